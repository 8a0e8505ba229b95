//! Instruction steps, shadow state and divergence search over tandem-verification traces;
//! protocol-free trace elements; an encoder from architectural state.
//!
//! Layers, each pull-based over the one below:
//!
//! - [`StepDecoder`]: one [`Step`] per begin/end group (or per record outside a group),
//!   applied to a [`Shadow`] state: registers (incremental updates resolved), pc and
//!   privilege. A group's pc value is the pc *after* it, so an instruction's own address
//!   is the pc before its group (docs/tandem-protocol-choices.md).
//!   [`StepDecoder::next_step_into`] decodes into one step, reusing its allocation.
//! - [`TandemElements`]: [`trace_elements::ElementSource`] over the steps.
//! - [`compare`]: the spec's §3.1 comparison of collected state changes, step by step.
//! - [`TandemEncoder`]: groups from retired instructions or from before/after states.
//!
//! ```
//! use tandem_flow::{StepDecoder, StepKind};
//! use tandem_message::{InstructionBits, Parameters, Register};
//!
//! // A pc, then appendix C.1 (add gp, t0, t1).
//! let bytes = [
//!     0x01, 0x07, 0x10, 0x00, 0x10, 0, 0, 0, 0, 0, 0, 0x02,
//!     0x01, 0x03, 0x11, 0xb3, 0x81, 0x62, 0x00, 0x04, 0x03, 0x10, 0x34, 0x12, 0, 0, 0, 0,
//!     0, 0, 0x02,
//! ];
//! let mut steps = StepDecoder::new(&bytes, Parameters::default());
//! assert_eq!(steps.next_step().unwrap().unwrap().kind, StepKind::PcSet { next_pc: 0x1000 });
//! let add = steps.next_step().unwrap().unwrap();
//! assert_eq!(
//!     add.kind,
//!     StepKind::Instruction { pc: 0x1000, bits: InstructionBits::bits32(0x0062_81b3), next_pc: 0x1004 }
//! );
//! assert_eq!(steps.shadow().register(Register::Integer(3)), Some(0x1234));
//! assert_eq!(steps.next_step(), Ok(None));
//! ```

#![forbid(unsafe_code)]

mod compare;
mod elements;
mod encoder;
mod step;

pub use compare::{
    compare, CompareError, CompareOptions, Comparison, Difference, Divergence, Position,
    TimerComparison, Trace, DEFAULT_IGNORED_CSRS,
};
pub use elements::{ElementOptions, StateElements, TandemElements};
pub use encoder::{
    memory_operation, ArchitecturalState, EncoderOptions, Interrupt, MemoryRecord, PcUpdates,
    Retirement, TandemEncoder, Tracing,
};
pub use step::{
    FlowError, MemoryAccess, MemoryResponse, Shadow, StateChange, Step, StepDecoder, StepErrorKind,
    StepKind,
};
