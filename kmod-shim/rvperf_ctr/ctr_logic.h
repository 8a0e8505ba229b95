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

#include "rvperf_ctr.h"

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
 * enables, inhibits cleared for the wanted types) and the set of
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
 * The attr fields rvperf_ctr refuses before anything else: 0, -EINVAL or
 * -EOPNOTSUPP. (The trigger's type and firmware events are checked by the
 * caller, which knows the trigger table.)
 *  - inherit: see ctr_core.c, "Ordering and lifetimes".
 *  - A zero period (sample_period and sample_freq share the word): the
 *    trigger would count without ever overflowing, recording nothing.
 *  - exclude_host (only a guest's branches), exclude_idle, use_clockid: not
 *    implemented. exclude_hv and exclude_guest are accepted: S-mode CTR never
 *    records M-mode, and a guest's VS/VU-mode transfers go to vsctrctl's
 *    configuration, never to this one.
 */
static inline int ctr_check_attr(const struct perf_event_attr *attr)
{
	if (attr->inherit)
		return -EOPNOTSUPP;
	if ((attr->config1 & ~RVPERF_CTR_CONFIG1_TRIGGER_MASK) || attr->config2)
		return -EINVAL;
	if (!attr->sample_period)
		return -EINVAL;
	if (attr->exclude_host || attr->exclude_idle || attr->use_clockid)
		return -EOPNOTSUPP;
	return 0;
}

/*
 * The privilege levels to record, as perf resolves them for branch stacks:
 * the filter's u/k/hv bits, else the event's exclude_* bits; a filter with
 * no branch type means "any". Kernel recording also needs !exclude_kernel,
 * which perf's permission check (perf_allow_kernel) has already enforced
 * for unprivileged callers. Returns the completed branch_sample_type in
 * *branch, or -EINVAL when nothing would be recorded.
 */
static inline int ctr_resolve_privilege(u64 branch_sample_type, bool exclude_user,
					bool exclude_kernel, u64 *branch,
					bool *user, bool *kernel)
{
	u64 modifiers = PERF_SAMPLE_BRANCH_PLM_ALL | PERF_SAMPLE_BRANCH_NO_FLAGS |
			PERF_SAMPLE_BRANCH_NO_CYCLES | PERF_SAMPLE_BRANCH_TYPE_SAVE |
			PERF_SAMPLE_BRANCH_HW_INDEX | PERF_SAMPLE_BRANCH_PRIV_SAVE;
	u64 result = branch_sample_type;

	if (!(result & PERF_SAMPLE_BRANCH_PLM_ALL)) {
		if (!exclude_user)
			result |= PERF_SAMPLE_BRANCH_USER;
		if (!exclude_kernel)
			result |= PERF_SAMPLE_BRANCH_KERNEL;
	}
	if (!(result & ~modifiers))
		result |= PERF_SAMPLE_BRANCH_ANY;
	*user = result & PERF_SAMPLE_BRANCH_USER;
	*kernel = (result & (PERF_SAMPLE_BRANCH_KERNEL | PERF_SAMPLE_BRANCH_HV)) &&
		  !exclude_kernel;
	*branch = result;
	return *user || *kernel ? 0 : -EINVAL;
}

/*
 * Returns 0, or -EOPNOTSUPP for a filter CTR cannot express (call stacks
 * without RASEMU, transactional-memory filters, per-branch event counters).
 * user/kernel are the privilege levels already resolved from the filter and
 * exclude_* bits.
 */
static inline int ctr_filter_from_perf(u64 branch_sample_type, bool user,
				       bool kernel, bool rasemu_supported,
				       struct ctr_filter *filter)
{
	u16 wanted = 0;
	u64 ctl = 0;

	if (branch_sample_type &
	    (PERF_SAMPLE_BRANCH_ABORT_TX | PERF_SAMPLE_BRANCH_IN_TX |
	     PERF_SAMPLE_BRANCH_COUNTERS))
		return -EOPNOTSUPP;
	if (branch_sample_type & ~((u64)PERF_SAMPLE_BRANCH_MAX - 1))
		return -EINVAL;
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
 * Whether this CTR can honour a filter: every transfer type the filter
 * leaves out must either be inhibited in hardware (the inhibit bit is
 * implemented) or be recognisable by ctrdata.TYPE for the software filter.
 * Otherwise the unwanted types would be recorded as if asked for.
 */
static inline int ctr_filter_check_hw(const struct ctr_filter *filter,
				      u64 implemented_inhibits, bool type_supported)
{
	u64 missing = filter->ctl & CTRCTL_ALL_INHIBITS & ~implemented_inhibits;

	return missing && !type_supported ? -EOPNOTSUPP : 0;
}

/*
 * How CTR is kept still while the overflow handler reads it.
 *  - CTR_FREEZE_NONE: user-mode-only recording. Nothing is recorded in
 *    S-mode, so the buffer cannot change between the overflow trap and the
 *    handler's reads; freezing would only add a way to go stale (any other
 *    PMU event's overflow would freeze it too).
 *  - CTR_FREEZE_HARDWARE: sctrctl.LCOFIFRZ, where implemented and where the
 *    module can unfreeze at the end of every PMU interrupt (whoever's counter
 *    overflowed), as the SBI PMU driver would if it knew about CTR.
 *  - CTR_FREEZE_SOFTWARE: otherwise. The handler stops recording before it
 *    reads, so the newest entries are the interrupt path up to it.
 */
enum ctr_freeze {
	CTR_FREEZE_NONE,
	CTR_FREEZE_HARDWARE,
	CTR_FREEZE_SOFTWARE,
};

static inline enum ctr_freeze ctr_freeze_mode(bool kernel, bool lcofifrz,
					      bool unfreeze_after_interrupts)
{
	if (!kernel)
		return CTR_FREEZE_NONE;
	if (lcofifrz && unfreeze_after_interrupts)
		return CTR_FREEZE_HARDWARE;
	return CTR_FREEZE_SOFTWARE;
}

/*
 * The sctrctl value to program: the filter's, without unimplemented
 * inhibits, with LCOFIFRZ where the freeze is the hardware's.
 */
static inline u64 ctr_filter_hw_ctl(const struct ctr_filter *filter,
				    u64 implemented_inhibits, enum ctr_freeze freeze)
{
	u64 ctl = filter->ctl & (implemented_inhibits | ~CTRCTL_ALL_INHIBITS);

	return freeze == CTR_FREEZE_HARDWARE ? ctl | CTRCTL_LCOFIFRZ : ctl;
}

/*
 * Whether one converted entry goes into the record: 0 to keep it, else the
 * record flag that says why it was dropped. An entry of a type the filter
 * does not want (which the hardware could not inhibit) is dropped when TYPE
 * is implemented; with user_only (no kernel recording, every unprivileged
 * event) an entry with an address at or above user_limit (TASK_SIZE) is
 * redacted: it would reveal a kernel address.
 */
static inline u8 ctr_entry_verdict(const struct perf_branch_entry *entry,
				   unsigned int type, u16 wanted_types,
				   bool type_supported, bool user_only,
				   u64 user_limit)
{
	if (type_supported && !(wanted_types & (1U << (type & 15))))
		return RVPERF_CTR_RECORD_SOFTWARE_FILTERED;
	if (user_only && (entry->from >= user_limit || entry->to >= user_limit))
		return RVPERF_CTR_RECORD_KERNEL_REDACTED;
	return 0;
}

/*
 * Copies size bytes to offset head of a ring of ring_size bytes (a power of
 * two) at base, wrapping around its end; records may straddle it.
 */
static inline void ctr_ring_write(void *base, unsigned long ring_size,
				  unsigned long head, const void *data, size_t size)
{
	unsigned long offset = head & (ring_size - 1);
	size_t first = size < ring_size - offset ? size : ring_size - offset;

	memcpy(base + offset, data, first);
	if (first < size)
		memcpy(base, data + first, size - first);
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
