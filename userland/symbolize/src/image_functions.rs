//! The functions of several ELF files loaded into one address space (a trace
//! decoder's code image), looked up at image addresses: for callers that name
//! many addresses of code they placed themselves, without perf records.

use crate::{FunctionSymbol, FunctionTable};

/// The [`FunctionTable`]s of the files of a code image, each with the bias it was
/// loaded at, and which file maps each range of the image.
///
/// Files are numbered in the order they are added, as `code_image::CodeImage`
/// numbers the files it loads, so that its segments can be added as ranges as
/// they are.
#[derive(Debug, Default)]
pub struct ImageFunctions {
    /// By file number.
    files: Vec<LoadedFunctions>,
    /// Sorted by start.
    ranges: Vec<MappedRange>,
}

#[derive(Debug)]
struct LoadedFunctions {
    functions: FunctionTable,
    /// Added, modulo 2^64, to each link-time address of the file.
    bias: u64,
}

/// A count summed over one function ([`ImageFunctions::totals_by_function`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FunctionTotal {
    /// Where the function starts in the image; `None` for addresses in no function.
    pub start: Option<u64>,
    pub total: u64,
}

/// A range of image addresses that one file maps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MappedRange {
    pub start: u64,
    /// One past the last mapped byte.
    pub end: u64,
    /// The file's number, as [`ImageFunctions::add_file`] returned it.
    pub file: usize,
}

impl ImageFunctions {
    pub fn new() -> ImageFunctions {
        ImageFunctions::default()
    }

    /// Adds the functions of a file whose link-time address `a` is at image address
    /// `a + bias` (modulo 2^64); returns the file's number.
    pub fn add_file(&mut self, functions: FunctionTable, bias: u64) -> usize {
        self.files.push(LoadedFunctions { functions, bias });
        self.files.len() - 1
    }

    /// Records that `range` of the image holds code of `range.file`. Ranges are
    /// expected not to overlap (a code image's segments do not); where they do, an
    /// address belongs to the range starting last at or below it.
    pub fn add_range(&mut self, range: MappedRange) {
        let position = self
            .ranges
            .partition_point(|existing| existing.start <= range.start);
        self.ranges.insert(position, range);
    }

    /// The function containing image address `address` and the offset into it.
    pub fn lookup(&self, address: u64) -> Option<(&FunctionSymbol, u64)> {
        let following = self.ranges.partition_point(|range| range.start <= address);
        let range = self.ranges[..following]
            .last()
            .filter(|range| address < range.end)?;
        let file = self.files.get(range.file)?;
        // Exact for addresses inside the file's ranges: the loader placed each at
        // `link + bias` without overflow.
        file.functions.lookup(address.wrapping_sub(file.bias))
    }

    /// The image address where the function containing `address` starts.
    /// Counts summed per function of the image, most first (ties in address order,
    /// addresses in no function first among equals): `counts` gives an image address and a
    /// count each (instructions run from a block's start, say). Sums saturate.
    pub fn totals_by_function(
        &self,
        counts: impl IntoIterator<Item = (u64, u64)>,
    ) -> Vec<FunctionTotal> {
        let mut by_function: std::collections::HashMap<Option<u64>, u64> =
            std::collections::HashMap::new();
        for (address, count) in counts {
            let total = by_function.entry(self.function_start(address)).or_default();
            *total = total.saturating_add(count);
        }
        let mut ranked: Vec<FunctionTotal> = by_function
            .into_iter()
            .map(|(start, total)| FunctionTotal { start, total })
            .collect();
        ranked.sort_by(|a, b| b.total.cmp(&a.total).then(a.start.cmp(&b.start)));
        ranked
    }

    pub fn function_start(&self, address: u64) -> Option<u64> {
        let (_, offset) = self.lookup(address)?;
        // The function starts `offset` bytes before `address`, inside the image.
        address.checked_sub(offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::symbols::{Candidate, SymbolKind, SymbolTable};

    /// A function table of sized global functions at link-time addresses.
    fn table(functions: &[(&'static str, u64, u64)]) -> FunctionTable {
        FunctionTable::new(SymbolTable::new(functions.iter().map(
            |&(name, address, size)| Candidate {
                name: name.into(),
                address,
                size,
                kind: SymbolKind::Function,
                global: true,
                weak: false,
                section_end: None,
            },
        )))
    }

    /// A program linked at its load address and a shared object linked at 0 and
    /// loaded at 0x4000_0000; ranges added out of order.
    fn two_files() -> ImageFunctions {
        let mut image = ImageFunctions::new();
        let program = image.add_file(
            table(&[("main", 0x1_0000, 0x40), ("helper", 0x1_0040, 0x20)]),
            0,
        );
        let library = image.add_file(table(&[("memcpy", 0x100, 0x80)]), 0x4000_0000);
        image.add_range(MappedRange {
            start: 0x4000_0000,
            end: 0x4000_1000,
            file: library,
        });
        image.add_range(MappedRange {
            start: 0x1_0000,
            end: 0x1_1000,
            file: program,
        });
        image
    }

    fn name_at(image: &ImageFunctions, address: u64) -> Option<(&str, u64)> {
        image
            .lookup(address)
            .map(|(function, offset)| (function.name.as_str(), offset))
    }

    #[test]
    fn addresses_are_looked_up_in_the_file_that_maps_them() {
        let image = two_files();
        assert_eq!(name_at(&image, 0x1_0000), Some(("main", 0)));
        assert_eq!(name_at(&image, 0x1_0044), Some(("helper", 4)));
        assert_eq!(name_at(&image, 0x4000_0110), Some(("memcpy", 0x10)));
        assert_eq!(image.function_start(0x4000_0110), Some(0x4000_0100));
        assert_eq!(image.function_start(0x1_005f), Some(0x1_0040));
    }

    #[test]
    fn addresses_outside_ranges_or_functions_have_none() {
        let image = two_files();
        // Below every range, between ranges, one past a range's end.
        for address in [0, 0xffff, 0x2000_0000, 0x1_1000, 0x4000_1000, u64::MAX] {
            assert_eq!(name_at(&image, address), None, "{address:#x}");
        }
        // Inside a range but in no function: before the library's memcpy, after the
        // program's helper.
        assert_eq!(name_at(&image, 0x4000_0000), None);
        assert_eq!(image.function_start(0x1_0fff), None);
    }

    #[test]
    fn a_range_of_an_unknown_file_names_nothing() {
        let mut image = ImageFunctions::new();
        image.add_range(MappedRange {
            start: 0x1000,
            end: 0x2000,
            file: 3,
        });
        assert_eq!(name_at(&image, 0x1800), None);
    }

    #[test]
    fn totals_are_summed_per_function_most_first_ties_by_address() {
        let image = two_files();
        let totals = image.totals_by_function([
            (0x1_0000, 5),
            (0x1_0010, 5),
            (0x1_0040, 7),
            (0x4000_0100, 10),
            // In no function: summed under `None`, first among equals.
            (0x9000_0000, 10),
            (0x1_0044, u64::MAX),
        ]);
        assert_eq!(
            totals,
            [
                FunctionTotal {
                    start: Some(0x1_0040),
                    total: u64::MAX,
                },
                FunctionTotal {
                    start: None,
                    total: 10,
                },
                FunctionTotal {
                    start: Some(0x1_0000),
                    total: 10,
                },
                FunctionTotal {
                    start: Some(0x4000_0100),
                    total: 10,
                },
            ]
        );
    }
}
