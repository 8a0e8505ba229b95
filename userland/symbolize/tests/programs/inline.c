/* Test program for the symbolize tests: an always-inline function inlined
 * into a caller, and a loop whose one line holds several basic blocks (so
 * gcc -O2 gives its line-table rows discriminators). Tests find lines by
 * searching this text, so it can be edited freely. */
#include <stdio.h>
#include <stdlib.h>

static inline __attribute__((always_inline)) int square_sum(const int *values, int count)
{
	int total = 0;
	for (int index = 0; index < count; index++)
		total += values[index] * values[index];
	return total;
}

__attribute__((noinline)) int compute(const int *values, int count)
{
	int result = square_sum(values, count);
	return result + 1;
}

__attribute__((noinline)) void bump(int *counter)
{
	__asm__ volatile("" : : "r"(counter) : "memory");
	++*counter;
}

__attribute__((noinline)) int count_nonzero(const int *a, int n)
{
	int x = 0, y = 0;
	for (int i = 0; i < n; i++) { if (a[i]) bump(&x); else y++; }
	return x * 3 + y;
}

/* The anchor a kernel image would have: the vmlinux test relocates this
 * program as if it were one. */
void _text(void)
{
}

int main(int argc, char **argv)
{
	int values[64];
	for (int index = 0; index < 64; index++)
		values[index] = atoi(argv[0]) + index + argc;
	printf("%d %d\n", compute(values, argc * 16), count_nonzero(values, argc * 64));
	return 0;
}

/* A function gcc -O2 splits in two on x86-64: the path to a cold function is
 * placed apart, in `checked.cold`, and the DWARF gives the function both ranges. */
__attribute__((cold, noinline)) void report_negative(int n)
{
	fprintf(stderr, "negative %d\n", n);
}

__attribute__((noinline)) int checked(int n)
{
	if (n < 0) {
		report_negative(n);
		return -1;
	}
	return n * 2;
}
