//! pprof profiles (`profile.proto`, the format of `go tool pprof`, Pyroscope, Parca and
//! Google's Cloud Profiler): a [`ProfileBuilder`] that interns strings, mappings,
//! functions and locations and merges equal stacks, and the gzip writer and reader.
//!
//! The builder knows nothing of perf, traces or symbolizers: callers name each
//! location's mapping, address and inline functions once (it tells them whether it has
//! seen a location before, so they symbolize each address once) and add stacks of
//! location ids with one value per sample type.
//!
//! No file I/O: the writer appends to an `io::Write` the caller owns.

use std::io::{Read, Write};

use std::hash::Hasher as _;

use hashbrown::HashTable;
use prost::Message as _;
use rustc_hash::{FxHashMap, FxHasher};

pub mod proto;

pub use proto::Profile;

/// What went wrong building or reading a profile.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PprofError {
    /// A sample with another number of values than the profile has sample types.
    #[error("a sample has {given} values, the profile has {expected} sample types")]
    ValueCount { expected: usize, given: usize },
    /// A location, mapping or function id the builder did not hand out.
    #[error("{what} id {id} was not made by this builder")]
    UnknownId { what: &'static str, id: u64 },
    /// A profile merged into a builder of other sample types.
    #[error("cannot merge a profile of sample types {given:?} into one of {expected:?}")]
    SampleTypes {
        expected: Vec<String>,
        given: Vec<String>,
    },
    /// A merged profile refers to a string, mapping, function or location it lacks.
    #[error("the merged profile's {what} {index} does not exist")]
    Dangling { what: &'static str, index: u64 },
    /// Bytes that are not gzip data (or whose gzip stream breaks off).
    #[error("not a gzip-compressed profile: {message}")]
    Gzip { message: String },
    /// Bytes that are not a profile.proto message.
    #[error("not a profile.proto message ({length} bytes): {message}")]
    Decode { length: usize, message: String },
    /// The writer failed.
    #[error("cannot write the profile: {0}")]
    Write(#[from] std::io::Error),
}

/// The kind and unit of one value of every sample, as pprof names them
/// (`samples`/`count`, `cpu`/`nanoseconds`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SampleType<'a> {
    pub kind: &'a str,
    pub unit: &'a str,
}

/// A mapping as the caller knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MappingSpec<'a> {
    pub start: u64,
    /// One past the last address.
    pub limit: u64,
    pub file_offset: u64,
    /// The file's path as recorded, or a name like `[kernel.kallsyms]`.
    pub filename: &'a str,
    /// The ELF build id's bytes, written as lower-case hex as pprof does.
    pub build_id: Option<&'a [u8]>,
    pub symbols: MappingSymbols,
}

/// What the locations of a mapping were symbolized with (pprof's `has_*` flags, which
/// tell `pprof` whether it may symbolize the mapping again itself).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum MappingSymbols {
    /// Nothing: addresses only.
    #[default]
    None,
    /// Function names.
    Functions,
    /// Function names, source files and lines.
    Lines,
    /// Function names, files, lines and inlined functions.
    InlineFrames,
}

/// A function as the caller knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FunctionSpec<'a> {
    /// The demangled name.
    pub name: &'a str,
    /// The symbol table's name (the same as `name` for C).
    pub system_name: &'a str,
    /// Its source file, when known.
    pub filename: Option<&'a str>,
    pub start_line: Option<u32>,
}

/// One function of a location's inline stack and the line there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LineSpec {
    pub function: FunctionId,
    pub line: Option<u32>,
    pub column: Option<u32>,
}

/// A value attached to a sample: text, or a number with an optional unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LabelValue<'a> {
    Text(&'a str),
    Number { value: i64, unit: Option<&'a str> },
}

/// A label of a sample (`pid`, `comm`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LabelSpec<'a> {
    pub key: &'a str,
    pub value: LabelValue<'a>,
}

/// A mapping of the profile being built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MappingId(u64);

/// A function of the profile being built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FunctionId(u64);

/// A location of the profile being built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LocationId(u64);

impl LocationId {
    /// The id as written in the profile.
    pub fn get(self) -> u64 {
        self.0
    }
}

