/*
 * qsort.c — glibc qsort of pseudo-random integers and strings, repeated.
 *
 * Control-flow features exercised:
 *   - glibc's qsort (merge sort into a temporary buffer, with its size-specific
 *     copy loops) calling comparators through a function pointer for every
 *     comparison: an indirect call and a return per comparison, short and
 *     data-dependent conditional branches in between (no repeating branch
 *     pattern for trace compression to find),
 *   - a string comparator calling glibc's strcmp (nested library calls),
 *   - the work is mostly in libc, reached from a few call sites.
 *
 * Usage: qsort [ROUNDS]   (decimal, default 1)
 *
 * Each round sorts 2000 integers and 400 strings from a fresh linear
 * congruential sequence; work scales linearly with ROUNDS: about
 * 17,000 + 1,118,000 * ROUNDS retired instructions (qemu-riscv64 10.0;
 * 1,135,245 for the default, 33.6 M for the benchmarks' 30 rounds).
 *
 * Deterministic; prints one summary line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NINTS 2000
#define NSTRS 400

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int ints[NINTS];
static char strbuf[NSTRS][16];
static char *strs[NSTRS];

int main(int argc, char **argv)
{
    static const char *const syll[] = { "ba", "de", "fi", "go", "hu", "ka", "le", "mo" };
    long rounds = argc > 1 ? strtol(argv[1], NULL, 10) : 1;
    unsigned long lcg = 12345, checksum = 0;

    for (long round = 0; round < rounds; round++) {
        for (unsigned i = 0; i < NINTS; i++) {
            lcg = lcg * 6364136223846793005UL + 1442695040888963407UL;
            ints[i] = (int)(lcg >> 41);
        }
        qsort(ints, NINTS, sizeof ints[0], cmp_int);
        for (unsigned i = 0; i < NSTRS; i++) {
            char *s = strbuf[i];
            s[0] = '\0';
            for (unsigned k = 0; k < 5; k++) {
                lcg = lcg * 6364136223846793005UL + 1442695040888963407UL;
                strcat(s, syll[(lcg >> 50) & 7]);
            }
            strs[i] = s;
        }
        qsort(strs, NSTRS, sizeof strs[0], cmp_str);
        checksum = checksum * 31 + (unsigned long)ints[NINTS / 2] + (unsigned char)strs[NSTRS / 2][3];
    }
    printf("qsort: %ld rounds, min %d max %d, first %s last %s, checksum %lu\n", rounds, ints[0],
           ints[NINTS - 1], strs[0], strs[NSTRS - 1], checksum);
    return 0;
}
