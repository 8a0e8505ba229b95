// SPDX-License-Identifier: GPL-2.0

//! rvtrace: the driver of a RISC-V trace block (N-Trace encoders, a funnel, a RAM sink in
//! system-memory mode) behind the Trace Control Interface 1.0, and its user interface
//! `/dev/rvtrace` (`kmod-shim/include/uapi/rvtrace.h`).
//!
//! Layers, bottom up:
//! - the register map and the discovery table: `userland/trace-control`, the same source
//!   files userland compiles (one definition of the registers);
//! - [`Registers`]: a component is a base and 32-bit register accessors over a bus
//!   mapping; the PCI binding below is the only bus code, so a device-tree platform
//!   binding for silicon adds a probe and nothing else (`kmod-shim/README.md`);
//! - [`plan`]: a user's configuration checked and turned into register values (pure);
//! - [`TraceBlock`]: the Trace Control Interface sequences (reset and discovery, enable
//!   sink → funnel → encoders, disable encoders → funnel → sink each until empty) and the
//!   state one owner drives through ioctls;
//! - [`TraceFile`]: the misc device: open (CAP_PERFMON, one owner), ioctls, mmap of the
//!   sink memory read-only, release (stop and power down).

use kernel::{
    alloc::VVec,
    bindings,
    device::Core,
    error::to_result,
    fs::File,
    io::Io,
    ioctl::{_IO, _IOR, _IOW, _IOWR},
    miscdevice::{MiscDevice, MiscDeviceOptions, MiscDeviceRegistration},
    mm::virt::VmaNew,
    new_condvar, new_mutex, pci,
    prelude::*,
    sync::{Arc, CondVar, CondVarTimeoutResult, Mutex},
    time::{delay::fsleep, msecs_to_jiffies, Delta},
    transmute::{AsBytes, FromBytes},
    uaccess::{UserPtr, UserSlice},
};

// The register map, the ABI and the plan (shared.rs says why they are shared).
include!("shared.rs");

use core::sync::atomic::{AtomicU16, AtomicU32, Ordering};

use component::{ComponentType, COMPONENT_SIZE};
use discovery::{ComponentEntry, DiscoveryTable, MAGIC};
use ram_sink::WriteProgress;

// SAFETY: the uapi structs are `#[repr(C)]` of integers (and arrays and structs of
// them) without padding (the header's static_asserts pin their sizes to the sums of
// their fields), so every byte pattern is a valid value and every byte is initialised.
unsafe impl FromBytes for uapi::rvtrace_config {}
// SAFETY: as above.
unsafe impl FromBytes for uapi::rvtrace_wait {}
// SAFETY: as above.
unsafe impl AsBytes for uapi::rvtrace_info {}
// SAFETY: as above.
unsafe impl AsBytes for uapi::rvtrace_status {}
// SAFETY: as above.
unsafe impl AsBytes for uapi::rvtrace_wait {}

const IOC_GET_INFO: u32 =
    _IOR::<uapi::rvtrace_info>(uapi::RVTRACE_IOC_MAGIC, uapi::RVTRACE_NR_GET_INFO);
const IOC_CONFIGURE: u32 =
    _IOW::<uapi::rvtrace_config>(uapi::RVTRACE_IOC_MAGIC, uapi::RVTRACE_NR_CONFIGURE);
const IOC_START: u32 = _IO(uapi::RVTRACE_IOC_MAGIC, uapi::RVTRACE_NR_START);
const IOC_STOP: u32 = _IO(uapi::RVTRACE_IOC_MAGIC, uapi::RVTRACE_NR_STOP);
const IOC_GET_STATUS: u32 =
    _IOR::<uapi::rvtrace_status>(uapi::RVTRACE_IOC_MAGIC, uapi::RVTRACE_NR_GET_STATUS);
const IOC_WAIT: u32 = _IOWR::<uapi::rvtrace_wait>(uapi::RVTRACE_IOC_MAGIC, uapi::RVTRACE_NR_WAIT);

/// BAR 2 of the emulated block (`docs/trace-device.md`): registers and sink memory.
const TRACE_BAR: u32 = 2;
/// How long a component may take to show a control change (the emulation applies a
/// store at the next translation block, an idle block's watcher within 1 ms).
const SETTLE_TIMEOUT_MICROS: i64 = 200_000;
const SETTLE_POLL_MICROS: i64 = 50;

/// Why the driver stops talking to the block.
fn device_gone() -> Error {
    ENODEV
}

/// 32-bit register access to one component: its base in the bus mapping.
#[derive(Clone, Copy, Debug)]
struct Registers {
    base: usize,
}

/// The bus mapping of the block, revoked when the device is unbound.
struct Bus {
    bar: pci::DevresBar,
}

impl Bus {
    fn read(&self, component: Registers, offset: usize) -> Result<u32> {
        let bar = self.bar.try_access().ok_or_else(device_gone)?;
        (&*bar).try_read32(component.base + offset)
    }

    fn write(&self, component: Registers, offset: usize, value: u32) -> Result {
        let bar = self.bar.try_access().ok_or_else(device_gone)?;
        (&*bar).try_write32(value, component.base + offset)
    }

    /// Waits until `(register & mask) == want`: the specification's read-back loops.
    /// Sleeps between reads (the mapping's guard is dropped first: it is an RCU read
    /// section).
    fn settle(&self, component: Registers, offset: usize, mask: u32, want: u32) -> Result {
        let mut waited = 0;
        loop {
            if self.read(component, offset)? & mask == want {
                return Ok(());
            }
            if waited >= SETTLE_TIMEOUT_MICROS {
                pr_err!(
                    "component at {:#x}: register {:#x} does not settle to {:#x} under mask {:#x}\n",
                    component.base,
                    offset,
                    want,
                    mask
                );
                return Err(ETIMEDOUT);
            }
            fsleep(Delta::from_micros(SETTLE_POLL_MICROS));
            waited += SETTLE_POLL_MICROS;
        }
    }

    fn read_address(&self, component: Registers, low: usize, high: usize) -> Result<u64> {
        Ok(ram_sink::join_address(
            self.read(component, low)?,
            self.read(component, high)?,
        ))
    }

    fn write_address(&self, component: Registers, low: usize, high: usize, address: u64) -> Result {
        let (low_value, high_value) = ram_sink::split_address(address);
        // High first: the pair is legalised as one value after either store.
        self.write(component, high, high_value)?;
        self.write(component, low, low_value)
    }
}

