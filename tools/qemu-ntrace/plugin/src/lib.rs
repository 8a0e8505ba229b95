//! A QEMU TCG plugin that emulates N-Trace hardware for riscv64 guests: an encoder per
//! hart (rvperf's encoder model, fed as the hart's ingress port would feed it), a funnel
//! and a RAM sink, with the RISC-V Trace Control Interface registers, in a shared-memory
//! file the guest sees as an `ivshmem-plain` PCI device's BAR 2 (`docs/trace-device.md`).
//!
//!     qemu-system-riscv64 ... \
//!         -object memory-backend-file,id=rvtrace,share=on,mem-path=/dev/shm/NAME,size=16M \
//!         -device ivshmem-plain,memdev=rvtrace \
//!         -plugin libqemu_ntrace.so,path=/dev/shm/NAME
//!
//! Every executed block gets one callback, conditional on a per-vCPU scoreboard entry
//! (tested inline by the generated code: a disarmed callback costs no call) that says
//! what the hart has to do ([`Mode`]). While the hart's encoder is enabled, it reads the
//! hart's registers and reports the previous block to the encoder
//! (`hart::Hart::observe`); while any component of the trace block is out of reset, it
//! applies the guest's register stores (`ntrace_device::TraceBlock::poll`) and this
//! hart's encoder configuration. While every component is in reset, a watcher thread
//! looks at the block every millisecond and arms the callback when the guest has stored
//! to it: an idle trace block costs the guest almost nothing (the README's Benchmarks).

mod block;
mod hart;
mod registers;

use std::cell::UnsafeCell;
use std::fs::OpenOptions;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use memmap2::MmapRaw;
use ntrace_device::{BlockConfig, SharedMemory, TraceBlock};
use qemu_plugin::install::{Args, Info, Value};
use qemu_plugin::plugin::{HasCallbacks, Register};
use qemu_plugin::{
    register, CallbackFlags, Error, PluginCondition, PluginId, PluginU64, Result, TranslationBlock,
    VCPUIndex,
};

use crate::block::TranslatedBlock;
use crate::hart::Hart;

/// The plugin's state, made when QEMU loads it.
struct State {
    device: TraceBlock,
    harts: Vec<HartCell>,
    /// Per vCPU, a [`Mode`]: the block callback's condition (not [`Mode::Idle`]).
    mode: PluginU64,
    /// The shared-memory file, mapped for as long as QEMU runs.
    _mapping: MmapRaw,
}

// SAFETY: `mode` is the handle of a QEMU scoreboard (a pointer QEMU owns and keeps for
// the plugin's life, and an offset), whose entries are only accessed atomically
// ([`State::mode_of`]); the harts are each used by one vCPU's callbacks alone
// ([`HartCell`]); the rest is Send and Sync by itself.
unsafe impl Send for State {}
// SAFETY: as above.
unsafe impl Sync for State {}

/// What the block callback of a vCPU does, as its scoreboard entry holds it.
#[repr(u64)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// Nothing: no call (the trace block is idle; the watcher thread looks at it).
    Idle = 0,
    /// Polls the trace block's registers.
    Poll = 1,
    /// Observes the hart for its encoder, then polls.
    Observe = 2,
}

/// A hart's state, used without a lock: only the callbacks QEMU runs for that hart's
/// vCPU touch it, and QEMU runs a vCPU's callbacks one at a time, on the thread that
/// executes the vCPU (its own thread with multi-threaded TCG, the one thread of all
/// vCPUs under -icount).
struct HartCell(UnsafeCell<Hart>);

// SAFETY: see the type's documentation: one vCPU's callbacks at a time, so no two
// threads ever hold references to the same hart.
unsafe impl Sync for HartCell {}

static STATE: OnceLock<State> = OnceLock::new();

/// How often the watcher thread sweeps the trace block (restores the words the per-block
/// poll does not watch, applies stores to enabled components' other registers) and, while
/// it is idle, looks for the guest's first store.
const WATCH_INTERVAL: Duration = Duration::from_millis(1);

struct NtracePlugin;

impl Register for NtracePlugin {
    fn register(&mut self, _id: PluginId, args: &Args, info: &Info) -> Result<()> {
        let state = State::new(args, info).map_err(|message| {
            eprintln!("qemu-ntrace: {message}");
            Error::PluginInstanceSetError
        })?;
        STATE
            .set(state)
            .map_err(|_| Error::PluginInstanceSetError)?;
        let state = STATE.get().ok_or(Error::PluginInstanceSetError)?;
        std::thread::Builder::new()
            .name("qemu-ntrace".into())
            .spawn(move || state.watch())
            .map_err(|error| {
                eprintln!("qemu-ntrace: cannot start the watcher thread: {error}");
                Error::PluginInstanceSetError
            })?;
        Ok(())
    }
}

