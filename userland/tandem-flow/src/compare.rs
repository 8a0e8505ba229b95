//! Divergence search between two traces of the same program, by the spec's §3.1 method of
//! comparing collected state changes.

use std::collections::BTreeSet;

use tandem_message::{InstructionBits, Register};

use crate::step::{FlowError, Shadow, StateChange, Step, StepDecoder, StepKind};

/// Which of the two traces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Trace {
    A,
    B,
}

/// Whether `mtime` additional state is compared.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum TimerComparison {
    /// The timer is non-deterministic state: never compared.
    #[default]
    Ignore,
    Compare,
}

/// What the comparison leaves out: the spec's non-deterministic or unobserved state.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CompareOptions {
    /// Registers whose values are never compared.
    pub ignored_registers: BTreeSet<Register>,
    pub timer: TimerComparison,
}

/// Counters, timers and interrupt-pending bits: state a hart's environment changes
/// (chapter 1.1: "interrupt pending registers, timers").
pub const DEFAULT_IGNORED_CSRS: [u16; 13] = [
    0xc00, // cycle
    0xc01, // time
    0xc02, // instret
    0xc80, // cycleh
    0xc81, // timeh
    0xc82, // instreth
    0xb00, // mcycle
    0xb02, // minstret
    0xb80, // mcycleh
    0xb82, // minstreth
    0x344, // mip
    0x144, // sip
    0x244, // vsip
];

impl Default for CompareOptions {
    fn default() -> Self {
        CompareOptions {
            ignored_registers: DEFAULT_IGNORED_CSRS
                .iter()
                .map(|&csr| Register::Csr(csr))
                .collect(),
            timer: TimerComparison::Ignore,
        }
    }
}

impl CompareOptions {
    /// Also ignores `register`.
    #[must_use]
    pub fn with_ignored_register(mut self, register: Register) -> Self {
        self.ignored_registers.insert(register);
        self
    }

    /// Compares everything, the default list included.
    #[must_use]
    pub fn without_ignored_registers(mut self) -> Self {
        self.ignored_registers.clear();
        self
    }

    #[must_use]
    pub fn with_timer(mut self, timer: TimerComparison) -> Self {
        self.timer = timer;
        self
    }
}

/// Where a step lies in one trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Position {
    /// Offset of the step's first record.
    pub offset: u64,
    /// The step's pc ([`Step::pc`]).
    pub pc: Option<u64>,
}

/// The first thing that differs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Difference {
    /// Different kinds of step (an instruction against an interrupt, ...).
    StepKind { a: StepKind, b: StepKind },
    /// The steps happened at different pcs.
    Pc { a: Option<u64>, b: Option<u64> },
    /// The same pc, different encodings.
    Instruction {
        a: InstructionBits,
        b: InstructionBits,
    },
    /// The pc after the step differs.
    NextPc { a: Option<u64>, b: Option<u64> },
    /// A register either step changed holds different values afterwards.
    Register {
        register: Register,
        a: Option<u64>,
        b: Option<u64>,
    },
    /// The privilege mode after the step differs (compared when either step set it).
    Privilege { a: Option<u8>, b: Option<u8> },
    /// Memory-related changes (requests, responses, addresses, store data) differ; the
    /// first unequal pair, `None` where one step has fewer.
    Memory {
        a: Option<StateChange>,
        b: Option<StateChange>,
    },
    /// `mtime` differs (only with [`TimerComparison::Compare`]).
    Timer { a: Option<u64>, b: Option<u64> },
    /// One trace ended while the other went on.
    TraceEnds { which: Trace },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Divergence {
    /// Index (0-based) of the step, the same in both traces.
    pub step: u64,
    pub position_a: Position,
    pub position_b: Position,
    pub difference: Difference,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Comparison {
    /// Steps found equal (and, with a divergence, the diverging one not counted).
    pub steps_compared: u64,
    pub divergence: Option<Divergence>,
}

/// One of the traces could not be followed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[error("trace {trace:?}: {error}")]
pub struct CompareError {
    pub trace: Trace,
    pub error: FlowError,
}

impl CompareError {
    #[must_use]
    pub fn offset(&self) -> u64 {
        self.error.offset()
    }
}

fn position(step: Option<&Step>, end: u64) -> Position {
    match step {
        Some(step) => Position {
            offset: step.offset,
            pc: step.pc(),
        },
        None => Position {
            offset: end,
            pc: None,
        },
    }
}

fn next_pc(kind: &StepKind) -> Option<u64> {
    match *kind {
        StepKind::Instruction { next_pc, .. }
        | StepKind::Interrupt { next_pc, .. }
        | StepKind::PcSet { next_pc } => Some(next_pc),
        StepKind::StateInitialization { next_pc } | StepKind::HartReset { next_pc } => next_pc,
        StepKind::Other => None,
    }
}

fn is_memory(change: &StateChange) -> bool {
    matches!(
        change,
        StateChange::Memory(_)
            | StateChange::EffectiveAddress(_)
            | StateChange::PhysicalAddress(_)
            | StateChange::StoreData { .. }
            | StateChange::PcPhysical(_)
    )
}

fn mtime(step: &Step) -> Option<u64> {
    step.changes.iter().find_map(|change| match *change {
        StateChange::Mtime(time) => Some(time),
        _ => None,
    })
}

fn registers_changed(step: &Step) -> impl Iterator<Item = Register> + '_ {
    step.changes.iter().filter_map(|change| match *change {
        StateChange::Register { register, .. } => Some(register),
        _ => None,
    })
}

