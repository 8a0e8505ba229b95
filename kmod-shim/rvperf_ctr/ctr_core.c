// SPDX-License-Identifier: GPL-2.0
/*
 * rvperf_ctr: RISC-V Control Transfer Records (Smctr/Ssctr) as perf branch
 * stacks, from a loadable module on a stock kernel.
 *
 * Why an AUX PMU: a module cannot emit ordinary perf samples for a PMU of its
 * own (perf_event_overflow, perf_event_output and perf_prepare_sample are not
 * exported), and the built-in SBI PMU driver refuses branch-stack events. What
 * a module can use is perf_pmu_register, perf_event_create_kernel_counter with
 * an overflow handler of its own, and the AUX output API. So each rvperf_ctr
 * event owns a "trigger": an in-kernel sampling counter on the SBI PMU for the
 * same task and CPU. When the trigger overflows, the SBI PMU driver's LCOFI
 * handler calls our handler, which reads the entries, appends one struct
 * rvperf_ctr_record (include/uapi/rvperf_ctr.h) to the event's AUX buffer and
 * lets CTR go on. Userland turns records into PERF_RECORD_SAMPLEs with
 * PERF_SAMPLE_BRANCH_STACK.
 *
 * Ordering and lifetimes:
 *  - The trigger is created in event_init (process context, no perf context
 *    lock held yet), after the caller's right to profile the target task was
 *    checked (perf core checks it only after event_init, and the trigger
 *    would by then have been installed on the task), and released from
 *    event->destroy, which runs after the event left its context. Inherited
 *    events are refused: inherit_event() runs event_init under the parent's
 *    context lock, where creating a second counter on the child (whose
 *    context is being built) would deadlock. With enable_on_exec the trigger
 *    too is enabled at exec, so its frequency-mode periods start where the
 *    recording starts, as a plain perf record's do.
 *  - The trigger and the event are scheduled together with their task (same
 *    task, same CPU): the trigger is pinned, the event flexible, so the
 *    trigger is scheduled first; ->add refuses while the trigger is in error
 *    state (it could not get a counter), which userland sees as the event's
 *    time_running falling behind time_enabled.
 *  - The AUX handle is per CPU: begun in ->start, ended in ->stop, and ended
 *    and begun again after every record so that userland sees each record as
 *    soon as it is written (PERF_RECORD_AUX). A full buffer ends the handle
 *    with PERF_AUX_FLAG_TRUNCATED; the next begin then disables the event
 *    (the core's rule), which userland sees and may re-enable. Nothing waits.
 *  - CTR itself is per hart. ->add clears it and ->del clears it again, so a
 *    task never sees another task's branches; in call-stack mode (RASEMU) a
 *    per-task event saves its entries in ->del and writes them back in ->add,
 *    as Intel's LBR call-stack mode does, so a call stack survives context
 *    switches. ->start and ->stop only enable and disable recording: perf
 *    core calls them on every tick in frequency mode, and clearing there cut
 *    every call stack at each tick. A CPU-wide event has no ->add/->del at
 *    task switches, so a sched_switch probe clears CTR for it instead.
 *  - Freezing (see enum ctr_freeze): none for user-only recording; otherwise
 *    LCOFIFRZ, undone at the end of every PMU interrupt by an
 *    irq_handler_exit probe (another event's overflow freezes CTR too, and
 *    only this module knows to unfreeze it); software where LCOFIFRZ or the
 *    probe is missing.
 *  - CPUs: every CPU's CSRs are probed (they trap where firmware did not open
 *    CTR to S-mode) and depth is programmed and read back by a CPU hotplug
 *    callback as each CPU comes online, and again after a low-power state
 *    that lost it (cpu_pm). A CPU where either failed takes no events.
 */
#define pr_fmt(fmt) "rvperf_ctr: " fmt

#include <linux/acpi.h>
#include <linux/capability.h>
#include <linux/cpu.h>
#include <linux/cpu_pm.h>
#include <linux/cpuhotplug.h>
#include <linux/cpumask.h>
#include <linux/cred.h>
#include <linux/debugfs.h>
#include <linux/interrupt.h>
#include <linux/irqdomain.h>
#include <linux/module.h>
#include <linux/of.h>
#include <linux/perf_event.h>
#include <linux/percpu.h>
#include <linux/mutex.h>
#include <linux/overflow.h>
#include <linux/pid_namespace.h>
#include <linux/refcount.h>
#include <linux/sched/clock.h>
#include <linux/sched/coredump.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/smp.h>
#include <linux/tracepoint.h>
#include <linux/vmalloc.h>
#include <asm/irq.h>
#include <asm/sbi.h>

#include "rvperf_ctr.h"
#include "ctr_hw.h"
#include "ctr_logic.h"

/* What this machine's CTR implements, discovered once at load. */
struct ctr_capabilities {
	unsigned int depth;		/* entries in use */
	u64 depth_field;		/* sctrdepth value for it */
	unsigned int max_depth;
	u64 inhibits;			/* implemented inhibit bits */
	bool rasemu;
	bool misp;
	bool cycles;
	bool type;
	bool lcofifrz;			/* sctrctl.LCOFIFRZ is implemented */
};
static struct ctr_capabilities caps;

/* CPUs whose CTR is accessible and programmed (hotplug callback, cpu_pm). */
static struct cpumask usable_cpus;

/* perf core's value of hw.interrupts for a throttled event (kernel/events/core.c). */
#define CTR_TRIGGER_THROTTLED (~0ULL)

/* The AUX area, mapped contiguously (setup_aux). */
struct ctr_aux_buffer {
	void *base;
	unsigned long size;
};

struct ctr_cpu_state {
	struct perf_output_handle handle;
	struct perf_event *event;	/* started here, or NULL */
	struct perf_branch_entry entries[RVPERF_CTR_MAX_DEPTH];
};
static struct ctr_cpu_state __percpu *cpu_states;

