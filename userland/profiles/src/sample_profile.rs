//! The AutoFDO sample profile: what LLVM's `SampleProfile` and GCC's `autofdo`
//! `function_instance` both hold. Counts are keyed by source position relative to the
//! start of the function (line offset and DWARF discriminator), so a profile survives
//! edits elsewhere in the file; inlined code is nested under the call site it was
//! inlined at, so the compiler can re-inline with the right counts.

use std::collections::{BTreeMap, BTreeSet};

/// A source position inside a function: `line - function start line` (the line of the
/// function's `DW_AT_decl_line`) and the discriminator as the profile's compiler reads
/// it (0 when none; see [`Discriminators`](crate::Discriminators)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct LineLocation {
    pub line_offset: u32,
    pub discriminator: u32,
}

impl LineLocation {
    pub fn new(line_offset: u32, discriminator: u32) -> Self {
        Self {
            line_offset,
            discriminator,
        }
    }
}

/// Samples of one source position: how often it executed, and for calls made there,
/// how often each callee (by linkage name) was called from it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BodySample {
    pub count: u64,
    pub call_targets: BTreeMap<String, u64>,
}

impl BodySample {
    /// The call targets hottest first, ties by name: the order LLVM writes them in.
    pub fn call_targets_by_count(&self) -> Vec<(&str, u64)> {
        let mut targets: Vec<(&str, u64)> = self
            .call_targets
            .iter()
            .map(|(name, count)| (name.as_str(), *count))
            .collect();
        targets.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
        targets
    }
}

/// One function's profile, or one inlined instance of a function under a call site.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FunctionProfile {
    /// The linkage (mangled) name, as the compiler names the function.
    pub name: String,
    /// Sum of every count in the function, inlined callees included.
    pub total_samples: u64,
    /// How often the function was entered (0 for inlined instances in GCC's sense;
    /// LLVM keeps a head count for top-level functions only).
    pub head_samples: u64,
    pub body: BTreeMap<LineLocation, BodySample>,
    /// Inlined callees: call site -> callee linkage name -> the callee's profile there.
    pub callsites: BTreeMap<LineLocation, BTreeMap<String, FunctionProfile>>,
}

impl FunctionProfile {
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            ..Self::default()
        }
    }

    /// Adds `count` executions of `location` (to the body and the totals).
    pub fn add_body(&mut self, location: LineLocation, count: u64) {
        self.body.entry(location).or_default().count += count;
        self.total_samples += count;
    }

    /// Records `count` calls from `location` to `callee`.
    pub fn add_call(&mut self, location: LineLocation, callee: &str, count: u64) {
        *self
            .body
            .entry(location)
            .or_default()
            .call_targets
            .entry(callee.to_owned())
            .or_default() += count;
    }

    /// The profile of `callee` inlined at `location`, created empty when new.
    pub fn inlined(&mut self, location: LineLocation, callee: &str) -> &mut FunctionProfile {
        self.callsites
            .entry(location)
            .or_default()
            .entry(callee.to_owned())
            .or_insert_with(|| FunctionProfile::new(callee))
    }

    /// Recomputes `total_samples` of this profile and every inlined one from the bodies.
    pub fn recompute_totals(&mut self) -> u64 {
        let mut total: u64 = self.body.values().map(|sample| sample.count).sum();
        for callees in self.callsites.values_mut() {
            for callee in callees.values_mut() {
                total += callee.recompute_totals();
            }
        }
        self.total_samples = total;
        total
    }

    /// Adds every name this profile refers to: its own, its call targets', and those of
    /// its inlined callees, recursively (what a format's name table must hold).
    pub fn collect_names<'a>(&'a self, names: &mut BTreeSet<&'a str>) {
        names.insert(&self.name);
        for sample in self.body.values() {
            names.extend(sample.call_targets.keys().map(String::as_str));
        }
        for callee in self.callsites.values().flat_map(BTreeMap::values) {
            callee.collect_names(names);
        }
    }

    /// The largest body count, inlined callees included (GCC's and LLVM's "max count").
    pub fn max_count(&self) -> u64 {
        let own = self
            .body
            .values()
            .map(|sample| sample.count)
            .max()
            .unwrap_or(0);
        self.callsites
            .values()
            .flat_map(BTreeMap::values)
            .map(FunctionProfile::max_count)
            .fold(own, u64::max)
    }
}

/// A whole-program sample profile: top-level (not inlined) functions by linkage name.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SampleProfile {
    pub functions: BTreeMap<String, FunctionProfile>,
}

impl SampleProfile {
    /// The top-level profile of `name`, created empty when new.
    pub fn function(&mut self, name: &str) -> &mut FunctionProfile {
        self.functions
            .entry(name.to_owned())
            .or_insert_with(|| FunctionProfile::new(name))
    }

    /// Functions with at least one sample, hottest first (ties by name), as both
    /// compilers' tools list them.
    pub fn by_hotness(&self) -> Vec<&FunctionProfile> {
        let mut functions: Vec<_> = self
            .functions
            .values()
            .filter(|function| function.total_samples > 0 || function.head_samples > 0)
            .collect();
        functions.sort_by(|a, b| {
            b.total_samples
                .cmp(&a.total_samples)
                .then_with(|| a.name.cmp(&b.name))
        });
        functions
    }
}
