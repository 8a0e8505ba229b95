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
    fn location(&self) -> LineLocation {
        LineLocation::new(
            self.line.wrapping_sub(self.function_start_line) & 0xffff,
            self.discriminator,
        )
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
) -> (SampleProfile, PlacementStats) {
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
        );
        let body = function.body.entry(innermost.location()).or_default();
        body.count = body.count.max(count);
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
            let location = call_site.location();
            profile_at(&mut profile, outermost, inner).add_call(location, &callee_name, count);
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
) -> &'p mut FunctionProfile {
    let mut function = profile.function(&outermost.linkage_name);
    // Walk inwards: each outer frame's position is the call site of the next inner one.
    let mut caller = outermost;
    for callee in inner.iter().rev() {
        function = function.inlined(caller.location(), &callee.linkage_name);
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
        let (profile, stats) =
            build_sample_profile(&counts, &branches, stacks, |address| address == 0x10c);
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
        let (profile, stats) =
            build_sample_profile(&counts, &HashMap::new(), |_| Vec::new(), |_| false);
        assert!(profile.functions.is_empty());
        assert_eq!(stats.unplaced_instructions, 1);
        assert_eq!(stats.unplaced_count, 10);
    }
}