/* One CTR entry as the registers hold it, for call stacks kept across switches. */
struct ctr_saved_entry {
	u64 source;
	u64 target;
	u64 data;
};

/*
 * A task's call stack between its runs, shared by all the events on that task:
 * userland opens one per-task event per CPU, and the task's entries must follow
 * it from the CPU it left to the one it runs on next. Found by the task (the
 * events hold a reference on it, so the pointer stays unique while in use).
 */
struct ctr_task_stack {
	struct list_head node;
	const struct task_struct *task;
	refcount_t users;
	unsigned int count;
	struct ctr_saved_entry entries[];	/* caps.depth of them */
};
static LIST_HEAD(task_stacks);
static DEFINE_MUTEX(task_stacks_lock);

/* Per event (event->pmu_private). */
struct ctr_event_state {
	struct perf_event *trigger;
	struct ctr_filter filter;
	enum ctr_freeze freeze;
	u64 ctl;			/* sctrctl while recording */
	bool save_type;
	bool save_cycles;
	bool user_only;
	bool cpu_wide;
	/* Call-stack mode, per task: where ->del saves the task's entries for ->add. */
	struct ctr_task_stack *stack;
};

/* Triggers created since load: the permission test reads it (debugfs). */
static atomic_t triggers_created;
static struct dentry *debugfs_dir;

/* The SBI PMU's overflow interrupt (LCOFI), 0 if it could not be found. */
static unsigned int pmu_irq;
static struct tracepoint *sched_switch_tracepoint;
static struct tracepoint *irq_exit_tracepoint;

static struct pmu ctr_pmu;

/*
 * Entries per sample: every record carries the whole buffer, so depth trades
 * history for AUX bandwidth (a 256-entry record is 6 KiB, a 32-entry one 816
 * bytes). The default, 32, is what LBR-based tools such as AutoFDO are tuned
 * for; 0 asks for the largest depth the hardware supports.
 */
static unsigned int depth = 32;
module_param(depth, uint, 0444);
MODULE_PARM_DESC(depth, "CTR depth to use: 16, 32, 64, 128 or 256; 0 = hardware maximum (default 32, or the maximum if smaller)");

/*
 * A test hook: freeze in software even where LCOFIFRZ exists, so that the
 * path for hardware without it runs on an emulator that has it.
 */
static bool software_freeze;
module_param(software_freeze, bool, 0444);
MODULE_PARM_DESC(software_freeze, "Freeze CTR in software even where sctrctl.LCOFIFRZ exists (tests the path for hardware without it)");

/* ------------------------------------------------------------------------
 * Discovery (CTR 1.0: unimplemented fields read as 0, implemented ones are
 * writable, so each is found by writing it and reading it back).
 */

/*
 * Whether firmware lists CTR on every hart. The kernel's ISA API where it
 * knows Ssctr; else the device tree where the system booted with one; under
 * ACPI (RHCT) with a kernel that does not know Ssctr, the CSR probe alone
 * decides, so such systems are not refused outright.
 */
static bool ctr_in_device_tree(void);

static bool ctr_listed_by_firmware(void)
{
#ifdef RISCV_ISA_EXT_SSCTR
	return riscv_isa_extension_available(NULL, SSCTR) &&
	       riscv_isa_extension_available(NULL, SSCSRIND);
#else
	if (acpi_disabled)
		return ctr_in_device_tree();
	return true;
#endif
}

static bool ctr_in_device_tree(void)
{
	struct device_node *np;
	bool any = false, all = true;

	for_each_of_cpu_node(np) {
		if (!of_device_is_available(np))
			continue;
		any = true;
		if (of_property_match_string(np, "riscv,isa-extensions", "ssctr") < 0 ||
		    of_property_match_string(np, "riscv,isa-extensions", "sscsrind") < 0)
			all = false;
	}
	return any && all;
}

static void ctr_discover_local(void *info)
{
	struct ctr_capabilities *found = info;
	u64 source, target, data;
	int field;

	found->max_depth = 0;
	for (field = 4; field >= 0; field--) {
		ctr_hw_write_depth(field);
		if ((ctr_hw_read_depth() & 7) == field) {
			found->max_depth = ctr_depth_entries(field);
			found->depth_field = field;
			break;
		}
	}
	found->depth = found->max_depth;

	/* Enables off: nothing may be recorded while the fields are probed. */
	ctr_hw_write_ctl(CTRCTL_ALL_INHIBITS | CTRCTL_RASEMU | CTRCTL_LCOFIFRZ);
	found->inhibits = ctr_hw_read_ctl() & CTRCTL_ALL_INHIBITS;
	found->rasemu = !!(ctr_hw_read_ctl() & CTRCTL_RASEMU);
	found->lcofifrz = !!(ctr_hw_read_ctl() & CTRCTL_LCOFIFRZ);
	ctr_hw_write_ctl(0);

	/* Optional entry fields: write all ones to logical entry 0. */
	ctr_hw_clear();
	ctr_hw_write_entry(0, ~0ULL, ~0ULL, ~0ULL);
	ctr_hw_read_entry(0, &source, &target, &data);
	found->misp = !!(target & CTRTARGET_MISP);
	found->cycles = !!(data & CTRDATA_CCV);
	found->type = (data & CTRDATA_TYPE) == CTRDATA_TYPE;
	ctr_hw_clear();
	ctr_hw_write_status(0);
}

/* ------------------------------------------------------------------------
 * The trigger's overflow: one record per sample.
 */

static void ctr_trigger_overflow(struct perf_event *trigger,
				 struct perf_sample_data *sample,
				 struct pt_regs *regs)
{
	struct perf_event *event = trigger->overflow_handler_context;
	struct ctr_event_state *state = event->pmu_private;
	struct ctr_cpu_state *cpu = this_cpu_ptr(cpu_states);
	struct perf_output_handle *handle = &cpu->handle;
	struct ctr_aux_buffer *buffer;
	struct rvperf_ctr_record record = {};
	unsigned long siselect;
	unsigned int i, n = 0;
	u64 ip = instruction_pointer(regs);
	bool kernel = !user_mode(regs);
	size_t size;

