/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note OR MIT */
/*
 * rvtrace.h: the user/kernel ABI of the rvtrace module (kmod-shim/rvtrace), the
 * Rust-for-Linux driver of a RISC-V trace block (N-Trace encoders, a funnel and a RAM
 * sink behind the Trace Control Interface 1.0).
 *
 * /dev/rvtrace: open (CAP_PERFMON or CAP_SYS_ADMIN; one owner at a time), describe the
 * block (RVTRACE_IOC_GET_INFO), configure the encoders (RVTRACE_IOC_CONFIGURE), start
 * and stop tracing, read where the sink is writing (RVTRACE_IOC_GET_STATUS), wait for
 * new trace (RVTRACE_IOC_WAIT), and mmap the sink's memory read-only: offset 0 of the
 * mapping is the first byte of the sink memory, `sink_size` bytes long.
 *
 * Both sides check this file at build time: the module's Rust types are generated from
 * it by the kernel's bindgen, and userland/trace-device's layout test compiles it.
 * Every struct starts with its size: a caller passes the size it knows, the driver
 * refuses a size it does not know (EINVAL), so the ABI can grow by new versions.
 */
#ifndef _UAPI_RVTRACE_H
#define _UAPI_RVTRACE_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define RVTRACE_ABI_VERSION 1

/* Instruction trace modes (trTeInstMode). */
#define RVTRACE_MODE_BTM 3
#define RVTRACE_MODE_HTM 6

/* Privilege levels to trace (trTeFilterMatchChoicePrivilege bits); 0: all of them. */
#define RVTRACE_PRIVILEGE_USER (1u << 0)
#define RVTRACE_PRIVILEGE_SUPERVISOR (1u << 1)
#define RVTRACE_PRIVILEGE_MACHINE (1u << 3)

/* Encoder features (struct rvtrace_config.features). */
#define RVTRACE_FEATURE_IMPLICIT_RETURN (1u << 0)
#define RVTRACE_FEATURE_REPEATED_HISTORY (1u << 1)
#define RVTRACE_FEATURE_ALL_JUMPS (1u << 2)
#define RVTRACE_FEATURE_SEQUENTIAL_JUMPS (1u << 3)
#define RVTRACE_FEATURE_MSB_EXTENSION (1u << 4)
#define RVTRACE_FEATURE_TIMESTAMPS (1u << 5)
#define RVTRACE_FEATURE_CONTEXT (1u << 6)
#define RVTRACE_FEATURE_STOP_ON_WRAP (1u << 7)
/* The driver writes the running task to each traced hart's context at every context
 * switch and exec (RVTRACE_CONTEXT_*), so that Ownership messages (with
 * RVTRACE_FEATURE_CONTEXT, which this implies) name the thread that runs from there on.
 * EOPNOTSUPP where the block has nothing to write it to (RVTRACE_INFO_CONTEXT_REGISTER). */
#define RVTRACE_FEATURE_CONTEXT_TASK (1u << 8)
#define RVTRACE_FEATURES_ALL 0x1ffu

/* The context value of RVTRACE_FEATURE_CONTEXT_TASK, 32 bits (as scontext's data field):
 * bits 21:0 the thread id (tids are below PID_MAX_LIMIT, 2^22), bits 31:22 its
 * generation, 1 to 1023, new at its fork and at each exec while tracing (0: a thread that
 * ran before the start and has not exec'd since), so that one value is one program;
 * RVTRACE_CONTEXT_UNKNOWN for a task whose id does not fit. */
#define RVTRACE_CONTEXT_TID_BITS 22
#define RVTRACE_CONTEXT_EXEC_BITS 10
#define RVTRACE_CONTEXT_UNKNOWN 0xffffffffu

/* No periodic synchronisation (struct rvtrace_config.sync_max). */
#define RVTRACE_SYNC_NONE 0xffffffffu

struct rvtrace_config {
	__u32 size;		/* sizeof(struct rvtrace_config) */
	__u32 mode;		/* RVTRACE_MODE_* */
	__u32 features;		/* RVTRACE_FEATURE_* */
	__u32 privileges;	/* RVTRACE_PRIVILEGE_*; 0: every level */
	__u32 sync_max;		/* periodic sync every 2^(sync_max + 4) half-words, 0..15; or RVTRACE_SYNC_NONE */
	__u32 timestamp_prescale; /* timestamps count time / 4^prescale, 0..3 */
	__u64 harts;		/* bit i: trace hart i (mhartid); 0: every hart with an encoder */
	__u64 buffer_bytes;	/* bytes of sink memory to use, a multiple of 4; 0: all of it */
	__u64 reserved[4];	/* 0 */
};