/// What the profile says about itself beside its samples.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProfileMetadata {
    /// When the profile's data starts, nanoseconds since the Unix epoch.
    pub time_nanos: i64,
    pub duration_nanos: i64,
    /// The event between samples and how many of them (e.g. `cycles`/`count` and the
    /// sampling period), when there is one.
    pub period: Option<(String, String, i64)>,
    /// Lines for `pprof -comments`.
    pub comments: Vec<String>,
    /// The kind of the sample type pprof shows first; the last one when `None`, as
    /// pprof itself chooses.
    pub default_sample_type: Option<String>,
}

/// Builds a [`Profile`]: interns every string, mapping, function and location once and
/// sums the values of equal stacks with equal labels.
#[derive(Debug, Default, Clone)]
pub struct ProfileBuilder {
    strings: Strings,
    sample_types: Vec<proto::ValueType>,
    mappings: Vec<proto::Mapping>,
    mapping_ids: FxHashMap<MappingKey, MappingId>,
    functions: Vec<proto::Function>,
    function_ids: FxHashMap<FunctionKey, FunctionId>,
    locations: Vec<proto::Location>,
    address_locations: FxHashMap<(u64, u64), LocationId>,
    function_locations: FxHashMap<FunctionId, LocationId>,
    samples: Vec<proto::Sample>,
    /// The index in `samples` of each distinct (locations, labels), hashed by
    /// [`sample_hash`] and compared with the sample itself: the stacks are kept once,
    /// in the samples, not a second time as keys (half a long run's memory).
    sample_index: HashTable<usize>,
    /// The labels ([`LabelWords`]) of the sample being added, reused.
    scratch: Vec<LabelWords>,
    metadata: ProfileMetadata,
    main_mapping: Option<MappingId>,
    /// A cap on distinct samples ([`set_sample_limit`](Self::set_sample_limit)).
    sample_limit: Option<SampleLimit>,
    /// Values of the samples the cap folded into its stand-in, summed.
    over_limit: Vec<i64>,
}

