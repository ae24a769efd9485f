/* A frameless function with stack adjustments: gcc -O2 -S */
extern long consume(long, long, long, long, long, long, long, long);

long frameless(long a, long b)
{
    return consume(a, b, a + b, a - b, a * b, a ^ b, a | b, a & b) + 1;
}
