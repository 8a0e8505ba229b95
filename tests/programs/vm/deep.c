/*
 * deep.c: `deep DEPTH ITERATIONS`, the workload of the CTR call-stack test. It
 * recurses DEPTH levels through descend(), then, at the bottom, calls leaf()
 * ITERATIONS times (a few dozen instructions each), then unwinds and prints one
 * result line. It spends nearly all of its run at the bottom, where the calls
 * outstanding are main -> descend, DEPTH - 1 times descend -> descend, and
 * descend -> leaf while in leaf: a record taken there under `-j call_stack` must
 * hold that whole chain, at least DEPTH entries, or the call stack was cut (CTR
 * cleared at a context switch or by perf's frequency adjustment, say).
 *
 * The recursion is not a tail call: each level adds its own number to its
 * callee's result after the call returns, through a volatile, so no compiler
 * turns it into a loop. noinline (and the harness's -fno-inline) keeps every
 * call a real call.
 */
#include <stdio.h>
#include <stdlib.h>

volatile long sink;

__attribute__((noinline)) long leaf(long x)
{
    long h = x;
    for (int i = 0; i < 4; i++)
        h = (h ^ (h >> 13)) * 0x9e3779b97f4a7c15L + i;
    return h;
}

__attribute__((noinline)) long descend(int level, long iterations)
{
    if (level <= 1) {
        long acc = 0;
        for (long i = 0; i < iterations; i++)
            acc += leaf(acc + i);
        return acc;
    }
    /* Stored and read back through the volatile: the add after the call stays. */
    sink = descend(level - 1, iterations);
    return sink + level;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: deep DEPTH ITERATIONS\n");
        return 2;
    }
    int depth = atoi(argv[1]);
    long iterations = atol(argv[2]);
    if (depth < 1 || iterations < 0) {
        fprintf(stderr, "deep: DEPTH must be at least 1, ITERATIONS at least 0\n");
        return 2;
    }
    printf("deep %d %ld: %ld\n", depth, iterations, descend(depth, iterations));
    return 0;
}
