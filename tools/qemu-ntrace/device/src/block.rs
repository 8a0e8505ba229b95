//! The trace block: its registers over shared memory, polled at the start of every
//! executed translation block, and the trace path from the encoders to the sink memory.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use trace_control::component::control::{ACTIVE, ENABLE};
use trace_control::discovery::TABLE_SIZE;
use trace_control::encoder::{control as encoder_control, CONTEXT as ENCODER_CONTEXT};
use trace_control::ram_sink::split_address;
use trace_control::{timestamp, COMPONENT_SIZE};

use crate::encoder::{self, EncoderConfig, EncoderParameters};
use crate::funnel;
use crate::layout::{BlockConfig, Layout, LayoutError, MAX_HARTS};
use crate::memory::SharedMemory;
use crate::sink::{self, PartialWord, SinkMemory};
use crate::timestamp::TimestampCounter;

/// Watched registers of the largest block: every encoder's, the funnel's, the sink's.
const MAX_WATCHED: usize =
    MAX_HARTS * encoder::WATCHED.len() + funnel::WATCHED.len() + sink::WATCHED.len();

/// Bytes per register.
const WORD: usize = 4;

/// What became of the bytes given to [`TraceBlock::emit`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Emitted {
    /// Every byte went to the sink (the last word may still be buffered: trRamEmpty = 0).
    /// `wrapped`: the write pointer went past trRamLimit back to trRamStart (trRamWrap).
    Stored { wrapped: bool },
    /// trRamStopOnWrap: the buffer filled after the first `stored` bytes; the sink
    /// stopped (trRamEnable = 0) and the rest was dropped. trTeInstStallOrOverflow is set.
    Stopped { stored: usize },
    /// Nothing was stored. Except for a disabled funnel input, trTeInstStallOrOverflow
    /// is set.
    Dropped(DropReason),
}

/// Why [`TraceBlock::emit`] stored nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropReason {
    /// trFunnelDisInput disables the hart's input (messages are read and discarded).
    FunnelInputDisabled,
    /// The funnel is not active and enabled.
    FunnelDisabled,
    /// The sink is not active and enabled (or stopped on wrap).
    SinkDisabled,
}

/// A register the poll compares: where it is and the legal value last written there.
/// Eight bytes, so that the poll's loop reads few cache lines.
#[derive(Debug)]
struct Watched {
    /// Byte offset in the block / 4: the index in [`SharedMemory::words`] (a block's
    /// registers are in its first pages, far below 16 GiB).
    word: u32,
    legal: AtomicU32,
}

impl Watched {
    /// Byte offset in the block.
    fn offset(&self) -> usize {
        self.word as usize * WORD
    }
}

/// What belongs to one hart, on a cache line of its own: its thread reads `generation`
/// at every block and takes `timestamp` when it reports `time`.
#[derive(Debug)]
#[repr(align(64))]
struct Hart {
    /// Changes whenever the encoder's effective configuration does.
    generation: AtomicU64,
    /// trTeEmpty as the plugin last reported it.
    empty: AtomicBool,
    timestamp: Mutex<TimestampCounter>,
}

/// State changed only with the block's lock held.
#[derive(Debug)]
struct Model {
    configs: Vec<EncoderConfig>,
    partial: PartialWord,
}

