//! What the trace needs to know of one instruction, read from the code image: where the
//! next one is, how it transfers control and which data it accesses. The encoder and the
//! decoder classify with the same function, so they cannot disagree on what is inferable.

use code_image::{CodeImage, DecodeOptions};
use riscv_insn::{ControlFlow, Itype, Mnemonic};
use trace_elements::{MemoryOperation, RangeEnd};

/// How an instruction hands control on, as the trace module sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Flow {
    Sequential,
    /// A conditional branch to `target`.
    Branch {
        target: u64,
    },
    /// `jal`, `c.j`, `c.jal`: the target is in the instruction; `end` is Call or Jump.
    DirectJump {
        target: u64,
        end: RangeEnd,
    },
    /// The destination is not in the code: `jalr`, traps, trap returns, table jumps.
    Uninferable {
        end: RangeEnd,
    },
}

/// Which way a memory instruction moves data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Direction {
    Load,
    Store,
    /// Atomic memory operations read and write.
    Both,
}

/// The data an instruction accesses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    Memory {
        direction: Direction,
        operation: MemoryOperation,
        size: u8,
    },
    /// A CSR instruction: the CSR's address and the integer register it writes.
    Csr { csr: u16, destination: u8 },
}

/// One instruction of the image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Fetched {
    pub(crate) next: u64,
    pub(crate) flow: Flow,
    pub(crate) access: Option<Access>,
}

/// The instruction at `pc`, `None` when the image has none there (unmapped, odd, or a
/// reserved length).
pub(crate) fn fetch(code: &CodeImage, pc: u64) -> Option<Fetched> {
    if pc % 2 != 0 {
        return None;
    }
    let mut bytes = [0u8; 4];
    let read = code.read(pc, &mut bytes);
    if read < 2 {
        return None;
    }
    let raw = u32::from_le_bytes(bytes);
    let options: DecodeOptions = code
        .machine_at(pc)
        .and_then(|machine| machine.riscv())
        .map(|info| info.options)
        .unwrap_or_default();
    let instruction = riscv_insn::decode(raw, options).ok()?;
    if usize::from(instruction.length) > read {
        return None;
    }
    let next = pc.checked_add(u64::from(instruction.length))?;
    let xlen = options.xlen;
    let flow = match instruction.control_flow {
        ControlFlow::Sequential => Flow::Sequential,
        ControlFlow::Branch { .. } => Flow::Branch {
            target: instruction.direct_target(pc, xlen)?,
        },
        ControlFlow::Jump { .. } => Flow::DirectJump {
            target: instruction.direct_target(pc, xlen)?,
            end: if instruction.links() {
                RangeEnd::Call
            } else {
                RangeEnd::Jump
            },
        },
        ControlFlow::JumpRegister { .. } => Flow::Uninferable {
            end: match instruction.itype(true) {
                Itype::UninferableCall => RangeEnd::IndirectCall,
                Itype::CoroutineSwap => RangeEnd::CoroutineSwap,
                Itype::Return => RangeEnd::Return,
                _ => RangeEnd::IndirectJump,
            },
        },
        // rvperf does not read Zcmt jump tables here: the trace sends the destination.
        ControlFlow::TableJump { .. } => Flow::Uninferable {
            end: if instruction.links() {
                RangeEnd::IndirectCall
            } else {
                RangeEnd::IndirectJump
            },
        },
        ControlFlow::PopReturn => Flow::Uninferable {
            end: RangeEnd::Return,
        },
        ControlFlow::EnvironmentTrap => Flow::Uninferable {
            end: RangeEnd::EnvironmentCall,
        },
        ControlFlow::TrapReturn => Flow::Uninferable {
            end: RangeEnd::TrapReturn,
        },
    };
    Some(Fetched {
        next,
        flow,
        access: access_of(instruction.mnemonic, raw),
    })
}

/// Entries of [`FetchCache`]: a power of two; 4096 instructions cover the hot code of
/// the test programs, at about 200 KiB.
const CACHE_ENTRIES: usize = 4096;

/// Instructions already fetched, direct-mapped by address: reading the image (two
/// segment searches) and decoding cost more than the rest of a decoder's step, and
/// traced code runs the same instructions over and over. The image is borrowed for the
/// cache's life, so an entry never goes stale.
#[derive(Debug)]
pub(crate) struct FetchCache<'a> {
    code: &'a CodeImage,
    entries: Vec<Option<(u64, Fetched)>>,
}

impl<'a> FetchCache<'a> {
    pub(crate) fn new(code: &'a CodeImage) -> Self {
        Self {
            code,
            entries: vec![None; CACHE_ENTRIES],
        }
    }

