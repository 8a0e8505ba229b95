/*
 * calls.c: a call-heavy riscv64 workload for the CTR tests, built static so that
 * every user-mode branch lies in this one ELF. Its call graph is fixed and known:
 * main -> run_round -> (dispatch through a table) op_add / op_mul / op_mix,
 * op_mix -> helper_twice -> helper_leaf, and run_round -> checksum.
 * noinline keeps each edge a real call instruction.
 */
#include <stdio.h>
#include <stdlib.h>

volatile long sink;

__attribute__((noinline)) long helper_leaf(long x) { return x * 3 + 1; }

__attribute__((noinline)) long helper_twice(long x) { return helper_leaf(x) + helper_leaf(x + 1); }

__attribute__((noinline)) long op_add(long a, long b) { return a + b; }

__attribute__((noinline)) long op_mul(long a, long b) { return a * b + 7; }

__attribute__((noinline)) long op_mix(long a, long b) { return helper_twice(a ^ b); }

typedef long (*op_fn)(long, long);
static op_fn const table[3] = { op_add, op_mul, op_mix };

__attribute__((noinline)) long checksum(long value)
{
    long h = 0;
    for (int i = 0; i < 8; i++)
        h = h * 31 + ((value >> (i * 8)) & 0xff);
    return h;
}

__attribute__((noinline)) long run_round(long seed)
{
    long acc = seed;
    for (int i = 0; i < 1000; i++) {
        acc = table[(acc + i) % 3](acc & 0xffff, i);
        if (acc < 0)
            acc = -acc;
    }
    return checksum(acc);
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 300;
    long total = 0;
    for (int round = 0; round < rounds; round++)
        total += run_round(round);
    sink = total;
    printf("%ld\n", total);
    return 0;
}
