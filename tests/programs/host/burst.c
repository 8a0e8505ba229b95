/*
 * burst.c — a short-lived process for the `rvperf daemon` tests: it spends its few
 * milliseconds (100,000 iterations by default, about 8 ms under QEMU's riscv64 guest)
 * in burn_loop and exits, so a loop of them is a stream of processes that are gone
 * before the daemon's interval ends.
 */
#include <stdlib.h>

volatile long sink;

__attribute__((noinline)) void burn_loop(long n)
{
    for (long i = 0; i < n; i++)
        sink += i;
}

int main(int argc, char **argv)
{
    burn_loop(argc > 1 ? atol(argv[1]) : 100000);
    return 0;
}
