//! A model of an N-Trace encoder: retired instructions in, N-Trace bytes out.
//!
//! It behaves like the ingress port plus encoder of chapter 10: every retired
//! instruction adds to I-CNT; branches add HIST bits (HTM) or DirectBranch messages
//! (BTM); uninferable jumps, traps and trap returns send their target. The target of
//! instruction N is known when instruction N+1 retires, so the encoder keeps one
//! instruction of look-ahead, as hardware does ("an address emitted is known at the next
//! ingress port cycle").
//!
//! Instructions arrive two ways: by address, decoded from the ELF files of a
//! [`CodeImage`] ([`TraceEncoder::retire`], for `rvperf-tracegen`'s replay of a QEMU
//! log), or already decoded, as a hart's ingress port reports them
//! ([`TraceEncoder::retire_instruction`], and [`TraceEncoder::retire_block`] for a run of
//! them, the emulated hardware's path). The ingress port also says what only the hart
//! knows: that a trap was taken and where execution would have resumed
//! ([`TraceEncoder::trap`]), the privilege and context ([`TraceEncoder::set_context`]),
//! the time ([`TraceEncoder::set_time`]), that tracing stops and starts
//! ([`TraceEncoder::stop`], [`TraceEncoder::start`]) and that the sink lost messages
//! ([`TraceEncoder::messages_lost`]).

use code_image::CodeImage;
use ntrace_message::{
    Body, BranchType, CorrelationEvent, MessageEncoder, MessageOptions, Process, ProcessFormat,
    ResourceFull, SyncReason,
};
use riscv_insn::{ControlFlow, Instruction, Itype};

use crate::block::{decode_at, file_info, xlen_mask, BlockError, FileDecodeInfo};
use crate::return_stack::ReturnStack;

/// Conditional branch reporting (chapter 5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BranchMode {
    /// Branch Trace Messaging: a DirectBranch message per taken branch.
    Btm,
    /// History Trace Messaging: one HIST bit per branch.
    Htm,
}

/// Options of [`TraceEncoder`], named after the trace control bits they model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct EncoderOptions {
    /// trTeInstMode.
    pub mode: BranchMode,
    /// SRC width (trTeSrcBits), timestamps (trTsEnable), MSB extension (trTeInstExtendAddrMSB).
    pub message: MessageOptions,
    /// trTeSrcID.
    pub src: u16,
    /// Implicit-return stack depth (trTeInstImplicitReturnMode=3); 0 reports every return.
    pub return_stack_depth: usize,
    /// ResourceFull RCODE 2 for identical consecutive HIST overflows (trTeInstEnRepeatedHistory).
    pub repeated_history: bool,
    /// RepeatBranch for identical consecutive branch messages.
    pub repeat_branch: bool,
    /// Sequential jump optimisation (trTeInstEnSequentialJump).
    pub sequential_jumps: bool,
    /// Direct jumps and calls reported as taken branches: a HIST bit (HTM) or a
    /// DirectBranch message (BTM) each (trTeInstEnAllJumps).
    pub all_jumps: bool,
    /// HIST register width including the stop bit (2..=32).
    pub hist_bits: u8,
    /// I-CNT counter width in bits (2..=22); the count is reported before it would exceed it.
    pub icnt_bits: u8,
    /// Periodic synchronisation every this many messages (0: never; trTeInstSyncMode 1).
    pub periodic_sync: u32,
    /// Periodic synchronisation every this many instruction half-words (0: never;
    /// trTeInstSyncMode 3). The synchronisation comes with the next message that can
    /// carry one (a taken branch in BTM, an address message).
    pub periodic_sync_units: u64,
    /// When set, Ownership messages (U-mode, this scontext) follow every synchronisation.
    pub context: Option<u64>,
    /// Report `ecall`/`ebreak` as an uninferable call (B-TYPE 0, return address pushed)
    /// instead of an exception (B-TYPE 2), as the N-Trace reference encoder does.
    pub environment_call_as_jump: bool,
}

impl Default for EncoderOptions {
    fn default() -> Self {
        Self {
            mode: BranchMode::Htm,
            message: MessageOptions::default(),
            src: 0,
            return_stack_depth: 32,
            repeated_history: true,
            repeat_branch: true,
            sequential_jumps: false,
            all_jumps: false,
            hist_bits: 32,
            icnt_bits: 22,
            periodic_sync: 0,
            periodic_sync_units: 0,
            context: None,
            environment_call_as_jump: false,
        }
    }
}

