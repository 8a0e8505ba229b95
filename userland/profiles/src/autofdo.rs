//! Execution counts to an AutoFDO [`SampleProfile`]: every executed instruction is
//! placed at its source position through its inline stack, as both compilers expect.
//!
//! * Body counts: the count of a source position is the largest count of the
//!   instructions at it, not their sum: a line compiled to five instructions ran as
//!   often as each of them, and the compilers read the count as "times the line ran"
//!   (llvm-profgen and create_llvm_prof do the same).
//! * Inlined code is nested under its call site in the outer function (line offset of
//!   the call relative to the outer function's start line), recursively.
//! * Call targets come from branches whose source is a call; head counts from calls
//!   that land on a function's first instruction outside any inlined code. A call
//!   site's count is at least the sum of its calls.
//! * Discriminators are placed as the compiler that reads the profile reads them
//!   ([`Discriminators`]): GCC its own, as the DWARF has them; LLVM decodes a DWARF
//!   discriminator into a base discriminator and a duplication factor, and looks counts
//!   up by the base only, so an LLVM profile keys them by the base (positions that then
//!   coincide merge as above, each instruction's count first multiplied by its
//!   duplication factor, as llvm-profgen does).
//! * Positions no sample reached can be written with a count of 0
//!   ([`PlacementOptions::unreached_instructions`]): llvm-profgen does so for every
//!   instruction of a sampled function, so that the compiler reads them as cold rather
//!   than unknown.
//!
//! Line offsets are `line - start line` truncated to 16 bits, as LLVM stores them (GCC
//! shifts the same value left by 16 and adds the discriminator).

use std::collections::HashMap;
use std::hash::BuildHasher;

use crate::branch_counts::Branch;
use crate::sample_profile::{FunctionProfile, LineLocation, SampleProfile};

/// One frame of the inline stack at an address, innermost first in a stack: the
/// function by linkage name, and the source position in it (for outer frames, the
/// call site where the inner frame was inlined).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFrame {
    pub linkage_name: String,
    pub line: u32,
    pub discriminator: u32,
    /// The function's `DW_AT_decl_line`.
    pub function_start_line: u32,
}

impl SourceFrame {
    fn location(&self, discriminators: Discriminators) -> LineLocation {
        let discriminator = match discriminators {
            Discriminators::AsInDwarf => self.discriminator,
            Discriminators::Llvm => llvm_base_discriminator(self.discriminator),
        };
        LineLocation::new(
            self.line.wrapping_sub(self.function_start_line) & 0xffff,
            discriminator,
        )
    }
}

/// How a profile keys source positions by discriminator: as the compiler that reads it
/// does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Discriminators {
    /// The DWARF discriminator as is: GCC's AutoFDO reads the discriminators GCC
    /// assigned, in GCC's own numbering.
    #[default]
    AsInDwarf,
    /// LLVM's reading ([`llvm_base_discriminator`], [`llvm_duplication_factor`]): what
    /// clang's sample loader looks counts up by and what llvm-profgen writes, whichever
    /// compiler built the binary (GCC's discriminator 3 is LLVM's base 0).
    Llvm,
}

/// How [`build_sample_profile`] places counts.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct PlacementOptions {
    pub discriminators: Discriminators,
    /// Instructions whose source positions get a count of 0 when no executed
    /// instruction gave them one (inlined instances created as needed): what
    /// llvm-profgen writes for the instructions of every function a fall-through range
    /// starts in. Empty: only executed positions are written.
    pub unreached_instructions: Vec<u64>,
}

/// LLVM's base discriminator of the DWARF discriminator `discriminator`, as
/// `DILocation::getBaseDiscriminatorFromDiscriminator` decodes it without
/// flow-sensitive discriminators (as llvm-profgen and clang's sample loader do):
///
/// * low three bits set: a pseudo-probe discriminator, whose base is the DWARF base
///   packed in bits 16-18 when bit 28 says one is there, else the probe index (bits
///   3-18);
/// * otherwise the first component of LLVM's encoding: an odd value has base 0; an
///   even one holds the base after its low bit, prefix-encoded (5 bits, or when bit 5 of
///   the shifted value is set, 12 bits with that flag bit skipped).
pub fn llvm_base_discriminator(discriminator: u32) -> u32 {
    if discriminator & 0x7 == 0x7 {
        return if discriminator & (1 << 28) != 0 {
            (discriminator >> 16) & 0x7
        } else {
            (discriminator >> 3) & 0xffff
        };
    }
    unsigned_from_prefix_encoding(discriminator)
}

