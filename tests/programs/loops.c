/*
 * loops.c — tight loops with highly regular branch patterns.
 *
 * Control-flow features exercised:
 *   - a memcpy-like byte-copy loop and a memset-like byte-fill loop (one
 *     backward conditional branch, taken N-1 times then not taken); each
 *     byte gets an index-dependent transform so GCC neither replaces the
 *     loop by a libc call nor widens it to word-at-a-time copies,
 *   - a loop with an alternating taken/not-taken branch (`if (i & 1)`) and
 *     one with a period-3 pattern (`if (i % 3 == 0)`),
 *   - nested loops (3 levels, fixed trip counts) — inner-loop exits and
 *     outer back-edges repeat identically,
 * so an N-Trace encoder with branch history compression (repeated HIST
 * messages) sees long runs of identical history patterns.
 *
 * Deterministic; prints one summary line.
 */
#include <stdio.h>

#define NOINLINE __attribute__((noinline))
#define BUF 4096

static unsigned char src[BUF], dst[BUF];

static NOINLINE void byte_fill(unsigned char *p, unsigned char v, unsigned long n)
{
    for (unsigned long i = 0; i < n; i++)
        p[i] = (unsigned char)(v + (i >> 8)); /* memset-like */
}

static NOINLINE void byte_copy(unsigned char *d, const unsigned char *s, unsigned long n)
{
    for (unsigned long i = 0; i < n; i++)
        d[i] = (unsigned char)(s[i] ^ (i * 0x5b)); /* memcpy-like */
}

static NOINLINE unsigned long alternating(unsigned long n)
{
    unsigned long odd = 0, even = 0;
    for (unsigned long i = 0; i < n; i++) {
        if (i & 1)
            odd += i * 3;
        else
            even ^= i;
    }
    return odd + even;
}

static NOINLINE unsigned long period3(unsigned long n)
{
    unsigned long acc = 0;
    for (unsigned long i = 0; i < n; i++) {
        if (i % 3 == 0)
            acc += i;
        else
            acc = (acc << 1) ^ i;
    }
    return acc;
}

static NOINLINE unsigned long nested(void)
{
    unsigned long acc = 0;
    for (unsigned i = 0; i < 10; i++)
        for (unsigned j = 0; j < 20; j++)
            for (unsigned k = 0; k < 30; k++)
                acc += src[(i * 400 + j * 30 + k) & (BUF - 1)] ^ (i + j + k);
    return acc;
}

int main(void)
{
    unsigned long sum = 0;
    for (unsigned rep = 0; rep < 8; rep++) {
        byte_fill(src, (unsigned char)rep, BUF);
        byte_copy(dst, src, BUF);
        sum += dst[rep * 511];
    }
    unsigned long alt = alternating(20000);
    unsigned long p3 = period3(15000);
    unsigned long nest = nested();

    printf("loops: sum=%lu alt=%lu p3=%lu nested=%lu\n", sum, alt, p3, nest);
    return 0;
}
