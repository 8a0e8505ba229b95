#include <math.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static jmp_buf restart_point;
static _Atomic long shared_counter;

typedef int (*operation)(int, int);
static int add_numbers(int a, int b) { return a + b; }
static int multiply_numbers(int a, int b) { return a * b; }
static int divide_numbers(int a, int b) { return b ? a / b : 0; }
static const operation operations[] = {add_numbers, multiply_numbers, divide_numbers};

__attribute__((noinline)) static double polynomial(double x, float y) {
    return fma(x, x, (double)y) + sqrt(fabs(x)) / (1.0 + y * y);
}

__attribute__((noinline)) static int classify(int value) {
    switch (value) {
    case 0: return 11; case 1: return 27; case 2: return 13; case 3: return 91;
    case 4: return 5; case 5: return 77; case 6: return 3; default: return -1;
    }
}

__attribute__((noinline)) static long recurse(long depth) {
    if (depth <= 0) return 1;
    return depth * recurse(depth - 1) % 1000003;
}

int main(int argc, char **argv) {
    long total = 0;
    for (int i = 0; i < argc * 100; i++) {
        total += operations[i % 3](i, argc);
        total += classify(i & 7);
        atomic_fetch_add(&shared_counter, i);
    }
    if (setjmp(restart_point) == 0 && argc > 5) longjmp(restart_point, 1);
    char buffer[64];
    snprintf(buffer, sizeof buffer, "%ld %f", total, polynomial(argc, 0.5f));
    puts(buffer);
    printf("%ld %s\n", recurse(argc + 10), strchr(argv[0], '/') ? "path" : "bare");
    return (int)(total & 0x7f);
}
