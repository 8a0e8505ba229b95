//! Pre-decoded basic blocks, cached per code address (libipt's block cache idea).
//!
//! A block runs from an address to the first instruction that can change the flow (or
//! to a size limit). Walking the trace's I-CNT over whole blocks costs one lookup per
//! block instead of one decode per instruction; only the rare walk that stops inside a
//! block looks at single instructions, and then from the lengths stored here.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use code_image::CodeImage;
use riscv_insn::{decode, ControlFlow, DecodeOptions, Itype, Xlen};

/// A basic block of the code image that ran, for block profiles
/// ([`FlowDecoder::block_profile`](crate::FlowDecoder::block_profile)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockExecutions {
    /// The block's first instruction.
    pub start: u64,
    /// The address of its last instruction.
    pub last: u64,
    /// Instructions executed from the block's start (a run may leave a block early).
    pub instructions: u64,
}

/// Instructions per block at most: the per-instruction lengths must fit in `lengths`.
pub(crate) const MAX_BLOCK_INSTRUCTIONS: u32 = 64;
const PAGE_SHIFT: u32 = 12;
const PAGE_SLOTS: usize = 1 << (PAGE_SHIFT - 1);
/// Entries of the direct-mapped page cache in front of the page map: code jumps between
/// a handful of pages far more often than it touches new ones.
const TLB_ENTRIES: usize = 64;

/// Page numbers are already well spread; a multiply is all the hashing they need.
#[derive(Default)]
struct PageHasher(u64);

impl Hasher for PageHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(byte)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_u64(&mut self, value: u64) {
        self.0 = value.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// How to decode the code of one image file: the options `code-image` read from its ELF.
pub use code_image::FileDecodeInfo;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IndirectKind {
    Call,
    Return,
    CoroutineSwap,
    Other,
    TrapReturn,
}

/// The instruction that ends a block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Terminator {
    /// No control transfer: the block hit its size limit or undecodable bytes follow.
    Fallthrough,
    Branch {
        target: u64,
    },
    /// Direct jumps, and Zcmt table jumps whose table is known.
    Jump {
        target: u64,
        links: bool,
    },
    /// A direct jump or call (`jal`, `c.j`, `c.jal`) the encoder reports as a taken
    /// branch (trTeInstEnAllJumps): the trace confirms it as it does a taken branch.
    /// Only in the blocks of a decoder told so ([`crate::DecoderOptions::all_jumps`]).
    ReportedJump {
        target: u64,
        links: bool,
    },
    /// Needs the trace (or the return stack, or a preceding constant load) for its target.
    Indirect {
        kind: IndirectKind,
        inferred_target: Option<u64>,
        links: bool,
    },
    /// `ecall`/`ebreak`: retires, then traps.
    EnvironmentCall,
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct Block {
    pub(crate) start: u64,
    /// Address of the last instruction.
    pub(crate) last: u64,
    /// Address after the last instruction.
    pub(crate) next: u64,
    /// Size in 16-bit units, as I-CNT counts.
    pub(crate) units: u32,
    pub(crate) instructions: u32,
    /// Two bits per instruction, first instruction lowest: length / 2 - 1.
    pub(crate) lengths: u128,
    pub(crate) terminator: Terminator,
    /// Blocks that follow this one without the trace's help, once seen: index 0 for the
    /// next instruction (fall-through, branch not taken, ecall), 1 for the branch or
    /// jump target; `NO_BLOCK` until first used. Following these links skips the
    /// address lookup on most block-to-block steps (QEMU chains its blocks the same way).
    pub(crate) successors: [u32; 2],
}

/// No block.
pub(crate) const NO_BLOCK: u32 = u32::MAX;

impl Block {
    /// Length in bytes of instruction `index` of the block.
    #[inline]
    pub(crate) fn length_of(&self, index: u32) -> u64 {
        (((self.lengths >> (2 * index)) & 3) as u64 + 1) * 2
    }

    /// Walks `units` 16-bit units from the start: the number of instructions covered, the
    /// address of the last one and the address after it; `None` when `units` ends inside
    /// an instruction.
    pub(crate) fn prefix(&self, units: u64) -> Option<(u32, u64, u64)> {
        let mut address = self.start;
        let mut last = self.start;
        let mut left = units;
        let mut count = 0;
        while left > 0 {
            if count >= self.instructions {
                return None;
            }
            let length = self.length_of(count);
            let length_units = length / 2;
            if length_units > left {
                return None;
            }
            left -= length_units;
            last = address;
            address = address.wrapping_add(length);
            count += 1;
        }
        Some((count, last, address))
    }
}

/// Why a block could not be built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BlockError {
    Unmapped,
    Undecodable,
    Misaligned,
}

