//! LLVM's extensible binary sample profile (`SPF_Ext_Binary`, version 103), laid out
//! byte for byte as `llvm-profdata-19 merge --sample --extbinary` writes a profile
//! without contexts, probes or MD5 names:
//!
//! * ULEB128 magic (`SPROF42` then the format byte 4) and ULEB128 version 103;
//! * the section header table: a little-endian `u64` count, then per section four
//!   little-endian `u64`s — type, flags, offset from the start of the profile, size —
//!   in the order a reader visits them: ProfileSummary, NameTable, CSNameTable,
//!   FuncOffsetTable, LBRProfile, ProfileSymbolList, FuncMetadata;
//! * the sections, in the order they can be computed: the function offset table needs
//!   the offsets of the profiles, so it follows them in the file though the reader
//!   wants it first. The empty sections keep their header entries (offset, size 0); the
//!   context name table holds just its zero count, as LLVM 19 writes it.
//!
//! Every number inside a section is ULEB128. The summary is LLVM's
//! `ProfileSummaryBuilder`'s: totals over every body count (inlined ones included), the
//! largest head count, and one entry per default cutoff (1% ... 99.9999% of the total)
//! saying how many of the hottest counts it takes to reach it and the smallest of them.
//! Names are written in full (no MD5), sorted, each followed by a NUL byte; a function
//! profile refers to them by their index.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::encoding::push_uleb128;
use crate::{FunctionProfile, LineLocation, ProfileWriteError, SampleProfile};

/// `SPMagic(SPF_Ext_Binary)`: the bytes of "SPROF42" from the top, then the format.
const MAGIC: u64 = u64::from_be_bytes(*b"SPROF42\x04");
/// `SPVersion()`.
const VERSION: u64 = 103;

const SECTION_PROFILE_SUMMARY: u64 = 1;
const SECTION_NAME_TABLE: u64 = 2;
const SECTION_PROFILE_SYMBOL_LIST: u64 = 3;
const SECTION_FUNCTION_OFFSET_TABLE: u64 = 4;
const SECTION_FUNCTION_METADATA: u64 = 5;
const SECTION_CONTEXT_NAME_TABLE: u64 = 6;
const SECTION_LBR_PROFILE: u64 = 0x20;

/// The section header table's order (`DefaultLayout`), which is the order LLVM reads in.
const LAYOUT: [u64; 7] = [
    SECTION_PROFILE_SUMMARY,
    SECTION_NAME_TABLE,
    SECTION_CONTEXT_NAME_TABLE,
    SECTION_FUNCTION_OFFSET_TABLE,
    SECTION_LBR_PROFILE,
    SECTION_PROFILE_SYMBOL_LIST,
    SECTION_FUNCTION_METADATA,
];

/// Bytes of one section header: type, flags, offset and size, each a `u64`.
const SECTION_HEADER_SIZE: usize = 32;

/// LLVM's `ProfileSummaryBuilder::DefaultCutoffs`, in millionths of the total count.
pub const DEFAULT_CUTOFFS: [u32; 16] = [
    10_000, 100_000, 200_000, 300_000, 400_000, 500_000, 600_000, 700_000, 800_000, 900_000,
    950_000, 990_000, 999_000, 999_900, 999_990, 999_999,
];

/// What `cutoff` millionths of the total count take: the `num_counts` hottest counts,
/// the smallest of which is `min_count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SummaryEntry {
    pub cutoff: u32,
    pub min_count: u64,
    pub num_counts: u64,
}

/// The profile summary LLVM keeps with a sample profile, from which the compiler takes
/// its hot and cold thresholds. `llvm-profdata show --detailed-summary` prints it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProfileSummary {
    /// Sum of every body count, inlined callees' included.
    pub total_count: u64,
    /// The largest body count.
    pub max_count: u64,
    /// The largest head count of a top-level function.
    pub max_function_count: u64,
    /// How many body counts there are.
    pub num_counts: u64,
    /// How many top-level functions there are.
    pub num_functions: u64,
    /// One entry per [`DEFAULT_CUTOFFS`] cutoff.
    pub detailed: Vec<SummaryEntry>,
}

impl ProfileSummary {
    /// The summary of the functions [`write_llvm_extbinary`] writes (those with samples).
    pub fn of(profile: &SampleProfile) -> Result<Self, ProfileWriteError> {
        Self::of_functions(&profile.by_hotness())
    }

    fn of_functions(functions: &[&FunctionProfile]) -> Result<Self, ProfileWriteError> {
        let mut summary = Self::default();
        let mut frequencies: BTreeMap<u64, u64> = BTreeMap::new();
        for function in functions {
            summary.num_functions += 1;
            summary.max_function_count = summary.max_function_count.max(function.head_samples);
            summary.add_counts(function, &function.name, &mut frequencies)?;
        }
        summary.detailed = detailed_summary(summary.total_count, &frequencies);
        Ok(summary)
    }

