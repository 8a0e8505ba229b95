/*
 * rvtrace-ctl: drives rvperf's emulated trace block (docs/trace-device.md) from user
 * space, through the PCI resource file of its BAR, with the register sequences of the
 * RISC-V Trace Control Interface 1.0 ("Reset and Discovery", "Enabling and Disabling").
 * The guest tier's tool until the rvtrace driver exists, and the test of the register
 * interface itself.
 *
 *   rvtrace-ctl record [OPTIONS] -o TRACE -- PROGRAM [ARGS...] [:: PROGRAM [ARGS...]]...
 *       resets and discovers every component, configures the RAM sink, the funnel and
 *       the encoders, enables them (sink first, encoders last), runs the programs (at
 *       the same time, the i-th pinned to the CPU of hart i with --pin), stops the components
 *       (encoders first), waits until each is empty, and copies the trace out of the
 *       sink (both parts when it wrapped, oldest first) to TRACE. TRACE.info gets what
 *       a decoder needs to know (key=value lines).
 *   rvtrace-ctl selftest
 *       the register interface's own rules, as TAP.
 *   rvtrace-ctl discover
 *       prints the discovery table and every component's Impl register.
 *
 * Options of record: --mode btm|htm, --no-implicit-return, --no-repeated-history,
 * --all-jumps, --sequential-jumps, --msb-extension, --timestamps, --privilege user|supervisor|all,
 * --sync-max N (periodic synchronisation every 2^(N+4) instruction half-words),
 * --sink-bytes N, --stop-on-wrap, --harts N (encoders of harts 0..N-1), --src-bits N,
 * --pin, --kernel-text FILE (the running kernel's text from /proc/kcore, read right after
 * the trace stops: boot-time patching makes it differ from vmlinux; FILE.info gives its
 * address).
 *
 * The programs run with an empty environment and their standard output a pipe (drained
 * after they exit), as qemu-riscv64 runs them for the ground truth: a C library buffers
 * by what its output is, so a file there would be a different execution.
 *
 * Registers are plain shared memory that the emulation polls at the start of every
 * block the guest executes, so every write is done by a function of its own: its
 * return ends the block, and the next access sees the write's effect.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <sched.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <elf.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "trace_control.h"

#define MAX_COMPONENTS 16

struct component {
    uint32_t type;
    uint32_t impl;
    uint32_t offset;
    uint32_t hart;
};

static volatile uint8_t *block;
static uint64_t block_size, sink_offset, sink_size;
static struct component components[MAX_COMPONENTS];
static unsigned component_count;

static void die(const char *message)
{
    fprintf(stderr, "rvtrace-ctl: %s\n", message);
    exit(2);
}

__attribute__((noinline)) static uint32_t reg_read(uint32_t base, uint32_t offset)
{
    return *(volatile uint32_t *)(block + base + offset);
}

/* A write, then the end of the block: the emulation sees it before the next access. */
__attribute__((noinline)) static void reg_write(uint32_t base, uint32_t offset, uint32_t value)
{
    *(volatile uint32_t *)(block + base + offset) = value;
    __asm__ volatile("" ::: "memory");
}

/* Waits until (register & mask) == want; the specification's read-back loops. */
static int wait_for(uint32_t base, uint32_t offset, uint32_t mask, uint32_t want)
{
    /* Bounded by tries, not the clock: clock_gettime runs in the vDSO, code no ELF of
     * a user-mode trace holds. Ten million reads are tens of milliseconds of guest
     * time, far more than the emulation takes to act. */
    for (long tries = 0; tries < 10000000; tries++) {
        if ((reg_read(base, offset) & mask) == want)
            return 0;
    }
    return -1;
}

static uint64_t read64(uint64_t offset)
{
    uint64_t value;
    memcpy(&value, (const void *)(block + offset), sizeof value);
    return value;
}

