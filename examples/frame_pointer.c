/* A function that keeps a frame pointer: gcc -O2 -fno-omit-frame-pointer -S */
extern int work(int *);

int with_frame(int n)
{
    int local[8];
    for (int i = 0; i < 8; i++)
        local[i] = n + i;
    return work(local) + n;
}