    fn add_counts(
        &mut self,
        function: &FunctionProfile,
        top_level: &str,
        frequencies: &mut BTreeMap<u64, u64>,
    ) -> Result<(), ProfileWriteError> {
        for sample in function.body.values() {
            self.total_count = self.total_count.checked_add(sample.count).ok_or_else(|| {
                ProfileWriteError::CountOverflow {
                    function: top_level.to_owned(),
                }
            })?;
            self.max_count = self.max_count.max(sample.count);
            self.num_counts += 1;
            *frequencies.entry(sample.count).or_default() += 1;
        }
        for callee in function.callsites.values().flat_map(BTreeMap::values) {
            self.add_counts(callee, top_level, frequencies)?;
        }
        Ok(())
    }

    fn write(&self, out: &mut Vec<u8>) {
        push_uleb128(out, self.total_count);
        push_uleb128(out, self.max_count);
        push_uleb128(out, self.max_function_count);
        push_uleb128(out, self.num_counts);
        push_uleb128(out, self.num_functions);
        push_uleb128(out, self.detailed.len() as u64);
        for entry in &self.detailed {
            push_uleb128(out, u64::from(entry.cutoff));
            push_uleb128(out, entry.min_count);
            push_uleb128(out, entry.num_counts);
        }
    }
}

/// Walks the counts hottest first until each cutoff's share of the total is reached,
/// as `ProfileSummaryBuilder::computeDetailedSummary` does (the share rounded down, the
/// walk going on from where the previous cutoff stopped).
fn detailed_summary(total_count: u64, frequencies: &BTreeMap<u64, u64>) -> Vec<SummaryEntry> {
    let mut hottest_first = frequencies.iter().rev().peekable();
    let mut sum: u128 = 0;
    let mut counts_seen: u64 = 0;
    let mut count: u64 = 0;
    DEFAULT_CUTOFFS
        .iter()
        .map(|&cutoff| {
            let desired = u128::from(total_count) * u128::from(cutoff) / 1_000_000;
            while sum < desired {
                let Some((&next_count, &frequency)) = hottest_first.next() else {
                    break;
                };
                count = next_count;
                sum += u128::from(next_count) * u128::from(frequency);
                counts_seen += frequency;
            }
            SummaryEntry {
                cutoff,
                min_count: count,
                num_counts: counts_seen,
            }
        })
        .collect()
}

#[derive(Debug, Clone, Copy, Default)]
struct SectionHeader {
    section_type: u64,
    flags: u64,
    offset: u64,
    size: u64,
}

/// Appends sections and remembers their headers in layout order.
struct Sections {
    file_start: usize,
    headers: [SectionHeader; LAYOUT.len()],
}

impl Sections {
    fn write(&mut self, out: &mut Vec<u8>, section_type: u64, body: impl FnOnce(&mut Vec<u8>)) {
        let start = out.len();
        body(out);
        let layout_index = LAYOUT
            .iter()
            .position(|&layout_type| layout_type == section_type)
            .expect("every section written is in the layout");
        self.headers[layout_index] = SectionHeader {
            section_type,
            flags: 0,
            offset: (start - self.file_start) as u64,
            size: (out.len() - start) as u64,
        };
    }
}

/// Appends `profile` to `out` in LLVM's extensible binary format. Functions without
/// samples are left out, as in [`crate::write_llvm_text`]. Offsets in the file are
/// relative to where it starts in `out`.
pub fn write_llvm_extbinary(
    profile: &SampleProfile,
    out: &mut Vec<u8>,
) -> Result<(), ProfileWriteError> {
    let functions = profile.by_hotness();
    let mut names = BTreeSet::new();
    for function in &functions {
        function.collect_names(&mut names);
    }
    for name in &names {
        check_binary_name(name)?;
    }
    let summary = ProfileSummary::of_functions(&functions)?;
    // Names are indexed in byte order, as LLVM's `stablizeNameTable` sorts them.
    let name_indices: HashMap<&str, u64> = names
        .iter()
        .enumerate()
        .map(|(index, name)| (*name, index as u64))
        .collect();

    let file_start = out.len();
    push_uleb128(out, MAGIC);
    push_uleb128(out, VERSION);
    out.extend_from_slice(&(LAYOUT.len() as u64).to_le_bytes());
    let table_start = out.len();
    out.resize(table_start + LAYOUT.len() * SECTION_HEADER_SIZE, 0);

    let mut sections = Sections {
        file_start,
        headers: [SectionHeader::default(); LAYOUT.len()],
    };
    sections.write(out, SECTION_PROFILE_SUMMARY, |out| summary.write(out));
    sections.write(out, SECTION_NAME_TABLE, |out| {
        push_uleb128(out, names.len() as u64);
        for name in &names {
            out.extend_from_slice(name.as_bytes());
            out.push(0);
        }
    });
    // No calling contexts: just the table's zero count.
    sections.write(out, SECTION_CONTEXT_NAME_TABLE, |out| push_uleb128(out, 0));
    let mut function_offsets = Vec::with_capacity(functions.len());
    sections.write(out, SECTION_LBR_PROFILE, |out| {
        let section_start = out.len();
        for function in &functions {
            function_offsets.push((
                name_indices[function.name.as_str()],
                (out.len() - section_start) as u64,
            ));
            push_uleb128(out, function.head_samples);
            write_function_body(function, &name_indices, out);
        }
    });
    sections.write(out, SECTION_PROFILE_SYMBOL_LIST, |_| {});
    sections.write(out, SECTION_FUNCTION_OFFSET_TABLE, |out| {
        push_uleb128(out, function_offsets.len() as u64);
        for (name_index, offset) in &function_offsets {
            push_uleb128(out, *name_index);
            push_uleb128(out, *offset);
        }
    });
    sections.write(out, SECTION_FUNCTION_METADATA, |_| {});

    for (index, header) in sections.headers.iter().enumerate() {
        let at = table_start + index * SECTION_HEADER_SIZE;
        let fields = [
            header.section_type,
            header.flags,
            header.offset,
            header.size,
        ];
        for (field_index, field) in fields.iter().enumerate() {
            out[at + field_index * 8..at + field_index * 8 + 8]
                .copy_from_slice(&field.to_le_bytes());
        }
    }
    Ok(())
}