/// The emulated trace block over shared memory (`docs/trace-device.md`).
///
/// Every method takes `&self` and may be called from any vCPU thread. [`Self::poll`] is
/// lock-free while no register changed; everything that changes state takes one lock, so
/// register updates and sink writes are serialised.
#[derive(Debug)]
pub struct TraceBlock {
    memory: SharedMemory,
    layout: Layout,
    config: BlockConfig,
    encoder_parameters: EncoderParameters,
    sink_memory: SinkMemory,
    /// Every encoder's registers, then the funnel's, then the sink's.
    watched: Box<[Watched]>,
    /// Each component's range of `watched`, control register first.
    components: Box<[Range<usize>]>,
    harts: Box<[Hart]>,
    /// The discovery table's page as words.
    table: Box<[u32]>,
    model: Mutex<Model>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic on another thread leaves register values that are each legal: go on.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl TraceBlock {
    /// Lays the block out in `memory` (zeroed first) and writes its discovery table and
    /// every register's reset value: all components in reset (tr??Active = 0).
    pub fn new(memory: SharedMemory, config: BlockConfig) -> Result<TraceBlock, LayoutError> {
        let layout = Layout::new(&config)?;
        if memory.len() < layout.size() {
            return Err(LayoutError::MemoryTooSmall {
                size: layout.size(),
                memory: memory.len(),
            });
        }
        for offset in (0..layout.size()).step_by(WORD) {
            memory.store(offset, 0);
        }
        let mut page = vec![0u8; TABLE_SIZE];
        layout
            .discovery_table(config.return_stack_depth)
            .write(&mut page)
            .expect("the table of a laid-out block is valid");
        memory.write_bytes(0, &page);
        let table = page
            .chunks_exact(WORD)
            .map(|word| u32::from_le_bytes([word[0], word[1], word[2], word[3]]))
            .collect();

        let encoder_parameters = EncoderParameters {
            return_stack_depth: config.return_stack_depth,
        };
        let sink_range = layout.sink_memory();
        let sink_memory = SinkMemory {
            start: sink_range.start as u64,
            end: sink_range.end as u64,
        };
        let mut watched = Vec::new();
        let mut watch = |base: usize, offsets: &[usize], values: &[u32]| {
            for (&offset, &value) in offsets.iter().zip(values) {
                memory.store(base + offset, value);
                watched.push(Watched {
                    word: ((base + offset) / WORD) as u32,
                    legal: AtomicU32::new(value),
                });
            }
        };
        let encoder_reset = encoder::reset(&encoder_parameters, false);
        for hart in 0..layout.harts() {
            watch(layout.encoder(hart), &encoder::WATCHED, &encoder_reset);
        }
        if let Some(base) = layout.funnel() {
            watch(base, &funnel::WATCHED, &funnel::reset(false));
        }
        watch(
            layout.ram_sink(),
            &sink::WATCHED,
            &sink::reset(&sink_memory, false),
        );

        let harts = (0..layout.harts())
            .map(|_| Hart {
                generation: AtomicU64::new(1),
                empty: AtomicBool::new(true),
                timestamp: Mutex::new(TimestampCounter::new()),
            })
            .collect();
        let config_at_reset = EncoderConfig::from_registers(&encoder_reset, &encoder_parameters);
        Ok(TraceBlock {
            memory,
            layout,
            config,
            encoder_parameters,
            sink_memory,
            components: TraceBlock::components(&layout),
            watched: watched.into_boxed_slice(),
            harts,
            table,
            model: Mutex::new(Model {
                configs: vec![config_at_reset; layout.harts()],
                partial: PartialWord::default(),
            }),
        })
    }

    /// The shared memory (what the guest sees).
    pub fn memory(&self) -> &SharedMemory {
        &self.memory
    }

    /// Where the table, the registers and the sink memory are.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The configuration the block was made with.
    pub fn config(&self) -> &BlockConfig {
        &self.config
    }

    /// Applies the guest's register stores since the last poll: legalises them, carries
    /// out their effects (resets, flushes, timestamp changes) and writes back the legal
    /// values. Call it at the start of every executed translation block, of every hart.
    ///
    /// While no watched register changed it takes no lock and makes two relaxed loads
    /// (memory and last legal value) per watched register: the control register of each
    /// component, and while it is active (out of reset) and not enabled the others, 9
    /// registers per encoder, 3 for the funnel, 10 for the sink. In reset, stores to
    /// registers other than control are ignored lazily (the specification leaves
    /// accesses to them unspecified): undone at the release from reset or by a sweep.
    /// While enabled, stores to them (which the specification leaves undefined too: a
    /// component is configured before it is enabled) take effect at the next store to a
    /// control register or the next sweep, which keeps the poll of a tracing block at a
    /// load or two per component. Returns whether it found stores to apply.
    pub fn poll(&self) -> bool {
        if self.stores_pending() {
            self.poll_changed();
            return true;
        }
        false
    }

    /// Whether every component is in reset and no store is waiting: nothing for the
    /// per-block poll to do until the guest stores again (then a sweep finds it).
    pub fn is_idle(&self) -> bool {
        let words = self.memory.words();
        self.components.iter().all(|component| {
            let control = &self.watched[component.start];
            let legal = control.legal.load(Ordering::Relaxed);
            !ACTIVE.is_set(legal)
                && u32::from_le(words[control.word as usize].load(Ordering::Relaxed)) == legal
        })
    }

    /// Whether a register the poll watches differs from its legal value: a guest store
    /// to apply.
    fn stores_pending(&self) -> bool {
        let words = self.memory.words();
        // No early exit: a branch-free fold over a few registers is faster than a compare
        // and branch per register, and it almost never finds anything.
        let changed = |registers: &[Watched]| {
            registers.iter().fold(0, |difference, register| {
                let stored = u32::from_le(words[register.word as usize].load(Ordering::Relaxed));
                difference | (stored ^ register.legal.load(Ordering::Relaxed))
            })
        };
        let mut difference = 0;
        for component in self.components.iter() {
            let (control, others) = self.watched[component.clone()].split_at(1);
            difference |= changed(control);
            let legal = control[0].legal.load(Ordering::Relaxed);
            if ACTIVE.is_set(legal) && !ENABLE.is_set(legal) {
                difference |= changed(others);
            }
        }
        difference != 0
    }

    #[cold]
    #[inline(never)]
    fn poll_changed(&self) {
        let mut model = lock(&self.model);
        self.sync(&mut model, &mut |_| {});
    }

    /// Applies pending guest stores before an update of the block's own (lock held), so
    /// that it acts on the registers as the guest last set them.
    fn apply_pending_stores(&self, model: &mut Model) {
        if self.stores_pending() {
            self.sync(model, &mut |_| {});
        }
    }

    /// Restores every word the poll does not look at: reserved and unimplemented
    /// registers to 0, trTsCounter to the counter, the discovery table to itself, the
    /// registers of components in reset to their reset values. The poll does this
    /// whenever it finds a guest store; the plugin calls it now and then as well, so that
    /// a store to nothing but such words is undone too. Reads a few thousand words: not
    /// for every block.
    pub fn sweep(&self) {
        let mut model = lock(&self.model);
        // A sync that finds a store sweeps too.
        if !self.sync(&mut model, &mut |_| {}) {
            self.sweep_locked();
        }
    }

    /// The effective configuration of `hart`'s encoder. Read
    /// [`Self::encoder_generation`] first: a change in between changes the generation
    /// again.
    ///
    /// # Panics
    ///
    /// If `hart` is not below the block's number of harts (so do the other methods taking
    /// a hart).
    pub fn encoder_config(&self, hart: usize) -> EncoderConfig {
        assert!(
            hart < self.harts.len(),
            "hart {hart} of a block of {} harts",
            self.harts.len()
        );
        lock(&self.model).configs[hart]
    }

    /// A number that changes whenever [`Self::encoder_config`] of `hart` does, and only
    /// then (status bits such as trTeEmpty or trTeInstStallOrOverflow are not
    /// configuration).
    pub fn encoder_generation(&self, hart: usize) -> u64 {
        self.harts[hart].generation.load(Ordering::Acquire)
    }

    /// Reports whether `hart`'s encoder holds no trace (trTeEmpty). Cheap when it did not
    /// change. Ignored in reset, where trTeEmpty reads 1.
    pub fn set_encoder_empty(&self, hart: usize, empty: bool) {
        let state = &self.harts[hart];
        if state.empty.load(Ordering::Relaxed) == empty {
            return;
        }
        let mut model = lock(&self.model);
        self.apply_pending_stores(&mut model);
        state.empty.store(empty, Ordering::Relaxed);
        let base = self.encoder_slots(hart).start;
        let old: encoder::Registers = self.legal(base);
        if encoder_control::ACTIVE.is_set(old[encoder::CONTROL]) {
            let mut new = old;
            new[encoder::CONTROL] = encoder_control::EMPTY.with(old[encoder::CONTROL], empty);
            self.publish(base, &old, &new);
        }
    }

    /// Reports that `hart`'s encoder lost trace: sets trTeInstStallOrOverflow (of an
    /// active encoder). [`Self::emit`] does this itself when it drops a message.
    pub fn report_encoder_overflow(&self, hart: usize) {
        let control = &self.watched[self.encoder_slots(hart).start + encoder::CONTROL];
        if encoder_control::INSTRUCTION_STALL_OR_OVERFLOW
            .is_set(control.legal.load(Ordering::Relaxed))
        {
            return;
        }
        let mut model = lock(&self.model);
        self.apply_pending_stores(&mut model);
        self.set_overflow(hart);
    }

    /// Reports `hart`'s `time` CSR; returns the timestamp counter (trTsCounter, also
    /// written to its registers): `time` / 4^trTsPrescale minus the offset trTsReset and
    /// stopping the count (trTsCount = 0) make, 0 while the unit is in reset.
    pub fn set_timestamp(&self, hart: usize, time: u64) -> u64 {
        let mut counter = lock(&self.harts[hart].timestamp);
        let before = counter.value();
        let value = counter.sample(time);
        if value != before {
            self.publish_counter(hart, value);
        }
        value
    }

    /// What the guest last stored in `hart`'s stand-in context register
    /// (`trace_control::encoder::CONTEXT`), the hart's `scontext` for Ownership
    /// messages: a load, cheap enough for every block. 0 in reset.
    pub fn encoder_context(&self, hart: usize) -> u32 {
        self.memory
            .load(self.layout.encoder(hart) + ENCODER_CONTEXT)
    }

    /// The timestamp counter of `hart` at its last [`Self::set_timestamp`] (or register
    /// change): the value messages carry.
    pub fn timestamp(&self, hart: usize) -> u64 {
        lock(&self.harts[hart].timestamp).value()
    }

    /// Sends one whole message (or several) from `hart`'s encoder: through the funnel
    /// (with more than one hart) to the RAM sink, which writes it at trRamWP. The bytes of
    /// one call stay together in the sink memory: calls are serialised. The encoder's own
    /// registers are not looked at: after trTeEnable 1 → 0 its flush must get through.
    pub fn emit(&self, hart: usize, bytes: &[u8]) -> Emitted {
        assert!(
            hart < self.harts.len(),
            "hart {hart} of a block of {} harts",
            self.harts.len()
        );
        let mut model = lock(&self.model);
        self.apply_pending_stores(&mut model);
        if let Some(slots) = self.funnel_slots() {
            if let Err(reason) = funnel::passes(&self.legal(slots.start), hart) {
                return self.dropped(hart, reason);
            }
        }
        let base = self.sink_slots().start;
        let old: sink::Registers = self.legal(base);
        if !sink::enabled(&old) {
            return self.dropped(hart, DropReason::SinkDisabled);
        }
        let mut new = old;
        let stored = sink::store(
            &self.memory,
            &mut new,
            &self.sink_memory,
            &mut model.partial,
            bytes,
        );
        self.publish(base, &old, &new);
        if stored.stopped {
            // The sink left the enabled state: stores to its other registers made while
            // it was enabled take effect now, as a store to its control would apply
            // them, not at some later poll (until which the guest would read them back
            // unlegalised).
            self.apply_pending_stores(&mut model);
            self.set_overflow(hart);
            Emitted::Stopped {
                stored: stored.bytes,
            }
        } else {
            Emitted::Stored {
                wrapped: stored.wrapped,
            }
        }
    }

    fn dropped(&self, hart: usize, reason: DropReason) -> Emitted {
        if reason != DropReason::FunnelInputDisabled {
            self.set_overflow(hart);
        }
        Emitted::Dropped(reason)
    }

    /// Sets trTeInstStallOrOverflow of `hart`'s encoder if it is active. Lock held.
    fn set_overflow(&self, hart: usize) {
        let base = self.encoder_slots(hart).start;
        let old: encoder::Registers = self.legal(base);
        let control = old[encoder::CONTROL];
        if encoder_control::ACTIVE.is_set(control)
            && !encoder_control::INSTRUCTION_STALL_OR_OVERFLOW.is_set(control)
        {
            let mut new = old;
            new[encoder::CONTROL] =
                encoder_control::INSTRUCTION_STALL_OR_OVERFLOW.with(control, true);
            self.publish(base, &old, &new);
        }
    }

    /// Each component's range of `watched`.
    fn components(layout: &Layout) -> Box<[Range<usize>]> {
        let mut components = Vec::new();
        let mut add = |registers: usize| {
            let start = components.last().map_or(0, |last: &Range<usize>| last.end);
            components.push(start..start + registers);
        };
        for _ in 0..layout.harts() {
            add(encoder::WATCHED.len());
        }
        if layout.has_funnel() {
            add(funnel::WATCHED.len());
        }
        add(sink::WATCHED.len());
        components.into_boxed_slice()
    }

    fn encoder_slots(&self, hart: usize) -> Range<usize> {
        assert!(
            hart < self.harts.len(),
            "hart {hart} of a block of {} harts",
            self.harts.len()
        );
        let start = hart * encoder::WATCHED.len();
        start..start + encoder::WATCHED.len()
    }

    fn funnel_slots(&self) -> Option<Range<usize>> {
        let start = self.harts.len() * encoder::WATCHED.len();
        self.layout
            .has_funnel()
            .then(|| start..start + funnel::WATCHED.len())
    }

    fn sink_slots(&self) -> Range<usize> {
        let end = self.watched.len();
        end - sink::WATCHED.len()..end
    }

    /// The legal values of the `N` watched registers from slot `start`.
    fn legal<const N: usize>(&self, start: usize) -> [u32; N] {
        std::array::from_fn(|index| self.watched[start + index].legal.load(Ordering::Relaxed))
    }

    /// Makes `new` the legal values of the registers from slot `start`, writing each that
    /// differs from `expected` (what memory held when we looked) with compare-and-swap:
    /// if the guest stored meanwhile, its value stays, for the next poll to legalise.
    fn publish(&self, start: usize, expected: &[u32], new: &[u32]) {
        for (register, (&expected, &new)) in
            self.watched[start..].iter().zip(expected.iter().zip(new))
        {
            if expected != new {
                // Failure is the guest's later store, kept on purpose.
                let _ = self
                    .memory
                    .compare_exchange(register.offset(), expected, new);
            }
            register.legal.store(new, Ordering::Relaxed);
        }
    }

    fn publish_counter(&self, hart: usize, value: u64) {
        let base = self.layout.encoder(hart);
        let (low, high) = split_address(value);
        self.memory.store(base + timestamp::COUNTER_LOW, low);
        self.memory.store(base + timestamp::COUNTER_HIGH, high);
    }

    /// The latest `time` any hart reported: the harts share the platform timer, so the
    /// thread applying a register store (whose own hart is running) stands for "now".
    fn now(&self) -> u64 {
        self.harts
            .iter()
            .map(|hart| lock(&hart.timestamp).time())
            .max()
            .unwrap_or(0)
    }

    /// Applies the guest's stores to watched registers (see [`Self::poll`]); returns
    /// whether there were any. `between` runs after the registers were read and before
    /// the legal values are written back: tests store there as a racing guest would.
    fn sync(&self, model: &mut Model, between: &mut dyn FnMut(&SharedMemory)) -> bool {
        let mut written = [0u32; MAX_WATCHED];
        let mut changed = false;
        for (value, register) in written.iter_mut().zip(self.watched.iter()) {
            *value = self.memory.load(register.offset());
            changed |= *value != register.legal.load(Ordering::Relaxed);
        }
        if !changed {
            return false;
        }
        between(&self.memory);

        let mut now = None;
        for hart in 0..self.harts.len() {
            let start = self.encoder_slots(hart).start;
            let old: encoder::Registers = self.legal(start);
            let stored: encoder::Registers = std::array::from_fn(|index| written[start + index]);
            if stored == old {
                continue;
            }
            let new = encoder::apply(&old, &stored, &self.encoder_parameters);
            self.publish(start, &stored, &new);
            let active = |registers: &encoder::Registers| {
                encoder_control::ACTIVE.is_set(registers[encoder::CONTROL])
            };
            if !active(&new) || !active(&old) {
                // Into or out of reset the encoder is empty (trTeEmpty reads 1); the plugin
                // discards what it held when the configuration says so.
                self.harts[hart].empty.store(true, Ordering::Relaxed);
            }
            let reset_counter = encoder::timestamp_reset_requested(&old, &stored, &new);
            let timestamp_control = (
                old[encoder::TIMESTAMP_CONTROL],
                new[encoder::TIMESTAMP_CONTROL],
            );
            if timestamp_control.0 != timestamp_control.1 || reset_counter {
                let now = *now.get_or_insert_with(|| self.now());
                let mut counter = lock(&self.harts[hart].timestamp);
                counter.control_changed(
                    timestamp_control.0,
                    timestamp_control.1,
                    reset_counter,
                    now,
                );
                self.publish_counter(hart, counter.value());
            }
            let config = EncoderConfig::from_registers(&new, &self.encoder_parameters);
            if model.configs[hart] != config {
                model.configs[hart] = config;
                self.harts[hart].generation.fetch_add(1, Ordering::Release);
            }
        }

        if let Some(slots) = self.funnel_slots() {
            let old: funnel::Registers = self.legal(slots.start);
            let stored: funnel::Registers =
                std::array::from_fn(|index| written[slots.start + index]);
            if stored != old {
                self.publish(
                    slots.start,
                    &stored,
                    &funnel::apply(&old, &stored, self.harts.len()),
                );
            }
        }

        let start = self.sink_slots().start;
        let old: sink::Registers = self.legal(start);
        let stored: sink::Registers = std::array::from_fn(|index| written[start + index]);
        if stored != old {
            let mut new = sink::apply(&old, &stored, &self.sink_memory);
            if !sink::is_active(&new) || !sink::is_active(&old) {
                // Into or out of reset: buffered bytes are lost.
                model.partial.clear();
            } else if sink::enabled(&old) && !sink::enabled(&new) {
                sink::flush(
                    &self.memory,
                    &mut new,
                    &self.sink_memory,
                    &mut model.partial,
                );
            }
            self.publish(start, &stored, &new);
        }

        self.sweep_locked();
        true
    }

    /// See [`Self::sweep`]. Lock held.
    fn sweep_locked(&self) {
        for (index, &word) in self.table.iter().enumerate() {
            self.restore(index * WORD, word);
        }
        for hart in 0..self.harts.len() {
            let base = self.layout.encoder(hart);
            let (low, high) = split_address(lock(&self.harts[hart].timestamp).value());
            let active = encoder_control::ACTIVE.is_set(
                self.watched[self.encoder_slots(hart).start]
                    .legal
                    .load(Ordering::Relaxed),
            );
            self.restore_page(base, &encoder::WATCHED, |offset| match offset {
                timestamp::COUNTER_LOW => Some(low),
                timestamp::COUNTER_HIGH => Some(high),
                // The stand-in context register holds what the guest stores while the
                // encoder is active, and 0 in reset.
                ENCODER_CONTEXT if active => None,
                _ => Some(0),
            });
        }
        if let Some(base) = self.layout.funnel() {
            self.restore_page(base, &funnel::WATCHED, |_| Some(0));
        }
        self.restore_page(self.layout.ram_sink(), &sink::WATCHED, |_| Some(0));
    }

    /// Restores every word of the register page at `base` but the `watched` ones and
    /// those `value` leaves to the guest (`None`).
    fn restore_page(&self, base: usize, watched: &[usize], value: impl Fn(usize) -> Option<u32>) {
        for offset in (0..COMPONENT_SIZE).step_by(WORD) {
            if watched.contains(&offset) {
                continue;
            }
            if let Some(value) = value(offset) {
                self.restore(base + offset, value);
            }
        }
    }

    fn restore(&self, offset: usize, value: u32) {
        let current = self.memory.load(offset);
        if current != value {
            // A failure is a guest store since the load: undone at the next sweep.
            let _ = self.memory.compare_exchange(offset, current, value);
        }
    }

    /// [`Self::poll`] with `between` run after the registers were read and before the
    /// legal values are written back.
    #[cfg(test)]
    pub(crate) fn poll_racing(&self, mut between: impl FnMut(&SharedMemory)) -> bool {
        let mut model = lock(&self.model);
        self.sync(&mut model, &mut between)
    }
}