static void find_device(void)
{
    DIR *devices = opendir("/sys/bus/pci/devices");
    if (!devices)
        die("no /sys/bus/pci/devices");
    struct dirent *entry;
    while ((entry = readdir(devices))) {
        if (entry->d_name[0] == '.')
            continue;
        char path[512];
        snprintf(path, sizeof path, "/sys/bus/pci/devices/%s/resource2", entry->d_name);
        int fd = open(path, O_RDWR | O_SYNC);
        if (fd < 0)
            continue;
        struct stat status;
        if (fstat(fd, &status) || status.st_size < 4096) {
            close(fd);
            continue;
        }
        void *map = mmap(NULL, (size_t)status.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        close(fd);
        if (map == MAP_FAILED)
            continue;
        if (memcmp(map, TC_MAGIC, 8) == 0) {
            block = map;
            block_size = (uint64_t)status.st_size;
            break;
        }
        munmap(map, (size_t)status.st_size);
    }
    closedir(devices);
    if (!block)
        die("no trace block: no PCI device's BAR 2 starts with the magic " TC_MAGIC);
    uint32_t version = *(volatile uint32_t *)(block + TC_TABLE_VERSION_OFFSET);
    if (version != 1)
        die("discovery table version is not 1");
    component_count = *(volatile uint32_t *)(block + TC_TABLE_COMPONENTS_OFFSET);
    if (component_count == 0 || component_count > MAX_COMPONENTS)
        die("discovery table lists no components, or too many");
    if (read64(TC_TABLE_SIZE_OFFSET) > block_size)
        die("discovery table says the block is larger than the BAR");
    sink_offset = read64(TC_TABLE_SINK_OFFSET_OFFSET);
    sink_size = read64(TC_TABLE_SINK_SIZE_OFFSET);
    for (unsigned i = 0; i < component_count; i++) {
        const volatile uint32_t *entry =
            (const volatile uint32_t *)(block + TC_TABLE_ENTRIES_OFFSET + TC_TABLE_ENTRY_SIZE * i);
        components[i] = (struct component){ entry[0], entry[1], entry[2], entry[3] };
        if (components[i].offset + TC_COMPONENT_SIZE > sink_offset)
            die("a component's registers overlap the sink memory");
    }
}

static const struct component *find(uint32_t type, uint32_t hart)
{
    for (unsigned i = 0; i < component_count; i++)
        if (components[i].type == type && (type != TC_TYPE_ENCODER || components[i].hart == hart))
            return &components[i];
    return NULL;
}

/* tr??Active = 0: the component in reset, its registers back to their reset values. */
static void enter_reset(const struct component *component)
{
    reg_write(component->offset, TC_CONTROL, 0);
    if (wait_for(component->offset, TC_CONTROL, TC_ACTIVE, 0))
        die("a component does not enter reset");
}

/* Reset and discovery (spec "Reset and Discovery"): reset, release, check Impl. */
static void reset(const struct component *component)
{
    uint32_t base = component->offset;
    enter_reset(component);
    reg_write(base, TC_CONTROL, TC_ACTIVE);
    if (wait_for(base, TC_CONTROL, TC_ACTIVE, TC_ACTIVE))
        die("a component does not leave reset");
    /* Out of reset, a component is empty (tr??Empty = 1, as the specification's RAM sink
     * sequence verifies); the emulation shows it once it has seen the release, which
     * from an idle block takes up to a millisecond (docs/trace-device.md). */
    if (wait_for(base, TC_CONTROL, TC_EMPTY, TC_EMPTY))
        die("a component released from reset does not read empty");
    uint32_t impl = reg_read(base, TC_IMPL);
    if (TC_IMPL_TYPE(impl) != component->type)
        die("a component's Impl register names another type than the discovery table");
    if (TC_IMPL_VERSION_MAJOR(impl) != 1) {
        fprintf(stderr, "rvtrace-ctl: component at %#x has version %u.%u (Impl %#x); this tool knows 1.x\n",
                base, TC_IMPL_VERSION_MAJOR(impl), TC_IMPL_VERSION_MINOR(impl), impl);
        exit(2);
    }
}

struct options {
    unsigned mode;
    int implicit_return, repeated_history, all_jumps, sequential_jumps, msb_extension, timestamps;
    unsigned privileges; /* filter's privilege bits; 0: no filter */
    int sync_max;        /* -1: no periodic synchronisation */
    uint64_t sink_bytes;
    int stop_on_wrap;
    unsigned harts;
    unsigned src_bits;
    int pin;
    const char *output;
    const char *kernel_text;
};

/* The running kernel's text, [_stext, _etext), from /proc/kcore, to FILE (raw bytes)
 * and FILE.info (its address and size). */
static void save_kernel_text(const char *file)
{
    FILE *symbols = fopen("/proc/kallsyms", "r");
    if (!symbols)
        die("cannot read /proc/kallsyms");
    unsigned long long address, start = 0, end = 0;
    char type, name[256];
    while (fscanf(symbols, "%llx %c %255s%*[^\n]", &address, &type, name) == 3) {
        if (!strcmp(name, "_stext"))
            start = address;
        else if (!strcmp(name, "_etext"))
            end = address;
    }
    fclose(symbols);
    if (!start || end <= start)
        die("no _stext/_etext in /proc/kallsyms (kptr_restrict?)");
    int fd = open("/proc/kcore", O_RDONLY);
    if (fd < 0)
        die("cannot open /proc/kcore (CONFIG_PROC_KCORE, root)");
    Elf64_Ehdr header;
    if (pread(fd, &header, sizeof header, 0) != (ssize_t)sizeof header || memcmp(header.e_ident, ELFMAG, SELFMAG))
        die("/proc/kcore is not an ELF file");
    uint64_t offset = 0;
    for (unsigned i = 0; i < header.e_phnum && !offset; i++) {
        Elf64_Phdr segment;
        if (pread(fd, &segment, sizeof segment, (off_t)(header.e_phoff + i * header.e_phentsize)) != (ssize_t)sizeof segment)
            die("cannot read /proc/kcore's program headers");
        if (segment.p_type == PT_LOAD && segment.p_vaddr <= start && end <= segment.p_vaddr + segment.p_memsz)
            offset = segment.p_offset + (start - segment.p_vaddr);
    }
    if (!offset)
        die("/proc/kcore has no segment holding the kernel's text");
    size_t size = (size_t)(end - start);
    uint8_t *text = malloc(size);
    if (!text || pread(fd, text, size, (off_t)offset) != (ssize_t)size)
        die("cannot read the kernel's text from /proc/kcore");
    close(fd);
    FILE *out = fopen(file, "wb");
    if (!out || fwrite(text, 1, size, out) != size || fclose(out))
        die("cannot write the kernel's text");
    free(text);
    char info_path[4096];
    snprintf(info_path, sizeof info_path, "%s.info", file);
    FILE *info = fopen(info_path, "w");
    if (!info)
        die("cannot write the kernel text's info file");
    fprintf(info, "address=%#llx\nsize=%zu\n", start, size);
    fclose(info);
}

static void start_trace(const struct options *options, uint64_t *start, uint64_t *limit)
{
    const struct component *sink = find(TC_TYPE_RAM_SINK, 0);
    const struct component *funnel = find(TC_TYPE_FUNNEL, 0);
    if (!sink)
        die("no RAM sink");
    /* Power up and reset from the sink towards the encoders. */
    reset(sink);
    if (funnel)
        reset(funnel);
    for (unsigned hart = 0; hart < options->harts; hart++) {
        const struct component *encoder = find(TC_TYPE_ENCODER, hart);
        if (!encoder)
            die("no encoder for a hart asked for");
        reset(encoder);
    }
    /* RAM sink in SMEM mode: mode first, then the buffer, then WP = start. */
    uint32_t impl = reg_read(sink->offset, TC_IMPL);
    if (!(impl & TC_RAM_HAS_SMEM))
        die("the RAM sink has no system-memory mode");
    uint32_t sink_control = TC_ACTIVE | TC_RAM_MODE_SMEM | (options->stop_on_wrap ? TC_RAM_STOP_ON_WRAP : 0);
    reg_write(sink->offset, TC_CONTROL, sink_control);
    uint64_t bytes = options->sink_bytes ? options->sink_bytes : sink_size;
    *start = sink_offset;
    uint64_t want_limit = sink_offset + bytes - 4;
    reg_write(sink->offset, TC_RAM_START_HIGH, (uint32_t)(*start >> 32));
    reg_write(sink->offset, TC_RAM_START_LOW, (uint32_t)*start);
    reg_write(sink->offset, TC_RAM_LIMIT_HIGH, (uint32_t)(want_limit >> 32));
    reg_write(sink->offset, TC_RAM_LIMIT_LOW, (uint32_t)want_limit);
    *limit = ((uint64_t)reg_read(sink->offset, TC_RAM_LIMIT_HIGH) << 32) | reg_read(sink->offset, TC_RAM_LIMIT_LOW);
    if (*limit != want_limit)
        fprintf(stderr, "rvtrace-ctl: the sink took limit %#llx for %#llx\n",
                (unsigned long long)*limit, (unsigned long long)want_limit);
    reg_write(sink->offset, TC_RAM_WP_HIGH, (uint32_t)(*start >> 32));
    reg_write(sink->offset, TC_RAM_WP_LOW, (uint32_t)*start);
    reg_write(sink->offset, TC_CONTROL, sink_control | TC_ENABLE);
    if (wait_for(sink->offset, TC_CONTROL, TC_ENABLE, TC_ENABLE))
        die("the RAM sink does not enable");
    if (funnel) {
        reg_write(funnel->offset, TC_FUNNEL_DISABLE_INPUT, 0);
        reg_write(funnel->offset, TC_CONTROL, TC_ACTIVE | TC_ENABLE);
        if (wait_for(funnel->offset, TC_CONTROL, TC_ENABLE, TC_ENABLE))
            die("the funnel does not enable");
    }
    for (unsigned hart = 0; hart < options->harts; hart++) {
        uint32_t base = find(TC_TYPE_ENCODER, hart)->offset;
        uint32_t features = (options->implicit_return ? TC_TE_EN_IMPLICIT_RETURN : 0) |
                            (options->repeated_history ? TC_TE_EN_REPEATED_HISTORY : 0) |
                            (options->all_jumps ? TC_TE_EN_ALL_JUMPS : 0) |
                            (options->sequential_jumps ? TC_TE_EN_SEQUENTIAL_JUMP : 0) |
                            (options->msb_extension ? TC_TE_EXTEND_ADDR_MSB : 0) |
                            (hart << TC_TE_SRC_ID_SHIFT) | (options->src_bits << TC_TE_SRC_BITS_SHIFT);
        reg_write(base, TC_TE_INST_FEATURES, features);
        if (reg_read(base, TC_TE_INST_FEATURES) != (features | (3u << TC_TE_IMPLICIT_RETURN_MODE_SHIFT)))
            die("the encoder did not take its features");
        if (options->privileges) {
            reg_write(base, TC_TE_FILTER_MATCH_INST(0), options->privileges);
            reg_write(base, TC_TE_FILTER_CONTROL(0), TC_TE_FILTER_ENABLE | TC_TE_FILTER_MATCH_PRIVILEGE);
            reg_write(base, TC_TE_INST_FILTERS, 1);
        } else {
            reg_write(base, TC_TE_INST_FILTERS, 0);
        }
        if (options->timestamps) {
            uint32_t ts = TC_TS_ACTIVE | TC_TS_COUNT | (TC_TS_MODE_INTERNAL_SYSTEM << TC_TS_MODE_SHIFT);
            reg_write(base, TC_TE_TS_CONTROL, ts);
            reg_write(base, TC_TE_TS_CONTROL, ts | TC_TS_ENABLE);
        } else {
            reg_write(base, TC_TE_TS_CONTROL, 0);
        }
        uint32_t control = TC_ACTIVE | (options->mode << TC_TE_INST_MODE_SHIFT) |
                           (TC_TE_FORMAT_NTRACE << TC_TE_FORMAT_SHIFT);
        if (options->sync_max >= 0)
            control |= (3u << TC_TE_INST_SYNC_MODE_SHIFT) | ((unsigned)options->sync_max << TC_TE_INST_SYNC_MAX_SHIFT);
        reg_write(base, TC_CONTROL, control);
        if ((reg_read(base, TC_CONTROL) & TC_TE_INST_MODE_MASK) >> TC_TE_INST_MODE_SHIFT != options->mode)
            die("the encoder does not have the mode asked for");
        reg_write(base, TC_CONTROL, control | TC_ENABLE);
        if (wait_for(base, TC_CONTROL, TC_ENABLE, TC_ENABLE))
            die("an encoder does not enable");
        reg_write(base, TC_CONTROL, control | TC_ENABLE | TC_TE_INST_TRACING);
    }
}

/* Disabling (spec "Enabling and Disabling"): encoders, funnel, sink, each until empty. */
static void stop_trace(const struct options *options)
{
    for (unsigned hart = 0; hart < options->harts; hart++) {
        uint32_t base = find(TC_TYPE_ENCODER, hart)->offset;
        uint32_t control = reg_read(base, TC_CONTROL);
        reg_write(base, TC_CONTROL, control & ~(TC_ENABLE | TC_TE_INST_TRACING));
        if (wait_for(base, TC_CONTROL, TC_ENABLE | TC_EMPTY, TC_EMPTY))
            die("an encoder does not flush");
    }
    const struct component *funnel = find(TC_TYPE_FUNNEL, 0);
    if (funnel) {
        reg_write(funnel->offset, TC_CONTROL, TC_ACTIVE);
        if (wait_for(funnel->offset, TC_CONTROL, TC_ENABLE | TC_EMPTY, TC_EMPTY))
            die("the funnel does not flush");
    }
    const struct component *sink = find(TC_TYPE_RAM_SINK, 0);
    uint32_t control = reg_read(sink->offset, TC_CONTROL);
    reg_write(sink->offset, TC_CONTROL, control & ~TC_ENABLE);
    if (wait_for(sink->offset, TC_CONTROL, TC_ENABLE | TC_EMPTY, TC_EMPTY))
        die("the RAM sink does not flush");
}

/* Once the sink is read: every component used back in reset (tr??Active = 0), as a
 * driver leaves hardware it has finished with, encoders first. A block left active keeps
 * the emulation polling it on every translation block (docs/trace-device.md). */
static void power_down(const struct options *options)
{
    for (unsigned hart = 0; hart < options->harts; hart++)
        enter_reset(find(TC_TYPE_ENCODER, hart));
    const struct component *funnel = find(TC_TYPE_FUNNEL, 0);
    if (funnel)
        enter_reset(funnel);
    enter_reset(find(TC_TYPE_RAM_SINK, 0));
}

#define MAX_PROGRAMS 8

/* The Linux CPU number of the hart with `hartid`: the boot hart (OpenSBI picks one) is
 * CPU 0, so CPU numbers and hart IDs need not agree; /proc/cpuinfo pairs them. */
static int cpu_of_hart(unsigned hartid)
{
    FILE *cpuinfo = fopen("/proc/cpuinfo", "r");
    if (!cpuinfo)
        die("cannot read /proc/cpuinfo");
    char line[256];
    int processor = -1, found = -1;
    while (fgets(line, sizeof line, cpuinfo)) {
        unsigned value;
        if (sscanf(line, "processor : %u", &value) == 1)
            processor = (int)value;
        else if (sscanf(line, "hart : %u", &value) == 1 && value == hartid)
            found = processor;
    }
    fclose(cpuinfo);
    if (found < 0)
        die("no CPU of the hart asked for in /proc/cpuinfo");
    return found;
}

static int record(struct options *options, char **commands)
{
    uint64_t start, limit;
    /* The programs, split at "::". */
    char **programs[MAX_PROGRAMS];
    unsigned count = 0;
    programs[count++] = commands;
    for (char **arg = commands; *arg; arg++) {
        if (!strcmp(*arg, "::")) {
            *arg = NULL;
            if (count == MAX_PROGRAMS || !arg[1])
                die("too many programs, or an empty one after ::");
            programs[count++] = arg + 1;
        }
    }
    int output[2];
    if (pipe(output))
        die("cannot make the programs' output pipe");
    start_trace(options, &start, &limit);
    pid_t children[MAX_PROGRAMS];
    for (unsigned i = 0; i < count; i++) {
        children[i] = fork();
        if (children[i] == 0) {
            static char *const empty_environment[] = { NULL };
            if (dup2(output[1], STDOUT_FILENO) < 0)
                _exit(126);
            close(output[0]);
            close(output[1]);
            if (options->pin) {
                cpu_set_t set;
                CPU_ZERO(&set);
                CPU_SET(cpu_of_hart(i), &set);
                if (sched_setaffinity(0, sizeof set, &set)) {
                    perror("sched_setaffinity");
                    _exit(126);
                }
            }
            execve(programs[i][0], programs[i], empty_environment);
            perror(programs[i][0]);
            _exit(127);
        }
    }
    int status = 0;
    for (unsigned i = 0; i < count; i++) {
        int one = 0;
        if (children[i] < 0 || waitpid(children[i], &one, 0) < 0)
            one = 127 << 8;
        if (!status)
            status = one;
    }
    stop_trace(options);
    if (options->kernel_text)
        save_kernel_text(options->kernel_text);
    /* The programs' output, after the trace: a pipe holds 64 KiB, more than they print. */
    close(output[1]);
    char buffer[4096];
    ssize_t got;
    while ((got = read(output[0], buffer, sizeof buffer)) > 0)
        if (fwrite(buffer, 1, (size_t)got, stdout) != (size_t)got)
            die("cannot copy the programs' output");
    close(output[0]);

    const struct component *sink = find(TC_TYPE_RAM_SINK, 0);
    uint32_t wp_low = reg_read(sink->offset, TC_RAM_WP_LOW);
    uint64_t wp = ((uint64_t)reg_read(sink->offset, TC_RAM_WP_HIGH) << 32) | (wp_low & ~3u);
    int wrapped = wp_low & TC_RAM_WRAP;
    int stopped = !(reg_read(sink->offset, TC_CONTROL) & TC_ENABLE) && options->stop_on_wrap && wrapped;
    unsigned overflows = 0;
    for (unsigned hart = 0; hart < options->harts; hart++)
        if (reg_read(find(TC_TYPE_ENCODER, hart)->offset, TC_CONTROL) & TC_TE_INST_STALL_OR_OVERFLOW)
            overflows |= 1u << hart;
    if (wp < start || wp > limit + 4)
        die("the sink's write pointer is outside its buffer");
    /* A wrapped circular buffer: the oldest bytes start at WP. The trace is copied out
     * of the BAR first: a write(2) straight from a PCI mapping fails on file systems
     * that pin the user's pages (9p). */
    size_t older = wrapped ? (size_t)(limit + 4 - wp) : 0;
    size_t newer = (size_t)(wp - start);
    uint8_t *copy = malloc(older + newer + 1);
    if (!copy)
        die("out of memory for the trace");
    for (size_t i = 0; i < older; i++)
        copy[i] = block[wp + i];
    for (size_t i = 0; i < newer; i++)
        copy[older + i] = block[start + i];
    FILE *out = fopen(options->output, "wb");
    if (!out)
        die("cannot create the trace file");
    if (fwrite(copy, 1, older + newer, out) != older + newer || fclose(out))
        die("cannot write the trace file");
    free(copy);

    char info_path[4096];
    snprintf(info_path, sizeof info_path, "%s.info", options->output);
    FILE *info = fopen(info_path, "w");
    if (!info)
        die("cannot create the info file");
    fprintf(info, "mode=%s\nimplicit_return=%d\nreturn_stack_depth=%u\nrepeated_history=%d\nall_jumps=%d\n"
                  "sequential_jumps=%d\nmsb_extension=%d\ntimestamps=%d\nprivileges=%u\nsync_max=%d\nharts=%u\nsrc_bits=%u\n"
                  "sink_bytes=%llu\nstop_on_wrap=%d\nwrapped=%d\nstopped_on_wrap=%d\noverflow_harts=%u\n"
                  "exit_status=%d\nsink_start=%#llx\nsink_limit=%#llx\nwrite_pointer=%#llx\n",
            options->mode == TC_TE_INST_MODE_BTM ? "btm" : "htm", options->implicit_return,
            reg_read(find(TC_TYPE_ENCODER, 0)->offset, TC_IMPL) >> 24, options->repeated_history,
            options->all_jumps, options->sequential_jumps, options->msb_extension, options->timestamps, options->privileges,
            options->sync_max, options->harts, options->src_bits, (unsigned long long)(limit + 4 - start),
            options->stop_on_wrap, wrapped ? 1 : 0, stopped, overflows,
            WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), (unsigned long long)start,
            (unsigned long long)limit, (unsigned long long)wp);
    fclose(info);
    power_down(options);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* --- selftest: the register interface's rules, as TAP --------------------------- */

static int test_number, test_failures;

static void check(int condition, const char *description, uint32_t seen)
{
    test_number++;
    if (condition) {
        printf("ok %d - %s\n", test_number, description);
    } else {
        printf("not ok %d - %s (read %#x)\n", test_number, description, seen);
        test_failures++;
    }
}

static int selftest(void)
{
    const struct component *encoder = find(TC_TYPE_ENCODER, 0);
    const struct component *sink = find(TC_TYPE_RAM_SINK, 0);
    if (!encoder || !sink)
        die("no encoder or no RAM sink");
    uint32_t te = encoder->offset, ram = sink->offset;
    reset(encoder);
    reset(sink);

    uint32_t impl = reg_read(te, TC_IMPL);
    check(impl == encoder->impl, "trTeImpl reads what the discovery table says", impl);
    check(TC_IMPL_TYPE(impl) == TC_TYPE_ENCODER && TC_IMPL_VERSION_MAJOR(impl) == 1 &&
              TC_IMPL_VERSION_MINOR(impl) == 0 && ((impl >> 16) & 0xff) == 1,
          "trTeImpl: encoder 1.0, N-Trace 1.0", impl);
    reg_write(te, TC_IMPL, ~impl);
    check(reg_read(te, TC_IMPL) == impl, "trTeImpl is read-only", reg_read(te, TC_IMPL));

    uint32_t control = reg_read(te, TC_CONTROL);
    check(control == TC_ACTIVE + TC_EMPTY + (TC_TE_FORMAT_NTRACE << TC_TE_FORMAT_SHIFT) ||
              (control & (TC_ACTIVE | TC_ENABLE | TC_EMPTY)) == (TC_ACTIVE | TC_EMPTY),
          "trTeControl after reset: active, not enabled, empty", control);
    reg_write(te, TC_CONTROL, TC_ACTIVE);
    check(reg_read(te, TC_CONTROL) & TC_EMPTY, "trTeEmpty is read-only (stays 1 when written 0)",
          reg_read(te, TC_CONTROL));
    static const struct { uint32_t written, read; const char *description; } modes[] = {
        { 3, 3, "trTeInstMode WARL: 3 (BTM) reads 3" },
        { 6, 6, "trTeInstMode WARL: 6 (HTM) reads 6" },
        { 1, 6, "trTeInstMode WARL: 1 (unsupported) reads 6" },
        { 7, 6, "trTeInstMode WARL: 7 (vendor) reads 6" },
        { 0, 0, "trTeInstMode WARL: 0 reads 0" },
    };
    for (unsigned i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        reg_write(te, TC_CONTROL, TC_ACTIVE | (modes[i].written << TC_TE_INST_MODE_SHIFT));
        uint32_t read = (reg_read(te, TC_CONTROL) & TC_TE_INST_MODE_MASK) >> TC_TE_INST_MODE_SHIFT;
        check(read == modes[i].read, modes[i].description, read);
    }
    reg_write(te, TC_CONTROL, TC_ACTIVE | (7u << TC_TE_FORMAT_SHIFT));
    check(((reg_read(te, TC_CONTROL) & TC_TE_FORMAT_MASK) >> TC_TE_FORMAT_SHIFT) == TC_TE_FORMAT_NTRACE,
          "trTeFormat WARL: reads 1 (N-Trace) whatever is written", reg_read(te, TC_CONTROL));
    reg_write(te, TC_CONTROL, TC_ACTIVE | (2u << TC_TE_INST_SYNC_MODE_SHIFT));
    uint32_t sync_mode = (reg_read(te, TC_CONTROL) & TC_TE_INST_SYNC_MODE_MASK) >> TC_TE_INST_SYNC_MODE_SHIFT;
    check(sync_mode == 3, "trTeInstSyncMode WARL: 2 (cycles) reads 3 (half-words)", sync_mode);
    reg_write(te, TC_CONTROL, TC_ACTIVE | (1u << 7) | (1u << 10) | (1u << 14) | (1u << 31));
    check((reg_read(te, TC_CONTROL) & ((1u << 7) | (1u << 10) | (1u << 14) | (1u << 31))) == 0,
          "trTeControl reserved bits read 0", reg_read(te, TC_CONTROL));
    reg_write(te, TC_TE_INST_FEATURES, 0xffffffffu);
    uint32_t features = reg_read(te, TC_TE_INST_FEATURES);
    check(((features & TC_TE_SRC_BITS_MASK) >> TC_TE_SRC_BITS_SHIFT) <= 12,
          "trTeSrcBits WARL: at most 12", features);
    check((features & 0x33u) == 0, "trTeInstNoAddrDiff, NoTrapAddr, branch prediction, jump cache read 0",
          features);
    check(((features >> TC_TE_IMPLICIT_RETURN_MODE_SHIFT) & 3) == 3,
          "trTeInstImplicitReturnMode reads 3 (full address compare)", features);
    reg_write(te, TC_TE_INST_FEATURES, (0xfffu << TC_TE_SRC_ID_SHIFT) | (4u << TC_TE_SRC_BITS_SHIFT));
    features = reg_read(te, TC_TE_INST_FEATURES);
    check(((features & TC_TE_SRC_ID_MASK) >> TC_TE_SRC_ID_SHIFT) == 0xf,
          "trTeSrcID WARL: masked to trTeSrcBits bits", features);
    reg_write(te, TC_TE_FILTER_MATCH_INST(0), 0xffffffffu);
    uint32_t choice = reg_read(te, TC_TE_FILTER_MATCH_INST(0));
    check(choice == 0xbu, "trTeFilterMatchChoicePrivilege WARL: U, S and M only", choice);
    reg_write(te, TC_TE_INST_FILTERS, 0xffffffffu);
    check(reg_read(te, TC_TE_INST_FILTERS) == 3u, "trTeInstFilters: filters 0 and 1 only",
          reg_read(te, TC_TE_INST_FILTERS));
    /* Reserved words are restored by the emulation's periodic sweep, not at once. */
    reg_write(te, 0x100, 0xffffffffu);
    check(wait_for(te, 0x100, 0xffffffffu, 0) == 0, "an unimplemented encoder register reads 0 again",
          reg_read(te, 0x100));
    reg_write(te, TC_TE_TS_CONTROL, 0xffffffffu);
    uint32_t ts = reg_read(te, TC_TE_TS_CONTROL);
    check(((ts >> TC_TS_WIDTH_SHIFT) & 0x3f) == 63, "trTsWidth is read-only: 63 bits", ts);
    check(((ts >> TC_TS_MODE_SHIFT) & 7) == TC_TS_MODE_INTERNAL_SYSTEM, "trTsMode reads 2 (internal system)", ts);
    reg_write(te, TC_CONTROL, 0);
    wait_for(te, TC_CONTROL, TC_ACTIVE, 0);
    reg_write(te, TC_CONTROL, TC_ACTIVE);
    wait_for(te, TC_CONTROL, TC_ACTIVE, TC_ACTIVE);
    check(reg_read(te, TC_TE_INST_FEATURES) == (3u << TC_TE_IMPLICIT_RETURN_MODE_SHIFT) &&
              reg_read(te, TC_TE_INST_FILTERS) == 0,
          "trTeActive 0 -> 1 resets the encoder's fields", reg_read(te, TC_TE_INST_FEATURES));

    uint32_t ram_impl = reg_read(ram, TC_IMPL);
    check(TC_IMPL_TYPE(ram_impl) == TC_TYPE_RAM_SINK && (ram_impl & TC_RAM_HAS_SMEM) &&
              !(ram_impl & TC_RAM_HAS_SRAM),
          "trRamImpl: RAM sink with SMEM, without SRAM", ram_impl);
    reg_write(ram, TC_CONTROL, TC_ACTIVE);
    check(reg_read(ram, TC_CONTROL) & TC_RAM_MODE_SMEM, "trRamMode WARL: fixed to SMEM",
          reg_read(ram, TC_CONTROL));
    reg_write(ram, TC_RAM_START_HIGH, 0);
    reg_write(ram, TC_RAM_START_LOW, 0);
    uint32_t low = reg_read(ram, TC_RAM_START_LOW);
    check(low == (uint32_t)sink_offset, "trRamStart WARL: 0 reads the sink memory's start", low);
    reg_write(ram, TC_RAM_LIMIT_HIGH, 0xffffffffu);
    reg_write(ram, TC_RAM_LIMIT_LOW, 0xffffffffu);
    uint64_t limit = ((uint64_t)reg_read(ram, TC_RAM_LIMIT_HIGH) << 32) | reg_read(ram, TC_RAM_LIMIT_LOW);
    check(limit == sink_offset + sink_size - 4, "trRamLimit WARL: all ones reads the sink memory's last word",
          (uint32_t)limit);
    reg_write(ram, TC_RAM_START_LOW, (uint32_t)sink_offset + 7);
    check((reg_read(ram, TC_RAM_START_LOW) & 3) == 0, "trRamStart's low two bits read 0",
          reg_read(ram, TC_RAM_START_LOW));
    const struct component *funnel = find(TC_TYPE_FUNNEL, 0);
    if (funnel) {
        reset(funnel);
        uint32_t funnel_impl = reg_read(funnel->offset, TC_IMPL);
        check(TC_IMPL_TYPE(funnel_impl) == TC_TYPE_FUNNEL && TC_IMPL_VERSION_MAJOR(funnel_impl) == 1,
              "trFunnelImpl: funnel 1.0", funnel_impl);
        reg_write(funnel->offset, TC_FUNNEL_DISABLE_INPUT, 0xffffffffu);
        uint32_t inputs = reg_read(funnel->offset, TC_FUNNEL_DISABLE_INPUT);
        check(inputs == (1u << (component_count - 2)) - 1, "trFunnelDisInput: one bit per encoder", inputs);
    }
    printf("1..%d\n", test_number);
    return test_failures ? 1 : 0;
}

static int discover(void)
{
    printf("trace block: %llu bytes, sink memory at %#llx, %llu bytes, %u components\n",
           (unsigned long long)block_size, (unsigned long long)sink_offset,
           (unsigned long long)sink_size, component_count);
    for (unsigned i = 0; i < component_count; i++)
        printf("  type %u at %#x, hart %d, Impl %#010x (version %u.%u)\n", components[i].type,
               components[i].offset, (int)components[i].hart, components[i].impl,
               TC_IMPL_VERSION_MAJOR(components[i].impl), TC_IMPL_VERSION_MINOR(components[i].impl));
    return 0;
}

static void usage(void)
{
    fprintf(stderr, "usage: rvtrace-ctl record [OPTIONS] -o TRACE -- PROGRAM [ARGS...] [:: PROGRAM [ARGS...]]...\n"
                    "       rvtrace-ctl selftest | discover\n");
    exit(2);
}

int main(int argc, char **argv)
{
    if (argc < 2)
        usage();
    find_device();
    if (!strcmp(argv[1], "selftest"))
        return selftest();
    if (!strcmp(argv[1], "discover"))
        return discover();
    if (strcmp(argv[1], "record"))
        usage();
    struct options options = {
        .mode = TC_TE_INST_MODE_HTM, .implicit_return = 1, .repeated_history = 1,
        .sync_max = -1, .harts = 1,
    };
    int i = 2;
    for (; i < argc && strcmp(argv[i], "--"); i++) {
        const char *arg = argv[i];
        const char *value = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(arg, "--mode") && value) {
            options.mode = !strcmp(value, "btm") ? TC_TE_INST_MODE_BTM : TC_TE_INST_MODE_HTM;
            i++;
        } else if (!strcmp(arg, "--no-implicit-return")) {
            options.implicit_return = 0;
        } else if (!strcmp(arg, "--no-repeated-history")) {
            options.repeated_history = 0;
        } else if (!strcmp(arg, "--all-jumps")) {
            options.all_jumps = 1;
        } else if (!strcmp(arg, "--sequential-jumps")) {
            options.sequential_jumps = 1;
        } else if (!strcmp(arg, "--msb-extension")) {
            options.msb_extension = 1;
        } else if (!strcmp(arg, "--timestamps")) {
            options.timestamps = 1;
        } else if (!strcmp(arg, "--privilege") && value) {
            options.privileges = !strcmp(value, "user") ? 1u : !strcmp(value, "supervisor") ? 2u : 0u;
            i++;
        } else if (!strcmp(arg, "--sync-max") && value) {
            options.sync_max = atoi(value);
            i++;
        } else if (!strcmp(arg, "--sink-bytes") && value) {
            options.sink_bytes = strtoull(value, NULL, 0);
            i++;
        } else if (!strcmp(arg, "--stop-on-wrap")) {
            options.stop_on_wrap = 1;
        } else if (!strcmp(arg, "--harts") && value) {
            options.harts = (unsigned)atoi(value);
            i++;
        } else if (!strcmp(arg, "--kernel-text") && value) {
            options.kernel_text = value;
            i++;
        } else if (!strcmp(arg, "--pin")) {
            options.pin = 1;
        } else if (!strcmp(arg, "--src-bits") && value) {
            options.src_bits = (unsigned)atoi(value);
            i++;
        } else if (!strcmp(arg, "-o") && value) {
            options.output = value;
            i++;
        } else {
            usage();
        }
    }
    if (!options.output || i + 1 >= argc)
        usage();
    if (options.sink_bytes && (options.sink_bytes > sink_size || options.sink_bytes % 4))
        die("--sink-bytes must be a multiple of 4 within the sink memory");
    return record(&options, argv + i + 1);
}
