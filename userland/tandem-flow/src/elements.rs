//! Protocol-free trace elements from steps.

use std::collections::VecDeque;

use riscv_insn::{decode, ControlFlow, DecodeOptions, Itype};
use tandem_message::{Parameters, Xlen};
use trace_elements::{
    AddressKind, ElementKind, ElementSource, RangeEnd, TraceElement, TraceOffReason, TraceOnReason,
    TrapKind,
};

use crate::step::{advance_pc, FlowError, StateChange, Step, StepDecoder, StepKind};

/// Whether register and memory elements are produced.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum StateElements {
    /// Only control flow, context and time: ranges are as long as control flow allows.
    #[default]
    Omit,
    /// Also [`ElementKind::RegisterWrite`] and [`ElementKind::MemoryAccess`]; every
    /// instruction that changes state ends its range, so each of these elements belongs to
    /// the preceding range's last instruction.
    Report,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct ElementOptions {
    pub state: StateElements,
}

impl ElementOptions {
    #[must_use]
    pub fn with_state(mut self, state: StateElements) -> Self {
        self.state = state;
        self
    }
}

/// Instructions retired in a row without a control transfer.
#[derive(Clone, Copy, Debug)]
struct OpenRange {
    start: u64,
    last: u64,
    instructions: u32,
    next: u64,
    /// Offset of the step of the last instruction.
    offset: u64,
}

/// The steps of a tandem trace as [`TraceElement`]s (hart 0: the protocol traces one hart).
#[derive(Debug)]
pub struct TandemElements<'a> {
    steps: StepDecoder<'a>,
    options: ElementOptions,
    decode_options: DecodeOptions,
    queue: VecDeque<TraceElement>,
    open: Option<OpenRange>,
    /// Where execution continues as the elements told it so far; `None` before the first
    /// known pc and after a reset.
    expected: Option<u64>,
    /// Whether a trace-on element was ever produced (the first is `Start`, later ones
    /// `Restart`).
    started: bool,
    privilege: Option<u8>,
    /// Error to return once the elements before it are out.
    error: Option<FlowError>,
    finished: bool,
    /// The step being processed, kept so that its allocation is reused.
    step: Step,
}

/// How an instruction at `pc` that continued at `next` ends a range, `None` when it does
/// not (a sequential instruction that fell through). Follows the N-Trace itype table as
/// ntrace-flow does: links through x1/x5 make calls, returns and co-routine swaps.
fn classify(parameters: Parameters, raw: u32, pc: u64, length: u8, next: u64) -> Option<RangeEnd> {
    let xlen = match parameters.xlen {
        Xlen::Bits32 => riscv_insn::Xlen::Rv32,
        Xlen::Bits64 => riscv_insn::Xlen::Rv64,
    };
    let fall_through = advance_pc(parameters, pc, length);
    let Ok(instruction) = decode(raw, DecodeOptions::new(xlen)) else {
        return (next != fall_through).then_some(RangeEnd::Sequential);
    };
    Some(match instruction.control_flow {
        // The pc moved without a transfer of the instruction's own (a pc value in the group
        // that is not a trap): the range ends there.
        ControlFlow::Sequential => return (next != fall_through).then_some(RangeEnd::Sequential),
        ControlFlow::Branch { .. } => {
            if next == fall_through {
                RangeEnd::BranchNotTaken
            } else {
                RangeEnd::BranchTaken
            }
        }
        ControlFlow::Jump { .. } => {
            if instruction.links() {
                RangeEnd::Call
            } else {
                RangeEnd::Jump
            }
        }
        ControlFlow::JumpRegister { .. } => match instruction.itype(true) {
            Itype::UninferableCall => RangeEnd::IndirectCall,
            Itype::CoroutineSwap => RangeEnd::CoroutineSwap,
            Itype::Return => RangeEnd::Return,
            _ => RangeEnd::IndirectJump,
        },
        ControlFlow::TableJump { index } => {
            if index >= 32 {
                RangeEnd::Call
            } else {
                RangeEnd::IndirectJump
            }
        }
        ControlFlow::PopReturn => RangeEnd::Return,
        ControlFlow::EnvironmentTrap => RangeEnd::EnvironmentCall,
        ControlFlow::TrapReturn => RangeEnd::TrapReturn,
    })
}

fn is_interrupt_cause(parameters: Parameters, cause: u64) -> bool {
    let top = match parameters.xlen {
        Xlen::Bits32 => 1 << 31,
        Xlen::Bits64 => 1 << 63,
    };
    cause & top != 0
}

