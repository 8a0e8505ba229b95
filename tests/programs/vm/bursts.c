/*
 * bursts.c: bursts of work with sleeps between them, for the trace-drain tests of the
 * rvtrace driver (tools/vm/guest/ntrace-tests.sh): each round sorts 3000 integers with
 * glibc's qsort (about 1 M instructions, far more trace than a small sink holds), then
 * sleeps, so that a recorder draining the sink while the program sleeps reads the end
 * of every round: a trace with a gap before each piece, each piece a run of main.
 *
 * Usage: bursts ROUNDS PAUSE_MS   (defaults 4 and 30)
 *
 * Deterministic but for the sleeps; prints one checksum line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define COUNT 3000

static int values[COUNT];

static int compare(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	long rounds = argc > 1 ? strtol(argv[1], NULL, 10) : 4;
	long pause_ms = argc > 2 ? strtol(argv[2], NULL, 10) : 30;
	unsigned long lcg = 2024, checksum = 0;
	struct timespec pause = { .tv_sec = pause_ms / 1000, .tv_nsec = (pause_ms % 1000) * 1000000 };

	for (long round = 0; round < rounds; round++) {
		for (unsigned i = 0; i < COUNT; i++) {
			lcg = lcg * 6364136223846793005UL + 1442695040888963407UL;
			values[i] = (int)(lcg >> 40);
		}
		qsort(values, COUNT, sizeof values[0], compare);
		checksum = checksum * 31 + (unsigned long)values[COUNT / 2];
		nanosleep(&pause, NULL);
	}
	printf("bursts: %ld rounds, checksum %lu\n", rounds, checksum);
	return 0;
}