#[derive(Debug)]
pub(crate) struct BlockCache {
    pub(crate) blocks: Vec<Block>,
    /// Instructions executed from each block's start, for profiles.
    pub(crate) executed: Vec<u64>,
    /// Page number -> index into `tables`; each table maps a half-word slot to block + 1.
    pages: HashMap<u64, u32, BuildHasherDefault<PageHasher>>,
    tables: Vec<Box<[u32; PAGE_SLOTS]>>,
    /// (page number + 1, table) by page number modulo TLB_ENTRIES; 0 marks an empty entry.
    tlb: [(u64, u32); TLB_ENTRIES],
    /// Direct jumps and calls end their blocks as [`Terminator::ReportedJump`].
    all_jumps: bool,
}

impl Default for BlockCache {
    fn default() -> Self {
        Self {
            blocks: Vec::new(),
            executed: Vec::new(),
            pages: HashMap::default(),
            tables: Vec::new(),
            tlb: [(0, 0); TLB_ENTRIES],
            all_jumps: false,
        }
    }
}

impl BlockCache {
    /// An empty cache whose blocks end at direct jumps and calls reported as taken
    /// branches when `all_jumps` (trTeInstEnAllJumps).
    pub(crate) fn new(all_jumps: bool) -> Self {
        Self {
            all_jumps,
            ..Self::default()
        }
    }

    /// An empty cache of another code, decoding as this one does.
    pub(crate) fn empty_like(&self) -> Self {
        Self::new(self.all_jumps)
    }

    #[cfg(test)]
    pub(crate) fn block(&self, index: u32) -> &Block {
        &self.blocks[index as usize]
    }

    pub(crate) fn len(&self) -> usize {
        self.blocks.len()
    }

    /// The blocks that ran, with how many instructions ran from each one's start.
    pub(crate) fn executed(&self) -> impl Iterator<Item = BlockExecutions> + '_ {
        self.blocks
            .iter()
            .zip(&self.executed)
            .filter(|(_, &count)| count > 0)
            .map(|(block, &instructions)| BlockExecutions {
                start: block.start,
                last: block.last,
                instructions,
            })
    }

    /// The slot table of `page`, if the page has one.
    #[inline]
    fn table_of(&mut self, page: u64) -> Option<u32> {
        let slot = (page as usize) % TLB_ENTRIES;
        let (key, table) = self.tlb[slot];
        if key == page.wrapping_add(1) {
            return Some(table);
        }
        let table = *self.pages.get(&page)?;
        self.tlb[slot] = (page.wrapping_add(1), table);
        Some(table)
    }

    /// Creates the slot table of `page`: only once a block was decoded there, so that
    /// addresses from a corrupt trace cannot make the cache allocate for unmapped pages.
    fn new_table(&mut self, page: u64) -> u32 {
        self.tables.push(Box::new([0; PAGE_SLOTS]));
        let table = (self.tables.len() - 1) as u32;
        self.pages.insert(page, table);
        self.tlb[(page as usize) % TLB_ENTRIES] = (page.wrapping_add(1), table);
        table
    }

    /// Approximate heap bytes held.
    pub(crate) fn footprint(&self) -> usize {
        self.blocks.capacity() * std::mem::size_of::<Block>()
            + self.executed.capacity() * 8
            + self.tables.len() * PAGE_SLOTS * 4
            + self.pages.capacity() * 16
    }

    /// The block starting at `address`, decoding it on first use.
    #[inline]
    pub(crate) fn lookup(
        &mut self,
        image: &CodeImage,
        files: &[FileDecodeInfo],
        address: u64,
    ) -> Result<u32, BlockError> {
        if address & 1 != 0 {
            return Err(BlockError::Misaligned);
        }
        let page = address >> PAGE_SHIFT;
        let slot = ((address & ((1 << PAGE_SHIFT) - 1)) >> 1) as usize;
        let table = self.table_of(page);
        if let Some(table) = table {
            let entry = self.tables[table as usize][slot];
            if entry != 0 {
                return Ok(entry - 1);
            }
        }
        let block = build_block(image, files, address, self.all_jumps)?;
        let table = match table {
            Some(table) => table,
            None => self.new_table(page),
        };
        self.blocks.push(block);
        self.executed.push(0);
        let index = (self.blocks.len() - 1) as u32;
        self.tables[table as usize][slot] = index + 1;
        Ok(index)
    }

    /// The already built block at `address`, if any (no decoding).
    #[inline]
    pub(crate) fn cached(&self, address: u64) -> Option<&Block> {
        let page = address >> PAGE_SHIFT;
        let (key, table) = self.tlb[(page as usize) % TLB_ENTRIES];
        let table = if key == page.wrapping_add(1) {
            table
        } else {
            *self.pages.get(&page)?
        };
        let slot = ((address & ((1 << PAGE_SHIFT) - 1)) >> 1) as usize;
        let entry = self.tables[table as usize][slot];
        (entry != 0).then(|| &self.blocks[(entry - 1) as usize])
    }
}