/// A component as the discovery table lists it.
#[derive(Clone, Copy, Debug)]
struct Component {
    entry: ComponentEntry,
    registers: Registers,
}

impl Component {
    fn new(entry: &ComponentEntry) -> Component {
        Component {
            entry: *entry,
            registers: Registers {
                base: entry.registers as usize,
            },
        }
    }
}

/// What one owner has set up and observed.
struct State {
    owned: bool,
    plan: Option<plan::Plan>,
    running: bool,
    progress: Option<WriteProgress>,
    wrapped: bool,
    stopped_on_wrap: bool,
    overflow_harts: u64,
    /// While tracing with task contexts: the scheduler probes that write them.
    context_probes: Option<ContextProbes>,
}

/// One trace block: its layout, its bus mapping and its owner's state.
#[pin_data]
struct TraceBlock {
    bus: Bus,
    table: DiscoveryTable,
    /// Bus address of BAR 2, for mapping the sink memory.
    bar_start: u64,
    facts: plan::BlockFacts,
    sink: Component,
    funnel: Option<Component>,
    /// The sink has rvperf's implementation-defined wrap count.
    has_wrap_count: bool,
    encoder_implementation: u32,
    funnel_implementation: u32,
    sink_implementation: u32,
    #[pin]
    state: Mutex<State>,
    /// Woken on stop and release; waiters otherwise wake every tick to read the sink.
    #[pin]
    progress: CondVar,
}

/// How the ioctls' errors map from a refused plan.
fn plan_error(error: plan::PlanError) -> Error {
    match error {
        plan::PlanError::Unsupported => EOPNOTSUPP,
        _ => EINVAL,
    }
}

