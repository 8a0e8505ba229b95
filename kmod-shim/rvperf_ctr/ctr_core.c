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
 * handler calls our handler; CTR is already frozen (sctrctl.LCOFIFRZ), so the
 * handler reads the entries undisturbed by its own branches, appends one
 * struct rvperf_ctr_record (include/uapi/rvperf_ctr.h) to the event's AUX
 * buffer, and unfreezes CTR. Userland turns records into PERF_RECORD_SAMPLEs
 * with PERF_SAMPLE_BRANCH_STACK.
 *
 * Ordering and lifetimes:
 *  - The trigger is created in event_init (process context, no perf context
 *    lock held yet) and released from event->destroy, which runs after the
 *    event left its context. Inherited events are refused: inherit_event()
 *    runs event_init under the parent's context lock, where creating a
 *    second counter on the child (whose context is being built) would
 *    deadlock.
 *  - The trigger and the event are scheduled together with their task (same
 *    task, same CPU), so whenever the trigger counts, the event is either
 *    started on this CPU or stopped; the handler checks which.
 *  - The AUX handle is per CPU: begun in ->start, ended in ->stop, and ended
 *    and begun again after every record so that userland sees each record as
 *    soon as it is written (PERF_RECORD_AUX). A full buffer ends the handle
 *    with PERF_AUX_FLAG_TRUNCATED; the next begin then disables the event
 *    (the core's rule), which userland sees and may re-enable. Nothing waits.
 *  - CTR itself is per hart and follows the event: ->start clears it
 *    (SCTRCLR) and enables it, ->stop disables and clears it, so a task never
 *    sees another task's branches.
 */
#define pr_fmt(fmt) "rvperf_ctr: " fmt

#include <linux/cpu.h>
#include <linux/module.h>
#include <linux/of.h>
#include <linux/perf_event.h>
#include <linux/percpu.h>
#include <linux/sched/clock.h>
#include <linux/slab.h>
#include <linux/smp.h>
#include <linux/vmalloc.h>
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
};
static struct ctr_capabilities caps;

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

/* Per event (event->pmu_private). */
struct ctr_event_state {
	struct perf_event *trigger;
	struct ctr_filter filter;
	bool save_type;
	bool save_cycles;
	bool user_only;
};

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

/* ------------------------------------------------------------------------
 * Discovery (CTR 1.0: unimplemented fields read as 0, implemented ones are
 * writable, so each is found by writing it and reading it back).
 */

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

	ctr_hw_write_ctl(CTRCTL_ALL_INHIBITS | CTRCTL_RASEMU);
	found->inhibits = ctr_hw_read_ctl() & CTRCTL_ALL_INHIBITS;
	found->rasemu = !!(ctr_hw_read_ctl() & CTRCTL_RASEMU);
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
		goto unfreeze;
	buffer = perf_get_aux(handle);
	if (!buffer)
		goto unfreeze;

	if (kernel && state->user_only) {
		/* Attribute the sample to where the task will resume in user mode. */
		if (!current->mm)
			goto unfreeze;
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

	record.magic = RVPERF_CTR_RECORD_MAGIC;
	record.version = RVPERF_CTR_RECORD_VERSION;
	record.flags |= kernel ? RVPERF_CTR_RECORD_KERNEL : 0;
	record.cpu = smp_processor_id();
	record.pid = task_tgid_nr(current);
	record.tid = task_pid_nr(current);
	record.nr_entries = n;
	record.depth = caps.depth;
	record.time = local_clock();
	record.ip = ip;
	record.period = trigger->hw.last_period;
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
		event->hw.state |= PERF_HES_STOPPED;
		return;
	}

unfreeze:
	ctr_hw_unfreeze();
}

/* ------------------------------------------------------------------------
 * The PMU.
 */

static const u32 trigger_types[] = {
	[RVPERF_CTR_TRIGGER_HARDWARE] = PERF_TYPE_HARDWARE,
	[RVPERF_CTR_TRIGGER_HW_CACHE] = PERF_TYPE_HW_CACHE,
	[RVPERF_CTR_TRIGGER_RAW] = PERF_TYPE_RAW,
};

static void ctr_event_destroy(struct perf_event *event)
{
	struct ctr_event_state *state = event->pmu_private;

	if (!state)
		return;
	if (state->trigger)
		perf_event_release_kernel(state->trigger);
	kfree(state);
	event->pmu_private = NULL;
}

static int ctr_event_init(struct perf_event *event)
{
	struct perf_event_attr *attr = &event->attr;
	struct perf_event_attr trigger_attr = {};
	u64 branch;
	u64 trigger_type = attr->config1 & RVPERF_CTR_CONFIG1_TRIGGER_MASK;
	struct ctr_event_state *state;
	struct perf_event *trigger;
	bool user, kernel;
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

	trigger_attr.type = trigger_types[trigger_type];
	trigger_attr.size = sizeof(trigger_attr);
	trigger_attr.config = attr->config;
	trigger_attr.freq = attr->freq;
	trigger_attr.sample_period = attr->sample_period;
	trigger_attr.exclude_user = !user;
	trigger_attr.exclude_kernel = !kernel;
	trigger_attr.exclude_hv = 1;
	trigger_attr.pinned = 1;
	trigger = perf_event_create_kernel_counter(&trigger_attr, event->cpu,
						   event->hw.target,
						   ctr_trigger_overflow, event);
	if (IS_ERR(trigger)) {
		err = PTR_ERR(trigger);
		pr_debug("trigger type %u config %#llx: error %d\n",
			 trigger_attr.type, trigger_attr.config, err);
		goto err_free;
	}
	state->trigger = trigger;
	event->pmu_private = state;
	event->destroy = ctr_event_destroy;
	return 0;

err_free:
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
	/* A clean slate: nothing recorded before this task ran here. */
	ctr_hw_write_ctl(0);
	ctr_hw_clear();
	ctr_hw_write_status(0);
	ctr_hw_write_ctl(ctr_filter_hw_ctl(&state->filter, caps.inhibits));
}

