/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * rvperf_ctr: the user/kernel ABI of the rvperf_ctr perf PMU.
 *
 * This is the only header shared between kmod-shim and userland (rvperf's
 * perf-abi crate mirrors it and checks the sizes and offsets below).
 *
 * An rvperf_ctr event is an AUX-area PMU. Each of its events owns a sampling
 * counter on the SBI PMU (the "trigger", chosen by attr.config and
 * attr.config1); every time that counter overflows, the module freezes CTR,
 * reads its entries and appends one struct rvperf_ctr_record to the event's
 * AUX buffer. Userland turns each record into an ordinary PERF_RECORD_SAMPLE
 * with PERF_SAMPLE_BRANCH_STACK.
 *
 * attr.config             the trigger's config, as for perf_event_attr.config
 *                         of the trigger's type (e.g. 0 = cycles for
 *                         PERF_TYPE_HARDWARE; SBI raw and firmware events as
 *                         the SBI PMU driver encodes them for PERF_TYPE_RAW)
 * attr.config1 bits 0-1   the trigger's type (enum rvperf_ctr_trigger_type)
 * attr.sample_period /    the trigger's period or frequency
 *   attr.sample_freq
 * attr.branch_sample_type perf's branch filters (PERF_SAMPLE_BRANCH_*)
 */
#ifndef _UAPI_RVPERF_CTR_H
#define _UAPI_RVPERF_CTR_H

#include <linux/types.h>
#include <linux/perf_event.h>

#define RVPERF_CTR_PMU_NAME "rvperf_ctr"

enum rvperf_ctr_trigger_type {
	RVPERF_CTR_TRIGGER_HARDWARE = 0, /* PERF_TYPE_HARDWARE */
	RVPERF_CTR_TRIGGER_HW_CACHE = 1, /* PERF_TYPE_HW_CACHE */
	RVPERF_CTR_TRIGGER_RAW = 2,	 /* PERF_TYPE_RAW (SBI raw, raw v2, firmware) */
};
#define RVPERF_CTR_CONFIG1_TRIGGER_MASK 0x3ULL

/* "RCTR" in a little-endian dump. */
#define RVPERF_CTR_RECORD_MAGIC 0x52544352U
#define RVPERF_CTR_RECORD_VERSION 1

/* struct rvperf_ctr_record.flags */
/* The trigger interrupted kernel mode (ip is a kernel address). */
#define RVPERF_CTR_RECORD_KERNEL (1U << 0)
/* Entries whose type the hardware could not filter were dropped in software. */
#define RVPERF_CTR_RECORD_SOFTWARE_FILTERED (1U << 1)
/* Entries with a kernel address were dropped (exclude_kernel). */
#define RVPERF_CTR_RECORD_KERNEL_REDACTED (1U << 2)
/* The buffer held a full CTR depth of entries: older history was lost. */
#define RVPERF_CTR_RECORD_STACK_FULL (1U << 3)
/*
 * perf throttled the trigger at this sample (too many interrupts per tick,
 * kernel.perf_event_max_sample_rate): no records follow until perf
 * unthrottles it at a later tick.
 */
#define RVPERF_CTR_RECORD_THROTTLED (1U << 4)

/*
 * One sample: a fixed header followed by nr_entries struct perf_branch_entry
 * (newest first, as perf's PERF_SAMPLE_BRANCH_STACK has them). size is the
 * whole record in bytes, a multiple of 8. Records are packed back to back in
 * the AUX area and may wrap around its end.
 */
struct rvperf_ctr_record {
	__u32 magic;
	__u16 size;
	__u8 version;
	__u8 flags;
	__u32 cpu;
	__u32 pid;
	__u32 tid;
	__u16 nr_entries;
	__u16 depth;		/* CTR depth in use (16..256) */
	__u64 time;		/* perf clock (local_clock), as PERF_SAMPLE_TIME */
	__u64 ip;		/* the trigger's interrupted pc */
	__u64 period;		/* the trigger's period for this sample */
	struct perf_branch_entry entries[];
};

#define RVPERF_CTR_RECORD_HEADER_SIZE 48
#define RVPERF_CTR_MAX_DEPTH 256

/*
 * The layout is the ABI: every compiler that includes this header (the
 * module, and the test of rvperf's perf-abi crate that compares its parser's
 * offsets with offsetof/sizeof printed by a C program built with this
 * header) checks it.
 */
#ifdef __cplusplus
#define __RVPERF_CTR_ASSERT(expr) static_assert(expr, #expr)
#else
#define __RVPERF_CTR_ASSERT(expr) _Static_assert(expr, #expr)
#endif
#define __RVPERF_CTR_OFFSET(field, offset)                                     \
	__RVPERF_CTR_ASSERT(__builtin_offsetof(struct rvperf_ctr_record, field) == \
			    (offset))

__RVPERF_CTR_ASSERT(sizeof(struct rvperf_ctr_record) == RVPERF_CTR_RECORD_HEADER_SIZE);
__RVPERF_CTR_OFFSET(magic, 0);
__RVPERF_CTR_OFFSET(size, 4);
__RVPERF_CTR_OFFSET(version, 6);
__RVPERF_CTR_OFFSET(flags, 7);
__RVPERF_CTR_OFFSET(cpu, 8);
__RVPERF_CTR_OFFSET(pid, 12);
__RVPERF_CTR_OFFSET(tid, 16);
__RVPERF_CTR_OFFSET(nr_entries, 20);
__RVPERF_CTR_OFFSET(depth, 22);
__RVPERF_CTR_OFFSET(time, 24);
__RVPERF_CTR_OFFSET(ip, 32);
__RVPERF_CTR_OFFSET(period, 40);
__RVPERF_CTR_OFFSET(entries, 48);
/* from, to, and one word of flags, as PERF_SAMPLE_BRANCH_STACK has them. */
__RVPERF_CTR_ASSERT(sizeof(struct perf_branch_entry) == 24);

#endif /* _UAPI_RVPERF_CTR_H */
