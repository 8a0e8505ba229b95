//! The code image a trace decoder reads instructions from, and the function symbols the
//! CLI prints.
//!
//! Segments are non-overlapping address ranges with their bytes (libipt's image model);
//! a read that returns fewer bytes than asked means "not mapped", which is not an error
//! at this level (OpenCSD's memory-access interface). ELF files are parsed with the
//! `object` crate; this crate does no file I/O itself, the caller hands it the bytes.

#![forbid(unsafe_code)]

mod elf;
mod symbols;

pub use elf::{load_elf, load_symbols, ElfInfo, ElfSymbols, LoadSegment, Xlen};
pub use symbols::{Symbol, SymbolTable};

use std::sync::Arc;

/// Errors while building an image.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ImageError {
    #[error("{file}: not an ELF file we can read: {reason}")]
    NotElf { file: String, reason: String },
    #[error("{file}: not a RISC-V ELF file (architecture {architecture})")]
    NotRiscv { file: String, architecture: String },
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
    files: Vec<String>,
}

impl CodeImage {
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a file name; segments refer to it by the returned index.
    pub fn add_file(&mut self, name: impl Into<String>) -> usize {
        self.files.push(name.into());
        self.files.len() - 1
    }

    pub fn files(&self) -> &[String] {
        &self.files
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
        let file_name = self.files.get(file).cloned().unwrap_or_default();
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
                    other_file: self.files.get(other.file).cloned().unwrap_or_default(),
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
            let offset = (address - segment.start) as usize;
            let available = &segment.data[offset..];
            let take = available.len().min(out.len() - done);
            out[done..done + take].copy_from_slice(&available[..take]);
            done += take;
            address = address.wrapping_add(take as u64);
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
            .map(String::as_str)
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
