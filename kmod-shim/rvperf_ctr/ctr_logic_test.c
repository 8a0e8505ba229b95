// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit suite for rvperf_ctr's pure logic (ctr_logic.h) and the record
 * layout of include/uapi/rvperf_ctr.h. Runs when rvperf_ctr_test.ko loads;
 * results in /sys/kernel/debug/kunit/rvperf_ctr_logic/results.
 */
#include <kunit/test.h>
#include <linux/module.h>
#include <linux/stddef.h>

#include "rvperf_ctr.h"
#include "ctr_logic.h"

static u64 cc(u64 cce, u64 ccm)
{
	return CTRDATA_CCV | (cce << 28) | (ccm << 16);
}

static void cycles_formula(struct kunit *test)
{
	/* CCE = 0: the mantissa itself. */
	KUNIT_EXPECT_EQ(test, ctr_cycles(cc(0, 0)), 0ULL);
	KUNIT_EXPECT_EQ(test, ctr_cycles(cc(0, 4095)), 4095ULL);
	/* (4096 + CCM) << (CCE - 1). */
	KUNIT_EXPECT_EQ(test, ctr_cycles(cc(1, 0)), 4096ULL);
	KUNIT_EXPECT_EQ(test, ctr_cycles(cc(1, 4095)), 8191ULL);
	KUNIT_EXPECT_EQ(test, ctr_cycles(cc(2, 1)), 8194ULL);
	KUNIT_EXPECT_EQ(test, ctr_cycles(cc(3, 4095)), 32764ULL);
	/* The spec's maxima per CCE width (Table "Cycle Counter Size"). */
	KUNIT_EXPECT_EQ(test, ctr_cycles(cc(7, 4095)), 524224ULL);
	KUNIT_EXPECT_EQ(test, ctr_cycles(cc(15, 4095)), 134201344ULL);
}

static void depth_encoding(struct kunit *test)
{
	KUNIT_EXPECT_EQ(test, ctr_depth_entries(0), 16U);
	KUNIT_EXPECT_EQ(test, ctr_depth_entries(4), 256U);
	KUNIT_EXPECT_EQ(test, ctr_depth_entries(5), 0U);
	KUNIT_EXPECT_EQ(test, ctr_depth_encode(16), 0);
	KUNIT_EXPECT_EQ(test, ctr_depth_encode(64), 2);
	KUNIT_EXPECT_EQ(test, ctr_depth_encode(256), 4);
	KUNIT_EXPECT_EQ(test, ctr_depth_encode(48), -1);
}

static void filter_any(struct kunit *test)
{
	struct ctr_filter filter;

	KUNIT_ASSERT_EQ(test, ctr_filter_from_perf(PERF_SAMPLE_BRANCH_ANY, true,
						   false, false, &filter), 0);
	KUNIT_EXPECT_EQ(test, filter.ctl, CTRCTL_U);
	KUNIT_EXPECT_FALSE(test, filter.wanted_types & (1U << CTR_TYPE_NOT_TAKEN_BRANCH));
	KUNIT_EXPECT_TRUE(test, filter.wanted_types & (1U << CTR_TYPE_RETURN));
}

static void filter_any_call_user(struct kunit *test)
{
	struct ctr_filter filter;
	u64 enabled = CTRCTL_INDCALLINH | CTRCTL_DIRCALLINH | CTRCTL_INDLJMPINH |
		      CTRCTL_DIRLJMPINH | CTRCTL_EXCINH | CTRCTL_INTRINH;

	KUNIT_ASSERT_EQ(test, ctr_filter_from_perf(PERF_SAMPLE_BRANCH_ANY_CALL, true,
						   false, false, &filter), 0);
	KUNIT_EXPECT_EQ(test, filter.ctl & (CTRCTL_U | CTRCTL_S), CTRCTL_U);
	KUNIT_EXPECT_EQ(test, filter.ctl & enabled, 0ULL);
	KUNIT_EXPECT_EQ(test, filter.ctl & CTRCTL_ALL_INHIBITS,
			CTRCTL_ALL_INHIBITS & ~enabled);
	KUNIT_EXPECT_FALSE(test, filter.wanted_types & (1U << CTR_TYPE_RETURN));
	KUNIT_EXPECT_TRUE(test, filter.wanted_types & (1U << CTR_TYPE_DIRECT_CALL));
}

