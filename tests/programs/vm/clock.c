/*
 * clock.c — reads the clock through the vDSO: clock_gettime(CLOCK_MONOTONIC) CALLS
 * times (default 2000), code the kernel maps into every process ([vdso]), no file.
 * Its own control flow depends only on the calls' return values, never on the times,
 * so its instructions are the same under qemu-riscv64 (whose vDSO is QEMU's) and in
 * the guest (whose vDSO is the kernel's): the N-Trace tests check that a trace through
 * the vDSO is decoded with the recorder's copy of it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv)
{
    int calls = argc > 1 ? atoi(argv[1]) : 2000;
    int failed = 0;
    struct timespec now;
    for (int i = 0; i < calls; i++)
        if (clock_gettime(CLOCK_MONOTONIC, &now) != 0)
            failed++;
    printf("clock: %d calls, %d failed\n", calls, failed);
    return failed != 0;
}