impl TraceBlock {
    fn encoders(&self) -> impl Iterator<Item = Component> + '_ {
        self.table.encoders().map(Component::new)
    }

    fn funnel(&self) -> Option<Component> {
        self.funnel
    }

    fn sink(&self) -> Component {
        self.sink
    }

    /// tr??Active = 0: the component in reset, every register at its reset value.
    fn enter_reset(&self, component: Component) -> Result {
        self.bus.write(component.registers, component::CONTROL, 0)?;
        self.bus.settle(
            component.registers,
            component::CONTROL,
            component::control::ACTIVE.mask(),
            0,
        )
    }

    /// The specification's reset and discovery: reset, release, read back empty, check
    /// `Impl` against the discovery table.
    fn reset(&self, component: Component) -> Result {
        use component::control::{ACTIVE, EMPTY};
        self.enter_reset(component)?;
        self.bus
            .write(component.registers, component::CONTROL, ACTIVE.mask())?;
        self.bus.settle(
            component.registers,
            component::CONTROL,
            ACTIVE.mask(),
            ACTIVE.mask(),
        )?;
        self.bus.settle(
            component.registers,
            component::CONTROL,
            EMPTY.mask(),
            EMPTY.mask(),
        )?;
        let implementation = self
            .bus
            .read(component.registers, component::IMPLEMENTATION)?;
        check_implementation(&component.entry, implementation)
    }

    /// `self_arc` is this block, for the context writer's probes to hold.
    fn start(&self, self_arc: &Arc<TraceBlock>, state: &mut State) -> Result {
        let plan = state.plan.ok_or(EINVAL)?;
        let sink = self.sink();
        let funnel = self.funnel();
        let used = |component: &Component| {
            component
                .entry
                .hart
                .is_some_and(|hart| hart < 64 && plan.harts & (1 << hart) != 0)
        };
        self.reset(sink)?;
        if let Some(funnel) = funnel {
            self.reset(funnel)?;
        }
        for encoder in self.encoders().filter(used) {
            self.reset(encoder)?;
        }
        if plan.task_context {
            // The context registers hold what the probes write from now on (a released
            // encoder's reads 0, which would name the idle task): no task until then.
            for component in self.encoders().filter(used) {
                self.bus.write(
                    component.registers,
                    encoder::CONTEXT,
                    uapi::RVTRACE_CONTEXT_UNKNOWN,
                )?;
            }
            // Before any encoder is enabled, so that each hart's trace starts with its
            // task known (registering patches the kernel's text: slow, and not to be
            // traced as nobody's). Kept in `state` at once: a failure below takes the
            // probes off with the rest (`IOC_START`).
            state.context_probes = Some(ContextProbes::register(ContextWriter::new(
                self_arc, &plan,
            )?)?);
        }

        // The RAM sink in SMEM mode: mode, then the buffer, then WP = start, then enable.
        let sink_registers = sink.registers;
        let start = self.table.sink_offset;
        let limit = start + plan.buffer_bytes - ram_sink::ADDRESS_ALIGNMENT;
        self.bus
            .write(sink_registers, ram_sink::CONTROL, plan.sink_control)?;
        self.bus.write_address(
            sink_registers,
            ram_sink::START_LOW,
            ram_sink::START_HIGH,
            start,
        )?;
        self.bus.write_address(
            sink_registers,
            ram_sink::LIMIT_LOW,
            ram_sink::LIMIT_HIGH,
            limit,
        )?;
        self.bus.write_address(
            sink_registers,
            ram_sink::WRITE_POINTER_LOW,
            ram_sink::WRITE_POINTER_HIGH,
            start,
        )?;
        let taken =
            self.bus
                .read_address(sink_registers, ram_sink::LIMIT_LOW, ram_sink::LIMIT_HIGH)?;
        if taken != limit {
            pr_err!("the RAM sink took limit {:#x} for {:#x}\n", taken, limit);
            return Err(EIO);
        }
        let progress = WriteProgress::new(start, limit).ok_or(EINVAL)?;
        let enable = ram_sink::control::ENABLE.mask();
        self.bus.write(
            sink_registers,
            ram_sink::CONTROL,
            plan.sink_control | enable,
        )?;
        self.bus
            .settle(sink_registers, ram_sink::CONTROL, enable, enable)?;

        if let Some(funnel) = funnel {
            // Input i is the i-th encoder of the table: the ones not traced are disabled.
            let mut disabled = 0u32;
            for (input, encoder) in self.encoders().enumerate() {
                if !used(&encoder) && input < funnel::MAX_INPUTS {
                    disabled |= 1 << input;
                }
            }
            self.bus
                .write(funnel.registers, funnel::DISABLE_INPUT, disabled)?;
            let control = component::control::ACTIVE.mask() | component::control::ENABLE.mask();
            self.bus
                .write(funnel.registers, component::CONTROL, control)?;
            self.bus
                .settle(funnel.registers, component::CONTROL, enable, enable)?;
        }

        for encoder_component in self.encoders().filter(used) {
            let registers = encoder_component.registers;
            let hart = encoder_component.entry.hart.unwrap_or(0);
            let features = plan.features_of(hart);
            self.bus
                .write(registers, encoder::INSTRUCTION_FEATURES, features)?;
            // WARL: a feature the encoder lacks reads back clear.
            let kept = self.bus.read(registers, encoder::INSTRUCTION_FEATURES)?;
            let implicit_return_mode = encoder::instruction_features::IMPLICIT_RETURN_MODE.mask();
            if kept & !implicit_return_mode != features {
                pr_err!(
                    "hart {}'s encoder took features {:#x} for {:#x}\n",
                    hart,
                    kept,
                    features
                );
                return Err(EOPNOTSUPP);
            }
            self.bus.write(
                registers,
                encoder::filter_match_instruction(0),
                plan.filter_match,
            )?;
            self.bus
                .write(registers, encoder::filter_control(0), plan.filter_control)?;
            self.bus
                .write(registers, encoder::INSTRUCTION_FILTERS, plan.filters)?;
            self.bus
                .write(registers, timestamp::CONTROL, plan.timestamp_control)?;
            if let Some(enabled) = plan.timestamp_enabled() {
                self.bus.write(registers, timestamp::CONTROL, enabled)?;
            }
            self.bus
                .write(registers, encoder::CONTROL, plan.encoder_control)?;
            let mode = encoder::control::INSTRUCTION_MODE;
            let read_mode = mode.extract(self.bus.read(registers, encoder::CONTROL)?);
            if read_mode != mode.extract(plan.encoder_control) {
                pr_err!(
                    "hart {}'s encoder has no instruction mode {}\n",
                    hart,
                    mode.extract(plan.encoder_control)
                );
                return Err(EOPNOTSUPP);
            }
            let enabled = encoder::control::ENABLE.with(plan.encoder_control, true);
            self.bus.write(registers, encoder::CONTROL, enabled)?;
            self.bus
                .settle(registers, encoder::CONTROL, enable, enable)?;
            let tracing = encoder::control::INSTRUCTION_TRACING.with(enabled, true);
            self.bus.write(registers, encoder::CONTROL, tracing)?;
        }
        state.progress = Some(progress);
        state.running = true;
        state.wrapped = false;
        state.stopped_on_wrap = false;
        state.overflow_harts = 0;
        Ok(())
    }

    /// Reads the sink's write pointer and the encoders' overflow bits into `state`.
    fn sample(&self, state: &mut State) -> Result {
        if !state.running {
            return Ok(());
        }
        let Some(progress) = state.progress.as_mut() else {
            return Ok(());
        };
        let sink = self.sink().registers;
        let read_pointer = || -> Result<(u64, bool)> {
            let low = self.bus.read(sink, ram_sink::WRITE_POINTER_LOW)?;
            let high = self.bus.read(sink, ram_sink::WRITE_POINTER_HIGH)?;
            let wrap = ram_sink::write_pointer_low::WRAP.is_set(low);
            let address =
                ram_sink::join_address(low & ram_sink::write_pointer_low::ADDRESS.mask(), high);
            Ok((address, wrap))
        };
        let (wrap, observed) = if self.has_wrap_count {
            // The count before and after the pointer: equal, the three belong together.
            let mut tries = 0;
            loop {
                let before = self.bus.read(sink, ram_sink::WRAP_COUNT)?;
                let (pointer, wrap) = read_pointer()?;
                let after = self.bus.read(sink, ram_sink::WRAP_COUNT)?;
                if before == after {
                    break (wrap, progress.observe_counted(pointer, after));
                }
                tries += 1;
                if tries == 16 {
                    pr_err!("the RAM sink's wrap count does not hold still\n");
                    return Err(EIO);
                }
            }
        } else {
            let (pointer, wrap) = read_pointer()?;
            (wrap, progress.observe(pointer, wrap))
        };
        if let Err(error) = observed {
            pr_err!("the RAM sink's {}\n", core::format_args!("{error}"));
            return Err(EIO);
        }
        state.wrapped |= wrap;
        let control = self.bus.read(sink, ram_sink::CONTROL)?;
        let plan = state.plan.ok_or(EINVAL)?;
        if wrap
            && ram_sink::control::STOP_ON_WRAP.is_set(plan.sink_control)
            && !ram_sink::control::ENABLE.is_set(control)
        {
            state.stopped_on_wrap = true;
        }
        for encoder_component in self.encoders() {
            let Some(hart) = encoder_component.entry.hart else {
                continue;
            };
            if hart >= 64 || plan.harts & (1 << hart) == 0 {
                continue;
            }
            let control = self
                .bus
                .read(encoder_component.registers, encoder::CONTROL)?;
            if encoder::control::INSTRUCTION_STALL_OR_OVERFLOW.is_set(control) {
                state.overflow_harts |= 1 << hart;
            }
        }
        Ok(())
    }

    /// The specification's disable sequence: encoders, funnel, sink, each until empty;
    /// then the last reading, and every component back in reset (a block left active
    /// keeps the emulation polling it, and real hardware drawing power).
    fn stop(&self, state: &mut State) -> Result {
        // The probes go first (and whatever happens next): nothing writes contexts once
        // the encoders are stopped.
        drop(state.context_probes.take());
        if !state.running {
            return Ok(());
        }
        let empty = component::control::EMPTY.mask();
        let enable = component::control::ENABLE.mask();
        let plan = state.plan.ok_or(EINVAL)?;
        let mut result = Ok(());
        for encoder_component in self.encoders() {
            let Some(hart) = encoder_component.entry.hart else {
                continue;
            };
            if hart >= 64 || plan.harts & (1 << hart) == 0 {
                continue;
            }
            let registers = encoder_component.registers;
            let control = self.bus.read(registers, encoder::CONTROL)?;
            let stopped = control & !(enable | encoder::control::INSTRUCTION_TRACING.mask());
            self.bus.write(registers, encoder::CONTROL, stopped)?;
            result =
                result.and(
                    self.bus
                        .settle(registers, encoder::CONTROL, enable | empty, empty),
                );
        }
        if let Some(funnel) = self.funnel() {
            self.bus.write(
                funnel.registers,
                component::CONTROL,
                component::control::ACTIVE.mask(),
            )?;
            result = result.and(self.bus.settle(
                funnel.registers,
                component::CONTROL,
                enable | empty,
                empty,
            ));
        }
        let sink = self.sink().registers;
        let control = self.bus.read(sink, ram_sink::CONTROL)?;
        self.bus.write(sink, ram_sink::CONTROL, control & !enable)?;
        result = result.and(
            self.bus
                .settle(sink, ram_sink::CONTROL, enable | empty, empty),
        );
        self.sample(state)?;
        state.running = false;
        self.power_down()?;
        self.progress.notify_all();
        result
    }

    /// Every component in reset, encoders first.
    fn power_down(&self) -> Result {
        for encoder_component in self.encoders() {
            self.enter_reset(encoder_component)?;
        }
        if let Some(funnel) = self.funnel() {
            self.enter_reset(funnel)?;
        }
        self.enter_reset(self.sink())
    }

    fn status(&self, state: &State) -> uapi::rvtrace_status {
        let mut status = uapi::rvtrace_status {
            size: core::mem::size_of::<uapi::rvtrace_status>() as u32,
            ..Default::default()
        };
        let mut flags = 0;
        if state.plan.is_some() {
            flags |= uapi::RVTRACE_STATUS_CONFIGURED;
        }
        if state.running {
            flags |= uapi::RVTRACE_STATUS_RUNNING;
        }
        if state.wrapped {
            flags |= uapi::RVTRACE_STATUS_WRAPPED;
        }
        if state.stopped_on_wrap {
            flags |= uapi::RVTRACE_STATUS_STOPPED_ON_WRAP;
        }
        status.flags = flags;
        if let Some(plan) = state.plan {
            status.buffer_bytes = plan.buffer_bytes;
            status.src_bits = plan.source_bits;
        }
        if let Some(progress) = state.progress {
            let sink_offset = self.table.sink_offset;
            status.buffer_offset = progress.start() - sink_offset;
            status.buffer_bytes = progress.buffer_bytes();
            status.write_offset = progress.write_pointer() - sink_offset;
            status.bytes_written = progress.bytes_written();
            status.wraps = progress.wraps();
        }
        status.overflow_harts = state.overflow_harts;
        status
    }

    fn info(&self) -> uapi::rvtrace_info {
        uapi::rvtrace_info {
            size: core::mem::size_of::<uapi::rvtrace_info>() as u32,
            abi_version: uapi::RVTRACE_ABI_VERSION,
            encoders: self.encoders().count() as u32,
            return_stack_depth: self.facts.return_stack_depth,
            harts: self.facts.harts,
            sink_size: self.facts.sink_size,
            encoder_impl: self.encoder_implementation,
            funnel_impl: self.funnel_implementation,
            sink_impl: self.sink_implementation,
            flags: if self.has_wrap_count {
                uapi::RVTRACE_INFO_WRAP_COUNT
            } else {
                0
            } | if self.facts.has_context_register {
                uapi::RVTRACE_INFO_CONTEXT_REGISTER
            } else {
                0
            },
            ..Default::default()
        }
    }
}

