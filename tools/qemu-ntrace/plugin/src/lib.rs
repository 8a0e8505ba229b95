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
//! Every executed block gets two callbacks, each conditional on a per-vCPU scoreboard
//! entry (tested inline by the generated code: a disarmed callback costs no call). The
//! first, while the hart's encoder is enabled, reads the hart's registers and reports the
//! previous block to the encoder (`hart::Hart::observe`). The second, while any
//! component of the trace block is out of reset, applies the guest's register stores
//! (`ntrace_device::TraceBlock::poll`) and this hart's encoder configuration, arming or
//! disarming the first; it reads no register, which keeps it cheap. While every
//! component is in reset, a watcher thread looks at the block every millisecond and arms
//! the second when the guest has stored to it: an idle trace block costs the guest
//! almost nothing (the README's Benchmarks).

mod block;
mod hart;
mod registers;

use std::fs::OpenOptions;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
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
    harts: Vec<Mutex<Hart>>,
    /// Per hart: the configuration generation its state was last polled at, so that an
    /// unchanged configuration costs no lock.
    seen: Vec<AtomicU64>,
    /// Per vCPU: 1 while its encoder is enabled (the observing callback's condition).
    armed: PluginU64,
    /// Per vCPU: 1 while the trace block is not idle (the polling callback's condition).
    polling: PluginU64,
    /// The shared-memory file, mapped for as long as QEMU runs.
    _mapping: MmapRaw,
}

// SAFETY: `armed` and `polling` are handles of QEMU scoreboards (pointers QEMU owns and keeps for the
// plugin's life, and an offset), used only through QEMU's thread-safe accessors; the
// rest is Send and Sync by itself.
unsafe impl Send for State {}
// SAFETY: as above.
unsafe impl Sync for State {}

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
        // SAFETY: scoreboards of one u64 per vCPU, zeroed, owned by QEMU for the
        // plugin's life.
        let (armed, polling) = unsafe {
            (
                qemu_plugin::sys::qemu_plugin_scoreboard_new(8),
                qemu_plugin::sys::qemu_plugin_scoreboard_new(8),
            )
        };
        Ok(Self {
            device,
            harts: (0..harts)
                .map(|index| Mutex::new(Hart::new(index)))
                .collect(),
            seen: (0..harts).map(|_| AtomicU64::new(u64::MAX)).collect(),
            armed: PluginU64 {
                score: armed,
                offset: 0,
            },
            polling: PluginU64 {
                score: polling,
                offset: 0,
            },
            _mapping: mapping,
        })
    }

    fn hart(&self, vcpu: VCPUIndex) -> Option<&Mutex<Hart>> {
        self.harts.get(vcpu as usize)
    }

    /// At the start of every block while the trace block is not idle: the guest's
    /// register stores, then this hart's configuration when it changed; a hart whose
    /// encoder is off stops polling once every component is back in reset.
    fn poll(&self, vcpu: VCPUIndex) {
        self.device.poll();
        let index = vcpu as usize;
        let (Some(hart), Some(seen)) = (self.harts.get(index), self.seen.get(index)) else {
            return;
        };
        let generation = self.device.encoder_generation(index);
        if seen.load(Ordering::Relaxed) != generation {
            if let Ok(mut hart) = hart.lock() {
                let armed = hart.poll(&self.device);
                qemu_plugin::qemu_plugin_u64_set(self.armed, vcpu, u64::from(armed));
                seen.store(generation, Ordering::Relaxed);
            }
        }
        if qemu_plugin::qemu_plugin_u64_get(self.armed, vcpu) == 0 && self.device.is_idle() {
            qemu_plugin::qemu_plugin_u64_set(self.polling, vcpu, 0);
        }
    }

    /// The watcher thread: sweeps the block every [`WATCH_INTERVAL`] and, when the guest
    /// stored to an idle block, has every hart poll it again.
    fn watch(&self) {
        loop {
            std::thread::sleep(WATCH_INTERVAL);
            self.device.sweep();
            if !self.device.is_idle() {
                for vcpu in 0..self.harts.len() {
                    qemu_plugin::qemu_plugin_u64_set(self.polling, vcpu as VCPUIndex, 1);
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
        let block = Arc::new(TranslatedBlock::new(&tb));
        tb.register_conditional_execute_callback_flags(
            move |vcpu| {
                if let Some(hart) = state.hart(vcpu) {
                    if let Ok(mut hart) = hart.lock() {
                        hart.observe(&block, &state.device);
                    }
                }
            },
            CallbackFlags::QEMU_PLUGIN_CB_R_REGS,
            PluginCondition::QEMU_PLUGIN_COND_NE,
            state.armed,
            0,
        );
        tb.register_conditional_execute_callback(
            move |vcpu| state.poll(vcpu),
            PluginCondition::QEMU_PLUGIN_COND_NE,
            state.polling,
            0,
        );
        Ok(())
    }
}

register!(NtracePlugin);