/// The duplication factor LLVM reads in `discriminator`
/// (`DILocation::getDuplicationFactorFromDiscriminator`, no flow-sensitive
/// discriminators): the second component of the encoding, 1 when absent or 0. Code
/// duplicated by unrolling or vectorisation runs once per several iterations, so
/// llvm-profgen multiplies an instruction's count by it before taking a line's largest.
pub fn llvm_duplication_factor(discriminator: u32) -> u32 {
    // Skip the first component: one bit when it is empty (odd), else 7 or 14 bits.
    let rest = if discriminator & 1 != 0 {
        discriminator >> 1
    } else if discriminator & 0x40 != 0 {
        discriminator >> 14
    } else {
        discriminator >> 7
    };
    unsigned_from_prefix_encoding(rest).max(1)
}

/// One component of LLVM's discriminator encoding: 0 when the low bit is set, else the
/// value after it, 5 bits long, or 12 when its bit 5 flags the longer form.
fn unsigned_from_prefix_encoding(value: u32) -> u32 {
    if value & 1 != 0 {
        return 0;
    }
    let value = value >> 1;
    if value & 0x20 != 0 {
        ((value >> 1) & 0xfe0) | (value & 0x1f)
    } else {
        value & 0x1f
    }
}

/// What could not be placed, counted, so the caller can report it once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PlacementStats {
    /// Instructions with a count that no source position was found for, and their
    /// summed counts.
    pub unplaced_instructions: u64,
    pub unplaced_count: u64,
    pub placed_instructions: u64,
}

/// Builds the profile. `frames(address)` returns the inline stack at an address
/// (innermost first; empty when unknown); `is_call(address)` says whether the
/// instruction there is a call.
pub fn build_sample_profile<S: BuildHasher, T: BuildHasher>(
    instruction_counts: &HashMap<u64, u64, S>,
    branches: &HashMap<Branch, u64, T>,
    mut frames: impl FnMut(u64) -> Vec<SourceFrame>,
    mut is_call: impl FnMut(u64) -> bool,
    options: &PlacementOptions,
) -> (SampleProfile, PlacementStats) {
    let discriminators = options.discriminators;
    let mut profile = SampleProfile::default();
    let mut stats = PlacementStats::default();
    // Sorted so the profile does not depend on hash order (ties of max are equal anyway,
    // but the order callees are created in shows in some writers).
    let mut addresses: Vec<_> = instruction_counts.iter().collect();
    addresses.sort_unstable();
    for (&address, &count) in addresses {
        let stack = frames(address);
        let Some((innermost, _)) = stack.split_first() else {
            stats.unplaced_instructions += 1;
            stats.unplaced_count += count;
            continue;
        };
        stats.placed_instructions += 1;
        let function = profile_at(
            &mut profile,
            &stack[stack.len() - 1],
            &stack[..stack.len() - 1],
            discriminators,
        );
        let count = match discriminators {
            Discriminators::AsInDwarf => count,
            Discriminators::Llvm => {
                count.saturating_mul(u64::from(llvm_duplication_factor(innermost.discriminator)))
            }
        };
        let body = function
            .body
            .entry(innermost.location(discriminators))
            .or_default();
        body.count = body.count.max(count);
    }
    for &address in &options.unreached_instructions {
        let stack = frames(address);
        let Some((innermost, _)) = stack.split_first() else {
            continue;
        };
        profile_at(
            &mut profile,
            &stack[stack.len() - 1],
            &stack[..stack.len() - 1],
            discriminators,
        )
        .body
        .entry(innermost.location(discriminators))
        .or_default();
    }
    let mut calls: Vec<_> = branches.iter().collect();
    calls.sort_unstable_by_key(|(branch, _)| (branch.from, branch.to));
    for (branch, &count) in calls {
        if !is_call(branch.from) {
            continue;
        }
        let callee_stack = frames(branch.to);
        let Some(callee) = callee_stack.last() else {
            continue;
        };
        let callee_name = callee.linkage_name.clone();
        // A call into code that is itself inlined is not a call of the outer function.
        if callee_stack.len() == 1 {
            profile.function(&callee_name).head_samples += count;
        }
        let caller_stack = frames(branch.from);
        if let (Some(call_site), Some((outermost, inner))) =
            (caller_stack.first(), caller_stack.split_last())
        {
            let location = call_site.location(discriminators);
            profile_at(&mut profile, outermost, inner, discriminators).add_call(
                location,
                &callee_name,
                count,
            );
        }
    }
    for function in profile.functions.values_mut() {
        lift_call_sites(function);
        function.recompute_totals();
    }
    (profile, stats)
}

