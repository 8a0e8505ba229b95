//! One hart's ingress port: what it retired, traps and trap returns, privilege, time,
//! fed to its encoder, and the encoder's messages sent into the trace block.
//!
//! QEMU calls the plugin at the start of every executed block, not per instruction, and
//! QEMU 10.0's plugin API has no discontinuity callback. So a block's instructions are
//! reported when the next block starts: if it starts where the last instruction leads,
//! every instruction retired; if not (or if it starts at a trap vector, or the privilege
//! changed without a trap return), a trap was taken, and the trap CSRs of the mode it was
//! taken into say which instruction raised it or where the interrupt came (`xepc`) and
//! why (`xcause`).

use ntrace_device::{Emitted, EncoderConfig, TraceBlock};
use ntrace_flow::{Context, TraceEncoder, Trap};

use crate::block::{Successor, TranslatedBlock};
use crate::registers::{Register, RegisterReader};

/// Privilege levels (the ingress port's *priv*).
const USER: u8 = 0;
const MACHINE: u8 = 3;

/// `xcause` exception codes of the instructions that retire and trap by themselves:
/// breakpoint (`ebreak`), and environment calls from U, S, VS and M mode.
const ENVIRONMENT_CAUSES: [u64; 5] = [3, 8, 9, 10, 11];

/// Bytes of messages a hart's encoder collects before they go to the trace block: one
/// call into the sink per batch instead of per block.
const SEND_BATCH: usize = 256;

/// Whether [`Hart::send`] waits for a batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Flush {
    WhenBatched,
    Now,
}

/// A block that started executing, its instructions not reported yet.
#[derive(Debug)]
struct Executed {
    start: u64,
    block: &'static TranslatedBlock,
}

/// The trap vectors last read (`stvec`, `mtvec`): a block after an indirect jump that
/// starts at one is a trap's handler. Read again at every trap.
#[derive(Clone, Copy, Debug, Default)]
struct Vectors {
    supervisor: Option<u64>,
    machine: Option<u64>,
}

impl Vectors {
    fn is_handler(&self, address: u64) -> bool {
        [self.supervisor, self.machine]
            .into_iter()
            .flatten()
            .any(|vector| is_vector_entry(vector, address))
    }
}

/// Whether `address` is where a trap through `xtvec` = `vector` starts: its base in
/// direct mode, base + 4 × cause for interrupts in vectored mode.
fn is_vector_entry(vector: u64, address: u64) -> bool {
    let base = vector & !3;
    match vector & 3 {
        1 => {
            address >= base
                && address < base.wrapping_add(4 * 64)
                && (address - base).is_multiple_of(4)
        }
        _ => address == base,
    }
}

/// Whether `address` is in the upper half of the virtual address space (bit 63 set),
/// where Linux keeps the kernel and user code never runs.
fn is_upper_half(address: u64) -> bool {
    address >> 63 != 0
}

/// What happened between two executed blocks.
#[derive(Clone, Copy, Debug)]
struct Outcome {
    /// Instructions of the first block that retired.
    retired: usize,
    trap: Option<Trap>,
    /// The privilege level of the second block.
    privilege: u8,
}

/// What the ingress port last reported as the hart's privilege level and context.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Told {
    privilege: u8,
    context: u64,
}

/// One hart, behind a mutex of its own: its callbacks run on its vCPU's thread (or on
/// the one thread of `-icount` emulation).
#[derive(Debug)]
pub struct Hart {
    index: usize,
    registers: RegisterReader,
    /// The trace block's configuration generation this hart last applied.
    generation: u64,
    config: Option<EncoderConfig>,
    /// Present while the encoder is enabled.
    encoder: Option<TraceEncoder<'static>>,
    previous: Option<Executed>,
    /// Whether `previous` is traced (tracing on, the filters matching its privilege).
    traced: bool,
    privilege: u8,
    /// The privilege is known (read since the encoder was enabled).
    privilege_known: bool,
    /// The privilege level and context the encoder was last given (`None`: none since
    /// it was made).
    told: Option<Told>,
    vectors: Vectors,
    /// What trTeEmpty says now.
    empty: bool,
    /// A register could not be read: tracing stopped for good (said once on stderr).
    failed: bool,
    /// A trap was found that the remembered vectors missed (said once on stderr).
    warned_vectors: bool,
    /// What this hart's block callback does, as the plugin last set it.
    pub mode: crate::Mode,
}

