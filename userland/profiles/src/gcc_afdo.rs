//! The gcov-based AutoFDO profile that GCC 12 reads with `-fauto-profile=FILE`, as its
//! reader (`read_profile` and friends in gcc/auto-profile.cc, strings from gcov-io.cc)
//! takes it. Every word is a 32-bit little-endian `gcov_unsigned_t` (GCC compares the
//! magic without byte swapping, so the file follows the compiler host's byte order); a
//! counter is two words, low first, read as a signed 64-bit `gcov_type`.
//!
//! ```text
//! GCOV_DATA_MAGIC 0x67636461 ("gcda"), AUTO_PROFILE_VERSION 2, an unused 0 word
//! GCOV_TAG_AFDO_FILE_NAMES 0xaa000000, length, string count, strings
//! GCOV_TAG_AFDO_FUNCTION   0xac000000, length, function count, function instances
//! module grouping          0xae000000, length 0, module count 0
//! ```
//!
//! GCC 12 refuses any version but 2 ("AutoFDO profile version 1 does not match 2").
//! Version 2 goes with GCC 12's gcov-io.cc, which stores a string as its byte length
//! including the NUL, then the bytes unpadded; the older layout (a length in words, the
//! string NUL-padded to a word boundary) makes GCC 12 read garbage lengths and crash.
//! GCC ignores section lengths (we write the byte count after the length word, as GCC
//! 12's own gcov records do), reads nothing after the module grouping (so there is no
//! working set section to write) and requires the module count to be 0.
//!
//! A function instance is: (top level only) the head count as a counter; the name's
//! string index, the number of position counts and of call sites; each position count as
//! its offset `(line_offset << 16) | discriminator`, its number of call targets and its
//! count (a counter), each target as a histogram type word (7, the
//! `HIST_TYPE_INDIR_CALL_TOPN` of the AutoFDO tools' enum; GCC 12 reads and ignores it),
//! the target's string index (a counter) and its count (a counter); then each call site
//! as its offset followed by the inlined callee's instance. Totals are not in the file:
//! GCC adds each position count to the instance and to every instance it is inlined in.
//!
//! How GCC 12 finds a profile, which decides the names to write:
//! * reading the string table, it cuts every name at its first `.`
//!   (`get_original_name`), so `foo.constprop.0` and `foo` are one name, and a second
//!   function or call site with the same cut name would replace the first. This writer
//!   cuts names the same way and merges what then coincides, so no count is lost;
//! * a function's (or an inlined callee's) name is looked up as its assembler name, cut
//!   at `.`, then as its `lang_hooks.dwarf_name` (the `DW_AT_name` spelling, the bare
//!   identifier), then through the decl's abstract origin (`get_index_by_decl`). The
//!   linkage names of the model match the first, for C and C++ alike;
//! * an inlined instance is keyed by the call site's offset in the function it was
//!   inlined into and the callee's name index; offsets are relative to the
//!   `DECL_SOURCE_LINE` of the function that contains the line, which is the
//!   `DW_AT_decl_line` the model's offsets use;
//! * call targets are resolved with `cgraph_node::get_for_asmname`: assembler names
//!   only, and used for indirect calls only;
//! * `string_table::get_name` asserts that an index is above 0, so a name at index 0
//!   could crash the compiler when it looks at an indirect call. Index 0 holds an empty
//!   string that no function uses.
//!
//! Discriminators and line offsets must fit 16 bits each.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::encoding::{gcov_count, push_gcov_counter, push_gcov_string, push_gcov_word};
use crate::{FunctionProfile, LineLocation, ProfileWriteError, SampleProfile};