    /// As [`fetch`]; instructions that are not there are not cached (a walk stops at
    /// the first one).
    pub(crate) fn fetch(&mut self, pc: u64) -> Option<Fetched> {
        // Instructions are 2-byte aligned: the low bit carries no information.
        let index = usize::try_from(pc >> 1).unwrap_or(0) & (CACHE_ENTRIES - 1);
        if let Some(Some((address, fetched))) = self.entries.get(index) {
            if *address == pc {
                return Some(*fetched);
            }
        }
        let fetched = fetch(self.code, pc)?;
        if let Some(slot) = self.entries.get_mut(index) {
            *slot = Some((pc, fetched));
        }
        Some(fetched)
    }
}

fn access_of(mnemonic: Mnemonic, raw: u32) -> Option<Access> {
    use Direction::{Both, Load, Store};
    use MemoryOperation as O;
    use Mnemonic as M;
    let (direction, operation, size) = match mnemonic {
        M::Lb | M::Lbu | M::HlvB | M::HlvBu => (Load, O::Load, 1),
        M::Lh | M::Lhu | M::HlvH | M::HlvHu | M::HlvxHu => (Load, O::Load, 2),
        M::Lw
        | M::Lwu
        | M::Flw
        | M::CLw
        | M::CFlw
        | M::CLwsp
        | M::CFlwsp
        | M::HlvW
        | M::HlvWu
        | M::HlvxWu => (Load, O::Load, 4),
        M::Ld | M::Fld | M::CLd | M::CFld | M::CLdsp | M::CFldsp | M::HlvD => (Load, O::Load, 8),
        M::Sb | M::HsvB => (Store, O::Store, 1),
        M::Sh | M::HsvH => (Store, O::Store, 2),
        M::Sw | M::Fsw | M::CSw | M::CFsw | M::CSwsp | M::CFswsp | M::HsvW => (Store, O::Store, 4),
        M::Sd | M::Fsd | M::CSd | M::CFsd | M::CSdsp | M::CFsdsp | M::HsvD => (Store, O::Store, 8),
        M::LrW => (Load, O::LoadReserved, 4),
        M::LrD => (Load, O::LoadReserved, 8),
        M::ScW => (Store, O::StoreConditional, 4),
        M::ScD => (Store, O::StoreConditional, 8),
        M::AmoswapW => (Both, O::AtomicSwap, 4),
        M::AmoaddW => (Both, O::AtomicAdd, 4),
        M::AmoxorW => (Both, O::AtomicXor, 4),
        M::AmoandW => (Both, O::AtomicAnd, 4),
        M::AmoorW => (Both, O::AtomicOr, 4),
        M::AmominW => (Both, O::AtomicMin, 4),
        M::AmomaxW => (Both, O::AtomicMax, 4),
        M::AmominuW => (Both, O::AtomicMinUnsigned, 4),
        M::AmomaxuW => (Both, O::AtomicMaxUnsigned, 4),
        M::AmoswapD => (Both, O::AtomicSwap, 8),
        M::AmoaddD => (Both, O::AtomicAdd, 8),
        M::AmoxorD => (Both, O::AtomicXor, 8),
        M::AmoandD => (Both, O::AtomicAnd, 8),
        M::AmoorD => (Both, O::AtomicOr, 8),
        M::AmominD => (Both, O::AtomicMin, 8),
        M::AmomaxD => (Both, O::AtomicMax, 8),
        M::AmominuD => (Both, O::AtomicMinUnsigned, 8),
        M::AmomaxuD => (Both, O::AtomicMaxUnsigned, 8),
        M::Csrrw | M::Csrrs | M::Csrrc | M::Csrrwi | M::Csrrsi | M::Csrrci => {
            return Some(Access::Csr {
                csr: (raw >> 20) as u16,
                destination: ((raw >> 7) & 31) as u8,
            })
        }
        _ => return None,
    };
    Some(Access::Memory {
        direction,
        operation,
        size,
    })
}

/// Which data sequences an instruction can be the source of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DataSide {
    /// Load Address / Load Data.
    Load,
    /// Store Address / Store Data.
    Store,
}

/// Whether a data sequence of `side` can belong to an instruction with `access`; an
/// address sequence (`with_address`) only to memory instructions.
pub(crate) fn accepts(access: Option<Access>, side: DataSide, with_address: bool) -> bool {
    match access {
        None => false,
        Some(Access::Csr { .. }) => !with_address,
        Some(Access::Memory { direction, .. }) => matches!(
            (direction, side),
            (Direction::Both, _)
                | (Direction::Load, DataSide::Load)
                | (Direction::Store, DataSide::Store)
        ),
    }
}
