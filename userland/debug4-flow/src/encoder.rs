//! The trace source model: retired instructions in, the trace module's packets out.

use std::collections::BTreeMap;

use code_image::CodeImage;
use debug4_message::{
    BufferMode, EncodedTrace, InterruptEnable, OutgoingSequence, PcGranularity, Privilege,
    PrivilegeCause, SequenceEncoder, SequenceEncoderOptions,
};

use crate::code::{accepts, DataSide, FetchCache, Fetched, Flow};
use crate::BranchReporting;

/// Whether one kind of data sequence is sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Emission {
    #[default]
    Off,
    On,
}

/// Which data sequences are sent (the specification's `emitloadaddr`, `emitloaddata`,
/// `emitstoreaddr`, `emitstoredata`). CSR reads are sent as Load Data and CSR writes as
/// Store Data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct DataEmission {
    pub load_address: Emission,
    pub load_data: Emission,
    pub store_address: Emission,
    pub store_data: Emission,
}

impl DataEmission {
    /// Every data sequence.
    #[must_use]
    pub const fn all() -> Self {
        Self {
            load_address: Emission::On,
            load_data: Emission::On,
            store_address: Emission::On,
            store_data: Emission::On,
        }
    }
}

/// The encoder's settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct EncoderOptions {
    pub branch_reporting: BranchReporting,
    pub buffer: BufferMode,
    pub data: DataEmission,
    /// A Timestamp sequence every this many retired instructions (of all harts); 0: never.
    pub timestamp_interval: u64,
}

impl EncoderOptions {
    #[must_use]
    pub fn with_branch_reporting(mut self, branch_reporting: BranchReporting) -> Self {
        self.branch_reporting = branch_reporting;
        self
    }

    #[must_use]
    pub fn with_buffer(mut self, buffer: BufferMode) -> Self {
        self.buffer = buffer;
        self
    }

    #[must_use]
    pub fn with_data(mut self, data: DataEmission) -> Self {
        self.data = data;
        self
    }

    #[must_use]
    pub fn with_timestamp_interval(mut self, timestamp_interval: u64) -> Self {
        self.timestamp_interval = timestamp_interval;
        self
    }
}

/// What kind of data access a retired instruction made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AccessKind {
    Load,
    Store,
    CsrRead,
    CsrWrite,
}

/// The data access of a retired instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DataAccess {
    pub kind: AccessKind,
    /// The effective address (loads and stores).
    pub address: Option<u64>,
    /// The data loaded or stored, the CSR value read or written.
    pub value: Option<u64>,
}

/// One retired instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Retirement {
    pub hart: u16,
    pub pc: u64,
    /// The privilege level it ran at (0 U, 1 S, 3 M), when known.
    pub privilege: Option<u8>,
    pub data: Option<DataAccess>,
    /// The time, for timestamps; the count of retired instructions is used without it.
    pub time: Option<u64>,
}

impl Retirement {
    /// An instruction of `hart` at `pc` with nothing else known.
    #[must_use]
    pub const fn at(hart: u16, pc: u64) -> Self {
        Self {
            hart,
            pc,
            privilege: None,
            data: None,
            time: None,
        }
    }
}

/// Why the encoder refused its input.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    #[error(transparent)]
    Stream(#[from] debug4_message::EncodeError),
    /// The image has no instruction at the retired PC.
    #[error("no instruction in the code image at {pc:#x}")]
    NoCode { pc: u64 },
    /// The data access does not fit the instruction (a store reported for a load, an
    /// address for a CSR access): the decoder would place it on another instruction.
    #[error("the {kind:?} access reported at {pc:#x} does not fit the instruction there")]
    AccessMismatch { pc: u64, kind: AccessKind },
    /// A sequence the options ask for needs a value the retirement does not give.
    #[error("the {kind:?} access at {pc:#x} lacks the {what} the options ask to send")]
    MissingAccessValue {
        pc: u64,
        kind: AccessKind,
        what: &'static str,
    },
    /// A privilege level beyond 2 bits.
    #[error("privilege level {level} at {pc:#x} does not fit 2 bits")]
    BadPrivilege { pc: u64, level: u8 },
}

