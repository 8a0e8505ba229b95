/*
 * pingpong.c: `pingpong [ROUNDS [WORK]]`, two processes that run alternately, for
 * the CTR context-switch test. The parent runs only task_a_* functions, the child
 * only task_b_*; they hand a token back and forth through pipes ROUNDS times
 * (default 2000), so the hart switches between them thousands of times. A branch
 * record of one must never show up in a sample of the other.
 *
 * WORK (default 2000) is the number of iterations of task_a_work / task_b_work
 * each round, one user branch each: a small WORK (2, say) makes the tasks switch
 * after only a few user branches, so that a branch stack not cleared at a switch
 * would show the other task's branches in nearly every sample.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

volatile long sink;

__attribute__((noinline)) long task_a_work(long x, int work)
{
    for (int i = 0; i < work; i++)
        x = x * 6364136223846793005L + 1442695040888963407L;
    return x;
}

__attribute__((noinline)) long task_b_work(long x, int work)
{
    for (int i = 0; i < work; i++)
        x = (x ^ (x >> 7)) * 31 + i;
    return x;
}

__attribute__((noinline)) void task_a_loop(int to_b, int from_b, int rounds, int work)
{
    char token = 'a';
    long x = 1;
    for (int i = 0; i < rounds; i++) {
        x = task_a_work(x, work);
        if (write(to_b, &token, 1) != 1 || read(from_b, &token, 1) != 1)
            exit(2);
    }
    sink = x;
}

__attribute__((noinline)) void task_b_loop(int to_a, int from_a, int rounds, int work)
{
    char token = 'b';
    long x = 2;
    for (int i = 0; i < rounds; i++) {
        if (read(from_a, &token, 1) != 1)
            exit(3);
        x = task_b_work(x, work);
        if (write(to_a, &token, 1) != 1)
            exit(4);
    }
    sink = x;
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 2000;
    int work = argc > 2 ? atoi(argv[2]) : 2000;
    int a_to_b[2], b_to_a[2];
    if (pipe(a_to_b) || pipe(b_to_a))
        return 1;
    pid_t child = fork();
    if (child < 0)
        return 1;
    if (child == 0) {
        task_b_loop(b_to_a[1], a_to_b[0], rounds, work);
        return 0;
    }
    task_a_loop(a_to_b[1], b_to_a[0], rounds, work);
    int status = 0;
    waitpid(child, &status, 0);
    printf("done %d\n", WEXITSTATUS(status));
    return WEXITSTATUS(status);
}