	if (cpu->event != event || (event->hw.state & PERF_HES_STOPPED))
		return;
	if (state->freeze == CTR_FREEZE_SOFTWARE)
		ctr_hw_write_ctl(0);
	buffer = perf_get_aux(handle);
	if (!buffer)
		goto resume;

	if (kernel && state->user_only) {
		/* Attribute the sample to where the task will resume in user mode. */
		if (!current->mm)
			goto resume;
		ip = instruction_pointer(task_pt_regs(current));
		kernel = false;
	}

	siselect = csr_read(CSR_SISELECT);
	for (i = 0; i < caps.depth; i++) {
		struct perf_branch_entry *entry = &cpu->entries[n];
		u64 source, target, data;
		u8 dropped;

		ctr_hw_read_entry(i, &source, &target, &data);
		if (!ctr_entry_to_perf(source, target, data, caps.misp,
				       state->save_type, state->save_cycles, entry))
			break;
		dropped = ctr_entry_verdict(entry, data & CTRDATA_TYPE,
					    state->filter.wanted_types, caps.type,
					    state->user_only, TASK_SIZE);
		if (dropped) {
			record.flags |= dropped;
			continue;
		}
		n++;
	}
	csr_write(CSR_SISELECT, siselect);
	if (i == caps.depth)
		record.flags |= RVPERF_CTR_RECORD_STACK_FULL;
	/* perf core throttled the trigger at this very overflow. */
	if (trigger->hw.interrupts == CTR_TRIGGER_THROTTLED)
		record.flags |= RVPERF_CTR_RECORD_THROTTLED;

	record.magic = RVPERF_CTR_RECORD_MAGIC;
	record.version = RVPERF_CTR_RECORD_VERSION;
	record.flags |= kernel ? RVPERF_CTR_RECORD_KERNEL : 0;
	record.cpu = smp_processor_id();
	/* As perf_event_pid()/perf_event_tid(): in the PID namespace of the opener. */
	record.pid = task_tgid_nr_ns(current, event->ns);
	record.tid = task_pid_nr_ns(current, event->ns);
	record.nr_entries = n;
	record.depth = caps.depth;
	record.time = local_clock();
	record.ip = ip;
	/*
	 * This sample's period. The SBI PMU driver has already programmed the
	 * next one (hw.last_period) before calling perf_event_overflow().
	 */
	record.period = sample->period;
	size = sizeof(record) + n * sizeof(struct perf_branch_entry);
	record.size = size;

	if (handle->size < size) {
		/* Full: account the loss and never block; userland drains. */
		perf_aux_output_flag(handle, PERF_AUX_FLAG_TRUNCATED);
		perf_aux_output_end(handle, 0);
	} else {
		ctr_ring_write(buffer->base, buffer->size, handle->head, &record,
			       sizeof(record));
		ctr_ring_write(buffer->base, buffer->size, handle->head + sizeof(record),
			       cpu->entries, n * sizeof(struct perf_branch_entry));
		local64_inc(&event->count);
		/*
		 * RISC-V's memory order is weak (RVWMO): the record's stores must
		 * be visible before the new aux_head that perf_aux_output_end()
		 * publishes, since the consumer reads aux_head and then the data
		 * (with a read barrier between, as perf's ring ABI requires).
		 */
		smp_wmb();
		perf_aux_output_end(handle, size);
	}
	if (!perf_aux_output_begin(handle, event)) {
		/* No space left: the core disabled the event. */
		ctr_hw_write_ctl(0);
		ctr_hw_unfreeze();
		event->hw.state |= PERF_HES_STOPPED;
		return;
	}

resume:
	if (state->freeze == CTR_FREEZE_SOFTWARE)
		ctr_hw_write_ctl(state->ctl);
	else if (state->freeze == CTR_FREEZE_HARDWARE)
		ctr_hw_unfreeze();
}

/* ------------------------------------------------------------------------
 * Probes on kernel tracepoints.
 */

/*
 * A CPU-wide event stays on its hart across task switches (no ->del/->add),
 * so CTR would carry one task's branches into the next task's records.
 */
static void ctr_on_sched_switch(void *unused, bool preempt,
				struct task_struct *prev,
				struct task_struct *next,
				unsigned int prev_state)
{
	struct ctr_cpu_state *cpu = this_cpu_ptr(cpu_states);
	struct perf_event *event = cpu->event;
	struct ctr_event_state *state;

	if (!event || prev == next)
		return;
	state = event->pmu_private;
	if (state->cpu_wide)
		ctr_hw_clear();
}

/*
 * The end of every SBI PMU interrupt: with LCOFIFRZ any counter's overflow
 * froze CTR, also another event's, which this module's handler never sees.
 */
static void ctr_on_irq_exit(void *unused, int irq, struct irqaction *action,
			    int ret)
{
	struct ctr_cpu_state *cpu;
	struct perf_event *event;

	if (irq != pmu_irq)
		return;
	cpu = this_cpu_ptr(cpu_states);
	event = cpu->event;
	if (event && ((struct ctr_event_state *)event->pmu_private)->freeze ==
			     CTR_FREEZE_HARDWARE)
		ctr_hw_unfreeze();
}

static void ctr_find_tracepoint(struct tracepoint *tracepoint, void *unused)
{
	if (!strcmp(tracepoint->name, "sched_switch"))
		sched_switch_tracepoint = tracepoint;
	else if (!strcmp(tracepoint->name, "irq_handler_exit"))
		irq_exit_tracepoint = tracepoint;
}

