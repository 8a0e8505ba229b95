/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The pure logic of rvperf_ctr: CSR field layouts (ratified CTR 1.0), the
 * mapping of perf's branch filters onto CTR's inhibit bits, depth encoding,
 * and the conversion of one CTR entry into a perf_branch_entry. No hardware
 * access here, so the KUnit suite (ctr_logic_test.c) covers all of it.
 */
#ifndef RVPERF_CTR_LOGIC_H
#define RVPERF_CTR_LOGIC_H

#include <linux/bits.h>
#include <linux/errno.h>
#include <linux/string.h>
#include <linux/types.h>
#include <linux/perf_event.h>

/* CSR numbers (CTR 1.0; the 0.1.4 draft in shared/specs differs). */
#define CSR_SCTRCTL 0x14e
#define CSR_SCTRSTATUS 0x14f
#define CSR_SCTRDEPTH 0x15f
#define CTR_SISELECT_BASE 0x200

/* sctrctl fields. */
#define CTRCTL_U BIT_ULL(0)
#define CTRCTL_S BIT_ULL(1)
#define CTRCTL_RASEMU BIT_ULL(7)
#define CTRCTL_STE BIT_ULL(8)
#define CTRCTL_BPFRZ BIT_ULL(11)
#define CTRCTL_LCOFIFRZ BIT_ULL(12)
#define CTRCTL_EXCINH BIT_ULL(33)
#define CTRCTL_INTRINH BIT_ULL(34)
#define CTRCTL_TRETINH BIT_ULL(35)
#define CTRCTL_NTBREN BIT_ULL(36)
#define CTRCTL_TKBRINH BIT_ULL(37)
#define CTRCTL_INDCALLINH BIT_ULL(40)
#define CTRCTL_DIRCALLINH BIT_ULL(41)
#define CTRCTL_INDJMPINH BIT_ULL(42)
#define CTRCTL_DIRJMPINH BIT_ULL(43)
#define CTRCTL_CORSWAPINH BIT_ULL(44)
#define CTRCTL_RETINH BIT_ULL(45)
#define CTRCTL_INDLJMPINH BIT_ULL(46)
#define CTRCTL_DIRLJMPINH BIT_ULL(47)
#define CTRCTL_ALL_INHIBITS                                                    \
	(CTRCTL_EXCINH | CTRCTL_INTRINH | CTRCTL_TRETINH | CTRCTL_TKBRINH |    \
	 CTRCTL_INDCALLINH | CTRCTL_DIRCALLINH | CTRCTL_INDJMPINH |            \
	 CTRCTL_DIRJMPINH | CTRCTL_CORSWAPINH | CTRCTL_RETINH |                \
	 CTRCTL_INDLJMPINH | CTRCTL_DIRLJMPINH)

/* sctrstatus fields. */
#define CTRSTATUS_WRPTR GENMASK_ULL(7, 0)
#define CTRSTATUS_FROZEN BIT_ULL(31)

/* Entry registers. */
#define CTRSOURCE_VALID BIT_ULL(0)
#define CTRTARGET_MISP BIT_ULL(0)
#define CTRDATA_TYPE GENMASK_ULL(3, 0)
#define CTRDATA_CCV BIT_ULL(15)
#define CTRDATA_CC GENMASK_ULL(31, 16)
#define CTRDATA_CCM GENMASK_ULL(27, 16)
#define CTRDATA_CCE GENMASK_ULL(31, 28)

/* ctrdata.TYPE: the E-trace itype encodings CTR reuses. */
enum ctr_transfer_type {
	CTR_TYPE_NONE = 0,
	CTR_TYPE_EXCEPTION = 1,
	CTR_TYPE_INTERRUPT = 2,
	CTR_TYPE_TRAP_RETURN = 3,
	CTR_TYPE_NOT_TAKEN_BRANCH = 4,
	CTR_TYPE_TAKEN_BRANCH = 5,
	CTR_TYPE_INDIRECT_CALL = 8,
	CTR_TYPE_DIRECT_CALL = 9,
	CTR_TYPE_INDIRECT_JUMP = 10,
	CTR_TYPE_DIRECT_JUMP = 11,
	CTR_TYPE_COROUTINE_SWAP = 12,
	CTR_TYPE_RETURN = 13,
	CTR_TYPE_OTHER_INDIRECT_LINK_JUMP = 14,
	CTR_TYPE_OTHER_DIRECT_LINK_JUMP = 15,
};

