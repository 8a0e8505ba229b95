//! The mappings of one process, as MMAP/MMAP2 records built them.

/// One mapped range of a file. Every file offset of the range fits in 64 bits
/// (`file_offset + (end - start)` does not overflow): [`Mapping::new`] refuses
/// records that say otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Mapping {
    pub start: u64,
    pub end: u64,
    /// File offset mapped at `start` (MMAP2 `pgoff`).
    pub file_offset: u64,
    /// Index of the file in the symbolizer's file list.
    pub file: usize,
}

impl Mapping {
    /// The mapping of `length` bytes at `start` of `file` from `file_offset` on, as
    /// an MMAP/MMAP2 record gives it; `None` when its file offsets pass the end of
    /// the 64-bit space (no kernel writes such a record). A range that passes the
    /// end of the address space ends there.
    pub fn new(start: u64, length: u64, file_offset: u64, file: usize) -> Option<Mapping> {
        let end = start.saturating_add(length);
        file_offset.checked_add(end - start)?;
        Some(Mapping {
            start,
            end,
            file_offset,
            file,
        })
    }

    /// The file offset of `address`, an address of the mapping.
    pub fn offset_of(&self, address: u64) -> Option<u64> {
        self.file_offset
            .checked_add(address.checked_sub(self.start)?)
    }
}

/// Non-overlapping mappings sorted by start address.
#[derive(Debug, Clone, Default)]
pub(crate) struct AddressSpace {
    mappings: Vec<Mapping>,
}

impl AddressSpace {
    /// Adds `new`; what it overlaps of older mappings is unmapped first,
    /// as the kernel does for `mmap` over an existing range.
    pub fn insert(&mut self, new: Mapping) {
        if new.start >= new.end {
            return;
        }
        // Mappings do not overlap, so their ends are sorted like their
        // starts: the overlapped ones are one run.
        let first = self.mappings.partition_point(|old| old.end <= new.start);
        let last = self.mappings.partition_point(|old| old.start < new.end);
        let mut replacement = Vec::with_capacity(3);
        if let Some(old) = self.mappings[first..last].first() {
            if old.start < new.start {
                replacement.push(Mapping {
                    end: new.start,
                    ..*old
                });
            }
        }
        replacement.push(new);
        if let Some(old) = self.mappings[first..last].last() {
            // What is left of `old` after `new`; its offset is one of `old`'s, which
            // `Mapping::new` checked, so it is always there.
            if let Some(file_offset) = old.offset_of(new.end).filter(|_| old.end > new.end) {
                replacement.push(Mapping {
                    start: new.end,
                    file_offset,
                    ..*old
                });
            }
        }
        self.mappings.splice(first..last, replacement);
    }

    /// The mapping containing `address`.
    pub fn find(&self, address: u64) -> Option<&Mapping> {
        let following = self
            .mappings
            .partition_point(|mapping| mapping.start <= address);
        self.mappings[..following]
            .last()
            .filter(|mapping| address < mapping.end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mapping(start: u64, end: u64, file_offset: u64, file: usize) -> Mapping {
        Mapping {
            start,
            end,
            file_offset,
            file,
        }
    }

    #[test]
    fn mappings_whose_offsets_pass_the_end_are_refused() {
        let last_page = u64::MAX - 0xfff;
        assert_eq!(
            Mapping::new(0x1000, 0x1000, last_page - 1, 0).map(|m| m.end),
            Some(0x2000)
        );
        assert_eq!(Mapping::new(0x1000, 0x1000, last_page, 0), None);
        let top = Mapping::new(last_page, 0x2000, 0, 0).unwrap();
        assert_eq!(top.end, u64::MAX);
        assert_eq!(top.offset_of(u64::MAX - 1), Some(0xffe));
        assert_eq!(top.offset_of(0), None);
    }

    #[test]
    fn later_mappings_replace_what_they_overlap() {
        let mut space = AddressSpace::default();
        space.insert(mapping(0x1000, 0x5000, 0, 1));
        space.insert(mapping(0x2000, 0x3000, 0x7000, 2));
        assert_eq!(space.find(0x1fff), Some(&mapping(0x1000, 0x2000, 0, 1)));
        assert_eq!(
            space.find(0x2000),
            Some(&mapping(0x2000, 0x3000, 0x7000, 2))
        );
        assert_eq!(
            space.find(0x3000),
            Some(&mapping(0x3000, 0x5000, 0x2000, 1))
        );
        assert_eq!(space.find(0x5000), None);
        assert_eq!(space.find(0xfff), None);

        // Over the end of one and the start of the next, and over a whole one.
        space.insert(mapping(0x1800, 0x3800, 0, 3));
        assert_eq!(space.find(0x17ff), Some(&mapping(0x1000, 0x1800, 0, 1)));
        assert_eq!(space.find(0x2800), Some(&mapping(0x1800, 0x3800, 0, 3)));
        assert_eq!(
            space.find(0x3800),
            Some(&mapping(0x3800, 0x5000, 0x2800, 1))
        );
        space.insert(mapping(0x0, 0x6000, 0, 4));
        assert_eq!(space.mappings, vec![mapping(0x0, 0x6000, 0, 4)]);
    }
}
