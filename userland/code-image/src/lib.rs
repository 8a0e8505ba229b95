//! The code image a trace decoder or a profiler reads instructions from: the bytes of
//! each loaded file by address, how each file's code decodes, and the instruction sets
//! that decode it.
//!
//! Segments are non-overlapping address ranges with their bytes (libipt's image model);
//! a read that returns fewer bytes than asked means "not mapped", which is not an error
//! at this level (OpenCSD's memory-access interface). ELF files are parsed with the
//! `object` crate; this crate does no file I/O itself, the caller hands it the bytes.
//!
//! Each file's decode options ([`Machine`]: RISC-V register width, compressed and
//! Zcmp/Zcmt encodings, the Zcmt jump table; or x86_64) are read once from its ELF
//! header and attributes by [`load_elf`] / [`load_any_elf`]; every consumer takes them
//! from the image. [`InstructionSet`] is what a profile needs of one instruction (its
//! length and control-flow class), implemented for RISC-V by `riscv-insn` and, with
//! the `x86` feature, for x86_64 by `iced-x86`.
//!
//! Function names are not this crate's: the `symbolize` crate is the one symbol table.

#![forbid(unsafe_code)]

mod elf;
mod instruction_set;

pub use elf::{load_any_elf, load_elf, ElfInfo, FileMapping};
#[cfg(feature = "x86")]
pub use instruction_set::X86_64Code;
pub use instruction_set::{FlowKind, Instruction, InstructionAddresses, InstructionSet, RiscvCode};
pub use riscv_insn::{DecodeOptions, Xlen};

use std::sync::Arc;

/// Errors while building an image.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ImageError {
    #[error("{file}: not an ELF file we can read: {reason}")]
    NotElf { file: String, reason: String },
    #[error("{file}: not a RISC-V ELF file (architecture {architecture})")]
    NotRiscv { file: String, architecture: String },
    /// An ELF of a machine this build has no instruction set for (`e_machine`).
    #[error("{file}: no instruction set for ELF machine {machine} in this build")]
    UnsupportedMachine { file: String, machine: u16 },
    #[error("{file}: has no loadable executable segment")]
    NoCode { file: String },
    #[error(
        "{file}: segment 0x{start:x}..0x{end:x} overlaps 0x{other_start:x}..0x{other_end:x} of {other_file}"
    )]
    Overlap {
        file: String,
        start: u64,
        end: u64,
        other_file: String,
        other_start: u64,
        other_end: u64,
    },
    #[error(
        "{file}: load address 0x{load_address:x} moves a segment past the end of the address space"
    )]
    BadLoadAddress { file: String, load_address: u64 },
}

/// How to decode the RISC-V code of one image file: what its ELF says (register
/// width, Zcmp/Zcmt from the arch attribute, the Zcmt jump vector table).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct FileDecodeInfo {
    pub options: DecodeOptions,
    /// Zcmt jump vector table base, when the ELF defines `__jvt_base$`.
    pub jvt_base: Option<u64>,
}

/// Whether a RISC-V file may hold 16-bit instructions (`EF_RISCV_RVC` in `e_flags`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Compressed {
    Allowed,
    /// Every instruction is 4-byte aligned: after bytes that decode to nothing, the
    /// next instruction is 4 bytes on, not 2.
    Absent,
}

/// The instruction set of one file and what decoding it needs, read once from the ELF.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Machine {
    Riscv(RiscvCode),
    /// Only loaded when the crate is built with the `x86` feature.
    X86_64,
}

impl Default for Machine {
    /// RV64 with the C extension and no Zcmp/Zcmt: what a file added without an ELF
    /// (tests, hand-built images) is taken to hold.
    fn default() -> Self {
        Machine::Riscv(RiscvCode::default())
    }
}

impl Machine {
    /// The RISC-V decode options of the file, `None` for other machines.
    pub fn riscv(&self) -> Option<FileDecodeInfo> {
        match self {
            Machine::Riscv(code) => Some(code.decode),
            Machine::X86_64 => None,
        }
    }
}

/// One file of an image.
#[derive(Clone, Debug)]
pub struct ImageFile {
    pub name: String,
    pub machine: Machine,
}

/// One contiguous mapped range.
#[derive(Clone, Debug)]
pub struct Segment {
    pub start: u64,
    /// One past the last mapped byte.
    pub end: u64,
    pub executable: bool,
    /// Index into [`CodeImage::files`].
    pub file: usize,
    data: Arc<[u8]>,
}

impl Segment {
    pub fn bytes(&self) -> &[u8] {
        &self.data
    }
}

/// All the code (and data needed to decode it, such as Zcmt jump tables) of one address space.
#[derive(Clone, Debug, Default)]
pub struct CodeImage {
    /// Sorted by start address, never overlapping.
    segments: Vec<Segment>,
    files: Vec<ImageFile>,
}

impl CodeImage {
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a file of the default machine ([`Machine::default`]); segments refer
    /// to it by the returned index.
    pub fn add_file(&mut self, name: impl Into<String>) -> usize {
        self.add_file_of_machine(name, Machine::default())
    }

    /// Registers a file whose code is decoded as `machine` says.
    pub fn add_file_of_machine(&mut self, name: impl Into<String>, machine: Machine) -> usize {
        self.files.push(ImageFile {
            name: name.into(),
            machine,
        });
        self.files.len() - 1
    }