static void ctr_event_stop(struct perf_event *event, int flags)
{
	struct ctr_cpu_state *cpu = this_cpu_ptr(cpu_states);

	if (event->hw.state & PERF_HES_STOPPED)
		return;
	ctr_hw_write_ctl(0);
	ctr_hw_clear();
	if (perf_get_aux(&cpu->handle))
		perf_aux_output_end(&cpu->handle, 0);
	event->hw.state |= PERF_HES_STOPPED | PERF_HES_UPTODATE;
}

static int ctr_event_add(struct perf_event *event, int flags)
{
	struct ctr_cpu_state *cpu = this_cpu_ptr(cpu_states);

	/* CTR is one per hart. */
	if (cpu->event)
		return -EBUSY;
	cpu->event = event;
	event->hw.state = PERF_HES_STOPPED | PERF_HES_UPTODATE;
	if (flags & PERF_EF_START)
		ctr_event_start(event, PERF_EF_RELOAD);
	return 0;
}

static void ctr_event_del(struct perf_event *event, int flags)
{
	struct ctr_cpu_state *cpu = this_cpu_ptr(cpu_states);

	ctr_event_stop(event, PERF_EF_UPDATE);
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
	return sysfs_emit(buf, "rasemu=%d misp=%d cycles=%d type=%d\n", caps.rasemu,
			  caps.misp, caps.cycles, caps.type);
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

static void ctr_setup_local(void *unused)
{
	ctr_hw_write_ctl(0);
	ctr_hw_write_depth(caps.depth_field);
	ctr_hw_clear();
	ctr_hw_write_status(0);
}

static void ctr_teardown_local(void *unused)
{
	ctr_hw_write_ctl(0);
	ctr_hw_clear();
}

static int __init rvperf_ctr_init(void)
{
	int err;

	/* Never touch a CTR CSR before the device tree says every hart has it. */
	if (!ctr_in_device_tree()) {
		pr_err("no CTR: not every hart lists ssctr and sscsrind in riscv,isa-extensions\n");
		return -ENODEV;
	}
	if (!riscv_isa_extension_available(NULL, SSCOFPMF)) {
		pr_err("no Sscofpmf: the SBI PMU cannot sample, so nothing would trigger CTR reads\n");
		return -ENODEV;
	}

	cpus_read_lock();
	err = smp_call_function_single(cpumask_first(cpu_online_mask),
				       ctr_discover_local, &caps, 1);
	if (err || !caps.depth) {
		cpus_read_unlock();
		pr_err("CTR discovery failed (depth %u, error %d)\n", caps.depth, err);
		return err ?: -ENODEV;
	}
	if (depth == 32 && caps.max_depth < 32)
		depth = caps.max_depth;
	if (depth) {
		int field = ctr_depth_encode(depth);

		if (field < 0 || depth > caps.max_depth) {
			cpus_read_unlock();
			pr_err("depth=%u: this CTR supports 16..%u in powers of two\n", depth,
			       caps.max_depth);
			return -EINVAL;
		}
		caps.depth = depth;
		caps.depth_field = field;
	}
	on_each_cpu(ctr_setup_local, NULL, 1);
	cpus_read_unlock();

	cpu_states = alloc_percpu(struct ctr_cpu_state);
	if (!cpu_states) {
		err = -ENOMEM;
		goto err_teardown;
	}

	err = ctr_counters_init();
	if (err)
		goto err_free;
	err = perf_pmu_register(&ctr_pmu, RVPERF_CTR_PMU_NAME, -1);
	if (err)
		goto err_free;

	pr_info("CTR depth %u (max %u), inhibits %#llx, rasemu=%d misp=%d cycles=%d type=%d; PMU type %d\n",
		caps.depth, caps.max_depth, caps.inhibits, caps.rasemu, caps.misp,
		caps.cycles, caps.type, ctr_pmu.type);
	return 0;

err_free:
	ctr_counters_free();
	free_percpu(cpu_states);
err_teardown:
	on_each_cpu(ctr_teardown_local, NULL, 1);
	return err;
}

static void __exit rvperf_ctr_exit(void)
{
	/* Unregistering first: no event can start after this. */
	perf_pmu_unregister(&ctr_pmu);
	on_each_cpu(ctr_teardown_local, NULL, 1);
	ctr_counters_free();
	free_percpu(cpu_states);
}

module_init(rvperf_ctr_init);
module_exit(rvperf_ctr_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("RISC-V Control Transfer Records as perf branch stacks (AUX PMU)");
MODULE_AUTHOR("rvperf");