static void filter_each_type(struct kunit *test)
{
	static const struct {
		u64 perf;
		u64 cleared;
	} cases[] = {
		{ PERF_SAMPLE_BRANCH_ANY_RETURN, CTRCTL_RETINH | CTRCTL_TRETINH },
		{ PERF_SAMPLE_BRANCH_IND_CALL, CTRCTL_INDCALLINH | CTRCTL_INDLJMPINH },
		{ PERF_SAMPLE_BRANCH_CALL, CTRCTL_DIRCALLINH | CTRCTL_DIRLJMPINH },
		{ PERF_SAMPLE_BRANCH_COND, CTRCTL_TKBRINH },
		{ PERF_SAMPLE_BRANCH_IND_JUMP, CTRCTL_INDJMPINH },
	};
	struct ctr_filter filter;
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		KUNIT_ASSERT_EQ(test, ctr_filter_from_perf(cases[i].perf, true, true,
							   false, &filter), 0);
		KUNIT_EXPECT_EQ(test, filter.ctl & CTRCTL_ALL_INHIBITS,
				CTRCTL_ALL_INHIBITS & ~cases[i].cleared);
		KUNIT_EXPECT_EQ(test, filter.ctl & (CTRCTL_U | CTRCTL_S),
				CTRCTL_U | CTRCTL_S);
	}
}

static void filter_refusals(struct kunit *test)
{
	struct ctr_filter filter;

	/* Call stacks need RAS emulation. */
	KUNIT_EXPECT_EQ(test, ctr_filter_from_perf(PERF_SAMPLE_BRANCH_CALL_STACK,
						   true, false, false, &filter),
			-EOPNOTSUPP);
	KUNIT_ASSERT_EQ(test, ctr_filter_from_perf(PERF_SAMPLE_BRANCH_CALL_STACK,
						   true, false, true, &filter), 0);
	KUNIT_EXPECT_TRUE(test, filter.ctl & CTRCTL_RASEMU);
	/* No transactional memory on RISC-V. */
	KUNIT_EXPECT_EQ(test, ctr_filter_from_perf(PERF_SAMPLE_BRANCH_IN_TX, true,
						   false, false, &filter),
			-EOPNOTSUPP);
	/* A privilege level with no branch type is not a filter. */
	KUNIT_EXPECT_EQ(test, ctr_filter_from_perf(PERF_SAMPLE_BRANCH_NO_CYCLES,
						   true, false, false, &filter),
			-EINVAL);
}

static void entry_conversion(struct kunit *test)
{
	struct perf_branch_entry entry;

	/* An invalid entry ends the history. */
	KUNIT_EXPECT_FALSE(test, ctr_entry_to_perf(0x1000, 0x2000, 0, true, true,
						   true, &entry));

	KUNIT_ASSERT_TRUE(test, ctr_entry_to_perf(0x10000 | CTRSOURCE_VALID,
						  0x20000 | CTRTARGET_MISP,
						  cc(1, 1) | CTR_TYPE_DIRECT_CALL,
						  true, true, true, &entry));
	KUNIT_EXPECT_EQ(test, entry.from, 0x10000ULL);
	KUNIT_EXPECT_EQ(test, entry.to, 0x20000ULL);
	KUNIT_EXPECT_EQ(test, (u64)entry.mispred, 1ULL);
	KUNIT_EXPECT_EQ(test, (u64)entry.predicted, 0ULL);
	KUNIT_EXPECT_EQ(test, (u64)entry.cycles, 4097ULL);
	KUNIT_EXPECT_EQ(test, (u64)entry.type, (u64)PERF_BR_CALL);

	/* Saturation of perf's 16-bit cycles; no MISP implemented; no type. */
	KUNIT_ASSERT_TRUE(test, ctr_entry_to_perf(0x10000 | CTRSOURCE_VALID, 0x20000,
						  cc(15, 4095) | CTR_TYPE_RETURN,
						  false, false, true, &entry));
	KUNIT_EXPECT_EQ(test, (u64)entry.cycles, 0xffffULL);
	KUNIT_EXPECT_EQ(test, (u64)entry.mispred, 0ULL);
	KUNIT_EXPECT_EQ(test, (u64)entry.predicted, 0ULL);
	KUNIT_EXPECT_EQ(test, (u64)entry.type, 0ULL);

	/* CCV = 0: no cycle count; no_cycles: none either. */
	KUNIT_ASSERT_TRUE(test, ctr_entry_to_perf(0x10000 | CTRSOURCE_VALID, 0x20000,
						  (1ULL << 16) | CTR_TYPE_RETURN,
						  true, true, true, &entry));
	KUNIT_EXPECT_EQ(test, (u64)entry.cycles, 0ULL);
	KUNIT_EXPECT_EQ(test, (u64)entry.type, (u64)PERF_BR_RET);
	KUNIT_ASSERT_TRUE(test, ctr_entry_to_perf(0x10000 | CTRSOURCE_VALID, 0x20000,
						  cc(0, 7), true, true, false, &entry));
	KUNIT_EXPECT_EQ(test, (u64)entry.cycles, 0ULL);
}

