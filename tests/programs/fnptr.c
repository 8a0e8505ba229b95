/*
 * fnptr.c — indirect calls.
 *
 * Control-flow features exercised:
 *   - calls through a function-pointer table indexed by data (`jalr` to a
 *     register target, i.e. indirect calls that an N-Trace decoder cannot
 *     infer statically and must take from the trace),
 *   - calls through a struct of callbacks (vtable-like dispatch: two
 *     different "objects" with different callback sets),
 *   - a callback that itself performs an indirect call (nested indirect
 *     calls / returns),
 *   - returns from indirectly called functions.
 *
 * Deterministic: no time, randomness or environment input. The table index
 * sequence comes from a fixed linear congruential generator.
 * Expected stdout: expected/fnptr.stdout (checked by
 * tools/trace-gen/tests/qemu_programs.rs).
 */
#include <stdio.h>

typedef unsigned long (*op_fn)(unsigned long, unsigned long);

/* noinline keeps each target a real function so every call is indirect. */
#define NOINLINE __attribute__((noinline))

static NOINLINE unsigned long op_add(unsigned long a, unsigned long b) { return a + b; }
static NOINLINE unsigned long op_sub(unsigned long a, unsigned long b) { return a - b; }
static NOINLINE unsigned long op_xor(unsigned long a, unsigned long b) { return a ^ b; }
static NOINLINE unsigned long op_mul(unsigned long a, unsigned long b) { return a * (b | 1); }
static NOINLINE unsigned long op_rot(unsigned long a, unsigned long b)
{
    unsigned s = (unsigned)(b & 63);
    return s ? (a << s) | (a >> (64 - s)) : a;
}
static NOINLINE unsigned long op_max(unsigned long a, unsigned long b) { return a > b ? a : b; }
static NOINLINE unsigned long op_min(unsigned long a, unsigned long b) { return a < b ? a : b; }
static NOINLINE unsigned long op_avg(unsigned long a, unsigned long b) { return (a >> 1) + (b >> 1); }

/* volatile so the compiler cannot turn the table into a switch. */
static op_fn volatile op_table[8] = {
    op_add, op_sub, op_xor, op_mul, op_rot, op_max, op_min, op_avg,
};

struct shape_ops {
    unsigned long (*area)(const void *self);
    unsigned long (*perimeter)(const void *self);
    unsigned long (*combine)(const void *self, op_fn f, unsigned long acc);
};

struct rect { const struct shape_ops *ops; unsigned long w, h; };
struct tri { const struct shape_ops *ops; unsigned long a, b, c; };

static NOINLINE unsigned long rect_area(const void *self)
{
    const struct rect *r = self;
    return r->w * r->h;
}
static NOINLINE unsigned long rect_perimeter(const void *self)
{
    const struct rect *r = self;
    return 2 * (r->w + r->h);
}
/* Nested indirect call: a callback that calls another function pointer. */
static NOINLINE unsigned long rect_combine(const void *self, op_fn f, unsigned long acc)
{
    const struct rect *r = self;
    return f(acc, r->w) + f(acc, r->h);
}
static NOINLINE unsigned long tri_area(const void *self)
{
    const struct tri *t = self;
    return (t->a * t->b) / 2;
}
static NOINLINE unsigned long tri_perimeter(const void *self)
{
    const struct tri *t = self;
    return t->a + t->b + t->c;
}
static NOINLINE unsigned long tri_combine(const void *self, op_fn f, unsigned long acc)
{
    const struct tri *t = self;
    return f(f(acc, t->a), t->b) ^ t->c;
}

static const struct shape_ops rect_ops = { rect_area, rect_perimeter, rect_combine };
static const struct shape_ops tri_ops = { tri_area, tri_perimeter, tri_combine };

#define ITERS 12000

int main(void)
{
    struct rect r = { &rect_ops, 3, 7 };
    struct tri t = { &tri_ops, 3, 4, 5 };
    /* Array of "objects" seen through their common first member. */
    const struct shape_ops *const *shapes[2] = { &r.ops, &t.ops };

    unsigned long lcg = 12345;
    unsigned long table_acc = 1, ops_acc = 0, nested_acc = 0;

    for (unsigned i = 0; i < ITERS; i++) {
        lcg = lcg * 6364136223846793005UL + 1442695040888963407UL;
        unsigned idx = (unsigned)(lcg >> 61);          /* 0..7 */
        table_acc = op_table[idx](table_acc, lcg >> 7); /* table call */

        const struct shape_ops *const *obj = shapes[i & 1];
        const struct shape_ops *ops = *obj;
        ops_acc += ops->area(obj) + ops->perimeter(obj); /* struct callbacks */
        nested_acc = ops->combine(obj, op_table[(idx + i) & 7], nested_acc) + i;
    }

    printf("fnptr: table=%lu ops=%lu nested=%lu\n", table_acc, ops_acc, nested_acc);
    return 0;
}
