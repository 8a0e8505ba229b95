/*
 * mixed.c — library-heavy mix: qsort with a comparator callback and string
 * functions.
 *
 * Control-flow features exercised:
 *   - qsort (glibc msort/quicksort) calling a user comparator through a
 *     function pointer thousands of times (indirect calls from library code
 *     back into the program),
 *   - bsearch with a comparator callback,
 *   - glibc's optimized string routines (strlen, strcmp, strchr, memcpy,
 *     strncpy) with data-dependent loop exits,
 *   - sorting both integers and strings (two different comparators at the
 *     same call site inside qsort).
 *
 * Deterministic; prints one summary line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NINTS 1500
#define NSTRS 300

static int cmp_long(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static long ints[NINTS];
static char strbuf[NSTRS][24];
static char *strs[NSTRS];

int main(void)
{
    static const char *const syll[] = { "ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo" };
    unsigned long lcg = 7;

    for (unsigned i = 0; i < NINTS; i++) {
        lcg = lcg * 6364136223846793005UL + 1442695040888963407UL;
        ints[i] = (long)(lcg >> 40) - (1L << 23);
    }
    qsort(ints, NINTS, sizeof ints[0], cmp_long);

    for (unsigned i = 0; i < NSTRS; i++) {
        char *s = strbuf[i];
        s[0] = '\0';
        unsigned n = 2 + (unsigned)((lcg >> 33) % 4);
        for (unsigned k = 0; k < n; k++) {
            lcg = lcg * 6364136223846793005UL + 1442695040888963407UL;
            strcat(s, syll[lcg >> 61]);
        }
        strs[i] = s;
    }
    qsort(strs, NSTRS, sizeof strs[0], cmp_str);

    unsigned sorted = 1;
    for (unsigned i = 1; i < NINTS; i++)
        sorted &= ints[i - 1] <= ints[i];
    for (unsigned i = 1; i < NSTRS; i++)
        sorted &= strcmp(strs[i - 1], strs[i]) <= 0;

    unsigned found = 0;
    for (unsigned i = 0; i < NINTS; i += 3) {
        long key = ints[i];
        found += bsearch(&key, ints, NINTS, sizeof ints[0], cmp_long) != NULL;
    }

    unsigned long lens = 0, with_k = 0;
    char tmp[32];
    for (unsigned i = 0; i < NSTRS; i++) {
        lens += strlen(strs[i]);
        with_k += strchr(strs[i], 'k') != NULL;
        strncpy(tmp, strs[i], sizeof tmp - 1);
        tmp[sizeof tmp - 1] = '\0';
        lens += (unsigned char)tmp[0];
    }

    printf("mixed: sorted=%u found=%u lens=%lu with_k=%lu first=%s last=%s min=%ld\n",
           sorted, found, lens, with_k, strs[0], strs[NSTRS - 1], ints[0]);
    return 0;
}