static void type_mapping(struct kunit *test)
{
	KUNIT_EXPECT_EQ(test, ctr_type_to_perf(CTR_TYPE_INDIRECT_CALL), (u8)PERF_BR_IND_CALL);
	KUNIT_EXPECT_EQ(test, ctr_type_to_perf(CTR_TYPE_DIRECT_JUMP), (u8)PERF_BR_UNCOND);
	KUNIT_EXPECT_EQ(test, ctr_type_to_perf(CTR_TYPE_INTERRUPT), (u8)PERF_BR_IRQ);
	KUNIT_EXPECT_EQ(test, ctr_type_to_perf(CTR_TYPE_TRAP_RETURN), (u8)PERF_BR_ERET);
	KUNIT_EXPECT_EQ(test, ctr_type_inhibit(CTR_TYPE_NOT_TAKEN_BRANCH), 0ULL);
	KUNIT_EXPECT_EQ(test, ctr_type_inhibit(CTR_TYPE_COROUTINE_SWAP), CTRCTL_CORSWAPINH);
}

static void firmware_triggers(struct kunit *test)
{
	/* SBI_PMU_FW_ILLEGAL_INSN as riscv_pmu_sbi encodes it for PERF_TYPE_RAW. */
	KUNIT_EXPECT_TRUE(test, ctr_trigger_is_firmware(true, (2ULL << 62) | 2));
	KUNIT_EXPECT_FALSE(test, ctr_trigger_is_firmware(true, 0x12345));
	KUNIT_EXPECT_FALSE(test, ctr_trigger_is_firmware(true, 1ULL << 62));
	KUNIT_EXPECT_FALSE(test, ctr_trigger_is_firmware(false, 2ULL << 62));
}

static void attr_checks(struct kunit *test)
{
	struct perf_event_attr attr = { .sample_period = 20000 };

	KUNIT_EXPECT_EQ(test, ctr_check_attr(&attr), 0);
	/* perf's :u and paranoid fallback set exclude_hv; guests never reach sctrctl. */
	attr.exclude_hv = 1;
	attr.exclude_guest = 1;
	KUNIT_EXPECT_EQ(test, ctr_check_attr(&attr), 0);
	attr.exclude_host = 1;
	KUNIT_EXPECT_EQ(test, ctr_check_attr(&attr), -EOPNOTSUPP);
	attr.exclude_host = 0;
	attr.exclude_idle = 1;
	KUNIT_EXPECT_EQ(test, ctr_check_attr(&attr), -EOPNOTSUPP);
	attr.exclude_idle = 0;
	attr.use_clockid = 1;
	KUNIT_EXPECT_EQ(test, ctr_check_attr(&attr), -EOPNOTSUPP);
	attr.use_clockid = 0;
	attr.inherit = 1;
	KUNIT_EXPECT_EQ(test, ctr_check_attr(&attr), -EOPNOTSUPP);
	attr.inherit = 0;
	/* A zero period or frequency (one word) would never overflow. */
	attr.sample_period = 0;
	KUNIT_EXPECT_EQ(test, ctr_check_attr(&attr), -EINVAL);
	attr.freq = 1;
	KUNIT_EXPECT_EQ(test, ctr_check_attr(&attr), -EINVAL);
	attr.sample_freq = 4000;
	KUNIT_EXPECT_EQ(test, ctr_check_attr(&attr), 0);
	attr.config1 = 4;
	KUNIT_EXPECT_EQ(test, ctr_check_attr(&attr), -EINVAL);
	attr.config1 = RVPERF_CTR_TRIGGER_RAW;
	KUNIT_EXPECT_EQ(test, ctr_check_attr(&attr), 0);
	attr.config2 = 1;
	KUNIT_EXPECT_EQ(test, ctr_check_attr(&attr), -EINVAL);
}