/// A function's name, total, body samples and inlined callees (`writeBody`); the head
/// count precedes it for top-level functions only.
fn write_function_body(
    function: &FunctionProfile,
    name_indices: &HashMap<&str, u64>,
    out: &mut Vec<u8>,
) {
    push_uleb128(out, name_indices[function.name.as_str()]);
    push_uleb128(out, function.total_samples);
    push_uleb128(out, function.body.len() as u64);
    for (location, sample) in &function.body {
        push_location(out, *location);
        push_uleb128(out, sample.count);
        push_uleb128(out, sample.call_targets.len() as u64);
        for (target, count) in sample.call_targets_by_count() {
            push_uleb128(out, name_indices[target]);
            push_uleb128(out, count);
        }
    }
    let callsite_count: usize = function.callsites.values().map(BTreeMap::len).sum();
    push_uleb128(out, callsite_count as u64);
    for (location, callees) in &function.callsites {
        for callee in callees.values() {
            push_location(out, *location);
            write_function_body(callee, name_indices, out);
        }
    }
}

fn push_location(out: &mut Vec<u8>, location: LineLocation) {
    push_uleb128(out, u64::from(location.line_offset));
    push_uleb128(out, u64::from(location.discriminator));
}

/// Names are NUL-terminated in the name table.
fn check_binary_name(name: &str) -> Result<(), ProfileWriteError> {
    if name.is_empty() {
        return Err(ProfileWriteError::EmptyName);
    }
    if name.contains('\0') {
        return Err(ProfileWriteError::NameContainsNul {
            name: name.to_owned(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn magic_and_header_table() {
        let mut profile = SampleProfile::default();
        profile.function("f").add_body(LineLocation::new(1, 0), 7);
        let mut out = vec![0xaa];
        write_llvm_extbinary(&profile, &mut out).unwrap();
        // The magic as LLVM 19 writes it, then version 103.
        assert_eq!(
            out[1..12],
            [0x84, 0xe4, 0xd0, 0xb1, 0xf4, 0xc9, 0x94, 0xa8, 0x53, 0x67, 7]
        );
        // Offsets count from the start of the profile, not of the buffer.
        let header_end = 10 + 8 + 7 * 32;
        let summary_offset = u64::from_le_bytes(out[1 + 18 + 16..1 + 18 + 24].try_into().unwrap());
        assert_eq!(summary_offset, header_end as u64);
    }

    #[test]
    fn detailed_summary_walks_hottest_counts() {
        let mut profile = SampleProfile::default();
        let function = profile.function("f");
        function.head_samples = 4;
        function.add_body(LineLocation::new(1, 0), 90);
        function.add_body(LineLocation::new(2, 0), 9);
        function
            .inlined(LineLocation::new(3, 0), "g")
            .add_body(LineLocation::new(1, 0), 1);
        function.recompute_totals();
        let summary = ProfileSummary::of(&profile).unwrap();
        assert_eq!(
            (
                summary.total_count,
                summary.max_count,
                summary.max_function_count
            ),
            (100, 90, 4)
        );
        assert_eq!((summary.num_counts, summary.num_functions), (3, 1));
        let entry = |cutoff| {
            *summary
                .detailed
                .iter()
                .find(|e| e.cutoff == cutoff)
                .unwrap()
        };
        assert_eq!(entry(900_000).num_counts, 1);
        assert_eq!(entry(950_000).min_count, 9);
        // 99.9999% of 100 rounds down to 99, which the two hottest counts reach.
        assert_eq!(
            (entry(999_999).num_counts, entry(999_999).min_count),
            (2, 9)
        );
    }

    #[test]
    fn empty_profile_is_valid() {
        let mut out = Vec::new();
        write_llvm_extbinary(&SampleProfile::default(), &mut out).unwrap();
        // Header, a summary of zeros with its 16 cutoffs, and three zero counts (names,
        // contexts, function offsets).
        let cutoff_bytes: usize = DEFAULT_CUTOFFS
            .iter()
            .map(|&cutoff| if cutoff < 1 << 14 { 2 } else { 3 })
            .sum();
        assert_eq!(out.len(), 242 + 6 + cutoff_bytes + 16 * 2 + 3);
    }
}
