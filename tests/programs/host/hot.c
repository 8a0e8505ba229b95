/*
 * hot.c — a host (x86_64 or riscv64) workload with one known hot function, for the
 * perf recording tests: about 99% of its time is in hot_function, the rest in
 * cold_function and start-up. volatile stores keep the loops from being folded.
 */
#include <stdio.h>
#include <stdlib.h>

volatile double sink;

__attribute__((noinline)) double hot_function(long n)
{
    double x = 0;
    for (long i = 0; i < n; i++) {
        x += (double)(i % 7) * 0.5;
        sink = x;
    }
    return x;
}

__attribute__((noinline)) double cold_function(long n)
{
    double x = 0;
    for (long i = 0; i < n; i++) {
        x += 1.0;
        sink = x;
    }
    return x;
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 30;
    double total = 0;
    for (int round = 0; round < rounds; round++) {
        total += hot_function(10000000);
        total += cold_function(100000);
    }
    printf("%f\n", total);
    return 0;
}