/// Decodes the instruction at `address`.
pub(crate) fn decode_at(
    image: &CodeImage,
    options: DecodeOptions,
    address: u64,
) -> Result<riscv_insn::Instruction, BlockError> {
    let mut bytes = [0u8; 4];
    let available = image.read(address, &mut bytes);
    if available < 2 {
        return Err(BlockError::Unmapped);
    }
    let first = u16::from_le_bytes([bytes[0], bytes[1]]);
    let needed = riscv_insn::instruction_length(first)
        .bytes()
        .map_or(4, usize::from)
        .min(4);
    if available < needed {
        return Err(BlockError::Unmapped);
    }
    decode(u32::from_le_bytes(bytes), options).map_err(|_| BlockError::Undecodable)
}

/// How to decode the code at `address`: the options of the file that maps it.
pub(crate) fn file_info(
    image: &CodeImage,
    files: &[FileDecodeInfo],
    address: u64,
) -> Option<FileDecodeInfo> {
    let segment = image.segment_index(address)?;
    let file = image.segment(segment)?.file;
    Some(files.get(file).copied().unwrap_or(FileDecodeInfo {
        options: DecodeOptions::default(),
        jvt_base: None,
    }))
}

pub(crate) fn xlen_mask(xlen: Xlen, address: u64) -> u64 {
    match xlen {
        Xlen::Rv32 => address & 0xffff_ffff,
        Xlen::Rv64 => address,
    }
}

fn build_block(
    image: &CodeImage,
    files: &[FileDecodeInfo],
    start: u64,
    all_jumps: bool,
) -> Result<Block, BlockError> {
    let info = file_info(image, files, start).ok_or(BlockError::Unmapped)?;
    let xlen = info.options.xlen;
    let mut address = start;
    let mut block = Block {
        start,
        last: start,
        next: start,
        units: 0,
        instructions: 0,
        lengths: 0,
        terminator: Terminator::Fallthrough,
        successors: [NO_BLOCK; 2],
    };
    // The register and value the previous instruction loaded with lui/auipc/c.lui, for
    // sequential jump inference (spec 9.1): only an immediately preceding load counts.
    let mut constant: Option<(u8, u64)> = None;
    while block.instructions < MAX_BLOCK_INSTRUCTIONS {
        let instruction = match decode_at(image, info.options, address) {
            Ok(instruction) => instruction,
            Err(error) if block.instructions == 0 => return Err(error),
            Err(_) => break,
        };
        block.lengths |= u128::from((instruction.length / 2 - 1) & 3) << (2 * block.instructions);
        block.instructions += 1;
        block.units += u32::from(instruction.length / 2);
        block.last = address;
        let next = xlen_mask(xlen, address.wrapping_add(u64::from(instruction.length)));
        block.next = next;
        let terminator = match instruction.control_flow {
            ControlFlow::Sequential => None,
            ControlFlow::Branch { .. } => instruction
                .direct_target(address, xlen)
                .map(|target| Terminator::Branch { target }),
            ControlFlow::Jump { .. } => {
                let links = instruction.links();
                instruction.direct_target(address, xlen).map(|target| {
                    if all_jumps {
                        Terminator::ReportedJump { target, links }
                    } else {
                        Terminator::Jump { target, links }
                    }
                })
            }
            ControlFlow::JumpRegister { rs1, offset, .. } => {
                let kind = match instruction.itype(false) {
                    Itype::UninferableCall => IndirectKind::Call,
                    Itype::CoroutineSwap => IndirectKind::CoroutineSwap,
                    Itype::Return => IndirectKind::Return,
                    _ => IndirectKind::Other,
                };
                let inferred_target =
                    constant
                        .filter(|&(register, _)| register == rs1)
                        .map(|(_, value)| {
                            xlen_mask(xlen, value.wrapping_add(offset as i64 as u64)) & !1
                        });
                Some(Terminator::Indirect {
                    kind,
                    inferred_target,
                    links: instruction.links(),
                })
            }
            ControlFlow::TableJump { index } => {
                let links = index >= 32;
                let entry_size: u64 = if xlen == Xlen::Rv32 { 4 } else { 8 };
                let target = info.jvt_base.and_then(|base| {
                    let entry = base.wrapping_add(u64::from(index) * entry_size);
                    match xlen {
                        Xlen::Rv32 => image
                            .read_le::<4>(entry)
                            .map(|b| u64::from(u32::from_le_bytes(b))),
                        Xlen::Rv64 => image.read_le::<8>(entry).map(u64::from_le_bytes),
                    }
                });
                Some(match target {
                    Some(target) => Terminator::Jump {
                        target: target & !1,
                        links,
                    },
                    None => Terminator::Indirect {
                        kind: if links {
                            IndirectKind::Call
                        } else {
                            IndirectKind::Other
                        },
                        inferred_target: None,
                        links,
                    },
                })
            }
            ControlFlow::PopReturn => Some(Terminator::Indirect {
                kind: IndirectKind::Return,
                inferred_target: None,
                links: false,
            }),
            ControlFlow::EnvironmentTrap => Some(Terminator::EnvironmentCall),
            ControlFlow::TrapReturn => Some(Terminator::Indirect {
                kind: IndirectKind::TrapReturn,
                inferred_target: None,
                links: false,
            }),
        };
        if let Some(terminator) = terminator {
            block.terminator = terminator;
            break;
        }
        constant = instruction.constant_load(address, xlen);
        address = next;
    }
    Ok(block)
}