impl State {
    fn new(args: &Args, info: &Info) -> std::result::Result<Self, String> {
        if !info.target_name.starts_with("riscv64") {
            return Err(format!(
                "emulates RISC-V trace hardware, not for {}",
                info.target_name
            ));
        }
        let Some(system) = &info.system else {
            return Err("needs full-system emulation (qemu-system-riscv64)".into());
        };
        let path = match args.parsed.get("path") {
            Some(Value::String(path)) => path.clone(),
            _ => {
                return Err("needs path=FILE, the memory-backend-file of the ivshmem device".into())
            }
        };
        let harts = usize::try_from(system.max_vcpus)
            .ok()
            .filter(|&harts| (1..=8).contains(&harts))
            .ok_or_else(|| format!("supports 1 to 8 harts, not {}", system.max_vcpus))?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|error| format!("cannot open {path}: {error}"))?;
        let mapping =
            MmapRaw::map_raw(&file).map_err(|error| format!("cannot map {path}: {error}"))?;
        let size = mapping.len();
        // SAFETY: the mapping is shared, readable and writable, `size` bytes long, and
        // lives in the state as long as the trace block that uses it. The guest writes
        // the same memory concurrently; SharedMemory only ever accesses it atomically.
        let memory = unsafe { SharedMemory::from_raw(mapping.as_mut_ptr(), size) }
            .map_err(|error| format!("{path}: {error:?}"))?;
        let mut config = BlockConfig::default();
        config.harts = harts;
        config.size = size;
        let device = TraceBlock::new(memory, config)
            .map_err(|error| format!("{path} ({size} bytes): {error}"))?;
        // SAFETY: a scoreboard of one u64 per vCPU, zeroed (Mode::Idle), owned by QEMU
        // for the plugin's life.
        let mode = unsafe { qemu_plugin::sys::qemu_plugin_scoreboard_new(8) };
        Ok(Self {
            device,
            harts: (0..harts)
                .map(|index| HartCell(UnsafeCell::new(Hart::new(index))))
                .collect(),
            mode: PluginU64 {
                score: mode,
                offset: 0,
            },
            _mapping: mapping,
        })
    }

    /// The scoreboard entry of `vcpu`'s [`Mode`], shared with the generated code that
    /// tests it and with the watcher thread.
    fn mode_of(&self, vcpu: VCPUIndex) -> &AtomicU64 {
        // SAFETY: QEMU's scoreboard holds one aligned u64 per vCPU for the plugin's
        // life; its generated code only loads it, the plugin only accesses it through
        // this atomic. (The entries move only when QEMU creates vCPUs, before they run.)
        unsafe {
            let entry = qemu_plugin::sys::qemu_plugin_scoreboard_find(self.mode.score, vcpu);
            &*entry.cast::<AtomicU64>()
        }
    }

    /// At the start of every block of a hart whose [`Mode`] is not idle: the previous
    /// block to the encoder, the guest's register stores, this hart's configuration when
    /// it changed, and the hart's mode from then on.
    fn block_starts(&self, vcpu: VCPUIndex, block: &'static TranslatedBlock) {
        let Some(cell) = self.harts.get(vcpu as usize) else {
            return;
        };
        // SAFETY: this vCPU's callbacks alone use its hart, one at a time (HartCell).
        let hart = unsafe { &mut *cell.0.get() };
        if hart.is_encoding() {
            hart.observe(block, &self.device);
        }
        self.device.poll();
        let encoding = hart.poll(&self.device);
        let mode = if encoding {
            Mode::Observe
        } else if self.device.is_idle() {
            Mode::Idle
        } else {
            Mode::Poll
        };
        let entry = self.mode_of(vcpu);
        match mode {
            // This callback runs only while the entry is not Idle, whatever `hart.mode`
            // says (the watcher arms Idle -> Poll, and the encoder may go from Observe
            // straight to Idle): replace what is there, unless the watcher armed it
            // again in between.
            Mode::Idle => {
                let current = entry.load(Ordering::Relaxed);
                if current != Mode::Idle as u64 {
                    let _ = entry.compare_exchange(
                        current,
                        Mode::Idle as u64,
                        Ordering::Relaxed,
                        Ordering::Relaxed,
                    );
                }
            }
            _ if mode != hart.mode => entry.store(mode as u64, Ordering::Relaxed),
            _ => {}
        }
        hart.mode = mode;
    }

    /// The watcher thread: sweeps the block every [`WATCH_INTERVAL`] and, when the guest
    /// stored to an idle block, has every hart poll it again.
    fn watch(&self) {
        loop {
            std::thread::sleep(WATCH_INTERVAL);
            self.device.sweep();
            if !self.device.is_idle() {
                for vcpu in 0..self.harts.len() {
                    let _ = self.mode_of(vcpu as VCPUIndex).compare_exchange(
                        Mode::Idle as u64,
                        Mode::Poll as u64,
                        Ordering::Relaxed,
                        Ordering::Relaxed,
                    );
                }
            }
        }
    }
}

impl HasCallbacks for NtracePlugin {
    fn on_translation_block_translate(
        &mut self,
        _id: PluginId,
        tb: TranslationBlock,
    ) -> Result<()> {
        let Some(state) = STATE.get() else {
            return Ok(());
        };
        // Kept for good, as QEMU keeps the callback that holds it (a retranslated block's
        // callback is not freed either): harts refer to blocks without counting.
        let block: &'static TranslatedBlock = Box::leak(Box::new(TranslatedBlock::new(&tb)));
        tb.register_conditional_execute_callback_flags(
            move |vcpu| state.block_starts(vcpu, block),
            CallbackFlags::QEMU_PLUGIN_CB_R_REGS,
            PluginCondition::QEMU_PLUGIN_COND_NE,
            state.mode,
            Mode::Idle as u64,
        );
        Ok(())
    }
}

register!(NtracePlugin);
