/*
 * longjmp.c — non-local exits with setjmp/longjmp.
 *
 * Control-flow features exercised:
 *   - longjmp out of a call chain 1 to 7 frames deep, repeated in a loop: the
 *     calls made below setjmp are never matched by returns, and __longjmp's
 *     final `ret` (jr ra with a restored ra) returns to the setjmp call site
 *     instead of the most recent caller — a mismatched return that an
 *     implicit-return decoder's return-address stack gets wrong,
 *   - nested handlers: an inner handler catches, then re-throws to an outer
 *     handler (two longjmps in one iteration),
 *   - iterations that do not jump (normal returns through the same chain).
 * With glibc, setjmp here does not save the signal mask, so no system calls
 * are involved (checked with qemu-riscv64 -strace).
 *
 * Deterministic; prints one summary line.
 */
#include <setjmp.h>
#include <stdio.h>

#define NOINLINE __attribute__((noinline))

static jmp_buf outer_env;
static jmp_buf inner_env;
static volatile unsigned long sink;
/* Modified between setjmp and longjmp, so they must be volatile. */
static volatile unsigned long normal, caught_inner, caught_outer;

static NOINLINE unsigned long dive(unsigned depth, unsigned throw_at, jmp_buf *env)
{
    volatile unsigned long local = depth * 7UL;
    if (depth == throw_at)
        longjmp(*env, (int)depth + 1); /* never returns */
    if (depth == 0)
        return local;
    unsigned long r = dive(depth - 1, throw_at, env);
    sink = r; /* keeps the call from being a tail call */
    return r + local;
}

/* Catches throws from dive(); on odd codes re-throws to the outer handler. */
static NOINLINE unsigned long inner(unsigned iter)
{
    volatile unsigned long caught = 0;
    int code = setjmp(inner_env);
    if (code == 0) {
        unsigned depth = 6;
        unsigned throw_at = iter % 8; /* 7: no throw, returns normally */
        return dive(depth, throw_at, &inner_env);
    }
    caught = (unsigned long)code;
    if (code & 1)
        longjmp(outer_env, code * 100); /* re-throw across inner() itself */
    return caught;
}

int main(void)
{
    for (volatile unsigned iter = 0; iter < 2000; iter++) {
        int code = setjmp(outer_env);
        if (code == 0) {
            unsigned long r = inner(iter);
            if (r < 8)
                caught_inner += r;
            else
                normal += r;
        } else {
            caught_outer += (unsigned long)code;
        }
    }

    printf("longjmp: normal=%lu inner=%lu outer=%lu\n", normal, caught_inner, caught_outer);
    return 0;
}
