//! Static basic blocks of a riscv64 ELF and the block-count overlap of two profiles:
//! the accuracy measure of sampled (CTR) profiles against the exact counts of
//! [`crate::execution_counts`].
//!
//! The overlap of two block-count vectors `p` and `q` is `sum_i min(p_i, q_i)` after
//! normalising each to sum 1: 1.0 when the two distribute execution over the blocks
//! identically, 0.0 when they share no block. It ignores the total, so a sampled
//! profile (counts scaled by the sampling period, or not) compares directly with the
//! exact counts.

use std::collections::{BTreeSet, HashMap};

use code_image::{load_elf, CodeImage, ImageError};
use object::{Object, ObjectSection, SectionFlags};
use riscv_insn::{decode, ControlFlow, DecodeOptions, Xlen};
use symbolize::{ObjectSymbolizer, SymbolizeError};

/// Errors while finding the basic blocks of an ELF.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BlockError {
    /// The file is not a RISC-V ELF that `code-image` loads.
    #[error(transparent)]
    Image(#[from] ImageError),
    /// The symbol table could not be read.
    #[error(transparent)]
    Symbols(#[from] SymbolizeError),
    /// The section headers could not be read.
    #[error("cannot read the section headers: {0}")]
    Sections(String),
    /// The ELF is RV32; the blocks are of riscv64 programs.
    #[error("not a riscv64 ELF")]
    NotRv64,
}

/// A basic block: the instructions in `start..end` (end exclusive).
pub type Block = (u64, u64);

/// The static basic blocks of the executable sections of a riscv64 ELF, sorted by
/// address, covering every byte of those sections.
///
/// Only sections flagged executable are decoded: a static binary's executable segment
/// also holds `.rodata` and `.eh_frame`, which would decode as nonsense. Within a
/// section, decoding restarts at every function symbol, so data or padding between
/// functions cannot shift the instruction boundaries of the next function.
///
/// Leaders (first instructions of blocks): section starts, function symbol starts,
/// targets of direct branches and jumps, and the instruction after every control
/// transfer (branches, jumps, calls, returns, `ecall`/`ebreak`). Targets of indirect
/// jumps (switch jump tables) are not known statically; [`block_counts`] takes that
/// into account.
pub fn basic_blocks(elf: &[u8]) -> Result<Vec<Block>, BlockError> {
    let code = Code::load(elf)?;
    let mut leaders = BTreeSet::new();
    let mut pieces = Vec::new();
    for &(start, end, ref bytes) in &code.sections {
        let mut piece_start = start;
        for cut in code
            .symbol_starts
            .range(start + 1..end)
            .copied()
            .chain([end])
        {
            pieces.push((piece_start, cut, &bytes[(piece_start - start) as usize..]));
            piece_start = cut;
        }
    }
    for &(start, end, bytes) in &pieces {
        leaders.insert(start);
        let mut address = start;
        while address < end {
            let offset = (address - start) as usize;
            let mut word = [0u8; 4];
            let available = bytes.len().min(offset + 4) - offset;
            word[..available].copy_from_slice(&bytes[offset..offset + available]);
            // An 80-bit-or-longer length encoding is no instruction of this ISA: data
            // inside a function. Stepping over it by a halfword resyncs soonest.
            let Ok(instruction) = decode(u32::from_le_bytes(word), code.options) else {
                address += 2;
                continue;
            };
            let next = address + u64::from(instruction.length);
            if instruction.control_flow != ControlFlow::Sequential {
                leaders.insert(next);
                if let Some(target) = instruction.direct_target(address, Xlen::Rv64) {
                    leaders.insert(target);
                }
            }
            address = next;
        }
    }
    // A block ends at the next leader or at the end of its piece, whichever is first;
    // leaders outside every piece (a jump into another section's gap) start nothing.
    let mut blocks = Vec::new();
    for &(start, end, _) in &pieces {
        let mut block_start = start;
        for &leader in leaders.range(start + 1..end) {
            blocks.push((block_start, leader));
            block_start = leader;
        }
        blocks.push((block_start, end));
    }
    Ok(blocks)
}

/// The per-block counts of `counts` (executions per instruction address): for each
/// block, the largest count of any of its instructions.
///
/// Why the largest and not the first instruction's: with exact counts all
/// instructions of a block execute equally often, so both rules agree, except where
/// control enters a block in its middle. That happens on both sides: the exact run
/// enters mid-block through indirect jumps whose targets are not leaders (a switch's
/// jump table), and a sampled profile's counts start wherever a recorded branch
/// landed or a sample's first range began. The first instruction's count would drop
/// those executions; the largest keeps them. Apply the same rule to both profiles.
///
/// Addresses outside every block do not count; see [`unattributed`].
pub fn block_counts(blocks: &[Block], counts: &HashMap<u64, u64>) -> Vec<u64> {
    let mut sorted: Vec<(u64, u64)> = counts.iter().map(|(&pc, &count)| (pc, count)).collect();
    sorted.sort_unstable();
    blocks
        .iter()
        .map(|&(start, end)| {
            let first = sorted.partition_point(|&(pc, _)| pc < start);
            sorted[first..]
                .iter()
                .take_while(|&&(pc, _)| pc < end)
                .map(|&(_, count)| count)
                .max()
                .unwrap_or(0)
        })
        .collect()
}

/// The sum of the counts of addresses in no block (code outside the ELF's executable
/// sections, e.g. the vDSO or a shared library).
pub fn unattributed(blocks: &[Block], counts: &HashMap<u64, u64>) -> u64 {
    counts
        .iter()
        .filter(|&(&pc, _)| {
            let index = blocks.partition_point(|&(start, _)| start <= pc);
            index == 0 || pc >= blocks[index - 1].1
        })
        .map(|(_, &count)| count)
        .sum()
}

/// `sum_i min(p_i / sum(p), q_i / sum(q))`, between 0.0 and 1.0. A profile with no
/// counts at all shares nothing with anything: the overlap is then 0.0.
///
/// # Panics
///
/// When `p` and `q` have different lengths: they must count the same blocks.
pub fn block_overlap(p: &[u64], q: &[u64]) -> f64 {
    assert_eq!(p.len(), q.len(), "block count vectors of different lengths");
    let p_total: f64 = p.iter().map(|&count| count as f64).sum();
    let q_total: f64 = q.iter().map(|&count| count as f64).sum();
    if p_total == 0.0 || q_total == 0.0 {
        return 0.0;
    }
    p.iter()
        .zip(q)
        .map(|(&a, &b)| (a as f64 / p_total).min(b as f64 / q_total))
        .sum()
}

/// What [`basic_blocks`] needs of the ELF.
struct Code {
    /// (start, end, bytes) of every executable section with contents.
    sections: Vec<(u64, u64, Vec<u8>)>,
    symbol_starts: BTreeSet<u64>,
    options: DecodeOptions,
}

impl Code {
    fn load(elf: &[u8]) -> Result<Code, BlockError> {
        let mut image = CodeImage::new();
        let info = load_elf(&mut image, "elf", elf, None)?;
        let options = info
            .riscv()
            .map(|decode| decode.options)
            .filter(|options| options.xlen == Xlen::Rv64)
            .ok_or(BlockError::NotRv64)?;
        // `object` reads headers in place and needs them aligned, as load_elf does.
        let mut storage = Vec::new();
        let bytes = if elf.as_ptr().align_offset(8) == 0 {
            elf
        } else {
            storage.resize(elf.len() + 8, 0u8);
            let shift = storage.as_ptr().align_offset(8);
            storage[shift..shift + elf.len()].copy_from_slice(elf);
            &storage[shift..shift + elf.len()]
        };
        let file = object::File::parse(bytes).map_err(|e| BlockError::Sections(e.to_string()))?;
        let mut sections = Vec::new();
        for section in file.sections() {
            let executable = matches!(
                section.flags(),
                SectionFlags::Elf { sh_flags } if sh_flags & u64::from(object::elf::SHF_EXECINSTR) != 0
            );
            if !executable || section.size() == 0 {
                continue;
            }
            let data = section
                .data()
                .map_err(|e| BlockError::Sections(e.to_string()))?;
            let start = section.address();
            sections.push((start, start + data.len() as u64, data.to_vec()));
        }
        sections.sort_by_key(|&(start, _, _)| start);
        let symbol_starts = ObjectSymbolizer::new("elf", elf.to_vec())?
            .function_table()
            .iter()
            .map(|function| function.address)
            .collect();
        Ok(Code {
            sections,
            symbol_starts,
            options,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlap_of_identical_disjoint_and_scaled_profiles() {
        let p = [5, 0, 3, 2];
        assert_eq!(block_overlap(&p, &p), 1.0);
        assert_eq!(block_overlap(&[1, 0, 2, 0], &[0, 4, 0, 1]), 0.0);
        let scaled: Vec<u64> = p.iter().map(|count| count * 1000).collect();
        assert!((block_overlap(&p, &scaled) - 1.0).abs() < 1e-12);
        assert!((block_overlap(&scaled, &p) - 1.0).abs() < 1e-12);
    }

    #[test]
    fn overlap_is_the_shared_fraction() {
        // p = (0.5, 0.5, 0), q = (0.25, 0.25, 0.5): each shares 0.25 twice.
        assert!((block_overlap(&[1, 1, 0], &[1, 1, 2]) - 0.5).abs() < 1e-12);
        assert_eq!(block_overlap(&[0, 0], &[1, 1]), 0.0);
        assert_eq!(block_overlap(&[], &[]), 0.0);
    }

    #[test]
    #[should_panic(expected = "different lengths")]
    fn overlap_of_different_block_lists_panics() {
        block_overlap(&[1], &[1, 2]);
    }

    #[test]
    fn block_count_is_the_largest_of_its_instructions() {
        let blocks = [(0x100, 0x108), (0x108, 0x110), (0x110, 0x120)];
        // 0x104 entered 3 more times in the middle (a jump-table target); the second
        // block never ran; 0x200 is in no block.
        let counts = HashMap::from([
            (0x100, 2),
            (0x102, 2),
            (0x104, 5),
            (0x110, 7),
            (0x11e, 7),
            (0x200, 9),
        ]);
        assert_eq!(block_counts(&blocks, &counts), vec![5, 0, 7]);
        assert_eq!(unattributed(&blocks, &counts), 9);
        assert_eq!(
            unattributed(&blocks, &HashMap::from([(0x0ff, 1), (0x120, 1)])),
            2
        );
    }
}