/* The SBI PMU driver's own lookup of its interrupt (riscv_pmu_sbi.c). */
static unsigned int ctr_find_pmu_irq(void)
{
	struct fwnode_handle *intc = riscv_get_intc_hwnode();
	struct irq_domain *domain;

	if (!intc)
		return 0;
	domain = irq_find_matching_fwnode(intc, DOMAIN_BUS_ANY);
	return domain ? irq_find_mapping(domain, RV_IRQ_PMU) : 0;
}

static void ctr_register_probes(void)
{
	for_each_kernel_tracepoint(ctr_find_tracepoint, NULL);
	if (sched_switch_tracepoint &&
	    tracepoint_probe_register(sched_switch_tracepoint,
				      ctr_on_sched_switch, NULL))
		sched_switch_tracepoint = NULL;
	pmu_irq = ctr_find_pmu_irq();
	if (!pmu_irq || !irq_exit_tracepoint ||
	    tracepoint_probe_register(irq_exit_tracepoint, ctr_on_irq_exit, NULL))
		irq_exit_tracepoint = NULL;
}

static void ctr_unregister_probes(void)
{
	if (sched_switch_tracepoint)
		tracepoint_probe_unregister(sched_switch_tracepoint,
					    ctr_on_sched_switch, NULL);
	if (irq_exit_tracepoint)
		tracepoint_probe_unregister(irq_exit_tracepoint, ctr_on_irq_exit, NULL);
	tracepoint_synchronize_unregister();
}

/* ------------------------------------------------------------------------
 * The PMU.
 */

static const u32 trigger_types[] = {
	[RVPERF_CTR_TRIGGER_HARDWARE] = PERF_TYPE_HARDWARE,
	[RVPERF_CTR_TRIGGER_HW_CACHE] = PERF_TYPE_HW_CACHE,
	[RVPERF_CTR_TRIGGER_RAW] = PERF_TYPE_RAW,
};

static struct ctr_task_stack *ctr_task_stack_get(const struct task_struct *task)
{
	struct ctr_task_stack *stack;

	mutex_lock(&task_stacks_lock);
	list_for_each_entry(stack, &task_stacks, node) {
		if (stack->task == task) {
			refcount_inc(&stack->users);
			goto out;
		}
	}
	stack = kzalloc(struct_size(stack, entries, caps.depth), GFP_KERNEL);
	if (stack) {
		stack->task = task;
		refcount_set(&stack->users, 1);
		list_add(&stack->node, &task_stacks);
	}
out:
	mutex_unlock(&task_stacks_lock);
	return stack;
}

static void ctr_task_stack_put(struct ctr_task_stack *stack)
{
	if (!stack)
		return;
	mutex_lock(&task_stacks_lock);
	if (refcount_dec_and_test(&stack->users)) {
		list_del(&stack->node);
		kfree(stack);
	}
	mutex_unlock(&task_stacks_lock);
}

static void ctr_event_destroy(struct perf_event *event)
{
	struct ctr_event_state *state = event->pmu_private;

	if (!state)
		return;
	if (state->trigger)
		perf_event_release_kernel(state->trigger);
	ctr_task_stack_put(state->stack);
	kfree(state);
	event->pmu_private = NULL;
}

/*
 * What perf core's perf_check_permission() asks (ptrace read access with
 * real credentials), which it does only after event_init. ptrace_may_access
 * is not exported, so this is its credential part: same thread group, or
 * the caller's real IDs are the task's real, effective and saved IDs and the
 * task is dumpable (where a module can tell), or CAP_SYS_PTRACE in the
 * task's user namespace. It may refuse what a lenient security module would
 * allow, and perf core's full check still follows.
 */
static bool ctr_may_profile(struct task_struct *task)
{
	const struct cred *cred = current_cred(), *task_cred;
	bool same_ids, may_ptrace, dumpable;

	if (same_thread_group(task, current))
		return true;
	rcu_read_lock();
	task_cred = __task_cred(task);
	same_ids = uid_eq(cred->uid, task_cred->euid) &&
		   uid_eq(cred->uid, task_cred->suid) &&
		   uid_eq(cred->uid, task_cred->uid) &&
		   gid_eq(cred->gid, task_cred->egid) &&
		   gid_eq(cred->gid, task_cred->sgid) &&
		   gid_eq(cred->gid, task_cred->gid);
	may_ptrace = ns_capable_noaudit(task_cred->user_ns, CAP_SYS_PTRACE);
	rcu_read_unlock();
	if (may_ptrace)
		return true;
	if (!same_ids)
		return false;
#ifdef SUID_DUMP_USER
	task_lock(task);
	dumpable = !task->mm || get_dumpable(task->mm) == SUID_DUMP_USER;
	task_unlock(task);
#else
	/*
	 * Newer kernels keep dumpability in the task's exec state, which
	 * modules cannot read: a task of the caller's own IDs that made itself
	 * non-dumpable is left to perf core's check.
	 */
	dumpable = true;
#endif
	return dumpable;
}