    pub fn files(&self) -> &[ImageFile] {
        &self.files
    }

    /// The RISC-V decode options of every file, by file index, as the trace decoders
    /// take them (the defaults for a file of another machine, which they never reach
    /// through a RISC-V trace).
    pub fn file_decode_infos(&self) -> Vec<FileDecodeInfo> {
        self.files
            .iter()
            .map(|file| file.machine.riscv().unwrap_or_default())
            .collect()
    }

    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    /// Maps `data` at `start`. Overlaps are refused: a decoder that silently picked one of
    /// two images would print wrong instructions with no hint why.
    pub fn add_segment(
        &mut self,
        start: u64,
        data: Vec<u8>,
        executable: bool,
        file: usize,
    ) -> Result<(), ImageError> {
        let file_name = self.file_name(file).to_owned();
        let end = start
            .checked_add(data.len() as u64)
            .ok_or(ImageError::BadLoadAddress {
                file: file_name.clone(),
                load_address: start,
            })?;
        if start == end {
            return Ok(());
        }
        let position = self
            .segments
            .partition_point(|segment| segment.start < start);
        let neighbours = [position.checked_sub(1), Some(position)];
        for other in neighbours
            .into_iter()
            .flatten()
            .filter_map(|index| self.segments.get(index))
        {
            if other.start < end && start < other.end {
                return Err(ImageError::Overlap {
                    file: file_name,
                    start,
                    end,
                    other_file: self.file_name(other.file).to_owned(),
                    other_start: other.start,
                    other_end: other.end,
                });
            }
        }
        self.segments.insert(
            position,
            Segment {
                start,
                end,
                executable,
                file,
                data: data.into(),
            },
        );
        Ok(())
    }

    /// The index of the segment holding `address`.
    #[inline]
    pub fn segment_index(&self, address: u64) -> Option<usize> {
        let position = self
            .segments
            .partition_point(|segment| segment.start <= address);
        let index = position.checked_sub(1)?;
        let segment = &self.segments[index];
        (address < segment.end).then_some(index)
    }

    #[inline]
    pub fn segment(&self, index: usize) -> Option<&Segment> {
        self.segments.get(index)
    }

    /// Copies the bytes at `address` into `out`, returning how many were mapped
    /// (contiguously, possibly across adjacent segments). A short count is not an error.
    pub fn read(&self, mut address: u64, out: &mut [u8]) -> usize {
        let mut done = 0;
        while done < out.len() {
            let Some(index) = self.segment_index(address) else {
                break;
            };
            let segment = &self.segments[index];
            // `segment_index` found `segment.start <= address < segment.end`, and a
            // segment's length is its data's: the offset is inside the data.
            let Some(available) = usize::try_from(address - segment.start)
                .ok()
                .and_then(|offset| segment.data.get(offset..))
            else {
                break;
            };
            let take = available.len().min(out.len() - done);
            out[done..done + take].copy_from_slice(&available[..take]);
            done += take;
            // A segment ending at the top of the address space has nothing after it.
            match address.checked_add(take as u64) {
                Some(next) => address = next,
                None => break,
            }
        }
        done
    }

    /// Reads a little-endian value of `N` bytes, or `None` when not all of it is mapped.
    pub fn read_le<const N: usize>(&self, address: u64) -> Option<[u8; N]> {
        let mut bytes = [0u8; N];
        (self.read(address, &mut bytes) == N).then_some(bytes)
    }

    /// The file name of the segment holding `address`.
    pub fn file_of(&self, address: u64) -> Option<&str> {
        let index = self.segment_index(address)?;
        self.files
            .get(self.segments[index].file)
            .map(|file| file.name.as_str())
    }

    /// The machine of the file mapping `address`.
    pub fn machine_at(&self, address: u64) -> Option<Machine> {
        let index = self.segment_index(address)?;
        self.files
            .get(self.segments[index].file)
            .map(|file| file.machine)
    }

    fn file_name(&self, file: usize) -> &str {
        self.files.get(file).map_or("", |file| file.name.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_across_adjacent_segments_and_reports_short_reads() {
        let mut image = CodeImage::new();
        let file = image.add_file("a");
        image
            .add_segment(0x1000, vec![1, 2, 3, 4], true, file)
            .unwrap();
        image.add_segment(0x1004, vec![5, 6], true, file).unwrap();
        let mut out = [0u8; 8];
        assert_eq!(image.read(0x1002, &mut out), 4);
        assert_eq!(&out[..4], &[3, 4, 5, 6]);
        assert_eq!(image.read(0x0fff, &mut out), 0);
        assert_eq!(image.read_le::<2>(0x1005), None);
        assert_eq!(image.read_le::<2>(0x1004), Some([5, 6]));
    }

    #[test]
    fn refuses_overlapping_segments() {
        let mut image = CodeImage::new();
        let first = image.add_file("first");
        let second = image.add_file("second");
        image.add_segment(0x1000, vec![0; 16], true, first).unwrap();
        let error = image
            .add_segment(0x100c, vec![0; 16], true, second)
            .unwrap_err();
        assert!(
            error
                .to_string()
                .contains("overlaps 0x1000..0x1010 of first"),
            "{error}"
        );
        image
            .add_segment(0x1010, vec![0; 16], true, second)
            .unwrap();
        assert_eq!(image.file_of(0x1011), Some("second"));
        assert_eq!(image.segment_index(0x1020), None);
    }
}