/// Why the encoder could not follow the instruction stream.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    #[error("retired instruction #{index} at {address:#x} is outside every ELF")]
    Unmapped { index: u64, address: u64 },
    #[error("retired instruction #{index} at {address:#x} cannot be decoded")]
    Undecodable { index: u64, address: u64 },
    #[error("retired instruction #{index} at {address:#x} is not 2-byte aligned")]
    Misaligned { index: u64, address: u64 },
    #[error("invalid encoder options: {0}")]
    Options(&'static str),
    #[error(transparent)]
    Message(#[from] ntrace_message::EncodeError),
}

/// What the encoder produced.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct EncoderStatistics {
    pub instructions: u64,
    pub messages: u64,
    pub bytes: u64,
    pub sync_messages: u64,
    pub implicit_returns: u64,
    /// Indirect jumps left out because a constant load just before gave their target.
    pub sequential_jumps: u64,
    pub repeated_branches: u64,
    pub repeated_histories: u64,
}

/// Identifies a branch message for RepeatBranch detection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct BranchKey {
    tcode: u8,
    btype: u8,
    icnt: u64,
    hist: u64,
    target: u64,
}

/// How the next retired instruction starts the trace (the SYNC of its ProgTraceSync).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Start {
    /// Already tracing.
    Tracing,
    /// The first instruction traced since the encoder was made (SYNC=3, exit from debug
    /// mode, as a capture started by a debugger is).
    First,
    /// Tracing enabled again after it was stopped (SYNC=5, trace enable).
    Enabled,
    /// After messages were lost: an Error message, then SYNC=7 (restart from FIFO
    /// overrun).
    AfterLoss,
}

/// A trap taken after the pending instruction, as the ingress port reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trap {
    /// A synchronous exception. `resume` is the instruction that raised it (it did not
    /// retire), or `None` for `ecall`/`ebreak`, which retire and raise it themselves.
    Exception { resume: Option<u64> },
    /// An interrupt, taken before the instruction at `resume` (`xepc`).
    Interrupt { resume: u64 },
}

/// The privilege level and context the ingress port reports (N-Trace Ownership message).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Context {
    /// 0 user, 1 supervisor, 3 machine (the ingress port's *priv*).
    pub privilege: u8,
    /// Virtualisation mode (V=1).
    pub virtualized: bool,
    /// `scontext` (or the process identifier the system uses as context).
    pub context: u64,
}

/// The instruction retired last, waiting for the next to tell where it went.
#[derive(Clone, Copy, Debug)]
struct Pending {
    address: u64,
    instruction: Instruction,
    /// Zcmt jump vector table base, when known.
    jump_table: Option<u64>,
}

/// A run of instructions a hart executes one after another, the last possibly a control
/// transfer: what the hardware model's ingress port reports per translation block.
/// Made once when the block is translated; retired with [`TraceEncoder::retire_block`]
/// wherever it executes (the same code can run at several addresses).
#[derive(Clone, Debug)]
pub struct InstructionRun {
    /// Each instruction and its offset from the run's first.
    instructions: Vec<(u32, Instruction)>,
    /// Half-words (I-CNT units) of the first `n` instructions, for every `n`.
    units_before: Vec<u64>,
    /// Whether every instruction before the last is sequential (no control transfer), so
    /// that a prefix can be counted in one step.
    sequential_prefix: bool,
}

impl InstructionRun {
    pub fn new(instructions: Vec<(u32, Instruction)>) -> Self {
        let mut units_before = Vec::with_capacity(instructions.len() + 1);
        let mut units = 0u64;
        units_before.push(0);
        for (_, instruction) in &instructions {
            units += u64::from(instruction.length / 2);
            units_before.push(units);
        }
        let sequential_prefix = instructions
            .iter()
            .rev()
            .skip(1)
            .all(|(_, instruction)| instruction.control_flow == ControlFlow::Sequential);
        Self {
            instructions,
            units_before,
            sequential_prefix,
        }
    }

    pub fn len(&self) -> usize {
        self.instructions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.instructions.is_empty()
    }

    /// Each instruction with its offset from the first.
    pub fn instructions(&self) -> &[(u32, Instruction)] {
        &self.instructions
    }
}

#[derive(Debug)]
pub struct TraceEncoder<'a> {
    /// The code the addresses given to [`Self::retire`] are decoded from.
    image: Option<&'a CodeImage>,
    files: Vec<FileDecodeInfo>,
    options: EncoderOptions,
    writer: MessageEncoder,
    output: Vec<u8>,
    start: Start,
    /// Stopped by [`Self::stop`]: nothing is reported until [`Self::start`].
    stopped: bool,
    pending: Option<Pending>,
    trap: Option<Trap>,
    /// Reported (Ownership) and reported next.
    context: Option<Context>,
    next_context: Option<Context>,
    /// The time set by [`Self::set_time`]; otherwise one tick per instruction.
    external_time: bool,
    icnt: u64,
    icnt_limit: u64,
    hist: u64,
    hist_full: u64,
    last_address: u64,
    stack: ReturnStack,
    /// The register and value loaded by the previous instruction, if nothing was sent since.
    constant: Option<(u8, u64)>,
    held_hist: Option<(u64, u64)>,
    last_branch: Option<BranchKey>,
    repeats: u64,
    messages_since_sync: u32,
    /// Half-words retired since the last synchronisation.
    units_since_sync: u64,
    time: u64,
    last_time: u64,
    statistics: EncoderStatistics,
}