/* The inhibit bit that filters out each transfer type (0: none). */
static inline u64 ctr_type_inhibit(unsigned int type)
{
	static const u64 table[16] = {
		[CTR_TYPE_EXCEPTION] = CTRCTL_EXCINH,
		[CTR_TYPE_INTERRUPT] = CTRCTL_INTRINH,
		[CTR_TYPE_TRAP_RETURN] = CTRCTL_TRETINH,
		[CTR_TYPE_TAKEN_BRANCH] = CTRCTL_TKBRINH,
		[CTR_TYPE_INDIRECT_CALL] = CTRCTL_INDCALLINH,
		[CTR_TYPE_DIRECT_CALL] = CTRCTL_DIRCALLINH,
		[CTR_TYPE_INDIRECT_JUMP] = CTRCTL_INDJMPINH,
		[CTR_TYPE_DIRECT_JUMP] = CTRCTL_DIRJMPINH,
		[CTR_TYPE_COROUTINE_SWAP] = CTRCTL_CORSWAPINH,
		[CTR_TYPE_RETURN] = CTRCTL_RETINH,
		[CTR_TYPE_OTHER_INDIRECT_LINK_JUMP] = CTRCTL_INDLJMPINH,
		[CTR_TYPE_OTHER_DIRECT_LINK_JUMP] = CTRCTL_DIRLJMPINH,
	};
	return table[type & 15];
}

/* perf's branch type for each CTR transfer type (static mapping table). */
static inline u8 ctr_type_to_perf(unsigned int type)
{
	static const u8 table[16] = {
		[CTR_TYPE_NONE] = PERF_BR_UNKNOWN,
		[CTR_TYPE_EXCEPTION] = PERF_BR_SYSCALL,
		[CTR_TYPE_INTERRUPT] = PERF_BR_IRQ,
		[CTR_TYPE_TRAP_RETURN] = PERF_BR_ERET,
		[CTR_TYPE_NOT_TAKEN_BRANCH] = PERF_BR_COND,
		[CTR_TYPE_TAKEN_BRANCH] = PERF_BR_COND,
		[6] = PERF_BR_UNKNOWN,
		[7] = PERF_BR_UNKNOWN,
		[CTR_TYPE_INDIRECT_CALL] = PERF_BR_IND_CALL,
		[CTR_TYPE_DIRECT_CALL] = PERF_BR_CALL,
		[CTR_TYPE_INDIRECT_JUMP] = PERF_BR_IND,
		[CTR_TYPE_DIRECT_JUMP] = PERF_BR_UNCOND,
		/* perf has no co-routine swap; it is an indirect jump to perf. */
		[CTR_TYPE_COROUTINE_SWAP] = PERF_BR_IND,
		[CTR_TYPE_RETURN] = PERF_BR_RET,
		[CTR_TYPE_OTHER_INDIRECT_LINK_JUMP] = PERF_BR_IND_CALL,
		[CTR_TYPE_OTHER_DIRECT_LINK_JUMP] = PERF_BR_CALL,
	};
	return table[type & 15];
}

/*
 * The elapsed cycle count of ctrdata.CC: CCM when CCE is 0, otherwise
 * (4096 + CCM) << (CCE - 1) (CTR 1.0, "Cycle Counting").
 */
static inline u64 ctr_cycles(u64 ctrdata)
{
	u64 ccm = (ctrdata & CTRDATA_CCM) >> 16;
	u64 cce = (ctrdata & CTRDATA_CCE) >> 28;

	if (!cce)
		return ccm;
	return (4096 + ccm) << (cce - 1);
}

/* sctrdepth.DEPTH <-> number of entries (16 << DEPTH; 0..4 are defined). */
static inline unsigned int ctr_depth_entries(u64 depth_field)
{
	return (depth_field & 7) <= 4 ? 16U << (depth_field & 7) : 0;
}

static inline int ctr_depth_encode(unsigned int entries)
{
	int field;

	for (field = 0; field <= 4; field++)
		if ((16U << field) == entries)
			return field;
	return -1;
}

/*
 * What a perf branch_sample_type asks of CTR: the sctrctl value (privilege
 * enables, inhibits cleared for the wanted types, LCOFIFRZ) and the set of
 * transfer types to keep (bit per ctr_transfer_type), which the software
 * filter applies to whatever the hardware could not inhibit.
 */
struct ctr_filter {
	u64 ctl;
	u16 wanted_types;
};

#define CTR_TYPES(...) ctr_types_mask((const u8[]){ __VA_ARGS__ }, \
	sizeof((const u8[]){ __VA_ARGS__ }))
static inline u16 ctr_types_mask(const u8 *types, size_t n)
{
	u16 mask = 0;

	while (n--)
		mask |= 1U << types[n];
	return mask;
}

/*
 * Returns 0, or -EOPNOTSUPP for a filter CTR cannot express (call stacks
 * without RASEMU, transactional-memory filters). user/kernel are the
 * privilege levels already resolved from the filter and exclude_* bits.
 */
