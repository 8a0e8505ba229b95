//! A model of an N-Trace encoder: retired instruction addresses in, N-Trace bytes out.
//!
//! It behaves like the ingress port plus encoder of chapter 10: every retired
//! instruction adds to I-CNT; branches add HIST bits (HTM) or DirectBranch messages
//! (BTM); uninferable jumps, traps and trap returns send their target. The target of
//! instruction N is known when instruction N+1 retires, so [`TraceEncoder::retire`] keeps
//! one instruction of look-ahead, as hardware does ("an address emitted is known at the
//! next ingress port cycle").

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
    /// Periodic synchronisation every this many messages (0: never).
    pub periodic_sync: u32,
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

#[derive(Debug)]
pub struct TraceEncoder<'a> {
    image: &'a CodeImage,
    files: Vec<FileDecodeInfo>,
    options: EncoderOptions,
    writer: MessageEncoder,
    output: Vec<u8>,
    started: bool,
    pending: Option<(u64, Instruction, FileDecodeInfo)>,
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
    time: u64,
    last_time: u64,
    statistics: EncoderStatistics,
}

impl<'a> TraceEncoder<'a> {
    pub fn new(
        image: &'a CodeImage,
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
            started: false,
            pending: None,
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

    /// One retired instruction, by address.
    pub fn retire(&mut self, address: u64) -> Result<(), EncodeError> {
        let index = self.statistics.instructions;
        if !self.started {
            self.started = true;
            self.emit_sync_start(address)?;
        }
        if let Some((previous, instruction, info)) = self.pending.take() {
            self.process(previous, instruction, info, Some(address))?;
        }
        let info = file_info(self.image, &self.files, address)
            .ok_or(EncodeError::Unmapped { index, address })?;
        let instruction =
            decode_at(self.image, info.options, address).map_err(|error| match error {
                BlockError::Unmapped => EncodeError::Unmapped { index, address },
                BlockError::Misaligned => EncodeError::Misaligned { index, address },
                BlockError::Undecodable => EncodeError::Undecodable { index, address },
            })?;
        if address & 1 != 0 {
            return Err(EncodeError::Misaligned { index, address });
        }
        self.pending = Some((address, instruction, info));
        self.statistics.instructions += 1;
        self.time += 1;
        Ok(())
    }

    /// Ends the trace with ProgTraceCorrelation (EVCODE 0, entry into debug mode) so the
    /// decoder can place the last instructions, and returns the remaining bytes.
    pub fn finish(mut self) -> Result<(Vec<u8>, EncoderStatistics), EncodeError> {
        if let Some((address, instruction, info)) = self.pending.take() {
            self.process(address, instruction, info, None)?;
        }
        if self.started {
            self.flush_repeats()?;
            let (cdf, hist) = match self.options.mode {
                BranchMode::Htm => (1, Some(self.hist)),
                BranchMode::Btm => (0, None),
            };
            let body = Body::ProgTraceCorrelation {
                evcode: CorrelationEvent(0),
                cdf,
                icnt: self.icnt,
                hist,
            };
            self.emit(body, false)?;
        }
        let output = std::mem::take(&mut self.output);
        Ok((output, self.statistics))
    }

    fn process(
        &mut self,
        address: u64,
        instruction: Instruction,
        info: FileDecodeInfo,
        next: Option<u64>,
    ) -> Result<(), EncodeError> {
        let xlen = info.options.xlen;
        let units = u64::from(instruction.length / 2);
        let fallthrough = xlen_mask(xlen, address.wrapping_add(u64::from(instruction.length)));
        if self.icnt + units > self.icnt_limit {
            self.report_icnt_overflow(address)?;
        }
        self.icnt += units;
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
                let target = info.jvt_base.and_then(|base| {
                    let entry = base.wrapping_add(u64::from(index) * entry_size);
                    self.image.read_le::<8>(entry).map(|bytes| {
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
        self.options.periodic_sync > 0 && self.messages_since_sync >= self.options.periodic_sync
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

    fn emit_sync_start(&mut self, address: u64) -> Result<(), EncodeError> {
        let body = Body::ProgTraceSync {
            sync: SyncReason(3),
            icnt: 0,
            faddr: address,
        };
        self.emit(body, true)?;
        self.last_address = address;
        self.after_sync()
    }

    /// A synchronisation resets the encoder (Table 25): the decoder clears its stack too.
    fn after_sync(&mut self) -> Result<(), EncodeError> {
        self.stack.clear();
        self.messages_since_sync = 0;
        self.last_branch = None;
        if let Some(context) = self.options.context {
            let process = Process {
                format: ProcessFormat::Scontext,
                privilege: 0,
                virtualized: false,
                context,
            };
            self.emit(Body::Ownership { process }, false)?;
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
