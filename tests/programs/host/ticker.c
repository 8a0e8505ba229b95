/*
 * ticker.c — a host (x86_64 or riscv64) workload that says how far it got, for tests
 * that must act while it runs (signal the recorder, stop it) without guessing at
 * times: it does a fixed amount of CPU work per tick and prints "tick N" after each,
 * flushed at once. `ticker TICKS` stops after TICKS ticks; without an argument it
 * runs until killed.
 */
#include <stdio.h>
#include <stdlib.h>

volatile double sink;

__attribute__((noinline)) double tick_work(long n)
{
    double x = 0;
    for (long i = 0; i < n; i++) {
        x += (double)(i % 7) * 0.5;
        sink = x;
    }
    return x;
}

int main(int argc, char **argv)
{
    long ticks = argc > 1 ? atol(argv[1]) : -1;
    for (long tick = 0; ticks < 0 || tick < ticks; tick++) {
        tick_work(10000000);
        printf("tick %ld\n", tick);
        fflush(stdout);
    }
    return 0;
}
