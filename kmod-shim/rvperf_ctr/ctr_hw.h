/* SPDX-License-Identifier: GPL-2.0 */
/*
 * CTR hardware access: the only place that touches CTR CSRs. Every function
 * here must run on the hart whose CTR it means, with preemption disabled.
 */
#ifndef RVPERF_CTR_HW_H
#define RVPERF_CTR_HW_H

#include <linux/stringify.h>
#include <asm/asm-extable.h>
#include <asm/csr.h>
#include "ctr_logic.h"

/* Sscsrind's indirect CSRs: 6.12's asm/csr.h has only the AIA subset. */
#ifndef CSR_SISELECT
#define CSR_SISELECT 0x150
#endif
#ifndef CSR_SIREG
#define CSR_SIREG 0x151
#endif
#ifndef CSR_SIREG2
#define CSR_SIREG2 0x152
#endif
#ifndef CSR_SIREG3
#define CSR_SIREG3 0x153
#endif

/*
 * Whether this hart lets S-mode use CTR. Firmware opens CTR and the
 * indirect CSRs to S-mode through mstateen0 (bits CTR and CSRIND) when
 * Smstateen is implemented; where it did not, every access below traps as
 * an illegal instruction. The exception table sends such a trap to the
 * label after the accesses, skipping the instruction that clears
 * "trapped", so the probe returns instead of oopsing. The only CTR code
 * that may run before this returned true on the hart.
 */
static inline bool ctr_hw_accessible(void)
{
	unsigned long value, trapped;

	asm volatile(
		"	li	%[trapped], 1\n"
		"1:	csrr	%[value], " __stringify(CSR_SCTRCTL) "\n"
		"2:	csrr	%[value], " __stringify(CSR_SCTRSTATUS) "\n"
		"3:	csrr	%[value], " __stringify(CSR_SCTRDEPTH) "\n"
		"4:	csrr	%[value], " __stringify(CSR_SISELECT) "\n"
		"	li	%[trapped], 0\n"
		"5:\n"
		_ASM_EXTABLE(1b, 5b)
		_ASM_EXTABLE(2b, 5b)
		_ASM_EXTABLE(3b, 5b)
		_ASM_EXTABLE(4b, 5b)
		: [value] "=&r"(value), [trapped] "=&r"(trapped)
		:
		: "memory");
	return !trapped;
}

/* SCTRCLR (SYSTEM, funct12 0x104): spelled out for assemblers without CTR. */
static inline void ctr_hw_clear(void)
{
	asm volatile(".4byte 0x10400073" ::: "memory");
}

static inline u64 ctr_hw_read_ctl(void)
{
	return csr_read(CSR_SCTRCTL);
}

static inline void ctr_hw_write_ctl(u64 ctl)
{
	csr_write(CSR_SCTRCTL, ctl);
}

static inline u64 ctr_hw_read_status(void)
{
	return csr_read(CSR_SCTRSTATUS);
}

static inline void ctr_hw_write_status(u64 status)
{
	csr_write(CSR_SCTRSTATUS, status);
}

static inline void ctr_hw_unfreeze(void)
{
	csr_clear(CSR_SCTRSTATUS, CTRSTATUS_FROZEN);
}

static inline u64 ctr_hw_read_depth(void)
{
	return csr_read(CSR_SCTRDEPTH);
}

static inline void ctr_hw_write_depth(u64 depth)
{
	csr_write(CSR_SCTRDEPTH, depth);
}

/*
 * Logical entry index (0 = newest) through siselect/sireg*. siselect is
 * shared with other indirect CSR users (AIA's IMSIC in S-mode), so callers
 * run with interrupts disabled, and siselect is restored afterwards.
 */
static inline void ctr_hw_read_entry(unsigned int index, u64 *source,
				     u64 *target, u64 *data)
{
	csr_write(CSR_SISELECT, CTR_SISELECT_BASE + index);
	*source = csr_read(CSR_SIREG);
	*target = csr_read(CSR_SIREG2);
	*data = csr_read(CSR_SIREG3);
}

static inline void ctr_hw_write_entry(unsigned int index, u64 source,
				      u64 target, u64 data)
{
	csr_write(CSR_SISELECT, CTR_SISELECT_BASE + index);
	csr_write(CSR_SIREG, source);
	csr_write(CSR_SIREG2, target);
	csr_write(CSR_SIREG3, data);
}

#endif /* RVPERF_CTR_HW_H */