static int ctr_event_init(struct perf_event *event)
{
	struct perf_event_attr *attr = &event->attr;
	struct perf_event_attr trigger_attr = {};
	u64 branch;
	u64 trigger_type = attr->config1 & RVPERF_CTR_CONFIG1_TRIGGER_MASK;
	struct ctr_event_state *state;
	struct perf_event *trigger;
	bool user, kernel, per_task = event->attach_state & PERF_ATTACH_TASK;
	int err;

	if (attr->type != ctr_pmu.type)
		return -ENOENT;
	/* See "Ordering and lifetimes" above. */
	if (event->parent)
		return -EOPNOTSUPP;
	err = ctr_check_attr(attr);
	if (err)
		return err;
	if (trigger_type >= ARRAY_SIZE(trigger_types))
		return -EINVAL;
	if (ctr_trigger_is_firmware(trigger_type == RVPERF_CTR_TRIGGER_RAW, attr->config))
		return -EOPNOTSUPP;
	err = ctr_resolve_privilege(attr->branch_sample_type, attr->exclude_user,
				    attr->exclude_kernel, &branch, &user, &kernel);
	if (err)
		return err;
	/* Without the sched_switch probe a CPU-wide event would mix tasks. */
	if (!per_task && !sched_switch_tracepoint)
		return -EOPNOTSUPP;
	/* Before anything is installed on the task: see "Ordering and lifetimes". */
	if (per_task && !ctr_may_profile(event->hw.target))
		return -EACCES;

	state = kzalloc(sizeof(*state), GFP_KERNEL);
	if (!state)
		return -ENOMEM;
	err = ctr_filter_from_perf(branch, user, kernel, caps.rasemu, &state->filter);
	if (!err)
		err = ctr_filter_check_hw(&state->filter, caps.inhibits, caps.type);
	if (err)
		goto err_free;
	state->save_type = branch & PERF_SAMPLE_BRANCH_TYPE_SAVE;
	state->save_cycles = !(branch & (PERF_SAMPLE_BRANCH_NO_CYCLES |
					 PERF_SAMPLE_BRANCH_NO_FLAGS));
	state->user_only = !kernel;
	state->cpu_wide = !per_task;
	state->freeze = ctr_freeze_mode(kernel, caps.lcofifrz && !software_freeze,
					irq_exit_tracepoint != NULL);
	state->ctl = ctr_filter_hw_ctl(&state->filter, caps.inhibits, state->freeze);
	if (per_task && (state->filter.ctl & CTRCTL_RASEMU)) {
		state->stack = ctr_task_stack_get(event->hw.target);
		if (!state->stack) {
			err = -ENOMEM;
			goto err_free;
		}
	}

	trigger_attr.type = trigger_types[trigger_type];
	trigger_attr.size = sizeof(trigger_attr);
	trigger_attr.config = attr->config;
	trigger_attr.freq = attr->freq;
	trigger_attr.sample_period = attr->sample_period;
	trigger_attr.exclude_user = !user;
	trigger_attr.exclude_kernel = !kernel;
	trigger_attr.exclude_hv = 1;
	trigger_attr.pinned = 1;
	if (attr->disabled && attr->enable_on_exec) {
		trigger_attr.disabled = 1;
		trigger_attr.enable_on_exec = 1;
	}
	trigger = perf_event_create_kernel_counter(&trigger_attr, event->cpu,
						   event->hw.target,
						   ctr_trigger_overflow, event);
	if (IS_ERR(trigger)) {
		err = PTR_ERR(trigger);
		pr_debug("trigger type %u config %#llx: error %d\n",
			 trigger_attr.type, trigger_attr.config, err);
		goto err_free;
	}
	atomic_inc(&triggers_created);
	state->trigger = trigger;
	event->pmu_private = state;
	event->destroy = ctr_event_destroy;
	return 0;

err_free:
	ctr_task_stack_put(state->stack);
	kfree(state);
	return err;
}

static void ctr_event_start(struct perf_event *event, int flags)
{
	struct ctr_event_state *state = event->pmu_private;
	struct ctr_cpu_state *cpu = this_cpu_ptr(cpu_states);

	event->hw.state = 0;
	if (!perf_aux_output_begin(&cpu->handle, event)) {
		/* No AUX buffer (not mapped yet) or no space. */
		event->hw.state = PERF_HES_STOPPED;
		return;
	}
	/* Recording goes on from what CTR holds: see "Ordering and lifetimes". */
	ctr_hw_unfreeze();
	ctr_hw_write_ctl(state->ctl);
}

static void ctr_event_stop(struct perf_event *event, int flags)
{
	struct ctr_cpu_state *cpu = this_cpu_ptr(cpu_states);

	if (event->hw.state & PERF_HES_STOPPED)
		return;
	ctr_hw_write_ctl(0);
	if (perf_get_aux(&cpu->handle))
		perf_aux_output_end(&cpu->handle, 0);
	event->hw.state |= PERF_HES_STOPPED | PERF_HES_UPTODATE;
}

/*
 * Call-stack mode: the task's entries, newest first, until the first invalid
 * one. The task runs on one CPU at a time, and the scheduler orders its
 * switch-out on one CPU (->del) before its switch-in on the next (->add).
 */
static void ctr_save_call_stack(struct ctr_task_stack *stack)
{
	unsigned long siselect = csr_read(CSR_SISELECT);
	unsigned int i;

	for (i = 0; i < caps.depth; i++) {
		struct ctr_saved_entry *entry = &stack->entries[i];

		ctr_hw_read_entry(i, &entry->source, &entry->target, &entry->data);
		if (!(entry->source & CTRSOURCE_VALID))
			break;
	}
	stack->count = i;
	csr_write(CSR_SISELECT, siselect);
}

/*
 * Logical entries are numbered from the write pointer, so writing them back
 * at the same logical indices rebuilds the stack wherever it now points.
 */
static void ctr_restore_call_stack(const struct ctr_task_stack *stack)
{
	unsigned long siselect = csr_read(CSR_SISELECT);
	unsigned int i;

	for (i = 0; i < stack->count; i++)
		ctr_hw_write_entry(i, stack->entries[i].source, stack->entries[i].target,
				   stack->entries[i].data);
	csr_write(CSR_SISELECT, siselect);
}

