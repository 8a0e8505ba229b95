/* The program the AutoFDO writer tests compile with their hand-made profiles
 * (tests/consumers.rs). The tests find every line they profile by the text on it, so
 * lines can move; keep each marked statement on a line of its own. */
#include <stdio.h>

/* Inlined into hot_loop: its profile sits under hot_loop's call site. */
static inline int
scale(int value)
{
	int scaled = value * 3;          /* scale: multiply */
	return scaled + (value >> 2);    /* scale: return */
}

__attribute__((noinline)) int
cold_path(int value)
{
	printf("cold %d\n", value);      /* cold: print */
	return value - 1;                /* cold: return */
}

/* noinline keeps hot_loop's entry count its own: inlining it into main would move
 * the calls' counts out of it. */
__attribute__((noinline)) int
hot_loop(int limit)
{
	int sum = 0;                     /* hot: init */
	for (int i = 0; i < limit; i++) { /* hot: loop */
		if (i % 1000 == 999)     /* hot: test */
			sum += cold_path(i); /* hot: cold call */
		else
			sum += scale(i); /* hot: scale call */
	}
	return sum;                      /* hot: return */
}

int
main(int argc, char **argv)
{
	int total = 0;                   /* main: init */
	(void)argv;
	for (int round = 0; round < 100 + argc; round++) /* main: loop */
		total += hot_loop(10000); /* main: call */
	printf("%d\n", total);           /* main: print */
	return 0;
}
