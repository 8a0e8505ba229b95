/*
 * syscalls.c — many system calls.
 *
 * Control-flow features exercised:
 *   - `ecall` instructions: each is a trap to the (emulated) kernel and a
 *     return to the following instruction, with glibc's syscall wrappers
 *     (error checks, errno paths) around them,
 *   - write(2) to stdout and to /dev/null, getpid(2), open/close,
 *     read(2) from /dev/zero in a loop, and heap growth/shrink through
 *     malloc/free (brk, and mmap/munmap for the large blocks).
 * The pid is used only in a comparison, never printed, so output does not
 * depend on the environment. Needs /dev/null and /dev/zero.
 *
 * Deterministic; prints a few fixed lines.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void put(int fd, const char *s)
{
    size_t n = strlen(s);
    while (n > 0) {
        ssize_t w = write(fd, s, n);
        if (w <= 0)
            exit(2);
        s += w;
        n -= (size_t)w;
    }
}

int main(void)
{
    unsigned long calls = 0, zero_bytes = 0, heap_sum = 0;
    char buf[256];

    int null_fd = open("/dev/null", O_WRONLY);
    int zero_fd = open("/dev/zero", O_RDONLY);
    calls += 2;
    if (null_fd < 0 || zero_fd < 0) {
        put(2, "syscalls: cannot open /dev/null or /dev/zero\n");
        return 1;
    }

    put(1, "syscalls: start\n");
    calls++;

    pid_t first = getpid();
    calls++;
    unsigned same_pid = 0;
    for (unsigned i = 0; i < 300; i++) {
        same_pid += getpid() == first;
        calls++;
    }

    for (unsigned i = 0; i < 300; i++) {
        ssize_t r = read(zero_fd, buf, 1 + (i % sizeof buf));
        if (r > 0)
            for (ssize_t j = 0; j < r; j++)
                zero_bytes += buf[j] == 0;
        calls++;
    }

    for (unsigned i = 0; i < 300; i++) {
        memset(buf, 'a' + (int)(i % 26), 32);
        buf[32] = '\n';
        if (write(null_fd, buf, 33) != 33)
            return 3;
        calls++;
    }

    /* Heap: allocations grow the brk heap; large ones are mmapped. Freeing
     * everything lets malloc trim the heap again (brk shrink). */
    for (unsigned round = 0; round < 20; round++) {
        char *blocks[8];
        for (unsigned k = 0; k < 8; k++) {
            size_t size = (size_t)(k + 1) << (12 + (round & 3)); /* 4K..256K */
            blocks[k] = malloc(size);
            if (!blocks[k])
                return 4;
            blocks[k][0] = (char)k;
            blocks[k][size - 1] = (char)round;
        }
        for (unsigned k = 0; k < 8; k++) {
            heap_sum += (unsigned char)blocks[k][0];
            free(blocks[k]);
        }
    }

    close(zero_fd);
    close(null_fd);
    calls += 2;

    printf("syscalls: explicit=%lu same_pid=%u zero_bytes=%lu heap_sum=%lu\n",
           calls, same_pid, zero_bytes, heap_sum);
    return 0;
}