/* The trace block (RVTRACE_IOC_GET_INFO). */
struct rvtrace_info {
	__u32 size;		/* sizeof(struct rvtrace_info) */
	__u32 abi_version;	/* RVTRACE_ABI_VERSION */
	__u32 encoders;		/* encoders in the block */
	__u32 return_stack_depth; /* the encoders' implicit-return stack depth */
	__u64 harts;		/* bit i: hart i has an encoder */
	__u64 sink_size;	/* bytes of sink memory: the length of the mapping */
	__u32 encoder_impl;	/* trTeImpl of the first encoder */
	__u32 funnel_impl;	/* trFunnelImpl; 0 without a funnel */
	__u32 sink_impl;	/* trRamImpl */
	__u32 flags;		/* RVTRACE_INFO_* */
	__u64 reserved[4];
};

/* Block flags (struct rvtrace_info.flags). */
/* The sink counts its wraps (rvperf's implementation-defined trRamWrapCount): the
 * driver's bytes_written is exact however rarely it reads the sink. Without it, the
 * driver reads the write pointer whenever its owner asks (GET_STATUS, and every tick
 * of a WAIT), and laps between two readings are not seen. */
#define RVTRACE_INFO_WRAP_COUNT (1u << 0)
/* Every encoder has rvperf's stand-in context register (trTeContext at 0xE00, announced
 * by trTeImpl bit 31; docs/trace-device.md): the emulated harts have no scontext, so the
 * driver writes RVTRACE_FEATURE_CONTEXT_TASK's value there, and the encoder reports it as
 * the hart's scontext. */
#define RVTRACE_INFO_CONTEXT_REGISTER (1u << 1)

/* Status flags (struct rvtrace_status.flags). */
#define RVTRACE_STATUS_CONFIGURED (1u << 0)
#define RVTRACE_STATUS_RUNNING (1u << 1)
#define RVTRACE_STATUS_WRAPPED (1u << 2)	/* the sink's trRamWrap */
#define RVTRACE_STATUS_STOPPED_ON_WRAP (1u << 3) /* stop-on-wrap ended the trace */

struct rvtrace_status {
	__u32 size;		/* sizeof(struct rvtrace_status) */
	__u32 flags;		/* RVTRACE_STATUS_* */
	__u64 buffer_offset;	/* where the buffer starts in the mapping */
	__u64 buffer_bytes;	/* its length */
	__u64 write_offset;	/* where the next byte goes, in the mapping */
	__u64 bytes_written;	/* bytes written since start, as the driver counted them */
	__u64 wraps;		/* times the write pointer went back to the buffer's start */
	__u64 overflow_harts;	/* bit i: hart i's encoder reported lost trace (trTeInstStallOrOverflow) */
	__u32 src_bits;		/* bits of the SRC field in messages (the funnel's hart number) */
	__u32 reserved0;
	__u64 reserved[3];
};

/* RVTRACE_IOC_WAIT: sleeps until bytes_written >= until_bytes, tracing stops, the
 * timeout passes or a signal comes (EINTR); fills status either way. */
struct rvtrace_wait {
	__u32 size;		/* sizeof(struct rvtrace_wait) */
	__u32 timeout_ms;	/* 0: no timeout */
	__u64 until_bytes;
	struct rvtrace_status status;
};

#define RVTRACE_IOC_MAGIC 0xb7
#define RVTRACE_NR_GET_INFO 0x01
#define RVTRACE_NR_CONFIGURE 0x02
#define RVTRACE_NR_START 0x03
#define RVTRACE_NR_STOP 0x04
#define RVTRACE_NR_GET_STATUS 0x05
#define RVTRACE_NR_WAIT 0x06

#define RVTRACE_IOC_GET_INFO _IOR(RVTRACE_IOC_MAGIC, RVTRACE_NR_GET_INFO, struct rvtrace_info)
#define RVTRACE_IOC_CONFIGURE _IOW(RVTRACE_IOC_MAGIC, RVTRACE_NR_CONFIGURE, struct rvtrace_config)
#define RVTRACE_IOC_START _IO(RVTRACE_IOC_MAGIC, RVTRACE_NR_START)
#define RVTRACE_IOC_STOP _IO(RVTRACE_IOC_MAGIC, RVTRACE_NR_STOP)
#define RVTRACE_IOC_GET_STATUS _IOR(RVTRACE_IOC_MAGIC, RVTRACE_NR_GET_STATUS, struct rvtrace_status)
#define RVTRACE_IOC_WAIT _IOWR(RVTRACE_IOC_MAGIC, RVTRACE_NR_WAIT, struct rvtrace_wait)

#ifdef __cplusplus
#define __RVTRACE_ASSERT(expr) static_assert(expr, #expr)
#else
#define __RVTRACE_ASSERT(expr) _Static_assert(expr, #expr)
#endif
__RVTRACE_ASSERT(sizeof(struct rvtrace_config) == 72);
__RVTRACE_ASSERT(sizeof(struct rvtrace_info) == 80);
__RVTRACE_ASSERT(sizeof(struct rvtrace_status) == 88);
__RVTRACE_ASSERT(sizeof(struct rvtrace_wait) == 104);

#endif /* _UAPI_RVTRACE_H */