fn privilege_changed(step: &Step) -> bool {
    step.changes
        .iter()
        .any(|change| matches!(change, StateChange::Privilege(_)))
}

/// The first difference between two steps at the same index, given each trace's shadow
/// state after its step.
fn differ(
    a: &Step,
    shadow_a: &Shadow,
    b: &Step,
    shadow_b: &Shadow,
    options: &CompareOptions,
) -> Option<Difference> {
    if core::mem::discriminant(&a.kind) != core::mem::discriminant(&b.kind) {
        return Some(Difference::StepKind {
            a: a.kind,
            b: b.kind,
        });
    }
    if a.pc() != b.pc() {
        return Some(Difference::Pc {
            a: a.pc(),
            b: b.pc(),
        });
    }
    if let (
        StepKind::Instruction { bits: bits_a, .. },
        StepKind::Instruction { bits: bits_b, .. },
    ) = (a.kind, b.kind)
    {
        if bits_a != bits_b {
            return Some(Difference::Instruction {
                a: bits_a,
                b: bits_b,
            });
        }
    }
    if next_pc(&a.kind) != next_pc(&b.kind) {
        return Some(Difference::NextPc {
            a: next_pc(&a.kind),
            b: next_pc(&b.kind),
        });
    }
    // Every register either step changed, compared in both shadows: this catches a
    // write one side made and the other did not, not only different values. The lowest
    // such register is reported.
    let differing = registers_changed(a)
        .chain(registers_changed(b))
        .filter(|register| !options.ignored_registers.contains(register))
        .filter(|&register| shadow_a.register(register) != shadow_b.register(register))
        .min();
    if let Some(register) = differing {
        return Some(Difference::Register {
            register,
            a: shadow_a.register(register),
            b: shadow_b.register(register),
        });
    }
    if (privilege_changed(a) || privilege_changed(b))
        && shadow_a.privilege() != shadow_b.privilege()
    {
        return Some(Difference::Privilege {
            a: shadow_a.privilege(),
            b: shadow_b.privilege(),
        });
    }
    let mut memory_a = a.changes.iter().filter(|change| is_memory(change));
    let mut memory_b = b.changes.iter().filter(|change| is_memory(change));
    loop {
        match (memory_a.next(), memory_b.next()) {
            (None, None) => break,
            (change_a, change_b) if change_a != change_b => {
                return Some(Difference::Memory {
                    a: change_a.copied(),
                    b: change_b.copied(),
                })
            }
            _ => {}
        }
    }
    if options.timer == TimerComparison::Compare && mtime(a) != mtime(b) {
        return Some(Difference::Timer {
            a: mtime(a),
            b: mtime(b),
        });
    }
    None
}

/// Walks both traces step by step and reports the first step where they differ.
///
/// # Errors
///
/// [`CompareError`] naming the trace that could not be followed (before any difference
/// was found).
pub fn compare(
    mut a: StepDecoder<'_>,
    mut b: StepDecoder<'_>,
    options: &CompareOptions,
) -> Result<Comparison, CompareError> {
    let mut steps_compared = 0u64;
    // Each side decodes into one step, reused.
    let (mut step_a, mut step_b) = (Step::empty(), Step::empty());
    loop {
        let more_a = a
            .next_step_into(&mut step_a)
            .map_err(|error| CompareError {
                trace: Trace::A,
                error,
            })?;
        let more_b = b
            .next_step_into(&mut step_b)
            .map_err(|error| CompareError {
                trace: Trace::B,
                error,
            })?;
        let difference = match (more_a, more_b) {
            (false, false) => {
                return Ok(Comparison {
                    steps_compared,
                    divergence: None,
                })
            }
            (false, true) => Some(Difference::TraceEnds { which: Trace::A }),
            (true, false) => Some(Difference::TraceEnds { which: Trace::B }),
            (true, true) => differ(&step_a, a.shadow(), &step_b, b.shadow(), options),
        };
        if let Some(difference) = difference {
            return Ok(Comparison {
                steps_compared,
                divergence: Some(Divergence {
                    step: steps_compared,
                    position_a: position(more_a.then_some(&step_a), a.records().position()),
                    position_b: position(more_b.then_some(&step_b), b.records().position()),
                    difference,
                }),
            });
        }
        steps_compared = steps_compared.saturating_add(1);
    }
}