/// Calls `visit` with the address of each of `instructions` instructions from `start`,
/// the start of `first`: a range may run on through several blocks that follow each
/// other in memory, which `lookup` finds. False when it runs into an address with no
/// block.
#[inline]
pub(crate) fn visit_range<'b>(
    first: &'b Block,
    start: u64,
    instructions: u32,
    lookup: impl Fn(u64) -> Option<&'b Block>,
    mut visit: impl FnMut(u64),
) -> bool {
    let mut block = first;
    let mut left = instructions;
    let mut address = start;
    loop {
        let here = left.min(block.instructions);
        for index in 0..here {
            visit(address);
            address = address.wrapping_add(block.length_of(index));
        }
        left -= here;
        if left == 0 {
            return true;
        }
        block = match lookup(address) {
            Some(next) => next,
            None => return false,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(code: &[u16]) -> CodeImage {
        let mut image = CodeImage::new();
        let file = image.add_file("test");
        let bytes = code.iter().flat_map(|half| half.to_le_bytes()).collect();
        image.add_segment(0x1000, bytes, true, file).unwrap();
        image
    }

    fn files() -> Vec<FileDecodeInfo> {
        vec![FileDecodeInfo {
            options: DecodeOptions::default(),
            jvt_base: None,
        }]
    }

    #[test]
    fn ends_at_the_first_branch_and_counts_units() {
        // c.nop; addi a0,a0,1 (32-bit); beq a0,a1,-6 (from riscv64-linux-gnu-as)
        let code = [0x0001, 0x0513, 0x0015, 0x0de3, 0xfeb5];
        let image = image(&code);
        let mut cache = BlockCache::default();
        let index = cache.lookup(&image, &files(), 0x1000).unwrap();
        let block = *cache.block(index);
        assert_eq!(block.instructions, 3);
        assert_eq!(block.units, 5);
        assert_eq!(block.last, 0x1006);
        assert_eq!(block.next, 0x100a);
        assert_eq!(block.terminator, Terminator::Branch { target: 0x1000 });
        assert_eq!(block.prefix(3), Some((2, 0x1002, 0x1006)));
        assert_eq!(block.prefix(2), None, "ends inside the 32-bit addi");
        assert_eq!(
            cache.lookup(&image, &files(), 0x1000).unwrap(),
            index,
            "cached"
        );
        assert_eq!(cache.len(), 1);
    }

    #[test]
    fn infers_jalr_after_auipc_of_the_same_register() {
        // auipc t1, 0x1 ; jalr ra, 16(t1)
        let code = [0x1317, 0x0000, 0x00e7, 0x0103];
        let image = image(&code);
        let mut cache = BlockCache::default();
        let index = cache.lookup(&image, &files(), 0x1000).unwrap();
        let block = *cache.block(index);
        assert_eq!(
            block.terminator,
            Terminator::Indirect {
                kind: IndirectKind::Call,
                inferred_target: Some(0x2010),
                links: true
            }
        );
    }

    #[test]
    fn reports_unmapped_and_odd_addresses() {
        let image = image(&[0x0001]);
        let mut cache = BlockCache::default();
        assert_eq!(
            cache.lookup(&image, &files(), 0x2000),
            Err(BlockError::Unmapped)
        );
        assert_eq!(
            cache.lookup(&image, &files(), 0x1001),
            Err(BlockError::Misaligned)
        );
    }
}