/// Whether a hart's trace is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tracing {
    /// Its next retirement starts with Trace Enabled and the start PC.
    Off,
    On,
}

/// The last retired instruction, waiting for the next to show where control went.
#[derive(Clone, Copy, Debug)]
struct Pending {
    pc: u64,
    fetched: Fetched,
}

/// What an instruction's successor says of it.
enum Resolution {
    /// The trace needs these sequences (possibly none).
    Sequences([Option<OutgoingSequence>; 2]),
    /// The successor is none the instruction can lead to: an asynchronous transfer
    /// (a signal, an interrupt the input did not flag).
    Discontinuity,
}

#[derive(Clone, Copy, Debug)]
struct HartState {
    tracing: Tracing,
    pending: Option<Pending>,
    /// An interrupt was flagged: the last instruction before it, to send with the
    /// handler's address once that retires.
    interrupted_after: Option<u64>,
    privilege: Option<u8>,
}

/// Encodes retired instructions; see the crate documentation.
#[derive(Debug)]
pub struct Debug4Encoder<'a> {
    code: FetchCache<'a>,
    options: EncoderOptions,
    sequences: SequenceEncoder,
    harts: BTreeMap<u16, HartState>,
    retired: u64,
}

impl<'a> Debug4Encoder<'a> {
    pub fn new(code: &'a CodeImage, options: EncoderOptions) -> Result<Self, EncodeError> {
        let sequences = SequenceEncoder::new(
            SequenceEncoderOptions::default()
                .with_buffer(options.buffer)
                .with_pc_granularity(PcGranularity::Halfword),
        )?;
        Ok(Self {
            code: FetchCache::new(code),
            options,
            sequences,
            harts: BTreeMap::new(),
            retired: 0,
        })
    }

    pub fn options(&self) -> EncoderOptions {
        self.options
    }

    /// One retired instruction.
    pub fn retire(&mut self, retirement: &Retirement) -> Result<(), EncodeError> {
        let pc = retirement.pc;
        let fetched = self.code.fetch(pc).ok_or(EncodeError::NoCode { pc })?;
        if let Some(level) = retirement.privilege.filter(|&level| level > 3) {
            return Err(EncodeError::BadPrivilege { pc, level });
        }
        let data = self.data_sequences(retirement, fetched)?;
        let hart = retirement.hart;
        let id = u64::from(hart);
        let mut state = self.harts.get(&hart).copied().unwrap_or(HartState {
            tracing: Tracing::Off,
            pending: None,
            interrupted_after: None,
            privilege: None,
        });
        let privilege_changed =
            retirement.privilege.is_some() && retirement.privilege != state.privilege;
        match state.tracing {
            Tracing::Off => {
                self.sequences.write_unit(
                    id,
                    &[
                        OutgoingSequence::TraceEnabled,
                        OutgoingSequence::Pc { address: pc },
                    ],
                )?;
                state.tracing = Tracing::On;
                if privilege_changed {
                    self.write_privilege(id, retirement.privilege, PrivilegeCause::Other)?;
                }
            }
            Tracing::On => {
                let interrupted_after = match state.pending.take() {
                    Some(pending) => match self.resolve(pending, pc) {
                        Resolution::Sequences(sequences) => {
                            let sequences: Vec<OutgoingSequence> =
                                sequences.into_iter().flatten().collect();
                            if !sequences.is_empty() {
                                self.sequences.write_unit(id, &sequences)?;
                            }
                            state.interrupted_after
                        }
                        Resolution::Discontinuity => Some(pending.pc),
                    },
                    None => state.interrupted_after,
                };
                if let Some(last) = interrupted_after {
                    let level = retirement.privilege.or(state.privilege).unwrap_or(0);
                    let privilege = Privilege {
                        cause: PrivilegeCause::Interrupt,
                        level,
                        interrupts: InterruptEnable::Disabled,
                    };
                    self.sequences.write_unit(
                        id,
                        &[
                            OutgoingSequence::Pc { address: last },
                            OutgoingSequence::Privilege(privilege),
                            OutgoingSequence::Pc { address: pc },
                        ],
                    )?;
                } else if privilege_changed {
                    self.write_privilege(id, retirement.privilege, PrivilegeCause::Other)?;
                }
            }
        }
        state.interrupted_after = None;
        if retirement.privilege.is_some() {
            state.privilege = retirement.privilege;
        }
        if !data.is_empty() {
            self.sequences.write_unit(id, &data)?;
        }
        state.pending = Some(Pending { pc, fetched });
        self.harts.insert(hart, state);
        self.retired = self.retired.saturating_add(1);
        let interval = self.options.timestamp_interval;
        if interval != 0 && self.retired % interval == 0 {
            let time = retirement.time.unwrap_or(self.retired);
            self.sequences
                .write_unit(id, &[OutgoingSequence::Timestamp { time }])?;
        }
        Ok(())
    }

