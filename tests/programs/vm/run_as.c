/*
 * run_as.c: `run_as UID CMD ARGS...` drops root to UID (and GID UID) and execs
 * CMD, for the guest checks that an unprivileged user meets perf's
 * perf_event_paranoid rules on the rvperf_ctr PMU like on any other.
 */
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: run_as UID CMD [ARGS...]\n");
        return 2;
    }
    uid_t id = (uid_t)atoi(argv[1]);
    if (setgroups(0, NULL) || setgid(id) || setuid(id)) {
        perror("run_as");
        return 2;
    }
    execvp(argv[2], argv + 2);
    perror(argv[2]);
    return 127;
}