static inline int ctr_filter_from_perf(u64 branch_sample_type, bool user,
				       bool kernel, bool rasemu_supported,
				       struct ctr_filter *filter)
{
	u16 wanted = 0;
	u64 ctl = CTRCTL_LCOFIFRZ;

	if (branch_sample_type &
	    (PERF_SAMPLE_BRANCH_ABORT_TX | PERF_SAMPLE_BRANCH_IN_TX))
		return -EOPNOTSUPP;
	if (user)
		ctl |= CTRCTL_U;
	if (kernel)
		ctl |= CTRCTL_S;

	if (branch_sample_type & PERF_SAMPLE_BRANCH_CALL_STACK) {
		if (!rasemu_supported)
			return -EOPNOTSUPP;
		/* RASEMU ignores the inhibits: calls push, returns pop. */
		filter->ctl = ctl | CTRCTL_RASEMU;
		filter->wanted_types = 0xffff;
		return 0;
	}

	if (branch_sample_type & PERF_SAMPLE_BRANCH_ANY) {
		wanted = 0xffff & ~CTR_TYPES(CTR_TYPE_NOT_TAKEN_BRANCH);
	} else {
		if (branch_sample_type & PERF_SAMPLE_BRANCH_ANY_CALL)
			wanted |= CTR_TYPES(CTR_TYPE_INDIRECT_CALL,
					    CTR_TYPE_DIRECT_CALL,
					    CTR_TYPE_OTHER_INDIRECT_LINK_JUMP,
					    CTR_TYPE_OTHER_DIRECT_LINK_JUMP,
					    CTR_TYPE_EXCEPTION,
					    CTR_TYPE_INTERRUPT);
		if (branch_sample_type & PERF_SAMPLE_BRANCH_ANY_RETURN)
			wanted |= CTR_TYPES(CTR_TYPE_RETURN,
					    CTR_TYPE_TRAP_RETURN);
		if (branch_sample_type & PERF_SAMPLE_BRANCH_IND_CALL)
			wanted |= CTR_TYPES(CTR_TYPE_INDIRECT_CALL,
					    CTR_TYPE_OTHER_INDIRECT_LINK_JUMP);
		if (branch_sample_type & PERF_SAMPLE_BRANCH_CALL)
			wanted |= CTR_TYPES(CTR_TYPE_DIRECT_CALL,
					    CTR_TYPE_OTHER_DIRECT_LINK_JUMP);
		if (branch_sample_type & PERF_SAMPLE_BRANCH_COND)
			wanted |= CTR_TYPES(CTR_TYPE_TAKEN_BRANCH);
		if (branch_sample_type & PERF_SAMPLE_BRANCH_IND_JUMP)
			wanted |= CTR_TYPES(CTR_TYPE_INDIRECT_JUMP);
		if (!wanted)
			return -EINVAL;
	}

	ctl |= CTRCTL_ALL_INHIBITS;
	{
		unsigned int type;

		for (type = 0; type < 16; type++)
			if (wanted & (1U << type))
				ctl &= ~ctr_type_inhibit(type);
	}
	filter->ctl = ctl;
	filter->wanted_types = wanted;
	return 0;
}

/*
 * Whether a PERF_TYPE_RAW config names an SBI firmware event: riscv_pmu_sbi
 * takes config bits 63:62 = 2 as "firmware". Firmware counters raise no
 * overflow interrupt ("Firmware counter don't support overflow yet" in the
 * driver), so as a trigger they would silently record nothing.
 */
static inline bool ctr_trigger_is_firmware(bool raw, u64 config)
{
	return raw && (config >> 62) == 2;
}

/*
 * One CTR entry as perf reports it. Returns false for an invalid entry (the
 * end of the recorded history). save_type and save_cycles follow perf's
 * PERF_SAMPLE_BRANCH_TYPE_SAVE and !PERF_SAMPLE_BRANCH_NO_CYCLES.
 */
static inline bool ctr_entry_to_perf(u64 source, u64 target, u64 data,
				     bool misp_supported, bool save_type,
				     bool save_cycles,
				     struct perf_branch_entry *entry)
{
	u64 cycles;

	if (!(source & CTRSOURCE_VALID))
		return false;
	memset(entry, 0, sizeof(*entry));
	entry->from = source & ~CTRSOURCE_VALID;
	entry->to = target & ~CTRTARGET_MISP;
	if (misp_supported) {
		entry->mispred = !!(target & CTRTARGET_MISP);
		entry->predicted = !entry->mispred;
	}
	if (save_cycles && (data & CTRDATA_CCV)) {
		cycles = ctr_cycles(data);
		entry->cycles = cycles > 0xffff ? 0xffff : cycles;
	}
	if (save_type)
		entry->type = ctr_type_to_perf(data & CTRDATA_TYPE);
	return true;
}

#endif /* RVPERF_CTR_LOGIC_H */
