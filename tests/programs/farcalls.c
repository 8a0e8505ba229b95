/*
 * farcalls.c — calls left as `auipc ra, hi; jalr ra, lo(ra)` pairs.
 *
 * rvperf-build-flags: -Wl,--no-relax
 *
 * Control-flow features exercised:
 *   - linking without relaxation keeps every call (in this file and in the static
 *     glibc linked in) as an auipc + jalr pair, the case N-Trace's sequential jump
 *     optimisation (spec 9.1) infers: the jalr's target follows from the constant
 *     the auipc just loaded, so an encoder may leave it out of the trace;
 *   - a mix of such calls with returns (implicit-return stack) and loops.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

__attribute__((noinline)) static unsigned mix(unsigned value, unsigned salt)
{
    return (value * 2654435761u) ^ (salt >> 3);
}

__attribute__((noinline)) static unsigned chain(unsigned value, int depth)
{
    return depth == 0 ? value : chain(mix(value, (unsigned)depth), depth - 1);
}

int main(void)
{
    char text[64];
    unsigned total = 0;
    for (int round = 0; round < 3000; round++) {
        total += chain((unsigned)round, 6);
        if (round % 500 == 0) {
            int length = snprintf(text, sizeof text, "round %d total %u\n", round, total);
            total += (unsigned)strlen(text);
            if (write(1, text, (size_t)length) < 0)
                return 1;
        }
    }
    printf("farcalls: %u\n", total);
    return 0;
}