pub const GCOV_DATA_MAGIC: u32 = 0x6763_6461;
/// The `AUTO_PROFILE_VERSION` GCC 12 requires ("AutoFDO profile version N does not
/// match 2" otherwise).
pub const AUTO_PROFILE_VERSION: u32 = 2;
pub const GCOV_TAG_AFDO_FILE_NAMES: u32 = 0xaa00_0000;
pub const GCOV_TAG_AFDO_FUNCTION: u32 = 0xac00_0000;
pub const GCOV_TAG_AFDO_MODULE_GROUPING: u32 = 0xae00_0000;
/// The histogram type written before each call target.
const HIST_TYPE_INDIR_CALL_TOPN: u32 = 7;

/// Appends `profile` to `out` as GCC 12's AutoFDO profile. Functions without samples are
/// left out. On error nothing is appended.
pub fn write_gcc_afdo(profile: &SampleProfile, out: &mut Vec<u8>) -> Result<(), ProfileWriteError> {
    let start = out.len();
    let result = write_profile(profile, out);
    if result.is_err() {
        out.truncate(start);
    }
    result
}

fn write_profile(profile: &SampleProfile, out: &mut Vec<u8>) -> Result<(), ProfileWriteError> {
    let mut functions: BTreeMap<&str, Instance<'_>> = BTreeMap::new();
    for function in profile.by_hotness() {
        let name = gcc_name(&function.name)?;
        let instance = functions.entry(name).or_default();
        instance.head_count = add_count(instance.head_count, function.head_samples, name)?;
        instance.add(function, name)?;
    }

    let mut names = BTreeSet::new();
    for (name, instance) in &functions {
        names.insert(*name);
        instance.collect_names(&mut names);
    }
    // Index 0 is the empty string no function uses (see the module documentation).
    let strings: Vec<&str> = std::iter::once("").chain(names).collect();
    let indices: HashMap<&str, u32> = strings
        .iter()
        .enumerate()
        .skip(1)
        .map(|(index, name)| (*name, index as u32))
        .collect();

    push_gcov_word(out, GCOV_DATA_MAGIC);
    push_gcov_word(out, AUTO_PROFILE_VERSION);
    push_gcov_word(out, 0);

    let length_at = start_record(out, GCOV_TAG_AFDO_FILE_NAMES);
    push_gcov_word(out, gcov_count("names", strings.len())?);
    for name in &strings {
        push_gcov_string(out, name)?;
    }
    finish_record(out, length_at);

    let length_at = start_record(out, GCOV_TAG_AFDO_FUNCTION);
    push_gcov_word(out, gcov_count("functions", functions.len())?);
    for (name, instance) in &functions {
        push_gcov_counter(out, instance.head_count, name)?;
        instance.write(name, &indices, out)?;
    }
    finish_record(out, length_at);

    start_record(out, GCOV_TAG_AFDO_MODULE_GROUPING);
    push_gcov_word(out, 0);
    Ok(())
}

/// Writes a record tag and a zero length; returns where the length is.
fn start_record(out: &mut Vec<u8>, tag: u32) -> usize {
    push_gcov_word(out, tag);
    push_gcov_word(out, 0);
    out.len() - 4
}

/// Sets the record length to the bytes written after it.
fn finish_record(out: &mut [u8], length_at: usize) {
    // GCC ignores the length; a record past 4 GiB keeps a wrong one rather than failing.
    let length = (out.len() - length_at - 4) as u32;
    out[length_at..length_at + 4].copy_from_slice(&length.to_le_bytes());
}

/// The name as GCC's string table keeps it: cut at the first `.`.
fn gcc_name(name: &str) -> Result<&str, ProfileWriteError> {
    let cut = name.split('.').next().unwrap_or_default();
    if cut.is_empty() {
        return Err(ProfileWriteError::EmptyName);
    }
    if cut.contains('\0') {
        return Err(ProfileWriteError::NameContainsNul {
            name: name.to_owned(),
        });
    }
    Ok(cut)
}

fn add_count(sum: u64, count: u64, function: &str) -> Result<u64, ProfileWriteError> {
    sum.checked_add(count)
        .ok_or_else(|| ProfileWriteError::CountOverflow {
            function: function.to_owned(),
        })
}