static void privilege_resolution(struct kunit *test)
{
	bool user, kernel;
	u64 branch;

	/* No filter: exclude_* decide, and "any" is implied. */
	KUNIT_ASSERT_EQ(test, ctr_resolve_privilege(0, false, true, &branch, &user,
						    &kernel), 0);
	KUNIT_EXPECT_TRUE(test, user);
	KUNIT_EXPECT_FALSE(test, kernel);
	KUNIT_EXPECT_EQ(test, branch, (u64)(PERF_SAMPLE_BRANCH_USER | PERF_SAMPLE_BRANCH_ANY));
	KUNIT_ASSERT_EQ(test, ctr_resolve_privilege(PERF_SAMPLE_BRANCH_ANY_CALL, false,
						    false, &branch, &user, &kernel), 0);
	KUNIT_EXPECT_TRUE(test, user && kernel);
	KUNIT_EXPECT_FALSE(test, branch & PERF_SAMPLE_BRANCH_ANY);
	/* The filter's k never overrides exclude_kernel (every unprivileged event). */
	KUNIT_EXPECT_EQ(test, ctr_resolve_privilege(PERF_SAMPLE_BRANCH_ANY |
						    PERF_SAMPLE_BRANCH_KERNEL,
						    false, true, &branch, &user, &kernel),
			-EINVAL);
	KUNIT_ASSERT_EQ(test, ctr_resolve_privilege(PERF_SAMPLE_BRANCH_USER |
						    PERF_SAMPLE_BRANCH_KERNEL,
						    false, true, &branch, &user, &kernel), 0);
	KUNIT_EXPECT_TRUE(test, user);
	KUNIT_EXPECT_FALSE(test, kernel);
	/* hv means S-mode here (there is no M-mode recording). */
	KUNIT_ASSERT_EQ(test, ctr_resolve_privilege(PERF_SAMPLE_BRANCH_HV, true, false,
						    &branch, &user, &kernel), 0);
	KUNIT_EXPECT_FALSE(test, user);
	KUNIT_EXPECT_TRUE(test, kernel);
	/* Everything excluded: nothing to record. */
	KUNIT_EXPECT_EQ(test, ctr_resolve_privilege(0, true, true, &branch, &user,
						    &kernel), -EINVAL);
}

/*
 * Freezing: never for user-only recording (nothing changes CTR in S-mode, and a
 * freeze could only go stale), LCOFIFRZ only where it exists and the module
 * unfreezes after every PMU interrupt, software otherwise.
 */
static void freeze_modes(struct kunit *test)
{
	struct ctr_filter filter;

	KUNIT_EXPECT_EQ(test, ctr_freeze_mode(false, true, true), CTR_FREEZE_NONE);
	KUNIT_EXPECT_EQ(test, ctr_freeze_mode(false, false, false), CTR_FREEZE_NONE);
	KUNIT_EXPECT_EQ(test, ctr_freeze_mode(true, true, true), CTR_FREEZE_HARDWARE);
	KUNIT_EXPECT_EQ(test, ctr_freeze_mode(true, false, true), CTR_FREEZE_SOFTWARE);
	KUNIT_EXPECT_EQ(test, ctr_freeze_mode(true, true, false), CTR_FREEZE_SOFTWARE);

	KUNIT_ASSERT_EQ(test, ctr_filter_from_perf(PERF_SAMPLE_BRANCH_ANY, true,
						   true, false, &filter), 0);
	KUNIT_EXPECT_FALSE(test, filter.ctl & CTRCTL_LCOFIFRZ);
	KUNIT_EXPECT_TRUE(test, ctr_filter_hw_ctl(&filter, CTRCTL_ALL_INHIBITS,
						  CTR_FREEZE_HARDWARE) & CTRCTL_LCOFIFRZ);
	KUNIT_EXPECT_FALSE(test, ctr_filter_hw_ctl(&filter, CTRCTL_ALL_INHIBITS,
						   CTR_FREEZE_SOFTWARE) & CTRCTL_LCOFIFRZ);
	KUNIT_EXPECT_FALSE(test, ctr_filter_hw_ctl(&filter, CTRCTL_ALL_INHIBITS,
						   CTR_FREEZE_NONE) & CTRCTL_LCOFIFRZ);
}

