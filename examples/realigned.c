extern void use(void *);
void realigned(int n) {
  char buf[64] __attribute__((aligned(64)));
  char *v = __builtin_alloca(n);
  use(buf); use(v);
}