/// A call site ran at least as often as the calls recorded from it. Fall-through
/// ranges under-count the instructions at the ends of a stack (the newest branch has
/// no newer one to close its range), while every recorded call counts, so a call
/// site's count is raised to the sum of its calls, as llvm-profgen does.
fn lift_call_sites(function: &mut FunctionProfile) {
    for sample in function.body.values_mut() {
        let calls: u64 = sample.call_targets.values().sum();
        sample.count = sample.count.max(calls);
    }
    for callees in function.callsites.values_mut() {
        for callee in callees.values_mut() {
            lift_call_sites(callee);
        }
    }
}

/// The (possibly inlined) function profile the innermost frame of a stack belongs to;
/// the stack is `inner` (innermost first) below `outermost`.
fn profile_at<'p>(
    profile: &'p mut SampleProfile,
    outermost: &SourceFrame,
    inner: &[SourceFrame],
    discriminators: Discriminators,
) -> &'p mut FunctionProfile {
    let mut function = profile.function(&outermost.linkage_name);
    // Walk inwards: each outer frame's position is the call site of the next inner one.
    let mut caller = outermost;
    for callee in inner.iter().rev() {
        function = function.inlined(caller.location(discriminators), &callee.linkage_name);
        caller = callee;
    }
    function
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(name: &str, line: u32, start: u32) -> SourceFrame {
        SourceFrame {
            linkage_name: name.to_owned(),
            line,
            discriminator: 0,
            function_start_line: start,
        }
    }

    #[test]
    fn lines_take_the_largest_count_and_inlines_nest_under_their_call_site() {
        let counts = HashMap::from([(0x100, 10), (0x104, 30), (0x108, 7), (0x10c, 5)]);
        let branches = HashMap::from([(
            Branch {
                from: 0x10c,
                to: 0x100,
            },
            4,
        )]);
        let stacks = |address: u64| match address {
            // main starts at line 10; lines 12 (two instructions) and 13.
            0x100 | 0x104 => vec![frame("main", 12, 10)],
            // helper (starts at line 3) inlined into main at line 14.
            0x108 => vec![frame("helper", 4, 3), frame("main", 14, 10)],
            0x10c => vec![frame("main", 15, 10)],
            _ => Vec::new(),
        };
        let (profile, stats) = build_sample_profile(
            &counts,
            &branches,
            stacks,
            |address| address == 0x10c,
            &PlacementOptions::default(),
        );
        assert_eq!(stats.unplaced_instructions, 0);
        let main = &profile.functions["main"];
        assert_eq!(main.body[&LineLocation::new(2, 0)].count, 30);
        // 5 executions already cover the 4 calls made there.
        assert_eq!(main.body[&LineLocation::new(5, 0)].count, 5);
        assert_eq!(main.body[&LineLocation::new(5, 0)].call_targets["main"], 4);
        let helper = &main.callsites[&LineLocation::new(4, 0)]["helper"];
        assert_eq!(helper.body[&LineLocation::new(1, 0)].count, 7);
        assert_eq!(main.total_samples, 30 + 5 + 7);
        assert_eq!(main.head_samples, 4);
    }

    #[test]
    fn unknown_addresses_are_counted() {
        let counts = HashMap::from([(0x100, 10)]);
        let (profile, stats) = build_sample_profile(
            &counts,
            &HashMap::new(),
            |_| Vec::new(),
            |_| false,
            &PlacementOptions::default(),
        );
        assert!(profile.functions.is_empty());
        assert_eq!(stats.unplaced_instructions, 1);
        assert_eq!(stats.unplaced_count, 10);
    }

    fn frame_at(name: &str, line: u32, discriminator: u32, start: u32) -> SourceFrame {
        SourceFrame {
            discriminator,
            ..frame(name, line, start)
        }
    }

    fn llvm() -> PlacementOptions {
        PlacementOptions {
            discriminators: Discriminators::Llvm,
            ..PlacementOptions::default()
        }
    }

    /// What llvm-profgen-19 wrote for lines of a test binary given these DWARF
    /// discriminators (`.loc ... discriminator N`, every line run 10 times): the base
    /// discriminator it keyed the line by, and the count it gave (10 x the duplication
    /// factor).
    #[test]
    fn discriminators_decode_as_llvm_profgen_19_decodes_them() {
        for (dwarf, base, count) in [
            (0, 0, 10),
            (1, 0, 10),
            (2, 1, 10),
            (3, 0, 10),
            (4, 2, 10),
            (9, 0, 20),
            // Low three bits set: a pseudo-probe discriminator, its probe index.
            (15, 1, 10),
            (1015, 126, 10),
            (0x40, 0, 10),
            (66, 1, 10),
            (0x8e, 7, 10),
            (0x100, 0, 10),
            (0x102, 1, 10),
            (0x202, 1, 20),
            // The long (12-bit) form of the first component.
            (0x142, 65, 10),
            (0x2c2, 161, 10),
        ] {
            assert_eq!(llvm_base_discriminator(dwarf), base, "base of {dwarf}");
            assert_eq!(
                10 * llvm_duplication_factor(dwarf),
                count,
                "duplication factor of {dwarf}"
            );
        }
        // A pseudo probe that packs a DWARF base discriminator (bit 28, bits 16-18).
        assert_eq!(
            llvm_base_discriminator((1 << 28) | (5 << 16) | (9 << 3) | 7),
            5
        );
    }

    #[test]
    fn llvm_placement_merges_discriminators_that_share_a_base() {
        // GCC numbers the blocks of line 12 1 and 3; LLVM reads both as base 0, and 2
        // as base 1. Line 13's discriminator 9 has a duplication factor of 2.
        let counts = HashMap::from([(0x100, 10), (0x104, 30), (0x108, 7), (0x10c, 5)]);
        let branches = HashMap::from([
            (
                Branch {
                    from: 0x104,
                    to: 0x200,
                },
                3,
            ),
            (
                Branch {
                    from: 0x100,
                    to: 0x200,
                },
                4,
            ),
        ]);
        let stacks = |address: u64| match address {
            0x100 => vec![frame_at("main", 12, 1, 10)],
            0x104 => vec![frame_at("main", 12, 3, 10)],
            0x108 => vec![frame_at("main", 12, 2, 10)],
            0x10c => vec![frame_at("main", 13, 9, 10)],
            0x200 => vec![frame("callee", 1, 1)],
            _ => Vec::new(),
        };
        let is_call = |address: u64| address == 0x100 || address == 0x104;
        let (profile, _) = build_sample_profile(&counts, &branches, stacks, is_call, &llvm());
        let main = &profile.functions["main"];
        let at = |offset, discriminator| &main.body[&LineLocation::new(offset, discriminator)];
        assert_eq!(at(2, 0).count, 30);
        // The calls of both instructions add up at their shared position.
        assert_eq!(at(2, 0).call_targets["callee"], 7);
        assert_eq!(at(2, 1).count, 7);
        assert_eq!(at(3, 0).count, 10);
        assert_eq!(main.body.len(), 3);

        // GCC's profile keeps GCC's discriminators, counts as they are.
        let (profile, _) = build_sample_profile(
            &counts,
            &branches,
            stacks,
            is_call,
            &PlacementOptions::default(),
        );
        let main = &profile.functions["main"];
        let locations: Vec<_> = main.body.keys().copied().collect();
        assert_eq!(
            locations,
            [
                LineLocation::new(2, 1),
                LineLocation::new(2, 2),
                LineLocation::new(2, 3),
                LineLocation::new(3, 9)
            ]
        );
        assert_eq!(main.body[&LineLocation::new(3, 9)].count, 5);
    }

    #[test]
    fn inlined_call_sites_take_llvm_base_discriminators() {
        let counts = HashMap::from([(0x100, 10)]);
        let stacks = |_| vec![frame("helper", 4, 3), frame_at("main", 14, 3, 10)];
        let (profile, _) =
            build_sample_profile(&counts, &HashMap::new(), stacks, |_| false, &llvm());
        let main = &profile.functions["main"];
        assert_eq!(
            main.callsites[&LineLocation::new(4, 0)]["helper"].body[&LineLocation::new(1, 0)].count,
            10
        );
    }

    #[test]
    fn unreached_instructions_read_zero_and_leave_counts_alone() {
        let counts = HashMap::from([(0x100, 10)]);
        let stacks = |address: u64| match address {
            0x100 | 0x102 => vec![frame("main", 12, 10)],
            0x104 => vec![frame_at("main", 13, 2, 10)],
            // An inlined instance no sample reached.
            0x108 => vec![frame("helper", 4, 3), frame("main", 14, 10)],
            _ => Vec::new(),
        };
        let options = PlacementOptions {
            unreached_instructions: vec![0x100, 0x102, 0x104, 0x108, 0x10c],
            ..llvm()
        };
        let (profile, stats) =
            build_sample_profile(&counts, &HashMap::new(), stacks, |_| false, &options);
        assert_eq!(stats.placed_instructions, 1);
        let main = &profile.functions["main"];
        assert_eq!(main.body[&LineLocation::new(2, 0)].count, 10);
        assert_eq!(main.body[&LineLocation::new(3, 1)].count, 0);
        let helper = &main.callsites[&LineLocation::new(4, 0)]["helper"];
        assert_eq!(helper.body[&LineLocation::new(1, 0)].count, 0);
        assert_eq!(helper.total_samples, 0);
        assert_eq!(main.total_samples, 10);
    }
}