static void filter_hardware_limits(struct kunit *test)
{
	struct ctr_filter filter;

	KUNIT_ASSERT_EQ(test, ctr_filter_from_perf(PERF_SAMPLE_BRANCH_ANY_CALL, true,
						   false, false, &filter), 0);
	/* All inhibits implemented: honoured in hardware alone. */
	KUNIT_EXPECT_EQ(test, ctr_filter_check_hw(&filter, CTRCTL_ALL_INHIBITS, false), 0);
	KUNIT_EXPECT_EQ(test, ctr_filter_hw_ctl(&filter, CTRCTL_ALL_INHIBITS, CTR_FREEZE_NONE),
			filter.ctl);
	/* No RETINH: returns would be recorded unless TYPE lets software drop them. */
	KUNIT_EXPECT_EQ(test, ctr_filter_check_hw(&filter,
						  CTRCTL_ALL_INHIBITS & ~CTRCTL_RETINH,
						  true), 0);
	KUNIT_EXPECT_EQ(test, ctr_filter_check_hw(&filter,
						  CTRCTL_ALL_INHIBITS & ~CTRCTL_RETINH,
						  false), -EOPNOTSUPP);
	KUNIT_EXPECT_EQ(test, ctr_filter_hw_ctl(&filter,
						CTRCTL_ALL_INHIBITS & ~CTRCTL_RETINH,
						CTR_FREEZE_NONE),
			filter.ctl & ~CTRCTL_RETINH);
	/* No inhibits at all: "any" (TKBRINH etc. clear) needs none of them. */
	KUNIT_ASSERT_EQ(test, ctr_filter_from_perf(PERF_SAMPLE_BRANCH_ANY, true,
						   false, false, &filter), 0);
	KUNIT_EXPECT_EQ(test, ctr_filter_check_hw(&filter, 0, false), 0);
	/* Filters CTR cannot express at all. */
	KUNIT_EXPECT_EQ(test, ctr_filter_from_perf(PERF_SAMPLE_BRANCH_ANY |
						   PERF_SAMPLE_BRANCH_COUNTERS, true,
						   false, false, &filter), -EOPNOTSUPP);
	KUNIT_EXPECT_EQ(test, ctr_filter_from_perf(PERF_SAMPLE_BRANCH_ANY |
						   PERF_SAMPLE_BRANCH_MAX, true,
						   false, false, &filter), -EINVAL);
}

static void entry_verdicts(struct kunit *test)
{
	const u64 limit = 0x4000000000ULL;
	struct perf_branch_entry user = { .from = 0x10000, .to = 0x20000 };
	struct perf_branch_entry to_kernel = { .from = 0x10000, .to = limit };
	struct perf_branch_entry from_kernel = { .from = ~0ULL - 7, .to = 0x10000 };
	u16 calls = 1U << CTR_TYPE_DIRECT_CALL;

	KUNIT_EXPECT_EQ(test, ctr_entry_verdict(&user, CTR_TYPE_DIRECT_CALL, calls,
						true, true, limit), 0);
	/* Unwanted types go when TYPE tells them apart, stay when it does not. */
	KUNIT_EXPECT_EQ(test, ctr_entry_verdict(&user, CTR_TYPE_RETURN, calls, true,
						true, limit),
			(u8)RVPERF_CTR_RECORD_SOFTWARE_FILTERED);
	KUNIT_EXPECT_EQ(test, ctr_entry_verdict(&user, CTR_TYPE_RETURN, calls, false,
						true, limit), 0);
	/* Redaction: either end at or above the user limit, only for user-only events. */
	KUNIT_EXPECT_EQ(test, ctr_entry_verdict(&to_kernel, CTR_TYPE_DIRECT_CALL, calls,
						true, true, limit),
			(u8)RVPERF_CTR_RECORD_KERNEL_REDACTED);
	KUNIT_EXPECT_EQ(test, ctr_entry_verdict(&from_kernel, CTR_TYPE_DIRECT_CALL,
						calls, false, true, limit),
			(u8)RVPERF_CTR_RECORD_KERNEL_REDACTED);
	KUNIT_EXPECT_EQ(test, ctr_entry_verdict(&from_kernel, CTR_TYPE_DIRECT_CALL,
						calls, true, false, limit), 0);
}