/// A component's `Impl` must name the type the table gives and a version this driver
/// knows (1.x); an encoder must speak N-Trace 1.x.
fn check_implementation(entry: &ComponentEntry, implementation: u32) -> Result {
    use component::implementation::{COMPONENT_TYPE, VERSION_MAJOR, VERSION_MINOR};
    if COMPONENT_TYPE.extract(implementation) != entry.component_type.value() {
        pr_err!(
            "component at {:#x}: Impl {:#x} names type {}, the discovery table {}\n",
            entry.registers,
            implementation,
            COMPONENT_TYPE.extract(implementation),
            entry.component_type.value()
        );
        return Err(ENODEV);
    }
    if VERSION_MAJOR.extract(implementation) != 1 {
        pr_err!(
            "component at {:#x}: version {}.{} (Impl {:#x}); this driver knows 1.x\n",
            entry.registers,
            VERSION_MAJOR.extract(implementation),
            VERSION_MINOR.extract(implementation),
            implementation
        );
        return Err(ENODEV);
    }
    if entry.component_type == ComponentType::Encoder
        && encoder::implementation::PROTOCOL_MAJOR.extract(implementation) != 1
    {
        pr_err!(
            "encoder at {:#x}: protocol version {} (Impl {:#x}); this driver knows N-Trace 1.x\n",
            entry.registers,
            encoder::implementation::PROTOCOL_MAJOR.extract(implementation),
            implementation
        );
        return Err(ENODEV);
    }
    Ok(())
}

/// The probe's reading of the block: its table and the facts the plans need.
struct Discovered {
    table: DiscoveryTable,
    sink: Component,
    facts: plan::BlockFacts,
    encoder_implementation: u32,
    funnel_implementation: u32,
    sink_implementation: u32,
}

