/*
 * autofdo.c — a small deterministic host (x86_64) workload for the AutoFDO test
 * (tests/tests/autofdo_x86_64.rs), run under qemu-x86_64 for its exact instruction
 * stream: hot_step is both the most entered and the most executed function, scan_table
 * a loop without calls, rare_bits runs a few times. About a million instructions.
 */
#include <stdio.h>

#define ROUNDS 100
#define STEPS 200
#define TABLE 128

unsigned table[TABLE];

__attribute__((noinline)) unsigned hot_step(unsigned x)
{
    for (int i = 0; i < 4; i++) {
        x = x * 2654435761u + (unsigned)i;
        if (x & 0x100)
            x ^= x >> 5;
    }
    return x;
}

__attribute__((noinline)) unsigned scan_table(const unsigned *values, int n)
{
    unsigned sum = 0;
    for (int i = 0; i < n; i++) {
        if (values[i] & 1)
            sum += values[i];
        else
            sum ^= values[i] << 1;
    }
    return sum;
}

__attribute__((noinline)) unsigned rare_bits(unsigned x)
{
    unsigned bits = 0;
    while (x) {
        bits += x & 1;
        x >>= 1;
    }
    return bits;
}

int main(void)
{
    unsigned state = 1;
    for (int round = 0; round < ROUNDS; round++) {
        for (int step = 0; step < STEPS; step++) {
            state = hot_step(state);
            table[step % TABLE] = state;
        }
        state += scan_table(table, TABLE);
        if (round % 10 == 0)
            state += rare_bits(state);
    }
    printf("%u\n", state);
    return 0;
}