    /// An interrupt (or any asynchronous trap) on `hart`: the instruction at `resume_pc`
    /// did not run; the hart's next retirement is the handler's first instruction.
    pub fn interrupt(&mut self, hart: u16, resume_pc: u64) -> Result<(), EncodeError> {
        let Some(mut state) = self.harts.get(&hart).copied() else {
            return Ok(());
        };
        if state.tracing == Tracing::Off {
            return Ok(());
        }
        let last = match state.pending.take() {
            Some(pending) => {
                // The interrupted instruction is where the last one led: send what it
                // needs; if it could not lead there, the interrupt unit's PC says where
                // the trace stopped anyway.
                if let Resolution::Sequences(sequences) = self.resolve(pending, resume_pc) {
                    let sequences: Vec<OutgoingSequence> =
                        sequences.into_iter().flatten().collect();
                    if !sequences.is_empty() {
                        self.sequences.write_unit(u64::from(hart), &sequences)?;
                    }
                }
                pending.pc
            }
            None => state.interrupted_after.unwrap_or(resume_pc),
        };
        state.interrupted_after = Some(last);
        self.harts.insert(hart, state);
        Ok(())
    }

    /// The trace module dropped data of `hart`: Trace Disabled now, and the next
    /// retirement starts over with Trace Enabled and a full PC. Whatever the last
    /// instruction's packets would have said is lost.
    pub fn data_dropped(&mut self, hart: u16) -> Result<(), EncodeError> {
        let Some(mut state) = self.harts.get(&hart).copied() else {
            return Ok(());
        };
        if state.tracing == Tracing::On {
            self.sequences
                .write_unit(u64::from(hart), &[OutgoingSequence::TraceDisabled])?;
        }
        state.tracing = Tracing::Off;
        state.pending = None;
        state.interrupted_after = None;
        self.harts.insert(hart, state);
        Ok(())
    }

    /// Ends every hart's trace (the PC of its last instruction, then Trace Disabled) and
    /// hands over the buffer.
    pub fn finish(mut self) -> Result<EncodedTrace, EncodeError> {
        let harts: Vec<(u16, HartState)> = self
            .harts
            .iter()
            .map(|(&hart, &state)| (hart, state))
            .collect();
        for (hart, state) in harts {
            if state.tracing == Tracing::Off {
                continue;
            }
            let last = state
                .pending
                .map(|pending| pending.pc)
                .or(state.interrupted_after);
            if let Some(last) = last {
                self.sequences.write_unit(
                    u64::from(hart),
                    &[
                        OutgoingSequence::Pc { address: last },
                        OutgoingSequence::TraceDisabled,
                    ],
                )?;
            }
        }
        Ok(self.sequences.finish())
    }

    fn write_privilege(
        &mut self,
        hart: u64,
        level: Option<u8>,
        cause: PrivilegeCause,
    ) -> Result<(), EncodeError> {
        let Some(level) = level else {
            return Ok(());
        };
        let privilege = Privilege {
            cause,
            level,
            interrupts: InterruptEnable::Disabled,
        };
        self.sequences
            .write_unit(hart, &[OutgoingSequence::Privilege(privilege)])?;
        Ok(())
    }