fn discover(bar: &pci::Bar<'_>, bar_length: u64) -> Result<Discovered> {
    let mut page = KVec::with_capacity(COMPONENT_SIZE, GFP_KERNEL)?;
    for offset in (0..COMPONENT_SIZE).step_by(4) {
        let word = bar.try_read32(offset)?;
        page.extend_from_slice(&word.to_le_bytes(), GFP_KERNEL)?;
    }
    if page[..MAGIC.len()] != MAGIC {
        // Another ivshmem device: not ours, quietly.
        return Err(ENODEV);
    }
    let table = DiscoveryTable::parse(&page).map_err(|error| {
        pr_err!(
            "the trace block's discovery table: {}\n",
            core::format_args!("{error}")
        );
        ENODEV
    })?;
    if table.block_size > bar_length {
        pr_err!(
            "the discovery table says {} bytes, BAR 2 has {}\n",
            table.block_size,
            bar_length
        );
        return Err(ENODEV);
    }
    let Some(sink) = table.ram_sink() else {
        pr_err!("the trace block has no RAM sink\n");
        return Err(ENODEV);
    };
    // The sink memory is mapped to user space page by page.
    if table.sink_offset % bindings::PAGE_SIZE as u64 != 0 {
        pr_err!(
            "the sink memory at {:#x} is not page-aligned\n",
            table.sink_offset
        );
        return Err(ENODEV);
    }
    let read = |entry: &ComponentEntry| -> Result<u32> {
        let value = bar.try_read32(entry.registers as usize + component::IMPLEMENTATION)?;
        check_implementation(entry, value)?;
        Ok(value)
    };
    let mut harts = 0u64;
    let mut encoder_implementation = 0;
    let mut return_stack_depth = u32::MAX;
    let mut has_context_register = true;
    for entry in table.encoders() {
        let implementation = read(entry)?;
        let hart = entry.hart.unwrap_or(u32::MAX);
        if hart >= 64 {
            pr_err!(
                "an encoder traces hart {}; this driver numbers harts up to 63\n",
                hart
            );
            return Err(ENODEV);
        }
        harts |= 1 << hart;
        encoder_implementation = implementation;
        // The emulated encoders' Impl vendor bits are their return stack depth and
        // whether they have the stand-in context register.
        return_stack_depth = return_stack_depth
            .min(encoder::implementation::RETURN_STACK_DEPTH.extract(implementation));
        has_context_register &= encoder::implementation::HAS_CONTEXT.is_set(implementation);
    }
    if harts == 0 {
        pr_err!("the trace block has no encoder\n");
        return Err(ENODEV);
    }
    let funnel_implementation = match table.funnel() {
        Some(entry) => read(entry)?,
        None => 0,
    };
    let sink_implementation = read(sink)?;
    if !ram_sink::implementation::HAS_SMEM.is_set(sink_implementation) {
        pr_err!(
            "the RAM sink has no system-memory mode (Impl {:#x})\n",
            sink_implementation
        );
        return Err(ENODEV);
    }
    Ok(Discovered {
        facts: plan::BlockFacts {
            harts,
            has_funnel: table.funnel().is_some(),
            sink_size: table.sink_size,
            return_stack_depth,
            has_context_register,
        },
        sink: Component::new(sink),
        table,
        encoder_implementation,
        funnel_implementation,
        sink_implementation,
    })
}

/// CPUs the kernel numbers (`NR_CPUS`).
const CPUS: usize = bindings::NR_CPUS as usize;

/// Thread ids the generations table covers: every tid Linux hands out
/// (`PID_MAX_LIMIT`, the context value's 22 bits).
const TIDS: usize = 1 << uapi::RVTRACE_CONTEXT_TID_BITS;

/// Exec generations the context value tells apart (its 10 bits).
const GENERATIONS: u32 = 1 << uapi::RVTRACE_CONTEXT_EXEC_BITS;

/// The id of `task` in the initial pid namespace (what perf's side-band records), if
/// it fits the context value.
///
/// # Safety
///
/// `task` points to a live task for the duration of the call.
unsafe fn tid_of(task: *const bindings::task_struct) -> Option<u32> {
    // Through the kernel's function, not a field: the bindings' `task_struct` layout of
    // this kernel's build is not C's (`kmod-shim/README.md`, "Task contexts").
    // SAFETY: the caller guarantees `task` is live; `init_pid_ns` is the kernel's
    // static namespace; `__task_pid_nr_ns` takes the RCU read lock itself and may run
    // in atomic context.
    let tid = unsafe {
        bindings::__task_pid_nr_ns(
            task.cast_mut(),
            bindings::pid_type_PIDTYPE_PID,
            core::ptr::addr_of_mut!(bindings::init_pid_ns),
        )
    };
    u32::try_from(tid).ok().filter(|&tid| (tid as usize) < TIDS)
}

/// Writes the task each traced hart runs to its encoder's stand-in context register
/// (`RVTRACE_FEATURE_CONTEXT_TASK`), where an operating system on silicon with Sdtrig
/// would write `scontext`: at every context switch the task switched to, at every exec
/// the task with its new program, and at the start whatever each CPU runs.
struct ContextWriter {
    block: Arc<TraceBlock>,
    /// By Linux CPU: the context register's encoder, if the CPU's hart is traced.
    encoder_of_cpu: [Option<Registers>; CPUS],
    /// By tid: the generation of the program the thread runs, given at its fork and at
    /// each exec since tracing started (0: the thread existed before and has not
    /// exec'd since). `task_struct.self_exec_id` would do, but fields of `task_struct`
    /// cannot be read here (see `tid_of`). 8 MiB, for the trace's duration.
    generations: VVec<u16>,
    /// The last generation given (counts modulo `GENERATIONS`, skipping 0).
    last_generation: AtomicU32,
}

impl ContextWriter {
    fn new(block: &Arc<TraceBlock>, plan: &plan::Plan) -> Result<KBox<ContextWriter>> {
        let mut encoder_of_cpu = [None; CPUS];
        for (cpu, slot) in encoder_of_cpu.iter_mut().enumerate() {
            // SAFETY: the CPU-to-hart map is written during boot and read-only after
            // (`__ro_after_init`): a plain read of one element.
            let hart = unsafe { (*core::ptr::addr_of!(bindings::__cpuid_to_hartid_map))[cpu] };
            *slot = block
                .encoders()
                .find(|component| {
                    component.entry.hart.is_some_and(|encoder_hart| {
                        u64::from(encoder_hart) == hart as u64
                            && encoder_hart < 64
                            && plan.harts & (1 << encoder_hart) != 0
                    })
                })
                .map(|component| component.registers);
        }
        Ok(KBox::new(
            ContextWriter {
                block: block.clone(),
                encoder_of_cpu,
                generations: VVec::from_elem(0, TIDS, GFP_KERNEL)?,
                last_generation: AtomicU32::new(0),
            },
            GFP_KERNEL,
        )?)
    }

    /// The generation slot of `tid` (below `TIDS`).
    fn generation_of(&self, tid: u32) -> &AtomicU16 {
        let slot = &self.generations[tid as usize];
        // SAFETY: `slot` is a valid, aligned `u16` of `generations`, which lives as
        // long as `self`; every access to it (the probes, on any CPU) is atomic
        // through this view, and nothing takes a plain reference to it mutably.
        unsafe { AtomicU16::from_ptr(core::ptr::from_ref(slot).cast_mut()) }
    }

    /// Gives thread `tid` a generation no other program of it had lately: its context
    /// value changes at exec, and a tid used again by a new task is not taken for the
    /// old one's.
    fn renew_generation(&self, tid: u32) {
        let count = self.last_generation.fetch_add(1, Ordering::Relaxed);
        let generation = 1 + count % (GENERATIONS - 1);
        self.generation_of(tid)
            .store(generation as u16, Ordering::Relaxed);
    }