static int ctr_event_add(struct perf_event *event, int flags)
{
	struct ctr_event_state *state = event->pmu_private;
	struct ctr_cpu_state *cpu = this_cpu_ptr(cpu_states);

	/* CTR is one per hart. */
	if (cpu->event)
		return -EBUSY;
	/* Not programmed (hotplug callback or cpu_pm failed): no CTR here. */
	if (!cpumask_test_cpu(smp_processor_id(), &usable_cpus))
		return -EBUSY;
	/*
	 * A pinned trigger that could not get a counter is in error state and
	 * stays there: nothing would ever be recorded. Not running shows in the
	 * event's time_running, which userland reports.
	 */
	if (READ_ONCE(state->trigger->state) == PERF_EVENT_STATE_ERROR)
		return -EBUSY;
	cpu->event = event;
	/* A clean slate: nothing recorded before this task ran here. */
	ctr_hw_write_ctl(0);
	ctr_hw_clear();
	ctr_hw_write_status(0);
	if (state->stack)
		ctr_restore_call_stack(state->stack);
	event->hw.state = PERF_HES_STOPPED | PERF_HES_UPTODATE;
	if (flags & PERF_EF_START)
		ctr_event_start(event, PERF_EF_RELOAD);
	return 0;
}

static void ctr_event_del(struct perf_event *event, int flags)
{
	struct ctr_event_state *state = event->pmu_private;
	struct ctr_cpu_state *cpu = this_cpu_ptr(cpu_states);

	ctr_event_stop(event, PERF_EF_UPDATE);
	if (state->stack)
		ctr_save_call_stack(state->stack);
	ctr_hw_clear();
	ctr_hw_write_status(0);
	cpu->event = NULL;
}

static void ctr_event_read(struct perf_event *event)
{
	/* event->count is the number of records written, kept by the handler. */
}

static void *ctr_setup_aux(struct perf_event *event, void **pages, int nr_pages,
			   bool snapshot)
{
	struct ctr_aux_buffer *buffer;
	struct page **page_list;
	int i;

	/* Records wrap at the end; the mask arithmetic needs a power of two. */
	if (!nr_pages || !is_power_of_2(nr_pages) || snapshot)
		return NULL;
	buffer = kzalloc(sizeof(*buffer), GFP_KERNEL);
	if (!buffer)
		return NULL;
	page_list = kcalloc(nr_pages, sizeof(*page_list), GFP_KERNEL);
	if (!page_list)
		goto err_buffer;
	for (i = 0; i < nr_pages; i++)
		page_list[i] = virt_to_page(pages[i]);
	buffer->base = vmap(page_list, nr_pages, VM_MAP, PAGE_KERNEL);
	kfree(page_list);
	if (!buffer->base)
		goto err_buffer;
	buffer->size = (unsigned long)nr_pages << PAGE_SHIFT;
	return buffer;

err_buffer:
	kfree(buffer);
	return NULL;
}

static void ctr_free_aux(void *aux)
{
	struct ctr_aux_buffer *buffer = aux;

	vunmap(buffer->base);
	kfree(buffer);
}

/* ------------------------------------------------------------------------
 * sysfs: format/, events/ and caps/.
 */

PMU_FORMAT_ATTR(event, "config:0-63");
PMU_FORMAT_ATTR(trigger, "config1:0-1");

static struct attribute *ctr_format_attrs[] = {
	&format_attr_event.attr,
	&format_attr_trigger.attr,
	NULL,
};

static const struct attribute_group ctr_format_group = {
	.name = "format",
	.attrs = ctr_format_attrs,
};