impl Hart {
    pub fn new(index: usize) -> Self {
        Self {
            index,
            registers: RegisterReader::new(),
            generation: u64::MAX,
            config: None,
            encoder: None,
            previous: None,
            traced: false,
            privilege: 0,
            privilege_known: false,
            told: None,
            vectors: Vectors::default(),
            empty: true,
            failed: false,
            warned_vectors: false,
            mode: crate::Mode::Idle,
        }
    }

    /// Whether the encoder is enabled (the hart is observed).
    pub fn is_encoding(&self) -> bool {
        self.encoder.is_some()
    }

    /// At the start of every executed block, after [`Self::observe`]: applies a new
    /// configuration of this hart's encoder. Returns whether the hart needs
    /// [`Self::observe`] on its blocks (its encoder is enabled).
    pub fn poll(&mut self, device: &TraceBlock) -> bool {
        let generation = device.encoder_generation(self.index);
        if generation != self.generation {
            self.generation = generation;
            let config = device.encoder_config(self.index);
            self.reconfigure(config, device);
        }
        self.encoder.is_some()
    }

    fn reconfigure(&mut self, config: EncoderConfig, device: &TraceBlock) {
        let running = self.encoder.is_some();
        // The encoder exists while enabled; trTeInstTracing and the filters start and
        // stop its trace (`observe`).
        let enabled = config.active && config.enabled && config.mode.is_some();
        let same_encoding = self
            .config
            .as_ref()
            .is_some_and(|old| old.encoder_options() == config.encoder_options());
        if running && (!enabled || !same_encoding) {
            // trTeEnable 1 -> 0 flushes (so does a change of the encoding while enabled,
            // which starts a new encoder): what the encoder holds goes out, and the block
            // that is starting is not traced. trTeActive 1 -> 0 resets: what the encoder
            // holds is lost.
            let resume = self.previous.as_ref().map(|executed| executed.start);
            if let (Some(encoder), true) = (&mut self.encoder, config.active) {
                if self.traced {
                    let _ = encoder.stop(resume);
                }
                self.send(device, Flush::Now);
            }
            self.encoder = None;
            self.previous = None;
            self.traced = false;
        }
        if enabled && self.encoder.is_none() {
            match TraceEncoder::for_ingress_port(config.encoder_options()) {
                Ok(encoder) => self.encoder = Some(encoder),
                Err(error) => {
                    eprintln!("qemu-ntrace: hart {}: cannot encode: {error}", self.index);
                }
            }
            // The vectors as they are now, so that even the first trap after an
            // indirect jump is told from the jump (a trap re-reads the one it went
            // through; Linux sets stvec once, at boot). Unreadable, they are learnt at
            // the first trap found otherwise.
            if self.encoder.is_some() {
                self.vectors = Vectors {
                    supervisor: self.registers.read(Register::SupervisorTrapVector).ok(),
                    machine: self.registers.read(Register::MachineTrapVector).ok(),
                };
            }
            // The block that is starting was not observed: tracing starts with the next.
            self.previous = None;
            self.traced = false;
            self.privilege_known = false;
            self.told = None;
        }
        self.config = Some(config);
        self.update_empty(device);
    }

    /// Whether the previous block's successor is traced: tracing on and the filters
    /// matching its privilege level.
    fn traces(config: &EncoderConfig, privilege: u8) -> bool {
        config.instruction_tracing && config.privileges.qualifies(privilege)
    }

    /// At the start of every executed block while the encoder is enabled: reports the
    /// previous block's instructions and what came between, and remembers this one.
    pub fn observe(&mut self, block: &'static TranslatedBlock, device: &TraceBlock) {
        if self.failed || self.encoder.is_none() {
            return;
        }
        if let Err(error) = self.observe_registers(block, device) {
            eprintln!(
                "qemu-ntrace: hart {}: {error}; tracing stops on this hart",
                self.index
            );
            self.failed = true;
            self.encoder = None;
        }
        self.send(device, Flush::WhenBatched);
        self.update_empty(device);
    }