/// At most `samples` distinct samples: the values of a new (stack, labels) beyond them
/// go to `stand_in`'s stack, under the same labels.
#[derive(Debug, Clone, Copy)]
struct SampleLimit {
    samples: usize,
    stand_in: LocationId,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct MappingKey {
    start: u64,
    limit: u64,
    file_offset: u64,
    filename: i64,
    build_id: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct FunctionKey {
    name: i64,
    system_name: i64,
    filename: i64,
    start_line: i64,
}

/// The string table: index 0 is `""`, as profile.proto requires.
#[derive(Debug, Clone)]
struct Strings {
    table: Vec<String>,
    indices: FxHashMap<String, i64>,
}

impl Default for Strings {
    fn default() -> Self {
        let mut indices = FxHashMap::default();
        indices.insert(String::new(), 0);
        Strings {
            table: vec![String::new()],
            indices,
        }
    }
}

impl Strings {
    fn intern(&mut self, text: &str) -> i64 {
        if let Some(&index) = self.indices.get(text) {
            return index;
        }
        // A table longer than i64::MAX entries cannot exist in memory.
        let index = self.table.len() as i64;
        self.table.push(text.to_owned());
        self.indices.insert(text.to_owned(), index);
        index
    }
}

/// A label as its message has it, its strings interned: key, text, number and unit (a
/// text label's number and unit are 0, a number label's text is 0). What samples are
/// told apart by, beside their locations.
type LabelWords = [u64; 4];

fn label_words(label: &proto::Label) -> LabelWords {
    [
        label.key as u64,
        label.str as u64,
        label.num as u64,
        label.num_unit as u64,
    ]
}

/// The hash of a sample's locations and labels: the same for a sample being added
/// and the one stored for it.
fn sample_hash(
    locations: impl Iterator<Item = u64>,
    labels: impl Iterator<Item = LabelWords>,
) -> u64 {
    let mut hasher = FxHasher::default();
    let mut count = 0u64;
    for location in locations {
        hasher.write_u64(location);
        count += 1;
    }
    // The number of locations separates them from the labels.
    hasher.write_u64(count);
    for label in labels {
        for word in label {
            hasher.write_u64(word);
        }
    }
    hasher.finish()
}

fn stored_sample_hash(sample: &proto::Sample) -> u64 {
    sample_hash(
        sample.location_id.iter().copied(),
        sample.label.iter().map(label_words),
    )
}

/// Whether `sample` is the sample of `locations` with `labels`.
fn sample_matches(sample: &proto::Sample, locations: &[LocationId], labels: &[LabelWords]) -> bool {
    sample.location_id.len() == locations.len()
        && sample
            .location_id
            .iter()
            .zip(locations)
            .all(|(&id, location)| id == location.0)
        && sample.label.len() == labels.len()
        && sample
            .label
            .iter()
            .zip(labels)
            .all(|(label, words)| label_words(label) == *words)
}

impl ProfileBuilder {
    /// A profile whose samples carry one value of each of `sample_types`.
    pub fn new(sample_types: &[SampleType<'_>]) -> Self {
        let mut builder = ProfileBuilder::default();
        for sample_type in sample_types {
            let value_type = proto::ValueType {
                r#type: builder.strings.intern(sample_type.kind),
                unit: builder.strings.intern(sample_type.unit),
            };
            builder.sample_types.push(value_type);
        }
        builder
    }

    /// The number of values every sample carries.
    pub fn sample_type_count(&self) -> usize {
        self.sample_types.len()
    }

    pub fn set_metadata(&mut self, metadata: ProfileMetadata) {
        self.metadata = metadata;
    }

    /// The mapping pprof presents as the profile's program (`File:`, `Build ID:`): pprof
    /// takes the first, so [`build`](Self::build) moves this one there.
    pub fn set_main_mapping(&mut self, mapping: MappingId) {
        self.main_mapping = Some(mapping);
    }

    /// The mapping `spec` describes, added on first use.
    pub fn mapping(&mut self, spec: &MappingSpec<'_>) -> MappingId {
        let build_id = match spec.build_id {
            Some(bytes) if !bytes.is_empty() => self.strings.intern(&hex(bytes)),
            _ => 0,
        };
        self.mapping_with_build_id_index(spec, build_id)
    }

    /// Gives `mapping` the build id `build_id` if it has none yet (a file whose build id
    /// was learnt only when it was read, after its mapping was added).
    pub fn set_missing_build_id(&mut self, mapping: MappingId, build_id: &[u8]) {
        if build_id.is_empty() {
            return;
        }
        let Some(index) = usize::try_from(mapping.0)
            .ok()
            .and_then(|id| id.checked_sub(1))
            .filter(|&index| index < self.mappings.len())
        else {
            return;
        };
        if self.mappings[index].build_id != 0 {
            return;
        }
        let old_key = MappingKey {
            start: self.mappings[index].memory_start,
            limit: self.mappings[index].memory_limit,
            file_offset: self.mappings[index].file_offset,
            filename: self.mappings[index].filename,
            build_id: 0,
        };
        let build_id = self.strings.intern(&hex(build_id));
        self.mappings[index].build_id = build_id;
        self.mapping_ids.remove(&old_key);
        self.mapping_ids.insert(
            MappingKey {
                build_id,
                ..old_key
            },
            mapping,
        );
    }

    /// [`mapping`](Self::mapping) with the build id's string index.
    fn mapping_with_build_id_index(&mut self, spec: &MappingSpec<'_>, build_id: i64) -> MappingId {
        let filename = self.strings.intern(spec.filename);
        let key = MappingKey {
            start: spec.start,
            limit: spec.limit,
            file_offset: spec.file_offset,
            filename,
            build_id,
        };
        if let Some(&id) = self.mapping_ids.get(&key) {
            return id;
        }
        let id = MappingId(self.mappings.len() as u64 + 1);
        let symbols = spec.symbols;
        self.mappings.push(proto::Mapping {
            id: id.0,
            memory_start: spec.start,
            memory_limit: spec.limit,
            file_offset: spec.file_offset,
            filename,
            build_id,
            has_functions: symbols != MappingSymbols::None,
            has_filenames: matches!(
                symbols,
                MappingSymbols::Lines | MappingSymbols::InlineFrames
            ),
            has_line_numbers: matches!(
                symbols,
                MappingSymbols::Lines | MappingSymbols::InlineFrames
            ),
            has_inline_frames: symbols == MappingSymbols::InlineFrames,
        });
        self.mapping_ids.insert(key, id);
        id
    }

    /// The function `spec` describes, added on first use.
    pub fn function(&mut self, spec: &FunctionSpec<'_>) -> FunctionId {
        let key = FunctionKey {
            name: self.strings.intern(spec.name),
            system_name: self.strings.intern(spec.system_name),
            filename: spec.filename.map_or(0, |name| self.strings.intern(name)),
            start_line: spec.start_line.map_or(0, i64::from),
        };
        if let Some(&id) = self.function_ids.get(&key) {
            return id;
        }
        let id = FunctionId(self.functions.len() as u64 + 1);
        self.functions.push(proto::Function {
            id: id.0,
            name: key.name,
            system_name: key.system_name,
            filename: key.filename,
            start_line: key.start_line,
        });
        self.function_ids.insert(key, id);
        id
    }

    /// The location already added for `address` in `mapping` (or in no mapping), so a
    /// caller symbolizes each address once.
    pub fn address_location(&self, mapping: Option<MappingId>, address: u64) -> Option<LocationId> {
        self.address_locations
            .get(&(mapping.map_or(0, |id| id.0), address))
            .copied()
    }

    /// Adds the location of `address` in `mapping` with its inline stack (innermost
    /// first; empty when no function is known), or returns the one added before.
    pub fn add_address_location(
        &mut self,
        mapping: Option<MappingId>,
        address: u64,
        lines: &[LineSpec],
    ) -> Result<LocationId, PprofError> {
        if let Some(id) = self.address_location(mapping, address) {
            return Ok(id);
        }
        let mapping_id = mapping.map_or(0, |id| id.0);
        if mapping_id > self.mappings.len() as u64 {
            return Err(PprofError::UnknownId {
                what: "mapping",
                id: mapping_id,
            });
        }
        let lines = self.lines(lines)?;
        let id = self.push_location(mapping_id, address, lines);
        self.address_locations.insert((mapping_id, address), id);
        Ok(id)
    }

    /// A location known only by its function (a frame of a trace's call stack, or a
    /// folded stack's name), one per function.
    pub fn function_location(&mut self, function: FunctionId) -> Result<LocationId, PprofError> {
        if let Some(&id) = self.function_locations.get(&function) {
            return Ok(id);
        }
        let lines = self.lines(&[LineSpec {
            function,
            line: None,
            column: None,
        }])?;
        let id = self.push_location(0, 0, lines);
        self.function_locations.insert(function, id);
        Ok(id)
    }

    fn lines(&self, lines: &[LineSpec]) -> Result<Vec<proto::Line>, PprofError> {
        lines
            .iter()
            .map(|line| {
                if line.function.0 == 0 || line.function.0 > self.functions.len() as u64 {
                    return Err(PprofError::UnknownId {
                        what: "function",
                        id: line.function.0,
                    });
                }
                Ok(proto::Line {
                    function_id: line.function.0,
                    line: line.line.map_or(0, i64::from),
                    column: line.column.map_or(0, i64::from),
                })
            })
            .collect()
    }

    fn push_location(
        &mut self,
        mapping_id: u64,
        address: u64,
        lines: Vec<proto::Line>,
    ) -> LocationId {
        let id = LocationId(self.locations.len() as u64 + 1);
        self.locations.push(proto::Location {
            id: id.0,
            mapping_id,
            address,
            line: lines,
            is_folded: false,
        });
        id
    }

    /// Adds `values` (one per sample type) to the stack `stack` (leaf first) with
    /// `labels`; a stack already added with the same labels has its values summed
    /// (saturating: values are counts read from recordings).
    pub fn add_sample(
        &mut self,
        stack: &[LocationId],
        values: &[i64],
        labels: &[LabelSpec<'_>],
    ) -> Result<(), PprofError> {
        if values.len() != self.sample_types.len() {
            return Err(PprofError::ValueCount {
                expected: self.sample_types.len(),
                given: values.len(),
            });
        }
        let location_count = self.locations.len() as u64;
        if let Some(location) = stack
            .iter()
            .find(|location| location.0 == 0 || location.0 > location_count)
        {
            return Err(PprofError::UnknownId {
                what: "location",
                id: location.0,
            });
        }
        let mut interned = std::mem::take(&mut self.scratch);
        interned.clear();
        for label in labels {
            let key = self.strings.intern(label.key) as u64;
            match label.value {
                LabelValue::Text(text) => {
                    interned.push([key, self.strings.intern(text) as u64, 0, 0]);
                }
                LabelValue::Number { value, unit } => {
                    let unit = unit.map_or(0, |unit| self.strings.intern(unit)) as u64;
                    interned.push([key, 0, value as u64, unit]);
                }
            }
        }
        let result = self.add_interned_sample(stack, values, &interned);
        self.scratch = interned;
        result
    }

    /// [`add_sample`](Self::add_sample) with the labels interned.
    fn add_interned_sample(
        &mut self,
        stack: &[LocationId],
        values: &[i64],
        labels: &[LabelWords],
    ) -> Result<(), PprofError> {
        let hash = sample_hash(
            stack.iter().map(|location| location.0),
            labels.iter().copied(),
        );
        let samples = &self.samples;
        if let Some(&index) = self.sample_index.find(hash, |&index| {
            sample_matches(&samples[index], stack, labels)
        }) {
            for (total, value) in self.samples[index].value.iter_mut().zip(values) {
                *total = total.saturating_add(*value);
            }
            return Ok(());
        }
        if let Some(limit) = self.sample_limit {
            if self.samples.len() >= limit.samples && stack != [limit.stand_in] {
                if self.over_limit.is_empty() {
                    self.over_limit = vec![0; values.len()];
                }
                for (total, value) in self.over_limit.iter_mut().zip(values) {
                    *total = total.saturating_add(*value);
                }
                // Into the stand-in's sample: its own stack is never over the cap.
                return self.add_interned_sample(&[limit.stand_in], values, labels);
            }
        }
        let label = labels
            .iter()
            .map(|&[key, text, number, unit]| proto::Label {
                key: key as i64,
                str: text as i64,
                num: number as i64,
                num_unit: unit as i64,
            })
            .collect();
        let index = self.samples.len();
        self.samples.push(proto::Sample {
            location_id: stack.iter().map(|location| location.0).collect(),
            value: values.to_vec(),
            label,
        });
        let samples = &self.samples;
        self.sample_index
            .insert_unique(hash, index, |&index| stored_sample_hash(&samples[index]));
        Ok(())
    }

    /// Caps the distinct samples at `samples`: a new (stack, labels) beyond them is
    /// counted under a stack of `stand_in` alone with its labels, so memory stays bounded
    /// however many distinct stacks a long run brings; [`over_limit`](Self::over_limit)
    /// says how much was folded. (Stand-ins of labels not seen before may still be added:
    /// the bound is the cap plus the distinct label sets.)
    pub fn set_sample_limit(&mut self, samples: usize, stand_in: LocationId) {
        self.sample_limit = Some(SampleLimit { samples, stand_in });
    }

    /// The values folded into the stand-in of [`set_sample_limit`](Self::set_sample_limit),
    /// summed per sample type (empty when nothing was).
    pub fn over_limit(&self) -> &[i64] {
        &self.over_limit
    }

    /// The number of distinct (stack, labels) samples so far.
    pub fn sample_count(&self) -> usize {
        self.samples.len()
    }

    /// The sum of each sample type's values so far.
    pub fn totals(&self) -> Vec<i64> {
        let mut totals = vec![0i64; self.sample_types.len()];
        for sample in &self.samples {
            for (total, value) in totals.iter_mut().zip(&sample.value) {
                *total = total.saturating_add(*value);
            }
        }
        totals
    }

    /// The profile.
    pub fn build(mut self) -> Profile {
        if let Some(main) = self.main_mapping {
            self.move_mapping_first(main);
        }
        let metadata = std::mem::take(&mut self.metadata);
        let period_type = metadata
            .period
            .as_ref()
            .map(|(kind, unit, _)| proto::ValueType {
                r#type: self.strings.intern(kind),
                unit: self.strings.intern(unit),
            });
        let comment = metadata
            .comments
            .iter()
            .map(|text| self.strings.intern(text))
            .collect();
        let default_sample_type = metadata
            .default_sample_type
            .as_deref()
            .map_or(0, |kind| self.strings.intern(kind));
        Profile {
            sample_type: self.sample_types,
            sample: self.samples,
            mapping: self.mappings,
            location: self.locations,
            function: self.functions,
            string_table: self.strings.table,
            drop_frames: 0,
            keep_frames: 0,
            time_nanos: metadata.time_nanos,
            duration_nanos: metadata.duration_nanos,
            period_type,
            period: metadata.period.map_or(0, |(_, _, period)| period),
            comment,
            default_sample_type,
        }
    }
}

impl ProfileBuilder {
    /// Swaps the ids (and places) of `mapping` and the first mapping.
    fn move_mapping_first(&mut self, mapping: MappingId) {
        let (first, other) = (1u64, mapping.0);
        if other <= first || other > self.mappings.len() as u64 {
            return;
        }
        self.mappings.swap(0, (other - 1) as usize);
        self.mappings[0].id = first;
        self.mappings[(other - 1) as usize].id = other;
        for location in &mut self.locations {
            if location.mapping_id == first {
                location.mapping_id = other;
            } else if location.mapping_id == other {
                location.mapping_id = first;
            }
        }
    }
}

impl ProfileBuilder {
    /// The profile as built so far, leaving the builder as it is (a running profile's
    /// snapshot).
    pub fn snapshot(&self) -> Profile {
        // The profile's parts only: the indices (most of all the sample index, one
        // entry per distinct stack) are not in the profile, and a long run's are large.
        ProfileBuilder {
            strings: self.strings.clone(),
            sample_types: self.sample_types.clone(),
            mappings: self.mappings.clone(),
            functions: self.functions.clone(),
            locations: self.locations.clone(),
            samples: self.samples.clone(),
            metadata: self.metadata.clone(),
            main_mapping: self.main_mapping,
            ..ProfileBuilder::default()
        }
        .build()
    }

    /// Adds every sample of `profile` (which must have the same sample types) with
    /// its mappings, functions, locations and labels: profiles of consecutive
    /// intervals merge into one of the whole run.
    pub fn merge(&mut self, profile: &Profile) -> Result<(), PprofError> {
        let text = |index: i64| -> Result<&str, PprofError> {
            usize::try_from(index)
                .ok()
                .and_then(|index| profile.string_table.get(index))
                .map(String::as_str)
                .ok_or(PprofError::Dangling {
                    what: "string",
                    index: index as u64,
                })
        };
        let names = |types: &[proto::ValueType], table: &dyn Fn(i64) -> Option<String>| {
            types
                .iter()
                .map(|kind| {
                    format!(
                        "{}/{}",
                        table(kind.r#type).unwrap_or_default(),
                        table(kind.unit).unwrap_or_default()
                    )
                })
                .collect::<Vec<String>>()
        };
        let given = names(&profile.sample_type, &|index| {
            text(index).ok().map(str::to_owned)
        });
        let expected = names(&self.sample_types, &|index| {
            self.strings.table.get(index as usize).cloned()
        });
        if given != expected {
            return Err(PprofError::SampleTypes { expected, given });
        }
        let mut mappings: FxHashMap<u64, MappingId> = FxHashMap::default();
        for mapping in &profile.mapping {
            let build_id = text(mapping.build_id)?;
            let id = self.mapping_with_text_build_id(
                &MappingSpec {
                    start: mapping.memory_start,
                    limit: mapping.memory_limit,
                    file_offset: mapping.file_offset,
                    filename: text(mapping.filename)?,
                    build_id: None,
                    symbols: if mapping.has_inline_frames {
                        MappingSymbols::InlineFrames
                    } else if mapping.has_line_numbers {
                        MappingSymbols::Lines
                    } else if mapping.has_functions {
                        MappingSymbols::Functions
                    } else {
                        MappingSymbols::None
                    },
                },
                build_id,
            );
            mappings.insert(mapping.id, id);
        }
        let mut functions: FxHashMap<u64, FunctionId> = FxHashMap::default();
        for function in &profile.function {
            let filename = text(function.filename)?;
            let id = self.function(&FunctionSpec {
                name: text(function.name)?,
                system_name: text(function.system_name)?,
                filename: (!filename.is_empty()).then_some(filename),
                start_line: u32::try_from(function.start_line)
                    .ok()
                    .filter(|&line| line > 0),
            });
            functions.insert(function.id, id);
        }
        let mut locations: FxHashMap<u64, LocationId> = FxHashMap::default();
        for location in &profile.location {
            let lines = location
                .line
                .iter()
                .map(|line| {
                    Ok(LineSpec {
                        function: *functions.get(&line.function_id).ok_or(
                            PprofError::Dangling {
                                what: "function",
                                index: line.function_id,
                            },
                        )?,
                        line: u32::try_from(line.line).ok().filter(|&line| line > 0),
                        column: u32::try_from(line.column).ok().filter(|&column| column > 0),
                    })
                })
                .collect::<Result<Vec<LineSpec>, PprofError>>()?;
            let mapping = match location.mapping_id {
                0 => None,
                id => Some(*mappings.get(&id).ok_or(PprofError::Dangling {
                    what: "mapping",
                    index: id,
                })?),
            };
            let id = match (mapping, location.address, lines.as_slice()) {
                (None, 0, [line]) => self.function_location(line.function)?,
                _ => self.add_address_location(mapping, location.address, &lines)?,
            };
            locations.insert(location.id, id);
        }
        let mut stack = Vec::new();
        for sample in &profile.sample {
            stack.clear();
            for id in &sample.location_id {
                stack.push(*locations.get(id).ok_or(PprofError::Dangling {
                    what: "location",
                    index: *id,
                })?);
            }
            let labels = sample
                .label
                .iter()
                .map(|label| {
                    Ok(LabelSpec {
                        key: text(label.key)?,
                        value: if label.str != 0 {
                            LabelValue::Text(text(label.str)?)
                        } else {
                            let unit = text(label.num_unit)?;
                            LabelValue::Number {
                                value: label.num,
                                unit: (!unit.is_empty()).then_some(unit),
                            }
                        },
                    })
                })
                .collect::<Result<Vec<LabelSpec<'_>>, PprofError>>()?;
            self.add_sample(&stack, &sample.value, &labels)?;
        }
        Ok(())
    }

    /// [`mapping`](Self::mapping) with the build id already as text.
    fn mapping_with_text_build_id(&mut self, spec: &MappingSpec<'_>, build_id: &str) -> MappingId {
        let build_id = self.strings.intern(build_id);
        self.mapping_with_build_id_index(spec, build_id)
    }
}

/// Lower-case hex, as pprof and perf write build ids.
fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        text.push(DIGITS[usize::from(byte >> 4)] as char);
        text.push(DIGITS[usize::from(byte & 0xf)] as char);
    }
    text
}

/// The profile as the bytes of a `.pb.gz` file: the protobuf message, gzip-compressed
/// (what `go tool pprof`, Pyroscope and Parca read).
pub fn write_gzip(profile: &Profile, out: &mut dyn Write) -> Result<(), PprofError> {
    let encoded = profile.encode_to_vec();
    // The fastest level, as Go's runtime/pprof writes its profiles: three times faster
    // than the default on a profile of 100,000 stacks, for a file a few percent larger.
    let mut encoder = flate2::write::GzEncoder::new(out, flate2::Compression::fast());
    encoder.write_all(&encoded)?;
    encoder.finish()?;
    Ok(())
}

/// The gzip magic bytes.
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// A profile from the bytes of a pprof file, gzip-compressed or not (pprof reads both).
pub fn read(bytes: &[u8]) -> Result<Profile, PprofError> {
    let decompressed;
    let message = if bytes.starts_with(&GZIP_MAGIC) {
        let mut decoder = flate2::read::GzDecoder::new(bytes);
        let mut out = Vec::new();
        decoder
            .read_to_end(&mut out)
            .map_err(|error| PprofError::Gzip {
                message: error.to_string(),
            })?;
        decompressed = out;
        decompressed.as_slice()
    } else {
        bytes
    };
    Profile::decode(message).map_err(|error| PprofError::Decode {
        length: message.len(),
        message: error.to_string(),
    })
}

#[cfg(test)]
mod tests;