#define CTR_EVENT_ATTR(name, config)                                           \
	PMU_EVENT_ATTR_STRING(name, ctr_event_##name, config)

/* Generic hardware triggers (trigger=0); SBI raw/firmware with trigger=2. */
CTR_EVENT_ATTR(cycles, "event=0x0,trigger=0");
CTR_EVENT_ATTR(instructions, "event=0x1,trigger=0");
CTR_EVENT_ATTR(branches, "event=0x4,trigger=0");
CTR_EVENT_ATTR(branch_misses, "event=0x5,trigger=0");

static struct attribute *ctr_event_attrs[] = {
	&ctr_event_cycles.attr.attr,
	&ctr_event_instructions.attr.attr,
	&ctr_event_branches.attr.attr,
	&ctr_event_branch_misses.attr.attr,
	NULL,
};

static const struct attribute_group ctr_events_group = {
	.name = "events",
	.attrs = ctr_event_attrs,
};

static ssize_t depth_show(struct device *dev, struct device_attribute *attr,
			  char *buf)
{
	return sysfs_emit(buf, "%u\n", caps.depth);
}
static DEVICE_ATTR_RO(depth);

static ssize_t inhibits_show(struct device *dev, struct device_attribute *attr,
			     char *buf)
{
	return sysfs_emit(buf, "%#llx\n", caps.inhibits);
}
static DEVICE_ATTR_RO(inhibits);

static ssize_t features_show(struct device *dev, struct device_attribute *attr,
			     char *buf)
{
	return sysfs_emit(buf, "rasemu=%d misp=%d cycles=%d type=%d lcofifrz=%d\n",
			  caps.rasemu, caps.misp, caps.cycles, caps.type, caps.lcofifrz);
}
static DEVICE_ATTR_RO(features);

/*
 * The SBI PMU's counter inventory (sbi_pmu_counter_get_info), read once at
 * load, one value per file in counters/: counterN_type ("hardware" or
 * "firmware") and, for hardware counters, counterN_csr and counterN_width
 * (bits). The built-in driver keeps it to itself; here userland (`rvperf
 * list`) sees what the machine has.
 */
enum ctr_counter_field { CTR_COUNTER_TYPE, CTR_COUNTER_CSR, CTR_COUNTER_WIDTH };

struct ctr_counter_attr {
	struct device_attribute attr;
	union sbi_pmu_ctr_info info;
	enum ctr_counter_field field;
	char name[32];
};

static struct ctr_counter_attr *counter_attrs;
static struct attribute **counter_attr_list;

static ssize_t counter_show(struct device *dev, struct device_attribute *attr,
			    char *buf)
{
	struct ctr_counter_attr *counter =
		container_of(attr, struct ctr_counter_attr, attr);

	switch (counter->field) {
	case CTR_COUNTER_TYPE:
		return sysfs_emit(buf, "%s\n", counter->info.type ? "firmware" : "hardware");
	case CTR_COUNTER_CSR:
		return sysfs_emit(buf, "%#lx\n", (unsigned long)counter->info.csr);
	default:
		return sysfs_emit(buf, "%lu\n", (unsigned long)counter->info.width + 1);
	}
}

static struct attribute_group ctr_counters_group = {
	.name = "counters",
};

/* Builds counters/ before the PMU (and so its sysfs directory) is registered. */
static int ctr_counters_init(void)
{
	static const char *const suffixes[] = { "type", "csr", "width" };
	struct sbiret ret;
	unsigned long i, count = 0;
	unsigned int n = 0;

	ret = sbi_ecall(SBI_EXT_PMU, SBI_EXT_PMU_NUM_COUNTERS, 0, 0, 0, 0, 0, 0);
	if (ret.error)
		pr_warn("SBI PMU: number of counters: error %ld\n", ret.error);
	else
		count = ret.value;
	counter_attrs = kcalloc(3 * count, sizeof(*counter_attrs), GFP_KERNEL);
	counter_attr_list = kcalloc(3 * count + 1, sizeof(*counter_attr_list),
				    GFP_KERNEL);
	if ((count && !counter_attrs) || !counter_attr_list)
		return -ENOMEM;
	for (i = 0; i < count; i++) {
		union sbi_pmu_ctr_info info;
		enum ctr_counter_field field, last;

		ret = sbi_ecall(SBI_EXT_PMU, SBI_EXT_PMU_COUNTER_GET_INFO, i, 0, 0, 0,
				0, 0);
		if (ret.error)
			continue;
		info.value = ret.value;
		last = info.type ? CTR_COUNTER_TYPE : CTR_COUNTER_WIDTH;
		for (field = CTR_COUNTER_TYPE; field <= last; field++) {
			struct ctr_counter_attr *counter = &counter_attrs[n];

			snprintf(counter->name, sizeof(counter->name), "counter%lu_%s", i,
				 suffixes[field]);
			sysfs_attr_init(&counter->attr.attr);
			counter->attr.attr.name = counter->name;
			counter->attr.attr.mode = 0444;
			counter->attr.show = counter_show;
			counter->info = info;
			counter->field = field;
			counter_attr_list[n++] = &counter->attr.attr;
		}
	}
	ctr_counters_group.attrs = counter_attr_list;
	return 0;
}

static void ctr_counters_free(void)
{
	kfree(counter_attr_list);
	kfree(counter_attrs);
	counter_attr_list = NULL;
	counter_attrs = NULL;
}

static struct attribute *ctr_caps_attrs[] = {
	&dev_attr_depth.attr,
	&dev_attr_inhibits.attr,
	&dev_attr_features.attr,
	NULL,
};

static const struct attribute_group ctr_caps_group = {
	.name = "caps",
	.attrs = ctr_caps_attrs,
};

static const struct attribute_group *ctr_attr_groups[] = {
	&ctr_format_group,
	&ctr_events_group,
	&ctr_caps_group,
	&ctr_counters_group,
	NULL,
};

static struct pmu ctr_pmu = {
	.module = THIS_MODULE,
	/*
	 * The software context, as Arm SPE does: it gets the scheduling
	 * callbacks per-task events need, and never competes with the SBI PMU's
	 * hardware context, where the trigger lives.
	 */
	.task_ctx_nr = perf_sw_context,
	.capabilities = PERF_PMU_CAP_EXCLUSIVE,
	.attr_groups = ctr_attr_groups,
	.event_init = ctr_event_init,
	.add = ctr_event_add,
	.del = ctr_event_del,
	.start = ctr_event_start,
	.stop = ctr_event_stop,
	.read = ctr_event_read,
	.setup_aux = ctr_setup_aux,
	.free_aux = ctr_free_aux,
};

/* ------------------------------------------------------------------------
 * Module load and unload.
 */

/*
 * Programs this CPU's CTR (enables off, the chosen depth, empty) and reads
 * the depth back; true if the CPU can take events. Runs on the CPU, from
 * the hotplug callback and the cpu_pm notifier.
 */
static bool ctr_program_local(void)
{
	unsigned int cpu = smp_processor_id();

	if (!ctr_hw_accessible()) {
		pr_warn("CPU %u: CTR CSRs trap (firmware did not enable CTR for S-mode); no CTR events on it\n",
			cpu);
		return false;
	}
	ctr_hw_write_ctl(0);
	ctr_hw_write_depth(caps.depth_field);
	if ((ctr_hw_read_depth() & 7) != caps.depth_field) {
		pr_warn("CPU %u: sctrdepth reads back %llu after writing %llu; no CTR events on it\n",
			cpu, ctr_hw_read_depth() & 7, caps.depth_field);
		return false;
	}
	ctr_hw_clear();
	ctr_hw_write_status(0);
	return true;
}

static int ctr_cpu_online(unsigned int cpu)
{
	bool usable;

	preempt_disable();
	usable = ctr_program_local();
	preempt_enable();
	if (usable)
		cpumask_set_cpu(cpu, &usable_cpus);
	return 0;
}

/*
 * Runs before perf core moves events off the CPU (its own hotplug state
 * comes earlier at bring-up, so later at teardown): CTR is left to ->del
 * while an event is still here.
 */
static int ctr_cpu_offline(unsigned int cpu)
{
	unsigned long flags;

	cpumask_clear_cpu(cpu, &usable_cpus);
	local_irq_save(flags);
	if (!this_cpu_ptr(cpu_states)->event && ctr_hw_accessible()) {
		ctr_hw_write_ctl(0);
		ctr_hw_clear();
	}
	local_irq_restore(flags);
	return 0;
}

/*
 * After a low-power state that may have lost CTR's configuration
 * (non-retentive suspend): program it again if the depth did not survive,
 * and go on recording for an event started here (its entries are gone).
 */
static int ctr_cpu_pm_notify(struct notifier_block *block, unsigned long action,
			     void *unused)
{
	struct ctr_cpu_state *cpu = this_cpu_ptr(cpu_states);
	unsigned int id = smp_processor_id();
	struct perf_event *event;

	if (action != CPU_PM_EXIT && action != CPU_PM_ENTER_FAILED)
		return NOTIFY_OK;
	if (!cpumask_test_cpu(id, &usable_cpus) ||
	    (ctr_hw_read_depth() & 7) == caps.depth_field)
		return NOTIFY_OK;
	if (!ctr_program_local()) {
		cpumask_clear_cpu(id, &usable_cpus);
		return NOTIFY_OK;
	}
	event = cpu->event;
	if (event && !(event->hw.state & PERF_HES_STOPPED))
		ctr_hw_write_ctl(((struct ctr_event_state *)event->pmu_private)->ctl);
	return NOTIFY_OK;
}

static struct notifier_block ctr_cpu_pm_block = {
	.notifier_call = ctr_cpu_pm_notify,
};

static enum cpuhp_state hotplug_state;

/* Whether this CPU's CSRs are accessible (on_each_cpu: inaccessible ones set in *info). */
static void ctr_probe_local(void *info)
{
	if (!ctr_hw_accessible())
		cpumask_set_cpu(smp_processor_id(), info);
}

static int __init rvperf_ctr_init(void)
{
	static struct cpumask trapping;
	int err;

	if (!ctr_listed_by_firmware()) {
		pr_err("no CTR: not every hart lists ssctr and sscsrind in riscv,isa-extensions\n");
		return -ENODEV;
	}
	if (!riscv_isa_extension_available(NULL, SSCOFPMF)) {
		pr_err("no Sscofpmf: the SBI PMU cannot sample, so nothing would trigger CTR reads\n");
		return -ENODEV;
	}

	cpus_read_lock();
	/* Before any other CTR access: a CSR firmware kept closed traps. */
	cpumask_clear(&trapping);
	on_each_cpu(ctr_probe_local, &trapping, 1);
	if (!cpumask_empty(&trapping)) {
		cpus_read_unlock();
		pr_err("CTR CSRs trap on CPUs %*pbl: the firmware did not enable CTR for S-mode (mstateen0 CTR and CSRIND bits)\n",
		       cpumask_pr_args(&trapping));
		return -ENODEV;
	}
	err = smp_call_function_single(cpumask_first(cpu_online_mask),
				       ctr_discover_local, &caps, 1);
	cpus_read_unlock();
	if (err || !caps.depth) {
		pr_err("CTR discovery failed (depth %u, error %d)\n", caps.depth, err);
		return err ?: -ENODEV;
	}
	if (depth == 32 && caps.max_depth < 32)
		depth = caps.max_depth;
	if (depth) {
		int field = ctr_depth_encode(depth);

		if (field < 0 || depth > caps.max_depth) {
			pr_err("depth=%u: this CTR supports 16..%u in powers of two\n", depth,
			       caps.max_depth);
			return -EINVAL;
		}
		caps.depth = depth;
		caps.depth_field = field;
	}

	cpu_states = alloc_percpu(struct ctr_cpu_state);
	if (!cpu_states)
		return -ENOMEM;
	ctr_register_probes();

	/* Programs every online CPU now, and each CPU that comes online later. */
	err = cpuhp_setup_state(CPUHP_AP_ONLINE_DYN, "perf/rvperf_ctr:online",
				ctr_cpu_online, ctr_cpu_offline);
	if (err < 0)
		goto err_probes;
	hotplug_state = err;
	err = cpu_pm_register_notifier(&ctr_cpu_pm_block);
	if (err)
		goto err_hotplug;

	err = ctr_counters_init();
	if (err)
		goto err_pm;
	debugfs_dir = debugfs_create_dir("rvperf_ctr", NULL);
	debugfs_create_atomic_t("triggers_created", 0444, debugfs_dir, &triggers_created);
	err = perf_pmu_register(&ctr_pmu, RVPERF_CTR_PMU_NAME, -1);
	if (err)
		goto err_counters;

	pr_info("CTR depth %u (max %u), inhibits %#llx, rasemu=%d misp=%d cycles=%d type=%d lcofifrz=%d; freeze %s; CPU-wide isolation %s; PMU type %d\n",
		caps.depth, caps.max_depth, caps.inhibits, caps.rasemu, caps.misp,
		caps.cycles, caps.type, caps.lcofifrz,
		caps.lcofifrz && !software_freeze && irq_exit_tracepoint ? "hardware" : "software",
		sched_switch_tracepoint ? "by sched_switch" : "unavailable (CPU-wide events refused)",
		ctr_pmu.type);
	return 0;

err_counters:
	debugfs_remove_recursive(debugfs_dir);
	ctr_counters_free();
err_pm:
	cpu_pm_unregister_notifier(&ctr_cpu_pm_block);
err_hotplug:
	cpuhp_remove_state(hotplug_state);
err_probes:
	ctr_unregister_probes();
	free_percpu(cpu_states);
	return err;
}

static void __exit rvperf_ctr_exit(void)
{
	/* Unregistering first: no event can start after this. */
	perf_pmu_unregister(&ctr_pmu);
	debugfs_remove_recursive(debugfs_dir);
	cpu_pm_unregister_notifier(&ctr_cpu_pm_block);
	cpuhp_remove_state(hotplug_state);
	ctr_unregister_probes();
	ctr_counters_free();
	free_percpu(cpu_states);
}

module_init(rvperf_ctr_init);
module_exit(rvperf_ctr_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("RISC-V Control Transfer Records as perf branch stacks (AUX PMU)");
MODULE_AUTHOR("rvperf");