/// `(line_offset << 16) | discriminator`, GCC's `get_combined_location`.
fn combined_offset(location: LineLocation, function: &str) -> Result<u32, ProfileWriteError> {
    if location.line_offset > 0xffff {
        return Err(ProfileWriteError::LineOffsetTooLarge {
            function: function.to_owned(),
            line_offset: location.line_offset,
        });
    }
    if location.discriminator > 0xffff {
        return Err(ProfileWriteError::DiscriminatorTooLarge {
            function: function.to_owned(),
            discriminator: location.discriminator,
        });
    }
    Ok((location.line_offset << 16) | location.discriminator)
}

/// A position's count and the calls made there, by cut target name.
#[derive(Debug, Default)]
struct Position<'a> {
    count: u64,
    targets: BTreeMap<&'a str, u64>,
}

/// A function instance as GCC keys it: cut names, combined offsets.
#[derive(Debug, Default)]
struct Instance<'a> {
    head_count: u64,
    positions: BTreeMap<u32, Position<'a>>,
    callsites: BTreeMap<(u32, &'a str), Instance<'a>>,
}

impl<'a> Instance<'a> {
    /// Merges the body and inlined callees of `profile` into this instance.
    fn add(&mut self, profile: &'a FunctionProfile, name: &str) -> Result<(), ProfileWriteError> {
        for (location, sample) in &profile.body {
            let position = self
                .positions
                .entry(combined_offset(*location, name)?)
                .or_default();
            position.count = add_count(position.count, sample.count, name)?;
            for (target, count) in &sample.call_targets {
                let target_count = position.targets.entry(gcc_name(target)?).or_default();
                *target_count = add_count(*target_count, *count, name)?;
            }
        }
        for (location, callees) in &profile.callsites {
            let offset = combined_offset(*location, name)?;
            for callee in callees.values() {
                let callee_name = gcc_name(&callee.name)?;
                self.callsites
                    .entry((offset, callee_name))
                    .or_default()
                    .add(callee, callee_name)?;
            }
        }
        Ok(())
    }

    fn collect_names(&self, names: &mut BTreeSet<&'a str>) {
        for position in self.positions.values() {
            names.extend(position.targets.keys());
        }
        for ((_, callee_name), callee) in &self.callsites {
            names.insert(callee_name);
            callee.collect_names(names);
        }
    }

