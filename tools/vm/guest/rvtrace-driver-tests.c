/*
 * rvtrace-driver-tests: the rvtrace driver's user interface, security and lifetime,
 * in the guest with the emulated trace block (run by ntrace-tests.sh as root, the
 * module not loaded). Built by tools/vm/lib.sh with the driver's own uapi header.
 *
 *   rvtrace-driver-tests [LOAD-CYCLES]
 *
 * Prints TAP ("ok N - ..." / "not ok N - ..."); exits 1 if any check failed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rvtrace.h"

#define DEVICE "/dev/rvtrace"
#define PROGRAM "/opt/rvperf/bin/qsort"

static int count, failed;

static int check(int condition, const char *format, ...)
{
	va_list args;
	count++;
	if (!condition)
		failed++;
	printf("%s %d - ", condition ? "ok" : "not ok", count);
	va_start(args, format);
	vprintf(format, args);
	va_end(args);
	printf("\n");
	fflush(stdout);
	return condition;
}

/* The status of `command` run through the shell, its output to the log. */
static int shell(const char *command)
{
	char line[512];
	snprintf(line, sizeof line, "%s >>/tmp/rvtrace-driver-tests.log 2>&1", command);
	int status = system(line);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

/* Oops, BUG and WARNING lines in the kernel log. */
static int oopses(void)
{
	FILE *log = popen("dmesg | grep -cE 'Oops|BUG:|WARNING:|Unable to handle'", "r");
	int n = -1;
	if (log) {
		if (fscanf(log, "%d", &n) != 1)
			n = -1;
		pclose(log);
	}
	return n;
}

static struct rvtrace_config config(__u32 mode, __u32 privileges, __u64 buffer_bytes)
{
	struct rvtrace_config c = {
		.size = sizeof c,
		.mode = mode,
		.features = RVTRACE_FEATURE_IMPLICIT_RETURN | RVTRACE_FEATURE_REPEATED_HISTORY,
		.privileges = privileges,
		.sync_max = RVTRACE_SYNC_NONE,
		.buffer_bytes = buffer_bytes,
	};
	return c;
}

/* errno of an ioctl, 0 on success. */
static int ioctl_errno(int fd, unsigned long request, void *argument)
{
	return ioctl(fd, request, argument) == 0 ? 0 : errno;
}

static int configure_errno(int fd, struct rvtrace_config c)
{
	return ioctl_errno(fd, RVTRACE_IOC_CONFIGURE, &c);
}

static struct rvtrace_status status_of(int fd)
{
	struct rvtrace_status s;
	memset(&s, 0xa5, sizeof s);
	if (ioctl(fd, RVTRACE_IOC_GET_STATUS, &s))
		memset(&s, 0, sizeof s), s.size = 0;
	return s;
}

static void on_alarm(int signal)
{
	(void)signal;
}

static int run_program(void)
{
	pid_t child = fork();
	if (child == 0) {
		int null = open("/dev/null", O_WRONLY);
		dup2(null, STDOUT_FILENO);
		execl(PROGRAM, PROGRAM, "1", (char *)NULL);
		_exit(127);
	}
	int status = 0;
	waitpid(child, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

int main(int argc, char **argv)
{
	int cycles = argc > 1 ? atoi(argv[1]) : 50;
	int oopses_before = oopses();

	check(shell("modprobe rvtrace") == 0, "modprobe rvtrace");
	check(shell("dmesg | grep -q 'rvtrace.*trace block:'") == 0, "the driver bound the trace block (dmesg: trace block: ...)");
	struct stat node;
	if (!check(stat(DEVICE, &node) == 0 && S_ISCHR(node.st_mode), DEVICE " is a character device"))
		goto done;

	int fd = open(DEVICE, O_RDONLY);
	if (!check(fd >= 0, "root opens " DEVICE " (errno %d)", fd < 0 ? errno : 0))
		goto done;
	struct rvtrace_info info = { 0 };
	int got = ioctl_errno(fd, RVTRACE_IOC_GET_INFO, &info);
	check(got == 0 && info.size == sizeof info && info.abi_version == RVTRACE_ABI_VERSION &&
		      info.encoders >= 1 && (info.harts & 1) && info.sink_size >= 4096,
	      "GET_INFO: %u encoder(s), harts %#llx, %llu bytes of sink, return stack %u, Impl %#x/%#x/%#x",
	      info.encoders, (unsigned long long)info.harts, (unsigned long long)info.sink_size,
	      info.return_stack_depth, info.encoder_impl, info.funnel_impl, info.sink_impl);
	check(info.flags == (RVTRACE_INFO_WRAP_COUNT | RVTRACE_INFO_CONTEXT_REGISTER),
	      "the emulated sink counts its wraps and the encoders have the context register (info flags %#x)",
	      info.flags);

	/* One owner at a time. */
	int second = open(DEVICE, O_RDONLY);
	check(second < 0 && errno == EBUSY, "a second open while the device is owned: EBUSY");
	if (second >= 0)
		close(second);

	/* What the block cannot do is refused; unknown ioctls are ENOTTY. */
	check(configure_errno(fd, config(4, RVTRACE_PRIVILEGE_USER, 0)) == EINVAL, "a configuration with mode 4: EINVAL");
	struct rvtrace_config bad = config(RVTRACE_MODE_HTM, 0, 0);
	bad.features = 1u << 9;
	check(configure_errno(fd, bad) == EINVAL, "a configuration with an unknown feature bit: EINVAL");
	bad = config(RVTRACE_MODE_HTM, 0, 0);
	bad.harts = 1ull << 40;
	check(configure_errno(fd, bad) == EINVAL, "a configuration naming a hart without an encoder: EINVAL");
	bad = config(RVTRACE_MODE_HTM, 0, 0);
	bad.reserved[2] = 1;
	check(configure_errno(fd, bad) == EINVAL, "a configuration with a reserved word set: EINVAL");
	check(configure_errno(fd, config(RVTRACE_MODE_HTM, 0, info.sink_size + 4096)) == EINVAL,
	      "a buffer larger than the sink memory: EINVAL");
	check(ioctl_errno(fd, _IO(RVTRACE_IOC_MAGIC, 0x3f), NULL) == ENOTTY, "an unknown ioctl: ENOTTY");
	check(ioctl_errno(fd, RVTRACE_IOC_START, NULL) == EINVAL, "START before a configuration: EINVAL");

	/* The sink memory maps read-only, never writable. */
	void *writable = mmap(NULL, info.sink_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	check(writable == MAP_FAILED && errno == EACCES, "a writable mapping of the sink memory: EACCES");
	const unsigned char *sink = mmap(NULL, info.sink_size, PROT_READ, MAP_SHARED, fd, 0);
	check(sink != MAP_FAILED, "the sink memory maps read-only, all %llu bytes", (unsigned long long)info.sink_size);
	check(sink == MAP_FAILED || mprotect((void *)sink, 4096, PROT_READ | PROT_WRITE) != 0,
	      "the read-only mapping cannot be made writable");
	void *longer = mmap(NULL, info.sink_size + 4096, PROT_READ, MAP_SHARED, fd, 0);
	check(longer == MAP_FAILED, "a mapping longer than the sink memory is refused");

	/* A trace through the ioctls: configure, start, run a program, stop. */
	check(configure_errno(fd, config(RVTRACE_MODE_HTM, RVTRACE_PRIVILEGE_USER, 65536)) == 0, "CONFIGURE");
	struct rvtrace_status s = status_of(fd);
	check(s.size == sizeof s && s.flags == RVTRACE_STATUS_CONFIGURED && s.buffer_bytes == 65536,
	      "configured, not running, a 64 KiB buffer (flags %#x, buffer %llu)", s.flags, (unsigned long long)s.buffer_bytes);
	check(ioctl_errno(fd, RVTRACE_IOC_START, NULL) == 0, "START");
	check(ioctl_errno(fd, RVTRACE_IOC_START, NULL) == EBUSY, "START while running: EBUSY");
	check(configure_errno(fd, config(RVTRACE_MODE_BTM, 0, 0)) == EBUSY, "CONFIGURE while running: EBUSY");
	int program = run_program();
	struct rvtrace_status running = status_of(fd);
	check(program == 0 && (running.flags & RVTRACE_STATUS_RUNNING) && running.bytes_written > 0 &&
		      running.write_offset >= running.buffer_offset &&
		      running.write_offset < running.buffer_offset + running.buffer_bytes,
	      "tracing qsort 1: running, %llu bytes written, %llu wraps, write offset %#llx",
	      (unsigned long long)running.bytes_written, (unsigned long long)running.wraps,
	      (unsigned long long)running.write_offset);

	/* A wait for more than will come returns at its timeout (user mode only, nothing
	 * runs); a signal interrupts a wait without a timeout. */
	struct rvtrace_wait w = { .size = sizeof w, .timeout_ms = 50, .until_bytes = 1ull << 62 };
	check(ioctl_errno(fd, RVTRACE_IOC_WAIT, &w) == 0 && (w.status.flags & RVTRACE_STATUS_RUNNING) &&
		      w.status.size == sizeof w.status,
	      "WAIT for more than comes returns at its timeout, with the status");
	struct sigaction action = { .sa_handler = on_alarm };
	sigaction(SIGALRM, &action, NULL);
	struct itimerval timer = { .it_value = { .tv_usec = 200000 } };
	setitimer(ITIMER_REAL, &timer, NULL);
	w.timeout_ms = 0;
	int waited = ioctl_errno(fd, RVTRACE_IOC_WAIT, &w);
	check(waited == EINTR, "a signal interrupts a WAIT without a timeout: EINTR (got %d)", waited);
	w.size = 8;
	check(ioctl_errno(fd, RVTRACE_IOC_WAIT, &w) == EINVAL, "a WAIT with a wrong size: EINVAL");

	check(ioctl_errno(fd, RVTRACE_IOC_STOP, NULL) == 0, "STOP");
	struct rvtrace_status stopped = status_of(fd);
	check(!(stopped.flags & RVTRACE_STATUS_RUNNING) && stopped.bytes_written >= running.bytes_written,
	      "stopped: not running, %llu bytes in all", (unsigned long long)stopped.bytes_written);
	/* N-Trace messages end with an MSEO=3 byte: the first bytes hold such ends. */
	int ends = 0;
	for (int i = 0; sink != MAP_FAILED && i < 64 && (unsigned long long)i < stopped.bytes_written; i++)
		ends += (sink[stopped.buffer_offset + i] & 3) == 3;
	check(ends > 0, "the mapping holds the trace (%d message ends in its first 64 bytes)", ends);

	/* Unloading while the device is open is refused. */
	check(shell("rmmod rvtrace") != 0, "rmmod while " DEVICE " is open is refused");
	if (sink != MAP_FAILED)
		munmap((void *)sink, info.sink_size);
	close(fd);

	/* Only CAP_PERFMON or CAP_SYS_ADMIN may open it, whatever the file's mode says. */
	chmod(DEVICE, 0666);
	pid_t child = fork();
	if (child == 0) {
		if (setgid(65534) || setuid(65534))
			_exit(255);
		int opened = open(DEVICE, O_RDONLY);
		_exit(opened >= 0 ? 0 : errno);
	}
	int child_status = 0;
	waitpid(child, &child_status, 0);
	chmod(DEVICE, 0600);
	check(WIFEXITED(child_status) && WEXITSTATUS(child_status) == EACCES,
	      "an unprivileged user opening a world-readable " DEVICE ": EACCES (got %d)", WEXITSTATUS(child_status));

	/* An owner killed while tracing: the trace stops and the device is released. */
	child = fork();
	if (child == 0) {
		int own = open(DEVICE, O_RDONLY);
		struct rvtrace_config c = config(RVTRACE_MODE_HTM, 0, 0);
		/* With the scheduler probes that write task contexts: the release takes them off. */
		c.features |= RVTRACE_FEATURE_CONTEXT_TASK;
		if (own < 0 || ioctl(own, RVTRACE_IOC_CONFIGURE, &c) || ioctl(own, RVTRACE_IOC_START))
			_exit(1);
		kill(getpid(), SIGKILL);
	}
	waitpid(child, &child_status, 0);
	fd = open(DEVICE, O_RDONLY);
	struct rvtrace_status after = fd >= 0 ? status_of(fd) : (struct rvtrace_status){ .flags = ~0u };
	check(WIFSIGNALED(child_status) && fd >= 0 && after.flags == 0,
	      "an owner killed while tracing (every privilege): the device is released, stopped and unconfigured");
	if (fd >= 0)
		close(fd);
	check(shell("rmmod rvtrace") == 0, "rmmod rvtrace once closed");

	/* Load, trace, close while running (release stops it), unload. */
	int cycle, cycle_failures = 0;
	for (cycle = 0; cycle < cycles && !cycle_failures; cycle++) {
		if (shell("modprobe rvtrace")) {
			cycle_failures++;
			break;
		}
		int own = open(DEVICE, O_RDONLY);
		struct rvtrace_config c = config(RVTRACE_MODE_BTM, 0, 16384);
		/* Every other cycle with task contexts: probes left on the scheduler's
		 * tracepoints after the close would run freed code once the module is gone. */
		if (cycle % 2)
			c.features |= RVTRACE_FEATURE_CONTEXT_TASK;
		if (own < 0 || ioctl(own, RVTRACE_IOC_CONFIGURE, &c) || ioctl(own, RVTRACE_IOC_START) ||
		    !(status_of(own).flags & RVTRACE_STATUS_RUNNING))
			cycle_failures++;
		if (own >= 0)
			close(own);
		if (shell("rmmod rvtrace"))
			cycle_failures++;
	}
	check(!cycle_failures,
	      "%d cycles of modprobe, trace (every privilege; task contexts every other), close while tracing, rmmod (failed at %d)",
	      cycles, cycle_failures ? cycle : -1);
	check(oopses() == oopses_before, "no Oops, BUG or WARNING in the kernel log (%d before, %d after)", oopses_before,
	      oopses());
	if (access("/sys/kernel/debug/kmemleak", W_OK) == 0) {
		shell("echo scan >/sys/kernel/debug/kmemleak; echo scan >/sys/kernel/debug/kmemleak");
		FILE *report = popen("grep -c '^unreferenced object' /sys/kernel/debug/kmemleak", "r");
		int leaks = -1;
		if (report) {
			if (fscanf(report, "%d", &leaks) != 1)
				leaks = -1;
			pclose(report);
		}
		check(leaks == 0, "kmemleak reports no leaks after the cycles (%d)", leaks);
	} else {
		check(0, "kmemleak is available");
	}
done:
	printf("1..%d\n", count);
	return failed ? 1 : 0;
}