    fn observe_registers(
        &mut self,
        block: &'static TranslatedBlock,
        device: &TraceBlock,
    ) -> Result<(), &'static str> {
        let pc = self.where_block_runs(block)?;
        let Some(config) = self.config else {
            return Ok(());
        };
        if config.timestamps.active {
            // The unit counts the hart's `time`; the counter registers show it, and
            // messages carry it when trTsEnable is set.
            let time = self.registers.read(Register::Time)?;
            let stamp = device.set_timestamp(self.index, time);
            if let Some(encoder) = &mut self.encoder {
                encoder.set_time(stamp);
            }
        }
        let outcome = match self.previous.take() {
            Some(previous) => Some((self.outcome(&previous, pc)?, previous)),
            None => {
                if !self.privilege_known {
                    self.privilege = self.read_privilege()?;
                    self.privilege_known = true;
                }
                None
            }
        };
        let privilege = outcome
            .as_ref()
            .map_or(self.privilege, |(outcome, _)| outcome.privilege);
        let traced = Self::traces(&config, privilege);
        // The hart has no scontext: what software stores in the block's stand-in for it
        // (a store in the previous block applies from this one on, as a `csrw scontext`
        // applies from the next instruction).
        let context = if config.context {
            u64::from(device.encoder_context(self.index))
        } else {
            0
        };
        let Some(encoder) = &mut self.encoder else {
            return Ok(());
        };
        let encoded = (|| {
            if let Some((outcome, previous)) = &outcome {
                if self.traced {
                    encoder.retire_block(previous.start, &previous.block.run, outcome.retired)?;
                    match (outcome.trap, traced) {
                        (Some(trap), true) => encoder.trap(trap)?,
                        (Some(trap), false) => encoder.stop(resume_of(trap))?,
                        (None, false) => encoder.stop(Some(pc))?,
                        (None, true) => {}
                    }
                }
            }
            if traced && !self.traced {
                encoder.start();
            }
            let told = Told { privilege, context };
            if traced && self.told != Some(told) {
                encoder.set_context(Context {
                    privilege,
                    virtualized: false,
                    context,
                });
                self.told = Some(told);
            }
            Ok::<(), ntrace_flow::EncodeError>(())
        })();
        if let Err(error) = encoded {
            // An instruction the encoder cannot follow (misaligned): the trace restarts
            // at the next block.
            eprintln!("qemu-ntrace: hart {}: {error}", self.index);
            encoder.messages_lost();
        }
        self.privilege = privilege;
        self.traced = traced;
        self.previous = Some(Executed { start: pc, block });
        Ok(())
    }

    /// Where `block` runs: `pc`, read unless the previous block's last instruction
    /// leaves two addresses at most and the block was translated at one of them. QEMU
    /// finds a block by the physical address of `pc`; a block translated at a possible
    /// successor and run at the other one would need both, a branch's target and its
    /// fall-through, to be one physical address (and a trap's handler is never one of
    /// them), so there the translation address is where it runs.
    fn where_block_runs(&mut self, block: &TranslatedBlock) -> Result<u64, &'static str> {
        let known = self.previous.as_ref().and_then(|previous| {
            match previous.block.successor(previous.start) {
                Some(Successor::Known { first, second })
                    if block.translated_at == first || block.translated_at == second =>
                {
                    Some(block.translated_at)
                }
                _ => None,
            }
        });
        match known {
            Some(pc) => Ok(pc),
            None => self.registers.read(Register::ProgramCounter),
        }
    }

    fn read_privilege(&mut self) -> Result<u8, &'static str> {
        // `priv` holds the privilege level in its low bits (and V above them on a hart
        // with the hypervisor extension).
        Ok((self.registers.read(Register::Privilege)? & 3) as u8)
    }

    /// How many of `previous`'s instructions retired, and whether a trap followed, given
    /// that the next block starts at `pc`.
    fn outcome(&mut self, previous: &Executed, pc: u64) -> Result<Outcome, &'static str> {
        let all = previous.block.run.len();
        let suspicious = match previous.block.successor(previous.start) {
            Some(Successor::Known { first, second }) => pc != first && pc != second,
            Some(Successor::Indirect) => {
                let handler = self.vectors.is_handler(pc);
                // User code jumps only within the user half of the address space: a
                // block in the upper (kernel) half after a user block is a trap's,
                // whatever the vectors remembered say (a two-hart trace once took a
                // trap's handler for the target of a user `jr`; said once if it
                // happens again).
                let into_kernel = self.privilege == USER && is_upper_half(pc);
                if into_kernel && !handler && !self.warned_vectors {
                    self.warned_vectors = true;
                    eprintln!(
                        "qemu-ntrace: hart {}: a user block's indirect jump reached {pc:#x}, \
                         not a trap vector it knew ({:x?}); taken as a trap",
                        self.index, self.vectors
                    );
                }
                handler || into_kernel
            }
            Some(Successor::TrapReturn) => {
                // The privilege changes; an interrupt may also be taken right after.
                let privilege = self.read_privilege()?;
                if !self.vectors.is_handler(pc) {
                    return Ok(Outcome {
                        retired: all,
                        trap: None,
                        privilege,
                    });
                }
                true
            }
            Some(Successor::Trap) | None => true,
        };
        if !suspicious {
            return Ok(Outcome {
                retired: all,
                trap: None,
                privilege: self.privilege,
            });
        }
        // Under -icount, an access to a device in the middle of a block ends it before
        // that instruction, which runs again as the last of a block of its own
        // (cpu_io_recompile): the next block starts at one of this one's instructions,
        // with no trap. (A block that loops to its own start cannot be told apart from
        // one ended at its first instruction; it was taken as a loop above.)
        if let Some(index) = previous.block.index_of(previous.start, pc) {
            if !self.vectors.is_handler(pc) {
                return Ok(Outcome {
                    retired: index,
                    trap: None,
                    privilege: self.privilege,
                });
            }
        }
        let privilege = self.read_privilege()?;
        let (cause, epc) = if privilege == MACHINE {
            let vector = self.registers.read(Register::MachineTrapVector)?;
            self.vectors.machine = Some(vector);
            (
                self.registers.read(Register::MachineCause)?,
                self.registers.read(Register::MachineExceptionPc)?,
            )
        } else {
            let vector = self.registers.read(Register::SupervisorTrapVector)?;
            self.vectors.supervisor = Some(vector);
            (
                self.registers.read(Register::SupervisorCause)?,
                self.registers.read(Register::SupervisorExceptionPc)?,
            )
        };
        let interrupt = cause >> 63 != 0;
        let index = previous.block.index_of(previous.start, epc);
        let (retired, trap) = if interrupt {
            // QEMU takes interrupts between blocks: the whole block retired (epc may be
            // its own first instruction, for a block that loops to itself).
            (all, Trap::Interrupt { resume: epc })
        } else if ENVIRONMENT_CAUSES.contains(&(cause & 0xff)) {
            // ecall/ebreak retire, and raise the exception themselves.
            (
                index.map_or(all, |index| index + 1),
                Trap::Exception { resume: None },
            )
        } else {
            // The instruction at epc raised it and did not retire (at the next block's
            // first instruction when it is not in this one: a fetch fault).
            (index.unwrap_or(all), Trap::Exception { resume: Some(epc) })
        };
        Ok(Outcome {
            retired,
            trap: Some(trap),
            privilege,
        })
    }

    /// Sends what the encoder produced into the trace block, once there is a batch of it
    /// (the funnel takes a few messages of one hart at a time, which the specification
    /// leaves to the implementation); `Flush::Now` sends whatever there is.
    fn send(&mut self, device: &TraceBlock, flush: Flush) {
        let Some(encoder) = &mut self.encoder else {
            return;
        };
        let pending = encoder.output().len();
        if pending == 0 || (flush == Flush::WhenBatched && pending < SEND_BATCH) {
            return;
        }
        match device.emit(self.index, encoder.output()) {
            Emitted::Stored { .. } => encoder.clear_output(),
            // The sink stopped on wrap or is off, or the funnel input is: what the encoder
            // sent is (partly) lost (the device sets trTeInstStallOrOverflow), and its
            // trace restarts after an Error message when it can be stored again.
            Emitted::Stopped { .. } | Emitted::Dropped(_) => encoder.messages_lost(),
        }
    }

    fn update_empty(&mut self, device: &TraceBlock) {
        let empty = self
            .encoder
            .as_ref()
            .is_none_or(|encoder| !encoder.holds_trace() && encoder.output().is_empty());
        if empty != self.empty {
            self.empty = empty;
            device.set_encoder_empty(self.index, empty);
        }
    }
}

/// Where execution would have resumed without `trap` (`None` for ecall/ebreak).
fn resume_of(trap: Trap) -> Option<u64> {
    match trap {
        Trap::Exception { resume } => resume,
        Trap::Interrupt { resume } => Some(resume),
    }
}