    /// Writes the instance after its head count (which only top-level instances have).
    fn write(
        &self,
        name: &str,
        indices: &HashMap<&str, u32>,
        out: &mut Vec<u8>,
    ) -> Result<(), ProfileWriteError> {
        push_gcov_word(out, indices[name]);
        push_gcov_word(out, gcov_count("position counts", self.positions.len())?);
        push_gcov_word(out, gcov_count("call sites", self.callsites.len())?);
        for (offset, position) in &self.positions {
            push_gcov_word(out, *offset);
            push_gcov_word(out, gcov_count("call targets", position.targets.len())?);
            push_gcov_counter(out, position.count, name)?;
            for (target, count) in &position.targets {
                push_gcov_word(out, HIST_TYPE_INDIR_CALL_TOPN);
                push_gcov_counter(out, u64::from(indices[target]), name)?;
                push_gcov_counter(out, *count, name)?;
            }
        }
        for ((offset, callee_name), callee) in &self.callsites {
            push_gcov_word(out, *offset);
            callee.write(callee_name, indices, out)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(bytes: &[u8]) -> Vec<u32> {
        bytes
            .chunks(4)
            .map(|chunk| {
                let mut word = [0u8; 4];
                word[..chunk.len()].copy_from_slice(chunk);
                u32::from_le_bytes(word)
            })
            .collect()
    }

    #[test]
    fn layout_of_a_small_profile() {
        let mut profile = SampleProfile::default();
        let function = profile.function("f");
        function.head_samples = 3;
        function.add_body(LineLocation::new(1, 2), 10);
        function.add_call(LineLocation::new(1, 2), "g", 4);
        function
            .inlined(LineLocation::new(2, 0), "h")
            .add_body(LineLocation::new(0, 0), 6);
        function.recompute_totals();
        let mut out = Vec::new();
        write_gcc_afdo(&profile, &mut out).unwrap();

        let mut expected = vec![0x6763_6461, 2, 0];
        // The string table: "" (index 0), "f", "g", "h".
        let mut names = Vec::new();
        for name in ["", "f", "g", "h"] {
            push_gcov_string(&mut names, name).unwrap();
        }
        expected.extend([0xaa00_0000, 4 + names.len() as u32, 4]);
        let names_words_start = expected.len();
        let function_words = [
            1, // one function
            3,
            0, // head count
            1,
            1,
            1, // "f", one position, one call site
            (1 << 16) | 2,
            1,
            10,
            0, // offset 1.2, one target, count 10
            7,
            2,
            0,
            4,
            0,       // target "g" x4
            2 << 16, // call site at offset 2
            3,
            1,
            0, // "h", one position, no call sites
            0,
            0,
            6,
            0, // offset 0, no targets, count 6
        ];
        let bytes_words = words(&out);
        assert_eq!(bytes_words[..names_words_start], expected[..]);
        let after_names = 3 * 4 + 12 + names.len();
        assert_eq!(out[3 * 4 + 12..after_names], names[..]);
        let rest = words(&out[after_names..]);
        assert_eq!(rest[0], 0xac00_0000);
        assert_eq!(rest[1] as usize, function_words.len() * 4);
        assert_eq!(rest[2..2 + function_words.len()], function_words);
        assert_eq!(rest[2 + function_words.len()..], [0xae00_0000, 0, 0]);
    }

    #[test]
    fn names_cut_at_the_first_dot_are_merged() {
        let mut profile = SampleProfile::default();
        profile.function("f").add_body(LineLocation::new(1, 0), 10);
        profile
            .function("f.constprop.0")
            .add_body(LineLocation::new(1, 0), 5);
        let mut out = Vec::new();
        write_gcc_afdo(&profile, &mut out).unwrap();
        // One string besides the empty one: strings are unpadded, so find the function
        // section by its tag bytes.
        assert_eq!(words(&out[20..24]), [2]);
        let function_section = out
            .windows(4)
            .position(|bytes| bytes == 0xac00_0000u32.to_le_bytes())
            .unwrap();
        let function = words(&out[function_section..]);
        // One function, head 0, "f" with one position and no call sites, offset 1 << 16,
        // no targets, count 15.
        assert_eq!(function[2..12], [1, 0, 0, 1, 1, 0, 1 << 16, 0, 15, 0]);
    }

    #[test]
    fn what_gcc_cannot_hold_is_refused_and_nothing_written() {
        let cases = [
            (LineLocation::new(0x1_0000, 0), 1, "LineOffsetTooLarge"),
            (LineLocation::new(1, 0x1_0000), 1, "DiscriminatorTooLarge"),
            (LineLocation::new(1, 0), u64::MAX, "CountTooLarge"),
        ];
        for (location, count, variant) in cases {
            let mut profile = SampleProfile::default();
            profile.function("f").add_body(location, count);
            let mut out = vec![1, 2, 3];
            let error = write_gcc_afdo(&profile, &mut out).unwrap_err();
            assert!(format!("{error:?}").starts_with(variant), "{error:?}");
            assert_eq!(out, [1, 2, 3]);
        }
        let mut profile = SampleProfile::default();
        profile
            .function(".hidden")
            .add_body(LineLocation::new(1, 0), 1);
        assert_eq!(
            write_gcc_afdo(&profile, &mut Vec::new()),
            Err(ProfileWriteError::EmptyName)
        );
    }
}