impl<'a> TraceEncoder<'a> {
    /// An encoder of the instructions of `image`, given by address ([`Self::retire`]).
    pub fn new(
        image: &'a CodeImage,
        files: Vec<FileDecodeInfo>,
        options: EncoderOptions,
    ) -> Result<Self, EncodeError> {
        Self::make(Some(image), files, options)
    }

    /// An encoder fed decoded instructions ([`Self::retire_instruction`],
    /// [`Self::retire_block`]), as a hart's ingress port feeds one.
    pub fn for_ingress_port(options: EncoderOptions) -> Result<TraceEncoder<'static>, EncodeError> {
        TraceEncoder::make(None, Vec::new(), options)
    }

    fn make(
        image: Option<&'a CodeImage>,
        files: Vec<FileDecodeInfo>,
        options: EncoderOptions,
    ) -> Result<Self, EncodeError> {
        if !(2..=32).contains(&options.hist_bits) {
            return Err(EncodeError::Options("hist_bits must be 2..=32"));
        }
        if !(2..=22).contains(&options.icnt_bits) {
            return Err(EncodeError::Options("icnt_bits must be 2..=22"));
        }
        if options.return_stack_depth > 32 {
            return Err(EncodeError::Options(
                "return stack depth is at most 32 (spec 9.2)",
            ));
        }
        Ok(Self {
            image,
            files,
            options,
            writer: MessageEncoder::new(options.message),
            output: Vec::new(),
            start: Start::First,
            stopped: false,
            pending: None,
            trap: None,
            context: None,
            next_context: options.context.map(|context| Context {
                privilege: 0,
                virtualized: false,
                context,
            }),
            external_time: false,
            icnt: 0,
            icnt_limit: (1u64 << options.icnt_bits) - 1,
            hist: 1,
            hist_full: 1u64 << (options.hist_bits - 1),
            last_address: 0,
            stack: ReturnStack::new(options.return_stack_depth),
            constant: None,
            held_hist: None,
            last_branch: None,
            repeats: 0,
            messages_since_sync: 0,
            units_since_sync: 0,
            time: 0,
            last_time: 0,
            statistics: EncoderStatistics::default(),
        })
    }

    pub fn statistics(&self) -> EncoderStatistics {
        self.statistics
    }

    /// Bytes produced so far, handed over to the caller (for streaming to a file).
    pub fn take_output(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.output)
    }

    /// Bytes produced since the last [`Self::clear_output`]: whole messages.
    pub fn output(&self) -> &[u8] {
        &self.output
    }

    /// Forgets the bytes [`Self::output`] gave (they were sent), keeping the buffer.
    pub fn clear_output(&mut self) {
        self.output.clear();
    }

    /// Whether the encoder holds trace it has not sent: the instruction retired last,
    /// counts and history not yet in a message (`trTeEmpty` is 0 while it does).
    pub fn holds_trace(&self) -> bool {
        self.pending.is_some()
            || self.icnt != 0
            || self.hist != 1
            || self.repeats != 0
            || self.held_hist.is_some()
    }

    /// One retired instruction, by address, decoded from the code image.
    ///
    /// # Panics
    /// Never; an encoder made by [`Self::for_ingress_port`] has no code image, and
    /// reports every address as [`EncodeError::Unmapped`].
    pub fn retire(&mut self, address: u64) -> Result<(), EncodeError> {
        let index = self.statistics.instructions;
        let Some(image) = self.image else {
            return Err(EncodeError::Unmapped { index, address });
        };
        let info = file_info(image, &self.files, address)
            .ok_or(EncodeError::Unmapped { index, address })?;
        let instruction = decode_at(image, info.options, address).map_err(|error| match error {
            BlockError::Unmapped => EncodeError::Unmapped { index, address },
            BlockError::Misaligned => EncodeError::Misaligned { index, address },
            BlockError::Undecodable => EncodeError::Undecodable { index, address },
        })?;
        self.retire_with_table(address, instruction, info.jvt_base)
    }

    /// One retired instruction, decoded by the caller (the ingress port's *iaddr* and
    /// instruction).
    pub fn retire_instruction(
        &mut self,
        address: u64,
        instruction: Instruction,
    ) -> Result<(), EncodeError> {
        self.retire_with_table(address, instruction, None)
    }

    /// The first `retired` instructions of `run`, executed from `start`: a block of
    /// instructions executed one after another (the rest of the run did not retire: a
    /// trap was taken before them). One step for all but the last when nothing in them
    /// needs a message.
    pub fn retire_block(
        &mut self,
        start: u64,
        run: &InstructionRun,
        retired: usize,
    ) -> Result<(), EncodeError> {
        let retired = retired.min(run.instructions.len());
        if retired == 0 || self.stopped {
            return Ok(());
        }
        let xlen = run.instructions[0].1.xlen;
        let address_of = |offset: u32| xlen_mask(xlen, start.wrapping_add(u64::from(offset)));
        // The first instruction resolves the one pending before it (and starts the trace
        // when it has to).
        let (first_offset, first) = run.instructions[0];
        self.retire_with_table(address_of(first_offset), first, None)?;
        if retired == 1 {
            return Ok(());
        }
        let sequential_units = run.units_before[retired - 1];
        let fits = self.icnt.saturating_add(sequential_units) <= self.icnt_limit;
        let Some(pending) = self
            .pending
            .take()
            .filter(|_| run.sequential_prefix && fits)
        else {
            for &(offset, instruction) in &run.instructions[1..retired] {
                self.retire_with_table(address_of(offset), instruction, None)?;
            }
            return Ok(());
        };
        // Every instruction before the last is sequential: they only add to I-CNT (and
        // the one before the last may load a constant for a sequential jump); the last
        // waits for its successor.
        debug_assert_eq!(pending.address, address_of(first_offset));
        self.icnt += sequential_units;
        self.units_since_sync = self.units_since_sync.saturating_add(sequential_units);
        let (constant_offset, constant_instruction) = run.instructions[retired - 2];
        self.constant = constant_instruction.constant_load(address_of(constant_offset), xlen);
        let (last_offset, last) = run.instructions[retired - 1];
        self.pending = Some(Pending {
            address: address_of(last_offset),
            instruction: last,
            jump_table: None,
        });
        let count = (retired - 1) as u64;
        self.statistics.instructions += count;
        if !self.external_time {
            self.time += count;
        }
        Ok(())
    }

    /// A trap was taken after the instruction retired last: the next instruction retired
    /// is its handler's first. With two traps in a row (the handler's first instruction
    /// trapped), the first trap's handler is where the second was raised.
    pub fn trap(&mut self, trap: Trap) -> Result<(), EncodeError> {
        if let Some(earlier) = self.trap.take() {
            let handler = match trap {
                Trap::Exception { resume } => resume,
                Trap::Interrupt { resume } => Some(resume),
            };
            if let Some(handler) = handler {
                let pending = self.pending.take();
                self.process_trap(pending, earlier, handler)?;
            }
        }
        if self.stopped || self.start != Start::Tracing {
            // Nothing traced to attach it to: the trace starts at the handler.
            return Ok(());
        }
        self.trap = Some(trap);
        Ok(())
    }

    /// The privilege level and context from the next instruction on: an Ownership
    /// message reports a change (with `EncoderOptions::context` set, trTeContext), after
    /// the message of a trap or trap return that caused it, and after every
    /// synchronisation.
    pub fn set_context(&mut self, context: Context) {
        self.next_context = Some(context);
    }

    /// The time (the timestamp unit's counter) from now on, for timestamps in messages;
    /// without it, the encoder counts one tick per instruction. Never earlier than the
    /// time set before.
    pub fn set_time(&mut self, time: u64) {
        self.external_time = true;
        // Relative timestamps cannot go back: a time that did stays where it was.
        self.time = self.time.max(time);
    }

    /// Tracing stops after the instruction retired last (trTeInstTracing 1 -> 0, a filter
    /// that stops matching, trTeEnable 1 -> 0 flushing the encoder): what the encoder
    /// holds goes out with a ProgTraceCorrelation (EVCODE=4, program trace disabled).
    /// `resume` is where the hart goes next when known (a pending branch's outcome).
    pub fn stop(&mut self, resume: Option<u64>) -> Result<(), EncodeError> {
        if self.stopped || self.start != Start::Tracing {
            self.stopped = true;
            self.constant = None;
            return Ok(());
        }
        if let Some(pending) = self.pending.take() {
            match (self.trap.take(), resume) {
                (Some(trap), Some(handler)) => self.process_trap(Some(pending), trap, handler)?,
                _ => self.process(pending, resume)?,
            }
        }
        self.trap = None;
        self.correlation(CorrelationEvent(4))?;
        self.stopped = true;
        // A constant load before the stop (the pending instruction processed above
        // included) feeds no jump after it: the trace starts again with a
        // synchronisation, from which the decoder cannot infer a target (spec 9.1), so a
        // jump right after the start is reported (an interrupt whose handler is not
        // traced, taken between an auipc and its jalr).
        self.constant = None;
        Ok(())
    }

    /// Tracing starts (trTeInstTracing 0 -> 1, a filter that matches again): the next
    /// instruction retired is reported with a ProgTraceSync (SYNC=5, trace enable; SYNC=7
    /// after lost messages). Without it, the first instruction an encoder sees starts
    /// the trace with SYNC=3 (exit from debug mode), as a debugger's capture starts.
    pub fn start(&mut self) {
        if self.stopped || self.start == Start::First {
            self.stopped = false;
            if self.start != Start::AfterLoss {
                self.start = Start::Enabled;
            }
        }
    }

    /// The output taken since the last call of [`Self::take_output`] was not stored (the
    /// sink was full or off): the encoder forgets what it holds, and the next instruction
    /// retired is reported after an Error message (ETYPE 0, program trace messages lost)
    /// with a ProgTraceSync (SYNC=7, restart from FIFO overrun).
    pub fn messages_lost(&mut self) {
        self.output.clear();
        self.pending = None;
        self.trap = None;
        self.icnt = 0;
        self.hist = 1;
        self.repeats = 0;
        self.held_hist = None;
        self.last_branch = None;
        self.constant = None;
        self.stack.clear();
        if self.start != Start::First {
            self.start = Start::AfterLoss;
        }
    }

    fn retire_with_table(
        &mut self,
        address: u64,
        instruction: Instruction,
        jump_table: Option<u64>,
    ) -> Result<(), EncodeError> {
        let index = self.statistics.instructions;
        if address & 1 != 0 {
            return Err(EncodeError::Misaligned { index, address });
        }
        if self.stopped {
            return Ok(());
        }
        if self.start != Start::Tracing {
            self.begin(address)?;
        } else if let Some(pending) = self.pending.take() {
            match self.trap.take() {
                Some(trap) => self.process_trap(Some(pending), trap, address)?,
                None => self.process(pending, Some(address))?,
            }
        } else if let Some(trap) = self.trap.take() {
            self.process_trap(None, trap, address)?;
        }
        self.report_context()?;
        self.pending = Some(Pending {
            address,
            instruction,
            jump_table,
        });
        self.statistics.instructions += 1;
        if !self.external_time {
            self.time += 1;
        }
        Ok(())
    }

    /// The synchronisation that starts (or restarts) the trace at `address`.
    fn begin(&mut self, address: u64) -> Result<(), EncodeError> {
        let sync = match self.start {
            Start::First => SyncReason(3),
            Start::Enabled => SyncReason(5),
            Start::AfterLoss => {
                // ECODE bit 2: program trace messages lost.
                self.write(
                    Body::Error {
                        etype: 0,
                        ecode: 0b100,
                    },
                    false,
                )?;
                SyncReason(7)
            }
            Start::Tracing => return Ok(()),
        };
        self.start = Start::Tracing;
        self.pending = None;
        self.trap = None;
        self.icnt = 0;
        self.hist = 1;
        let body = Body::ProgTraceSync {
            sync,
            icnt: 0,
            faddr: address,
        };
        self.emit(body, true)?;
        self.last_address = address;
        self.after_sync()
    }

    /// The pending instruction (if any) followed by `trap` to `handler`.
    fn process_trap(
        &mut self,
        pending: Option<Pending>,
        trap: Trap,
        handler: u64,
    ) -> Result<(), EncodeError> {
        let (btype, resume) = match trap {
            Trap::Exception { resume } => (BranchType::Exception, resume),
            Trap::Interrupt { resume } => (BranchType::Interrupt, Some(resume)),
        };
        if let Some(pending) = pending {
            if resume.is_none() && pending.instruction.control_flow == ControlFlow::EnvironmentTrap
            {
                // ecall/ebreak: the instruction's own flow is the trap.
                return self.process(pending, Some(handler));
            }
            // The retired instruction went where execution was to resume (a branch's
            // outcome, a return's target); then the trap, with what it counted.
            self.process(pending, resume)?;
        }
        self.indirect(btype, Some(handler))
    }

    /// ProgTraceCorrelation with what the encoder holds.
    fn correlation(&mut self, evcode: CorrelationEvent) -> Result<(), EncodeError> {
        self.flush_repeats()?;
        let (cdf, hist) = match self.options.mode {
            BranchMode::Htm => (1, Some(self.hist)),
            BranchMode::Btm => (0, None),
        };
        let body = Body::ProgTraceCorrelation {
            evcode,
            cdf,
            icnt: self.icnt,
            hist,
        };
        self.emit(body, false)?;
        self.icnt = 0;
        self.hist = 1;
        Ok(())
    }

    /// An Ownership message when the privilege or context changed (trTeContext).
    fn report_context(&mut self) -> Result<(), EncodeError> {
        if self.options.context.is_none() {
            return Ok(());
        }
        let Some(next) = self.next_context else {
            return Ok(());
        };
        let Some(current) = self.context else {
            return Ok(());
        };
        if next == current {
            return Ok(());
        }
        let format = if next.context == current.context {
            ProcessFormat::PrivilegeChange
        } else {
            ProcessFormat::Scontext
        };
        self.context = Some(next);
        let process = Process {
            format,
            privilege: next.privilege,
            virtualized: next.virtualized,
            context: next.context,
        };
        self.emit(Body::Ownership { process }, false)
    }

    /// Ends the trace with ProgTraceCorrelation (EVCODE 0, entry into debug mode) so the
    /// decoder can place the last instructions, and returns the remaining bytes.
    pub fn finish(mut self) -> Result<(Vec<u8>, EncoderStatistics), EncodeError> {
        if self.start == Start::Tracing && !self.stopped {
            if let Some(pending) = self.pending.take() {
                self.process(pending, None)?;
            }
            self.correlation(CorrelationEvent(0))?;
        }
        let output = std::mem::take(&mut self.output);
        Ok((output, self.statistics))
    }

    fn process(&mut self, pending: Pending, next: Option<u64>) -> Result<(), EncodeError> {
        let Pending {
            address,
            instruction,
            jump_table,
        } = pending;
        let xlen = instruction.xlen;
        let units = u64::from(instruction.length / 2);
        let fallthrough = xlen_mask(xlen, address.wrapping_add(u64::from(instruction.length)));
        if self.icnt + units > self.icnt_limit {
            self.report_icnt_overflow(address)?;
        }
        self.icnt += units;
        self.units_since_sync = self.units_since_sync.saturating_add(units);
        let constant = self.constant.take();
        // Where execution goes without a trap; None when only the trace can tell.
        let mut expected = Some(fallthrough);
        let depth = self.options.return_stack_depth;
        match instruction.control_flow {
            ControlFlow::Sequential => {}
            ControlFlow::Branch { .. } => {
                let target = instruction
                    .direct_target(address, xlen)
                    .unwrap_or(fallthrough);
                if let Some(next) = next {
                    let taken = next == target && target != fallthrough;
                    if taken || next == fallthrough {
                        expected = Some(next);
                        self.branch(taken, target)?;
                    }
                }
            }
            ControlFlow::Jump { .. } => {
                expected = instruction.direct_target(address, xlen);
                if instruction.links() {
                    self.stack.push(fallthrough);
                }
                // trTeInstEnAllJumps: the ingress port reports direct jumps and calls
                // as taken branches (itype 5), for timing precision. Stack effects first,
                // as for indirect jumps: a synchronisation in the same message resets it.
                if let (true, Some(target)) = (self.options.all_jumps, expected) {
                    self.branch(true, target)?;
                }
            }
            ControlFlow::JumpRegister { rs1, offset, .. } => {
                let sequential = constant
                    .filter(|&(register, _)| self.options.sequential_jumps && register == rs1)
                    .map(|(_, value)| {
                        xlen_mask(xlen, value.wrapping_add(offset as i64 as u64)) & !1
                    });
                if let Some(target) = sequential {
                    self.statistics.sequential_jumps += 1;
                    expected = Some(target);
                    if instruction.links() {
                        self.stack.push(fallthrough);
                    }
                } else {
                    expected = None;
                    // Stack effects come first: the decoder applies them when it walks
                    // the jump, before any synchronisation in the same message resets it.
                    match instruction.itype(false) {
                        Itype::Return => self.ret(next, depth, None)?,
                        Itype::CoroutineSwap => self.ret(next, depth, Some(fallthrough))?,
                        Itype::UninferableCall => {
                            self.stack.push(fallthrough);
                            self.indirect(BranchType::Indirect, next)?;
                        }
                        _ => self.indirect(BranchType::Indirect, next)?,
                    }
                }
            }
            ControlFlow::TableJump { index } => {
                let links = index >= 32;
                let entry_size: u64 = if xlen == riscv_insn::Xlen::Rv32 { 4 } else { 8 };
                let target = jump_table.zip(self.image).and_then(|(base, image)| {
                    let entry = base.wrapping_add(u64::from(index) * entry_size);
                    image.read_le::<8>(entry).map(|bytes| {
                        let value = u64::from_le_bytes(bytes);
                        xlen_mask(xlen, value) & !1
                    })
                });
                if links {
                    self.stack.push(fallthrough);
                }
                match target {
                    Some(target) => expected = Some(target),
                    None => {
                        expected = None;
                        self.indirect(BranchType::Indirect, next)?;
                    }
                }
            }
            ControlFlow::PopReturn => {
                expected = None;
                self.ret(next, depth, None)?;
            }
            ControlFlow::EnvironmentTrap => {
                // ecall/ebreak retire and trap (spec Table 2: "ecall is reported after
                // retirement"), so they are counted and the handler follows.
                expected = None;
                if self.options.environment_call_as_jump {
                    self.stack.push(fallthrough);
                    self.indirect(BranchType::Indirect, next)?;
                } else {
                    self.indirect(BranchType::Exception, next)?;
                }
            }
            ControlFlow::TrapReturn => {
                expected = None;
                self.indirect(BranchType::Indirect, next)?;
            }
        }
        if let (Some(expected), Some(next)) = (expected, next) {
            if expected != next {
                // The instruction retired but the next one is elsewhere: an interrupt (or
                // a signal delivered by the emulator) was taken in between.
                self.indirect(BranchType::Interrupt, Some(next))?;
            }
        }
        self.constant = instruction.constant_load(address, xlen);
        Ok(())
    }

    /// A return (or, with `push`, a co-routine swap that also links).
    fn ret(
        &mut self,
        next: Option<u64>,
        depth: usize,
        push: Option<u64>,
    ) -> Result<(), EncodeError> {
        // The stack is popped whether or not the return matches (spec 9.2, and the
        // reference encoder); only a match makes the return implicit.
        let popped = self.stack.pop();
        if let Some(link) = push {
            self.stack.push(link);
        }
        if depth > 0 && popped.is_some() && popped == next {
            self.statistics.implicit_returns += 1;
            return Ok(());
        }
        self.indirect(BranchType::Indirect, next)
    }

    fn branch(&mut self, taken: bool, target: u64) -> Result<(), EncodeError> {
        match self.options.mode {
            BranchMode::Htm => {
                self.hist = (self.hist << 1) | u64::from(taken);
                if self.hist & self.hist_full != 0 {
                    let hist = std::mem::replace(&mut self.hist, 1);
                    self.hist_overflow(hist)?;
                }
            }
            BranchMode::Btm if taken => {
                if self.sync_due() {
                    let body = Body::DirectBranchSync {
                        sync: SyncReason(2),
                        icnt: self.icnt,
                        faddr: target,
                    };
                    self.emit(body, true)?;
                    self.last_address = target;
                    self.after_sync()?;
                } else {
                    let key = BranchKey {
                        tcode: 3,
                        btype: 0,
                        icnt: self.icnt,
                        hist: 0,
                        target: 0,
                    };
                    self.branch_message(Body::DirectBranch { icnt: self.icnt }, key)?;
                }
                self.icnt = 0;
            }
            BranchMode::Btm => {}
        }
        Ok(())
    }

    fn hist_overflow(&mut self, hist: u64) -> Result<(), EncodeError> {
        self.flush_branch_repeat()?;
        if !self.options.repeated_history {
            return self.emit(
                Body::ResourceFull(ResourceFull::HistOverflow { hist }),
                false,
            );
        }
        match self.held_hist {
            Some((held, count)) if held == hist => self.held_hist = Some((held, count + 1)),
            _ => {
                self.flush_held_hist()?;
                self.held_hist = Some((hist, 1));
            }
        }
        // A held overflow is output the encoder owes: a repeat must not span it.
        self.last_branch = None;
        Ok(())
    }

    fn report_icnt_overflow(&mut self, address: u64) -> Result<(), EncodeError> {
        if self.options.mode == BranchMode::Htm && self.hist != 1 {
            // Spec 8.4.4: with history pending, report the overflow as a sync (SYNC=4),
            // which does not reset the encoder, so the return stack survives.
            let body = Body::IndirectBranchHistSync {
                sync: SyncReason(4),
                btype: BranchType::Indirect,
                icnt: self.icnt,
                faddr: address,
                hist: self.hist,
            };
            self.emit(body, true)?;
            self.last_address = address;
            self.hist = 1;
            // A synchronisation between a constant load and the jump it feeds: the
            // decoder starts afresh at the jump and cannot infer its target (spec 9.1,
            // the I-CNT must span both), so the jump is reported.
            self.constant = None;
        } else {
            self.emit(
                Body::ResourceFull(ResourceFull::IcntOverflow { icnt: self.icnt }),
                false,
            )?;
        }
        self.icnt = 0;
        Ok(())
    }

    fn sync_due(&self) -> bool {
        (self.options.periodic_sync > 0 && self.messages_since_sync >= self.options.periodic_sync)
            || (self.options.periodic_sync_units > 0
                && self.units_since_sync >= self.options.periodic_sync_units)
    }

    /// An address message: target of an uninferable jump, or a trap handler.
    fn indirect(&mut self, btype: BranchType, next: Option<u64>) -> Result<(), EncodeError> {
        // Without a next instruction (end of trace) the closing correlation message covers it.
        let Some(target) = next else { return Ok(()) };
        let htm = self.options.mode == BranchMode::Htm;
        if self.sync_due() {
            let sync = SyncReason(2);
            let body = if htm {
                Body::IndirectBranchHistSync {
                    sync,
                    btype,
                    icnt: self.icnt,
                    faddr: target,
                    hist: self.hist,
                }
            } else {
                Body::IndirectBranchSync {
                    sync,
                    btype,
                    icnt: self.icnt,
                    faddr: target,
                }
            };
            self.emit(body, true)?;
            self.last_address = target;
            self.icnt = 0;
            self.hist = 1;
            return self.after_sync();
        }
        let uaddr = self.last_address ^ target;
        let (body, hist) = if htm && self.hist != 1 {
            (
                Body::IndirectBranchHist {
                    btype,
                    icnt: self.icnt,
                    uaddr,
                    hist: self.hist,
                },
                self.hist,
            )
        } else {
            (
                Body::IndirectBranch {
                    btype,
                    icnt: self.icnt,
                    uaddr,
                },
                1,
            )
        };
        let key = BranchKey {
            tcode: body.tcode(),
            btype: btype.bits(),
            icnt: self.icnt,
            hist,
            target,
        };
        self.branch_message(body, key)?;
        self.last_address = target;
        self.icnt = 0;
        self.hist = 1;
        Ok(())
    }

    /// Sends a branch message, or counts it when it repeats the previous one exactly.
    fn branch_message(&mut self, body: Body, key: BranchKey) -> Result<(), EncodeError> {
        if self.options.repeat_branch && self.held_hist.is_none() && self.last_branch == Some(key) {
            self.repeats += 1;
            self.statistics.repeated_branches += 1;
            return Ok(());
        }
        self.emit(body, false)?;
        self.last_branch = Some(key);
        Ok(())
    }

    /// A synchronisation resets the encoder (Table 25): the decoder clears its stack too.
    fn after_sync(&mut self) -> Result<(), EncodeError> {
        self.stack.clear();
        self.messages_since_sync = 0;
        self.last_branch = None;
        self.units_since_sync = 0;
        if self.options.context.is_some() {
            // Ownership follows every synchronisation (spec 7.2): the context now.
            if let Some(context) = self.next_context {
                self.context = Some(context);
                let process = Process {
                    format: ProcessFormat::Scontext,
                    privilege: context.privilege,
                    virtualized: context.virtualized,
                    context: context.context,
                };
                self.emit(Body::Ownership { process }, false)?;
            }
        }
        Ok(())
    }

    fn flush_branch_repeat(&mut self) -> Result<(), EncodeError> {
        if self.repeats > 0 {
            let bcnt = std::mem::take(&mut self.repeats);
            self.write(Body::RepeatBranch { bcnt }, false)?;
        }
        Ok(())
    }

    fn flush_held_hist(&mut self) -> Result<(), EncodeError> {
        if let Some((hist, count)) = self.held_hist.take() {
            let resource = if count == 1 {
                ResourceFull::HistOverflow { hist }
            } else {
                self.statistics.repeated_histories += count - 1;
                ResourceFull::RepeatedHist {
                    hist,
                    repeat: count,
                }
            };
            self.write(Body::ResourceFull(resource), false)?;
        }
        Ok(())
    }

    fn flush_repeats(&mut self) -> Result<(), EncodeError> {
        self.flush_branch_repeat()?;
        self.flush_held_hist()
    }

    /// Sends `body` after everything the encoder still owes, in stream order.
    fn emit(&mut self, body: Body, sync: bool) -> Result<(), EncodeError> {
        self.flush_repeats()?;
        self.last_branch = None;
        self.write(body, sync)
    }

    fn write(&mut self, body: Body, sync: bool) -> Result<(), EncodeError> {
        let timestamp = self.options.message.timestamps.then(|| {
            let stamp = if sync {
                self.time
            } else {
                self.time - self.last_time
            };
            self.last_time = self.time;
            stamp
        });
        let before = self.output.len();
        self.writer
            .encode(self.options.src, &body, timestamp, &mut self.output)?;
        self.statistics.messages += 1;
        if sync {
            self.statistics.sync_messages += 1;
        }
        self.messages_since_sync = self.messages_since_sync.saturating_add(1);
        self.statistics.bytes += (self.output.len() - before) as u64;
        Ok(())
    }
}