    /// The sequences `pending` needs now that its successor is at `successor`.
    fn resolve(&self, pending: Pending, successor: u64) -> Resolution {
        let Pending { pc, fetched } = pending;
        let pair = [
            Some(OutgoingSequence::Pc { address: pc }),
            Some(OutgoingSequence::Pc { address: successor }),
        ];
        let nothing = Resolution::Sequences([None, None]);
        let one = |sequence| Resolution::Sequences([Some(sequence), None]);
        match (fetched.flow, self.options.branch_reporting) {
            (Flow::Sequential, _) => {
                if successor == fetched.next {
                    nothing
                } else {
                    Resolution::Discontinuity
                }
            }
            (Flow::Branch { target }, reporting) => {
                let taken = successor == target;
                if !taken && successor != fetched.next {
                    return Resolution::Discontinuity;
                }
                match (reporting, taken) {
                    (BranchReporting::TakenNotTaken, true) => one(OutgoingSequence::BranchTaken),
                    (BranchReporting::TakenNotTaken, false) => {
                        one(OutgoingSequence::BranchNotTaken)
                    }
                    (BranchReporting::PcPairs, true) => Resolution::Sequences(pair),
                    (BranchReporting::PcPairs, false) => nothing,
                }
            }
            (Flow::DirectJump { target, .. }, reporting) => {
                if successor != target {
                    return Resolution::Discontinuity;
                }
                match reporting {
                    BranchReporting::TakenNotTaken => nothing,
                    BranchReporting::PcPairs => Resolution::Sequences(pair),
                }
            }
            (Flow::Uninferable { .. }, BranchReporting::TakenNotTaken) => {
                one(OutgoingSequence::Pc { address: successor })
            }
            (Flow::Uninferable { .. }, BranchReporting::PcPairs) => Resolution::Sequences(pair),
        }
    }

    /// The data sequences of `retirement`, checked against the instruction.
    fn data_sequences(
        &self,
        retirement: &Retirement,
        fetched: Fetched,
    ) -> Result<Vec<OutgoingSequence>, EncodeError> {
        let Some(access) = retirement.data else {
            return Ok(Vec::new());
        };
        let pc = retirement.pc;
        let kind = access.kind;
        let emission = self.options.data;
        let (side, memory, address_emission, data_emission) = match kind {
            AccessKind::Load => (
                DataSide::Load,
                true,
                emission.load_address,
                emission.load_data,
            ),
            AccessKind::Store => (
                DataSide::Store,
                true,
                emission.store_address,
                emission.store_data,
            ),
            AccessKind::CsrRead => (DataSide::Load, false, Emission::Off, emission.load_data),
            AccessKind::CsrWrite => (DataSide::Store, false, Emission::Off, emission.store_data),
        };
        if address_emission == Emission::Off && data_emission == Emission::Off {
            return Ok(Vec::new());
        }
        let fits = match fetched.access {
            Some(crate::code::Access::Csr { .. }) => !memory,
            Some(crate::code::Access::Memory { .. }) => memory,
            None => false,
        } && accepts(fetched.access, side, false);
        if !fits {
            return Err(EncodeError::AccessMismatch { pc, kind });
        }
        let mut sequences = Vec::with_capacity(2);
        if address_emission == Emission::On {
            let address = access.address.ok_or(EncodeError::MissingAccessValue {
                pc,
                kind,
                what: "address",
            })?;
            sequences.push(match side {
                DataSide::Load => OutgoingSequence::LoadAddress { address },
                DataSide::Store => OutgoingSequence::StoreAddress { address },
            });
        }
        if data_emission == Emission::On {
            let value = access.value.ok_or(EncodeError::MissingAccessValue {
                pc,
                kind,
                what: "value",
            })?;
            sequences.push(match side {
                DataSide::Load => OutgoingSequence::LoadData { value },
                DataSide::Store => OutgoingSequence::StoreData { value },
            });
        }
        Ok(sequences)
    }
}