impl<'a> TandemElements<'a> {
    #[must_use]
    pub fn new(steps: StepDecoder<'a>, options: ElementOptions) -> Self {
        let xlen = match steps.parameters().xlen {
            Xlen::Bits32 => riscv_insn::Xlen::Rv32,
            Xlen::Bits64 => riscv_insn::Xlen::Rv64,
        };
        TandemElements {
            steps,
            options,
            decode_options: DecodeOptions::new(xlen),
            queue: VecDeque::new(),
            open: None,
            expected: None,
            started: false,
            privilege: None,
            error: None,
            finished: false,
            step: Step::empty(),
        }
    }

    /// The step decoder underneath (its shadow state, its statistics).
    #[must_use]
    pub fn steps(&self) -> &StepDecoder<'a> {
        &self.steps
    }

    fn push(&mut self, offset: u64, kind: ElementKind) {
        self.queue.push_back(TraceElement {
            hart: 0,
            offset,
            kind,
        });
    }

    fn close_range(&mut self, end: RangeEnd) {
        if let Some(open) = self.open.take() {
            self.push(
                open.offset,
                ElementKind::InstructionRange {
                    start: open.start,
                    last: open.last,
                    instructions: open.instructions,
                    end,
                    next: Some(open.next),
                },
            );
        }
    }

    /// Says where execution (re)starts when the elements did not already lead there.
    fn arrive(&mut self, offset: u64, pc: u64) {
        if self.expected != Some(pc) {
            self.close_range(RangeEnd::Sequential);
            let reason = if self.started {
                TraceOnReason::Restart
            } else {
                TraceOnReason::Start
            };
            self.started = true;
            self.push(
                offset,
                ElementKind::TraceOn {
                    address: pc,
                    reason,
                },
            );
        }
        self.expected = Some(pc);
    }

    fn retire(&mut self, step: &Step, pc: u64, next: u64, end: Option<RangeEnd>) {
        let open = match self.open {
            Some(open) if open.next == pc && open.instructions < u32::MAX => OpenRange {
                last: pc,
                // Checked above: the count stays below u32::MAX.
                instructions: open.instructions + 1,
                next,
                offset: step.offset,
                ..open
            },
            _ => {
                self.close_range(RangeEnd::Sequential);
                OpenRange {
                    start: pc,
                    last: pc,
                    instructions: 1,
                    next,
                    offset: step.offset,
                }
            }
        };
        self.open = Some(open);
        let reports_state = self.options.state == StateElements::Report && !step.changes.is_empty();
        match end {
            Some(end) => self.close_range(end),
            None if reports_state || open.instructions == u32::MAX => {
                self.close_range(RangeEnd::Sequential);
            }
            None => {}
        }
        self.expected = Some(next);
    }

    fn process(&mut self, step: &Step) {
        let parameters = self.steps.parameters();
        match step.kind {
            StepKind::Instruction { pc, bits, next_pc } => {
                self.arrive(step.offset, pc);
                let end = classify(parameters, bits.raw, pc, bits.length.bytes(), next_pc);
                match step.trap_cause() {
                    Some(cause) if end != Some(RangeEnd::EnvironmentCall) => {
                        // The instruction raised an exception and did not retire.
                        self.close_range(RangeEnd::Sequential);
                        let kind = if is_interrupt_cause(parameters, cause) {
                            TrapKind::Interrupt
                        } else {
                            TrapKind::Exception
                        };
                        self.push(
                            step.offset,
                            ElementKind::Trap {
                                from: Some(pc),
                                handler: next_pc,
                                kind,
                            },
                        );
                        self.expected = Some(next_pc);
                    }
                    _ if end == Some(RangeEnd::EnvironmentCall) => {
                        // ecall/ebreak retire, then trap: the element every decoder
                        // gives, also where the trace shows no trap CSR (a trace of user
                        // code alone goes on where the kernel returned).
                        self.retire(step, pc, next_pc, end);
                        self.push(
                            step.offset,
                            ElementKind::Trap {
                                from: Some(pc),
                                handler: next_pc,
                                kind: TrapKind::Exception,
                            },
                        );
                    }
                    _ => self.retire(step, pc, next_pc, end),
                }
            }
            StepKind::Interrupt { pc_before, next_pc } => {
                self.arrive(step.offset, pc_before);
                self.close_range(RangeEnd::Sequential);
                self.push(
                    step.offset,
                    ElementKind::Trap {
                        from: Some(pc_before),
                        handler: next_pc,
                        kind: TrapKind::Interrupt,
                    },
                );
                self.expected = Some(next_pc);
            }
            StepKind::PcSet { next_pc }
            | StepKind::StateInitialization {
                next_pc: Some(next_pc),
            } => self.arrive(step.offset, next_pc),
            StepKind::HartReset { next_pc } => {
                self.close_range(RangeEnd::Sequential);
                if self.started && self.expected.is_some() {
                    self.push(
                        step.offset,
                        ElementKind::TraceOff {
                            last_address: None,
                            // The protocol's hart reset opcode: trace elements have no
                            // reset reason of their own.
                            reason: TraceOffReason::Other(tandem_message::opcode::HART_RESET),
                        },
                    );
                }
                self.expected = None;
                if let Some(pc) = next_pc {
                    self.arrive(step.offset, pc);
                }
            }
            StepKind::StateInitialization { next_pc: None } | StepKind::Other => {}
        }
        self.side_elements(step);
    }

    /// Context, time and (when reported) state elements of a step, after its range.
    fn side_elements(&mut self, step: &Step) {
        for change in &step.changes {
            match *change {
                StateChange::Privilege(mode) if self.privilege != Some(mode) => {
                    self.close_range(RangeEnd::Sequential);
                    self.privilege = Some(mode);
                    self.push(
                        step.offset,
                        ElementKind::ContextChange {
                            privilege: mode,
                            virtualized: false,
                            context: None,
                        },
                    );
                }
                StateChange::Mtime(time) => {
                    self.close_range(RangeEnd::Sequential);
                    self.push(step.offset, ElementKind::Timestamp { time });
                }
                _ => {}
            }
        }
        if self.options.state == StateElements::Omit {
            return;
        }
        let shape = match step.kind {
            StepKind::Instruction { bits, .. } => decode(bits.raw, self.decode_options)
                .ok()
                .and_then(|instruction| instruction.memory_access()),
            _ => None,
        };
        let store_data = step.changes.iter().find_map(|change| match *change {
            StateChange::StoreData { value, .. } => Some(value),
            _ => None,
        });
        for change in &step.changes {
            let kind = match *change {
                StateChange::Register { register, value } => {
                    ElementKind::RegisterWrite { register, value }
                }
                StateChange::Memory(access) => ElementKind::MemoryAccess {
                    operation: access.operation,
                    address: Some(access.address),
                    // Memory records are system-bus transactions.
                    address_kind: AddressKind::Physical,
                    size: Some(access.size.bytes()),
                    data: access
                        .request_data
                        .or(access.response.and_then(|response| response.data)),
                },
                StateChange::EffectiveAddress(address) | StateChange::PhysicalAddress(address) => {
                    // The instruction's own view of its access: the operation comes from
                    // its encoding.
                    let Some(shape) = shape else { continue };
                    ElementKind::MemoryAccess {
                        operation: crate::encoder::memory_operation(shape.operation),
                        address: Some(address),
                        address_kind: if matches!(change, StateChange::EffectiveAddress(_)) {
                            AddressKind::Effective
                        } else {
                            AddressKind::Physical
                        },
                        size: Some(shape.size_bytes),
                        data: store_data,
                    }
                }
                _ => continue,
            };
            self.push(step.offset, kind);
        }
    }
}

impl ElementSource for TandemElements<'_> {
    type Error = FlowError;

    fn next_element(&mut self) -> Result<Option<TraceElement>, FlowError> {
        loop {
            if let Some(element) = self.queue.pop_front() {
                return Ok(Some(element));
            }
            if let Some(error) = self.error.take() {
                return Err(error);
            }
            if self.finished {
                return Ok(None);
            }
            let mut step = core::mem::replace(&mut self.step, Step::empty());
            let next = self.steps.next_step_into(&mut step);
            if let Ok(true) = next {
                self.process(&step);
            }
            self.step = step;
            match next {
                Ok(true) => {}
                Ok(false) => {
                    self.finished = true;
                    self.close_range(RangeEnd::Sequential);
                }
                Err(error) => {
                    // The elements before the error come first.
                    self.finished = true;
                    self.close_range(RangeEnd::Sequential);
                    self.error = Some(error);
                }
            }
        }
    }
}