    /// Writes `task`'s context to the encoder of the CPU this runs on, as the task that
    /// runs there from now on.
    ///
    /// # Safety
    ///
    /// `task` points to a live task for the duration of the call.
    unsafe fn write_task(&self, task: *const bindings::task_struct) {
        // The CPU must not change between reading its number and the write.
        let _interrupts_off = kernel::interrupt::local_interrupt_disable();
        // SAFETY: reading this CPU's number has no precondition; with interrupts off the
        // caller stays on it.
        let cpu = unsafe { bindings::raw_smp_processor_id() } as usize;
        let Some(registers) = self.encoder_of_cpu.get(cpu).copied().flatten() else {
            return;
        };
        // SAFETY: the caller guarantees `task` is live.
        let value = match unsafe { tid_of(task) } {
            Some(tid) => plan::task_context(
                tid,
                u32::from(self.generation_of(tid).load(Ordering::Relaxed)),
            ),
            None => uapi::RVTRACE_CONTEXT_UNKNOWN,
        };
        // A device gone (unbound) has nothing to write to; its owner's next ioctl says
        // ENODEV.
        let _ = self.block.bus.write(registers, encoder::CONTEXT, value);
    }
}

/// The writer of a probe's `data`.
///
/// # Safety
///
/// `data` is the writer `ContextProbes` registered, which outlives the registration
/// and the tracepoints' grace period after it (`ContextProbes::drop`).
unsafe fn writer_of<'a>(data: *mut core::ffi::c_void) -> &'a ContextWriter {
    // SAFETY: as the caller guarantees.
    unsafe { &*data.cast::<ContextWriter>() }
}

/// `sched_switch` probe: `next` runs on this CPU from now on.
///
/// # Safety
///
/// Called by the tracepoint with the `ContextWriter` it was registered with as `data`.
unsafe extern "C" fn on_sched_switch(
    data: *mut core::ffi::c_void,
    _preempt: bool,
    _previous: *mut bindings::task_struct,
    next: *mut bindings::task_struct,
    _previous_state: core::ffi::c_uint,
) {
    // SAFETY: registered with its writer; the scheduler passes the task it switches
    // to, live across the call.
    unsafe { writer_of(data).write_task(next) };
}

/// `sched_process_fork` probe: `child` starts as a copy of `parent`, in a new
/// generation (before it first runs: the fork wakes it after the tracepoint).
///
/// # Safety
///
/// As [`on_sched_switch`].
unsafe extern "C" fn on_sched_process_fork(
    data: *mut core::ffi::c_void,
    _parent: *mut bindings::task_struct,
    child: *mut bindings::task_struct,
) {
    // SAFETY: registered with its writer; the fork passes the child, live.
    let writer = unsafe { writer_of(data) };
    // SAFETY: as above.
    if let Some(tid) = unsafe { tid_of(child) } {
        writer.renew_generation(tid);
    }
}

/// `sched_process_exec` probe: `task` (the current one) runs a new program, in a new
/// generation, from now on.
///
/// # Safety
///
/// As [`on_sched_switch`].
unsafe extern "C" fn on_sched_process_exec(
    data: *mut core::ffi::c_void,
    task: *mut bindings::task_struct,
    _old_pid: bindings::pid_t,
    _binary: *mut bindings::linux_binprm,
) {
    // SAFETY: registered with its writer; exec passes the current task, live.
    let writer = unsafe { writer_of(data) };
    // SAFETY: as above.
    if let Some(tid) = unsafe { tid_of(task) } {
        writer.renew_generation(tid);
    }
    // SAFETY: as above.
    unsafe { writer.write_task(task) };
}

/// Run on every CPU at the start (`smp_call_function_single`): the task it runs now.
///
/// # Safety
///
/// `data` is a live `ContextWriter`.
unsafe extern "C" fn write_current_task(data: *mut core::ffi::c_void) {
    // SAFETY: `ContextProbes::register` passes its writer and waits for the call; the
    // current task is live while it runs this.
    unsafe { writer_of(data).write_task(bindings::get_current()) };
}

/// The scheduler's tracepoints the writer hooks, in the order they are registered.
const PROBED: [&[u8]; 3] = [
    b"sched_process_fork",
    b"sched_process_exec",
    b"sched_switch",
];

/// `for_each_kernel_tracepoint` callback: keeps each tracepoint `PROBED` names.
///
/// # Safety
///
/// `data` is a `[*mut tracepoint; 3]`; `tracepoint` a kernel tracepoint.
unsafe extern "C" fn find_probed_tracepoint(
    tracepoint: *mut bindings::tracepoint,
    data: *mut core::ffi::c_void,
) {
    // SAFETY: `ContextProbes::register` passes its own array, exclusively borrowed.
    let found = unsafe { &mut *data.cast::<[*mut bindings::tracepoint; 3]>() };
    // SAFETY: a kernel tracepoint's name is a static NUL-terminated string.
    let name = unsafe { core::ffi::CStr::from_ptr((*tracepoint).name) };
    if let Some(index) = PROBED.iter().position(|probed| *probed == name.to_bytes()) {
        found[index] = tracepoint;
    }
}

/// The writer's probes, registered; unregistered on drop. Rust for Linux 7.3 lets Rust
/// code declare tracepoints but not attach to the kernel's: this is the smallest
/// wrapper, three probes with one lifetime.
struct ContextProbes {
    writer: KBox<ContextWriter>,
    /// `PROBED`'s tracepoints, found by name (they are not exported symbols).
    tracepoints: [*mut bindings::tracepoint; 3],
    /// How many of them, from the first, have the probe registered.
    registered: usize,
}

// SAFETY: the raw pointers are the kernel's static tracepoints, valid from any thread;
// the writer holds an `Arc`, register accessors and atomics, which are `Send`.
unsafe impl Send for ContextProbes {}

impl ContextProbes {
    /// The probe of each of `PROBED`'s tracepoints, as the tracepoint calls it.
    fn probes() -> [*mut core::ffi::c_void; 3] {
        [
            on_sched_process_fork as *const () as *mut core::ffi::c_void,
            on_sched_process_exec as *const () as *mut core::ffi::c_void,
            on_sched_switch as *const () as *mut core::ffi::c_void,
        ]
    }

    fn data(&self) -> *mut core::ffi::c_void {
        core::ptr::from_ref::<ContextWriter>(&self.writer)
            .cast_mut()
            .cast()
    }

