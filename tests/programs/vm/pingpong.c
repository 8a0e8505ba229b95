/*
 * pingpong.c: two processes that run alternately, for the CTR context-switch
 * test. The parent runs only task_a_* functions, the child only task_b_*; they
 * hand a token back and forth through pipes, so the hart switches between them
 * thousands of times. A branch record of one must never show up in a sample of
 * the other.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

volatile long sink;

__attribute__((noinline)) long task_a_work(long x)
{
    for (int i = 0; i < 2000; i++)
        x = x * 6364136223846793005L + 1442695040888963407L;
    return x;
}

__attribute__((noinline)) long task_b_work(long x)
{
    for (int i = 0; i < 2000; i++)
        x = (x ^ (x >> 7)) * 31 + i;
    return x;
}

__attribute__((noinline)) void task_a_loop(int to_b, int from_b, int rounds)
{
    char token = 'a';
    long x = 1;
    for (int i = 0; i < rounds; i++) {
        x = task_a_work(x);
        if (write(to_b, &token, 1) != 1 || read(from_b, &token, 1) != 1)
            exit(2);
    }
    sink = x;
}

__attribute__((noinline)) void task_b_loop(int to_a, int from_a, int rounds)
{
    char token = 'b';
    long x = 2;
    for (int i = 0; i < rounds; i++) {
        if (read(from_a, &token, 1) != 1)
            exit(3);
        x = task_b_work(x);
        if (write(to_a, &token, 1) != 1)
            exit(4);
    }
    sink = x;
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 2000;
    int a_to_b[2], b_to_a[2];
    if (pipe(a_to_b) || pipe(b_to_a))
        return 1;
    pid_t child = fork();
    if (child < 0)
        return 1;
    if (child == 0) {
        task_b_loop(b_to_a[1], a_to_b[0], rounds);
        return 0;
    }
    task_a_loop(a_to_b[1], b_to_a[0], rounds);
    int status = 0;
    waitpid(child, &status, 0);
    printf("done %d\n", WEXITSTATUS(status));
    return WEXITSTATUS(status);
}
