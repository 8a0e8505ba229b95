/*
 * threads.c — a small multi-threaded workload (riscv64 guest or host) for the perf.data
 * reading goldens (tests/fixtures/perf-guest/, made by
 * tools/fixtures/make-perf-guest-fixtures.sh): `threads WORKERS ROUNDS`.
 *
 * The main thread starts WORKERS threads and joins them. Each worker spins ROUNDS
 * rounds in worker_before under the name it inherited, renames itself `worker-N`
 * (prctl PR_SET_NAME: a COMM record without the exec flag), spins ROUNDS rounds in
 * worker_after and ends. With WORKERS 0 the main thread spins ROUNDS rounds itself,
 * through a chain of calls (main -> outer_call -> inner_call -> spin_round) that
 * callchains show. A round is about 40,000 instructions. No clocks, no randomness;
 * volatile stores keep the loops from being folded.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>

#define MAX_WORKERS 8
#define ROUND_ITERATIONS 5000

volatile unsigned long sink;

__attribute__((noinline)) void spin_round(unsigned long seed)
{
    unsigned long x = seed;
    for (int i = 0; i < ROUND_ITERATIONS; i++) {
        x = x * 6364136223846793005ul + 1442695040888963407ul;
        sink = x;
    }
}

__attribute__((noinline)) void inner_call(long rounds)
{
    for (long round = 0; round < rounds; round++)
        spin_round((unsigned long)round);
}

__attribute__((noinline)) void outer_call(long rounds)
{
    inner_call(rounds);
}

__attribute__((noinline)) void worker_before(long rounds, long index)
{
    for (long round = 0; round < rounds; round++)
        spin_round((unsigned long)(round + index));
}

__attribute__((noinline)) void worker_after(long rounds, long index)
{
    for (long round = 0; round < rounds; round++)
        spin_round((unsigned long)(round * index));
}

struct work {
    long index;
    long rounds;
};

static void *worker(void *argument)
{
    const struct work *work = argument;
    char name[16];
    worker_before(work->rounds, work->index);
    snprintf(name, sizeof name, "worker-%ld", work->index);
    prctl(PR_SET_NAME, name);
    worker_after(work->rounds, work->index);
    return NULL;
}

int main(int argc, char **argv)
{
    long workers = argc > 1 ? atol(argv[1]) : 2;
    long rounds = argc > 2 ? atol(argv[2]) : 100;
    if (workers < 0 || workers > MAX_WORKERS || rounds < 0) {
        fprintf(stderr, "usage: threads WORKERS(0..%d) ROUNDS\n", MAX_WORKERS);
        return 2;
    }
    if (workers == 0) {
        outer_call(rounds);
    } else {
        pthread_t threads[MAX_WORKERS];
        struct work work[MAX_WORKERS];
        for (long i = 0; i < workers; i++) {
            work[i].index = i + 1;
            work[i].rounds = rounds;
            if (pthread_create(&threads[i], NULL, worker, &work[i]) != 0) {
                perror("pthread_create");
                return 1;
            }
        }
        for (long i = 0; i < workers; i++)
            pthread_join(threads[i], NULL);
    }
    printf("%lu\n", sink);
    return 0;
}
