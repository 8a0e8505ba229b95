/*
 * recursion.c — deep and branching recursion.
 *
 * Control-flow features exercised:
 *   - deep linear recursion (depth 200 and 300, repeated): call/return pairs
 *     nested far deeper than an 8- or 32-entry return-address stack, so an
 *     implicit-return decoder's return stack overflows and must fall back
 *     to explicit return addresses,
 *   - naive tree recursion (fib) with many short call/return sequences,
 *   - Ackermann A(2, n): nested recursion where GCC turns the outer (tail)
 *     call into a loop inside ack(), so recursive calls, returns and
 *     backward jumps are interleaved irregularly,
 *   - mutual recursion (ping/pong, depth 150).
 * Recursive functions use a volatile local and combine the callee's result
 * non-linearly so GCC cannot turn them into loops.
 *
 * Deterministic; prints one summary line.
 */
#include <stdio.h>

#define NOINLINE __attribute__((noinline))

static NOINLINE unsigned long linear(unsigned n)
{
    volatile unsigned long local = n * 3UL + 1;
    if (n == 0)
        return local;
    unsigned long r = linear(n - 1);
    return (r ^ local) + (r >> 3);
}

static NOINLINE unsigned long fib(unsigned n)
{
    if (n < 2)
        return n;
    return fib(n - 1) + fib(n - 2);
}

static NOINLINE unsigned long ack(unsigned long m, unsigned long n)
{
    if (m == 0)
        return n + 1;
    if (n == 0)
        return ack(m - 1, 1);
    return ack(m - 1, ack(m, n - 1));
}

static NOINLINE unsigned long pong(unsigned n);

static NOINLINE unsigned long ping(unsigned n)
{
    volatile unsigned long local = n;
    if (n == 0)
        return 1;
    return pong(n - 1) * 3 + local;
}

static NOINLINE unsigned long pong(unsigned n)
{
    volatile unsigned long local = n;
    if (n == 0)
        return 2;
    return (ping(n - 1) ^ local) + 1;
}

int main(void)
{
    unsigned long lin = 0;
    for (unsigned i = 0; i < 20; i++)
        lin += linear(200 + (i & 1) * 100); /* depth 200 / 300 */

    unsigned long f = fib(18);
    unsigned long a = ack(2, 60); /* A(2,n) = 2n+3, max depth ~2n+4 */
    unsigned long p = 0;
    for (unsigned i = 0; i < 10; i++)
        p += ping(150 + i);

    printf("recursion: linear=%lu fib=%lu ack=%lu ping=%lu\n", lin, f, a, p);
    return 0;
}
