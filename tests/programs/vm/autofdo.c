/*
 * autofdo.c: the workload of the AutoFDO accuracy test. Its exact per-instruction
 * execution counts come from a full run under qemu-riscv64 (rvperf-ground-truth);
 * a CTR-sampled profile of the same binary and argument, recorded in the VM, must
 * match them block by block (rvperf-block-overlap).
 *
 * `autofdo ROUNDS` runs ROUNDS rounds (default 1500, the input of the VM recording:
 * about 17 M instructions). Each round draws VALUES values from a xorshift generator
 * seeded by the round number, and for each value:
 *  - takes an if/else with a skewed, data-dependent split: rare_path for 1 value in
 *    16 (low four bits zero), common_path otherwise;
 *  - dispatches a dense 8-way switch on bits 4..6 (a jump table: `jr` into the
 *    middle of classify) whose cases call case_0 .. case_7;
 *  - calls one of four transforms through a function pointer (bits 7..8);
 *  - mixes the value with an always_inline helper, inlined despite -fno-inline.
 * Then, per round: loops of trip count SHORT_TRIP, WINDOW_TRIP and LONG_TRIP over a
 * table, and a tree recursion count_paths(RECURSION_DEPTH).
 *
 * tests/tests/ground_truth.rs recomputes from the same generator how often each
 * function must be entered and checks the QEMU counts against it, so the constants
 * and the generator here are mirrored there. Deterministic for a given ROUNDS; no
 * libc call between the argument parsing and the final printf.
 */
#include <stdio.h>
#include <stdlib.h>

#define VALUES 64
#define SHORT_TRIP 5
#define WINDOW_TRIP 37
#define LONG_TRIP 200
#define RECURSION_DEPTH 10

volatile unsigned long sink;
static unsigned long table[256];

static inline __attribute__((always_inline)) unsigned long mix(unsigned long x)
{
    x ^= x >> 31;
    x *= 0x7fb5d329728ea185UL;
    return x ^ (x >> 27);
}

static inline __attribute__((always_inline)) unsigned long next_value(unsigned long *state)
{
    unsigned long x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *state = x;
    return x;
}

__attribute__((noinline)) unsigned long rare_path(unsigned long v)
{
    unsigned long h = v;
    for (int i = 0; i < 24; i++)
        h = (h << 5) + h + (unsigned long)i;
    return h;
}

__attribute__((noinline)) unsigned long common_path(unsigned long v)
{
    return (v >> 3) + (v << 2) + 17;
}

__attribute__((noinline)) unsigned long case_0(unsigned long v) { return v + 1; }
__attribute__((noinline)) unsigned long case_1(unsigned long v) { return v * 3; }
__attribute__((noinline)) unsigned long case_2(unsigned long v) { return v ^ 0x5555; }
__attribute__((noinline)) unsigned long case_3(unsigned long v) { return v - 7; }
__attribute__((noinline)) unsigned long case_4(unsigned long v) { return v << 1; }
__attribute__((noinline)) unsigned long case_5(unsigned long v) { return v >> 1; }
__attribute__((noinline)) unsigned long case_6(unsigned long v) { return ~v; }
__attribute__((noinline)) unsigned long case_7(unsigned long v) { return v * v; }

__attribute__((noinline)) unsigned long classify(unsigned long v)
{
    switch ((v >> 4) & 7) {
    case 0: return case_0(v) + 11;
    case 1: return case_1(v) ^ 12;
    case 2: return case_2(v) + 13;
    case 3: return case_3(v) ^ 14;
    case 4: return case_4(v) + 15;
    case 5: return case_5(v) ^ 16;
    case 6: return case_6(v) + 17;
    default: return case_7(v) ^ 18;
    }
}

__attribute__((noinline)) unsigned long transform_add(unsigned long v) { return mix(v) + 1; }
__attribute__((noinline)) unsigned long transform_rotate(unsigned long v)
{
    return (v << 19) | (v >> 45);
}
__attribute__((noinline)) unsigned long transform_bytes(unsigned long v)
{
    unsigned long sum = 0;
    for (int i = 0; i < 8; i++)
        sum += (v >> (i * 8)) & 0xff;
    return sum;
}
__attribute__((noinline)) unsigned long transform_keep(unsigned long v) { return v; }

typedef unsigned long (*transform_fn)(unsigned long);
static transform_fn const transforms[4] = {
    transform_add, transform_rotate, transform_bytes, transform_keep,
};

__attribute__((noinline)) unsigned long process_value(unsigned long v)
{
    unsigned long r;
    if ((v & 15) == 0)
        r = rare_path(v);
    else
        r = common_path(v);
    r += classify(v);
    r ^= transforms[(v >> 7) & 3](v);
    return mix(r);
}

/* The loop's backward branch executes `count` times per call (GCC rotates the loop
 * behind an entry check), which the test checks. */
__attribute__((noinline)) unsigned long sum_window(const unsigned long *values, int count)
{
    unsigned long sum = 0;
    for (int i = 0; i < count; i++)
        sum += values[i] ^ (unsigned long)i;
    return sum;
}

__attribute__((noinline)) unsigned long count_paths(int n)
{
    if (n < 2)
        return 1;
    return count_paths(n - 1) + count_paths(n - 2);
}

__attribute__((noinline)) unsigned long run_round(unsigned long round)
{
    unsigned long state = round * 0x9e3779b97f4a7c15UL + 1;
    unsigned long acc = 0;
    for (int i = 0; i < VALUES; i++) {
        unsigned long v = next_value(&state);
        acc += process_value(v);
        table[(acc >> 3) & 255] ^= v;
    }
    acc += sum_window(table, SHORT_TRIP);
    acc += sum_window(table + 16, WINDOW_TRIP);
    acc += sum_window(table + 48, LONG_TRIP);
    acc += count_paths(RECURSION_DEPTH);
    return acc;
}

int main(int argc, char **argv)
{
    unsigned long rounds = argc > 1 ? strtoul(argv[1], NULL, 10) : 1500;
    unsigned long total = 0;
    for (unsigned long round = 0; round < rounds; round++)
        total = mix(total + run_round(round));
    sink = total;
    printf("%lu\n", total);
    return 0;
}
