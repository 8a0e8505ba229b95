/*
 * perf_open.c: `perf_open PMU [FIELD=VALUE]...` opens one sampling event of a
 * dynamic PMU (its type read from /sys/bus/event_source/devices/PMU/type) for
 * a task (the calling process by default) with perf_event_open(2) itself, and
 * prints the result:
 * "perf_event_open: ok" or "perf_event_open: errno N (message)". It sets the
 * attr fields exactly as given, where rvperf and perf apply their own rules
 * first (rvperf always sets exclude_kernel for an unprivileged user), for the
 * guest checks of what the kernel and the rvperf_ctr PMU accept and refuse.
 *
 * FIELD: config, config1, sample_period, freq, branch_sample_type,
 * exclude_user, exclude_kernel, exclude_hv, exclude_guest, exclude_host,
 * inherit. Defaults: sample_period=20000, exclude_kernel=1, the rest 0.
 * Two pseudo-fields are perf_event_open's own arguments: pid=N, the task to
 * follow (default 0, the calling process; -1 with a cpu: every task), and
 * cpu=N (default -1: wherever the task runs), e.g. pid=1 for another user's
 * task. Exit status 0 when the event opened, 1 when refused, 2 on bad usage.
 */
#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static int pmu_type(const char *pmu)
{
    char path[256];
    FILE *file;
    int type = -1;

    snprintf(path, sizeof(path), "/sys/bus/event_source/devices/%s/type", pmu);
    file = fopen(path, "r");
    if (!file || fscanf(file, "%d", &type) != 1)
        type = -1;
    if (file)
        fclose(file);
    return type;
}

static int set_field(struct perf_event_attr *attr, const char *field, unsigned long long value)
{
#define BIT_FIELD(name)                \
    if (!strcmp(field, #name)) {       \
        attr->name = value ? 1 : 0;    \
        return 0;                      \
    }
#define WORD_FIELD(name)               \
    if (!strcmp(field, #name)) {       \
        attr->name = value;            \
        return 0;                      \
    }
    WORD_FIELD(config)
    WORD_FIELD(config1)
    WORD_FIELD(sample_period)
    WORD_FIELD(branch_sample_type)
    BIT_FIELD(freq)
    BIT_FIELD(exclude_user)
    BIT_FIELD(exclude_kernel)
    BIT_FIELD(exclude_hv)
    BIT_FIELD(exclude_guest)
    BIT_FIELD(exclude_host)
    BIT_FIELD(inherit)
    return -1;
}

/* A whole decimal number (negative too) with nothing after it. */
static int parse_int(const char *text, int *value)
{
    char *end;
    long parsed;

    errno = 0;
    parsed = strtol(text, &end, 0);
    if (errno || end == text || *end || parsed < -2147483647L - 1 || parsed > 2147483647L)
        return -1;
    *value = (int)parsed;
    return 0;
}

int main(int argc, char **argv)
{
    struct perf_event_attr attr;
    int i, fd, type;
    int pid = 0, cpu = -1;

    if (argc < 2) {
        fprintf(stderr, "usage: perf_open PMU [FIELD=VALUE]...\n");
        return 2;
    }
    type = pmu_type(argv[1]);
    if (type < 0) {
        fprintf(stderr, "perf_open: no PMU %s in sysfs\n", argv[1]);
        return 2;
    }
    memset(&attr, 0, sizeof(attr));
    attr.size = sizeof(attr);
    attr.type = type;
    attr.sample_period = 20000;
    attr.exclude_kernel = 1;
    attr.disabled = 1;
    for (i = 2; i < argc; i++) {
        char *equals = strchr(argv[i], '=');

        if (!equals) {
            fprintf(stderr, "perf_open: %s: expected FIELD=VALUE\n", argv[i]);
            return 2;
        }
        *equals = 0;
        if (!strcmp(argv[i], "pid") || !strcmp(argv[i], "cpu")) {
            if (parse_int(equals + 1, !strcmp(argv[i], "pid") ? &pid : &cpu)) {
                fprintf(stderr, "perf_open: %s=%s: not a number\n", argv[i], equals + 1);
                return 2;
            }
            continue;
        }
        if (set_field(&attr, argv[i], strtoull(equals + 1, NULL, 0))) {
            fprintf(stderr, "perf_open: unknown field %s\n", argv[i]);
            return 2;
        }
    }
    fd = syscall(SYS_perf_event_open, &attr, pid, cpu, -1, 0);
    if (fd < 0) {
        int err = errno;

        printf("perf_event_open: errno %d (%s)\n", err, strerror(err));
        return 1;
    }
    printf("perf_event_open: ok\n");
    close(fd);
    return 0;
}