    fn register(writer: KBox<ContextWriter>) -> Result<ContextProbes> {
        let mut tracepoints: [*mut bindings::tracepoint; 3] = [core::ptr::null_mut(); 3];
        // SAFETY: the callback matches the type the iterator calls, and `tracepoints`
        // lives across the call.
        unsafe {
            bindings::for_each_kernel_tracepoint(
                Some(find_probed_tracepoint),
                core::ptr::from_mut(&mut tracepoints).cast(),
            )
        };
        if tracepoints.iter().any(|tracepoint| tracepoint.is_null()) {
            pr_err!("the kernel lacks sched_process_fork, sched_process_exec or sched_switch\n");
            return Err(EOPNOTSUPP);
        }
        let mut probes = ContextProbes {
            writer,
            tracepoints,
            registered: 0,
        };
        let data = probes.data();
        // Fork and exec first, so that a task's generation is in place before a switch
        // reads it.
        for (tracepoint, probe) in tracepoints.into_iter().zip(Self::probes()) {
            // SAFETY: each probe has its tracepoint's probe type (data first, then
            // TP_PROTO's arguments); `data` (the boxed writer) stays where it is until
            // `drop` unregisters the probes and waits out their callers. On error,
            // dropping `probes` takes off those registered.
            to_result(unsafe { bindings::tracepoint_probe_register(tracepoint, probe, data) })?;
            probes.registered += 1;
        }
        // What each CPU runs now: its next switch would say it only then. The probes
        // are in place first, so a switch in between writes after this.
        for cpu in 0..CPUS {
            // SAFETY: `write_current_task` has the IPI function type and `data` is live
            // until the call returns (`wait`). A CPU that is not online returns ENXIO:
            // there is nothing to write there.
            unsafe {
                bindings::smp_call_function_single(
                    cpu as core::ffi::c_int,
                    Some(write_current_task),
                    data,
                    true,
                )
            };
        }
        Ok(probes)
    }
}

impl Drop for ContextProbes {
    fn drop(&mut self) {
        let data = self.data();
        for (tracepoint, probe) in self
            .tracepoints
            .into_iter()
            .zip(Self::probes())
            .take(self.registered)
        {
            // SAFETY: a probe and data registered in `register`. Unregistering fails
            // only to allocate the tracepoint's new probe array, and then the probe
            // stays: this is the one place that can happen, and nothing better can be
            // done here than say so.
            let result = unsafe { bindings::tracepoint_probe_unregister(tracepoint, probe, data) };
            if result != 0 {
                pr_err!("cannot take a probe off the scheduler: error {}\n", result);
            }
        }
        // Probes of tracepoints that cannot fault run in `tracepoint_srcu` read
        // sections (`tracepoint_synchronize_unregister` waits for those, and for the
        // faultable ones' RCU tasks trace, which these are not): after this wait none
        // runs, and the writer can go.
        // SAFETY: `tracepoint_srcu` is the kernel's, initialised at boot; we are in
        // process context, which may sleep.
        unsafe { bindings::synchronize_srcu(core::ptr::addr_of_mut!(bindings::tracepoint_srcu)) };
    }
}

/// Whether the caller may trace every process and the kernel (perf's `perfmon_capable`).
fn may_trace() -> bool {
    // SAFETY: `capable` reads the current task's credentials, always valid in a syscall.
    unsafe {
        bindings::capable(bindings::CAP_PERFMON as i32)
            || bindings::capable(bindings::CAP_SYS_ADMIN as i32)
    }
}

/// Maps `length` bytes of device memory at bus address `start` into a VMA being set up.
/// Rust for Linux 7.3 has no safe wrapper for mapping I/O memory (only `vm_insert_page`
/// of struct pages, which a PCI BAR has none of); this is the smallest one.
fn map_device_memory(vma: &VmaNew, start: u64, length: u64) -> Result {
    let length = usize::try_from(length).map_err(|_| EINVAL)?;
    // SAFETY: `vma` is a VMA under construction in an `mmap` call (the `VmaNew`
    // invariant), so the mm's mmap lock is held for writing as `vm_iomap_memory` needs;
    // `[start, start + length)` is the sink memory inside BAR 2, which this driver holds
    // (`pci_request_region`) while bound, device memory the kernel does not otherwise
    // use. `vm_iomap_memory` checks the VMA's size and offset against `length`.
    to_result(unsafe { bindings::vm_iomap_memory(vma.as_ptr(), start, length) })
}

/// An open `/dev/rvtrace`: the owner of the block.
struct TraceFile {
    block: Arc<TraceBlock>,
}

/// The misc device with the block it serves.
#[pin_data]
struct Registered {
    block: Arc<TraceBlock>,
    #[pin]
    misc: MiscDeviceRegistration<TraceFile>,
}

impl Registered {
    fn block_of(misc: &MiscDeviceRegistration<TraceFile>) -> Arc<TraceBlock> {
        let field = core::ptr::from_ref(misc).cast_mut();
        // SAFETY: every `MiscDeviceRegistration<TraceFile>` is the `misc` field of a
        // pinned `Registered` (the probe makes it so, nothing else creates one), and
        // `misc_open` keeps the registration registered, so its `Registered` alive,
        // while `open` runs: the container pointer is valid to read.
        let registered = unsafe { &*kernel::container_of!(field, Registered, misc) };
        registered.block.clone()
    }
}

#[vtable]
impl MiscDevice for TraceFile {
    type Ptr = KBox<Self>;

    fn open(_file: &File, misc: &MiscDeviceRegistration<Self>) -> Result<KBox<Self>> {
        if !may_trace() {
            return Err(EACCES);
        }
        let block = Registered::block_of(misc);
        {
            let mut state = block.state.lock();
            if state.owned {
                return Err(EBUSY);
            }
            state.owned = true;
        }
        KBox::new(
            TraceFile {
                block: block.clone(),
            },
            GFP_KERNEL,
        )
        .map_err(|error| {
            block.state.lock().owned = false;
            Error::from(error)
        })
    }

    fn release(file: KBox<Self>, _: &File) {
        let block = &file.block;
        let mut state = block.state.lock();
        if let Err(error) = block.stop(&mut state) {
            pr_warn!(
                "stopping the trace on release: error {}\n",
                error.to_errno()
            );
        }
        if let Err(error) = block.power_down() {
            pr_warn!(
                "resetting the trace block on release: error {}\n",
                error.to_errno()
            );
        }
        state.plan = None;
        state.progress = None;
        state.owned = false;
        block.progress.notify_all();
    }