static void ring_wraps(struct kunit *test)
{
	u8 ring[16], data[6] = { 1, 2, 3, 4, 5, 6 };
	static const u8 wrapped[16] = { 3, 4, 5, 6, [4 ... 13] = 0xee, 1, 2 };

	memset(ring, 0xee, sizeof(ring));
	ctr_ring_write(ring, sizeof(ring), 2, data, sizeof(data));
	KUNIT_EXPECT_MEMEQ(test, ring + 2, data, sizeof(data));
	KUNIT_EXPECT_EQ(test, ring[8], (u8)0xee);
	/* head counts on past the size; the record straddles the end. */
	memset(ring, 0xee, sizeof(ring));
	ctr_ring_write(ring, sizeof(ring), 16 * 3 + 14, data, sizeof(data));
	KUNIT_EXPECT_MEMEQ(test, ring, wrapped, sizeof(ring));
	/* Exactly up to the end: nothing at the start. */
	memset(ring, 0xee, sizeof(ring));
	ctr_ring_write(ring, sizeof(ring), 10, data, sizeof(data));
	KUNIT_EXPECT_EQ(test, ring[0], (u8)0xee);
	KUNIT_EXPECT_EQ(test, ring[15], (u8)6);
}

static void record_layout(struct kunit *test)
{
	/* userland (perf-abi's rvperf_ctr module) relies on these. */
	KUNIT_EXPECT_EQ(test, sizeof(struct rvperf_ctr_record),
			(size_t)RVPERF_CTR_RECORD_HEADER_SIZE);
	KUNIT_EXPECT_EQ(test, offsetof(struct rvperf_ctr_record, size), (size_t)4);
	KUNIT_EXPECT_EQ(test, offsetof(struct rvperf_ctr_record, cpu), (size_t)8);
	KUNIT_EXPECT_EQ(test, offsetof(struct rvperf_ctr_record, nr_entries), (size_t)20);
	KUNIT_EXPECT_EQ(test, offsetof(struct rvperf_ctr_record, time), (size_t)24);
	KUNIT_EXPECT_EQ(test, offsetof(struct rvperf_ctr_record, ip), (size_t)32);
	KUNIT_EXPECT_EQ(test, offsetof(struct rvperf_ctr_record, period), (size_t)40);
	KUNIT_EXPECT_EQ(test, offsetof(struct rvperf_ctr_record, entries), (size_t)48);
	KUNIT_EXPECT_EQ(test, sizeof(struct perf_branch_entry), (size_t)24);
}

static struct kunit_case ctr_logic_cases[] = {
	KUNIT_CASE(cycles_formula),
	KUNIT_CASE(depth_encoding),
	KUNIT_CASE(filter_any),
	KUNIT_CASE(filter_any_call_user),
	KUNIT_CASE(filter_each_type),
	KUNIT_CASE(filter_refusals),
	KUNIT_CASE(entry_conversion),
	KUNIT_CASE(type_mapping),
	KUNIT_CASE(firmware_triggers),
	KUNIT_CASE(attr_checks),
	KUNIT_CASE(privilege_resolution),
	KUNIT_CASE(filter_hardware_limits),
	KUNIT_CASE(freeze_modes),
	KUNIT_CASE(entry_verdicts),
	KUNIT_CASE(ring_wraps),
	KUNIT_CASE(record_layout),
	{}
};

static struct kunit_suite ctr_logic_suite = {
	.name = "rvperf_ctr_logic",
	.test_cases = ctr_logic_cases,
};
kunit_test_suite(ctr_logic_suite);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("KUnit tests of rvperf_ctr's CTR logic");