    fn mmap(file: &TraceFile, _: &File, vma: &VmaNew) -> Result {
        // The sink memory is the hardware's to write: read-only, never writable later.
        if vma.writable() {
            return Err(EACCES);
        }
        vma.try_clear_maywrite()?;
        let block = &file.block;
        let start = block
            .bar_start
            .checked_add(block.table.sink_offset)
            .ok_or(EINVAL)?;
        map_device_memory(vma, start, block.table.sink_size)
    }

    fn ioctl(file: &TraceFile, _: &File, command: u32, argument: usize) -> Result<isize> {
        let block = &file.block;
        let user = UserPtr::from_addr(argument);
        match command {
            IOC_GET_INFO => {
                let info = block.info();
                UserSlice::new(user, core::mem::size_of_val(&info))
                    .writer()
                    .write(&info)?;
            }
            IOC_CONFIGURE => {
                let config: uapi::rvtrace_config =
                    UserSlice::new(user, core::mem::size_of::<uapi::rvtrace_config>())
                        .reader()
                        .read()?;
                let plan = plan::plan(&config, &block.facts).map_err(plan_error)?;
                let mut state = block.state.lock();
                if state.running {
                    return Err(EBUSY);
                }
                state.plan = Some(plan);
                state.progress = None;
            }
            IOC_START => {
                let mut state = block.state.lock();
                if state.running {
                    return Err(EBUSY);
                }
                if let Err(error) = block.start(block, &mut state) {
                    // Leave nothing half-enabled.
                    drop(state.context_probes.take());
                    let _ = block.power_down();
                    state.running = false;
                    return Err(error);
                }
            }
            IOC_STOP => {
                let mut state = block.state.lock();
                block.stop(&mut state)?;
            }
            IOC_GET_STATUS => {
                let mut state = block.state.lock();
                block.sample(&mut state)?;
                let status = block.status(&state);
                UserSlice::new(user, core::mem::size_of_val(&status))
                    .writer()
                    .write(&status)?;
            }
            IOC_WAIT => {
                let slice = UserSlice::new(user, core::mem::size_of::<uapi::rvtrace_wait>());
                let (mut reader, mut writer) = slice.reader_writer();
                let mut request: uapi::rvtrace_wait = reader.read()?;
                if request.size as usize != core::mem::size_of::<uapi::rvtrace_wait>() {
                    return Err(EINVAL);
                }
                let mut state = block.state.lock();
                // The device raises no interrupt: a waiter reads the sink every tick.
                let mut ticks_left = if request.timeout_ms == 0 {
                    None
                } else {
                    Some(msecs_to_jiffies(request.timeout_ms).max(1))
                };
                let mut interrupted = false;
                loop {
                    block.sample(&mut state)?;
                    let written = state
                        .progress
                        .map_or(0, |progress| progress.bytes_written());
                    if !state.running || written >= request.until_bytes || ticks_left == Some(0) {
                        break;
                    }
                    if matches!(
                        block.progress.wait_interruptible_timeout(&mut state, 1),
                        CondVarTimeoutResult::Signal { .. }
                    ) {
                        interrupted = true;
                        break;
                    }
                    ticks_left = ticks_left.map(|ticks| ticks - 1);
                }
                request.status = block.status(&state);
                drop(state);
                writer.write(&request)?;
                if interrupted {
                    return Err(EINTR);
                }
            }
            _ => return Err(ENOTTY),
        }
        Ok(0)
    }
}

struct RvTraceDriver;

kernel::pci_device_table!(
    PCI_TABLE,
    <RvTraceDriver as pci::Driver>::IdInfo,
    [(
        pci::DeviceId::from_id(pci::Vendor::REDHAT_QUMRANET, 0x1110),
        ()
    )]
);

impl pci::Driver for RvTraceDriver {
    type IdInfo = ();
    type Data<'bound> = Registered;

    const ID_TABLE: pci::IdTable<Self::IdInfo> = &PCI_TABLE;

    fn probe<'bound>(
        pdev: &'bound pci::Device<Core<'_>>,
        _info: Option<&'bound Self::IdInfo>,
    ) -> impl PinInit<Self::Data<'bound>, Error> + 'bound {
        try_pin_init!(Registered {
            block: probe_block(pdev)?,
            misc <- MiscDeviceRegistration::register(MiscDeviceOptions { name: c"rvtrace" }),
        })
    }
}

fn probe_block(pdev: &pci::Device<Core<'_>>) -> Result<Arc<TraceBlock>> {
    // Any ivshmem device can carry anything: ours starts with the table's magic.
    pdev.enable_device_mem()?;
    let bar_length = pdev.resource_len(TRACE_BAR)?;
    let bar_start = pdev.resource_start(TRACE_BAR)?;
    let bar = pdev.iomap_region(TRACE_BAR, c"rvtrace")?;
    let discovered = discover(&bar, bar_length)?;
    let facts = discovered.facts;
    dev_info!(
        pdev,
        "trace block: {} encoder(s) (harts {:#x}), {}funnel, {} KiB of sink memory{}\n",
        discovered.table.encoders().count(),
        facts.harts,
        if facts.has_funnel { "" } else { "no " },
        facts.sink_size / 1024,
        if ram_sink::implementation::HAS_WRAP_COUNT.is_set(discovered.sink_implementation) {
            ", wrap count"
        } else {
            ""
        }
    );
    let bus = Bus {
        bar: bar.into_devres()?,
    };
    let block = Arc::pin_init(
        try_pin_init!(TraceBlock {
            bus,
            table: discovered.table,
            bar_start,
            facts,
            sink: discovered.sink,
            funnel: discovered.table.funnel().map(Component::new),
            has_wrap_count: ram_sink::implementation::HAS_WRAP_COUNT.is_set(discovered.sink_implementation),
            encoder_implementation: discovered.encoder_implementation,
            funnel_implementation: discovered.funnel_implementation,
            sink_implementation: discovered.sink_implementation,
            state <- new_mutex!(State {
                owned: false,
                plan: None,
                running: false,
                progress: None,
                wrapped: false,
                stopped_on_wrap: false,
                overflow_harts: 0,
                context_probes: None,
            }),
            progress <- new_condvar!(),
        }),
        GFP_KERNEL,
    )?;
    // Whatever the block was left in (a previous driver, a crash): every component in
    // reset until an owner starts it.
    block.power_down()?;
    Ok(block)
}

kernel::module_pci_driver! {
    type: RvTraceDriver,
    name: "rvtrace",
    authors: ["rvperf"],
    description: "RISC-V trace block (N-Trace, Trace Control Interface 1.0) driver",
    license: "GPL",
}
