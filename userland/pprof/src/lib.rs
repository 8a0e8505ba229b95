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

mod encode;
pub mod proto;

pub use encode::EncodedProfile;

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
    /// Samples used with a builder other than the one whose ids they hold.
    #[error("the samples are of another profile builder")]
    ForeignSamples,
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
///
/// A long run keeps one builder: each interval's stacks are taken out as [`Samples`]
/// ([`take_samples`](Self::take_samples)), written as a profile of their own
/// ([`profile_of`](Self::profile_of)) and added to the run's total
/// ([`Samples::absorb`]), while the mappings, functions and locations stay, so each
/// address is symbolized and interned once per run rather than once per interval.
#[derive(Debug, Clone)]
pub struct ProfileBuilder {
    /// Tells this builder's [`Samples`] from another's (whose ids mean other things).
    identity: u64,
    strings: Strings,
    sample_types: Vec<proto::ValueType>,
    mappings: Vec<proto::Mapping>,
    mapping_ids: FxHashMap<MappingKey, MappingId>,
    functions: Vec<proto::Function>,
    function_ids: FxHashMap<FunctionKey, FunctionId>,
    locations: Vec<proto::Location>,
    address_locations: FxHashMap<(u64, u64), LocationId>,
    function_locations: FxHashMap<FunctionId, LocationId>,
    /// Locations by (mapping, functions innermost first), for
    /// [`add_functions_location`](Self::add_functions_location).
    functions_locations: FxHashMap<(u64, Box<[FunctionId]>), LocationId>,
    samples: Samples,
    /// The labels ([`LabelWords`]) of the sample being added, reused.
    scratch: Vec<LabelWords>,
    metadata: ProfileMetadata,
    main_mapping: Option<MappingId>,
}

/// Distinct (stack, labels) samples of one [`ProfileBuilder`] and their summed values:
/// the stacks are the builder's location ids and the labels its interned strings, so
/// they are only meaningful with it ([`ProfileBuilder::profile_of`]).
#[derive(Debug, Clone)]
pub struct Samples {
    /// The [`ProfileBuilder`] whose ids these are.
    builder: u64,
    samples: Vec<proto::Sample>,
    /// The index in `samples` of each distinct (locations, labels), hashed by
    /// [`sample_hash`] and compared with the sample itself: the stacks are kept once,
    /// in the samples, not a second time as keys (half a long run's memory).
    index: HashTable<usize>,
    /// A cap on distinct samples ([`Samples::set_limit`]).
    limit: Option<SampleLimit>,
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
fn sample_matches(
    sample: &proto::Sample,
    locations: impl Iterator<Item = u64>,
    labels: &[LabelWords],
) -> bool {
    sample.location_id.iter().copied().eq(locations)
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
        // Only told apart, never counted: any distinct number will do.
        static IDENTITIES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let identity = IDENTITIES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut builder = ProfileBuilder {
            identity,
            strings: Strings::default(),
            sample_types: Vec::new(),
            mappings: Vec::new(),
            mapping_ids: FxHashMap::default(),
            functions: Vec::new(),
            function_ids: FxHashMap::default(),
            locations: Vec::new(),
            address_locations: FxHashMap::default(),
            function_locations: FxHashMap::default(),
            functions_locations: FxHashMap::default(),
            samples: Samples::new(identity),
            scratch: Vec::new(),
            metadata: ProfileMetadata::default(),
            main_mapping: None,
        };
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

    /// The location of `address` in `mapping` by its functions alone: one location for
    /// every address of `mapping` whose inline stack (innermost first) has the same
    /// functions, whatever its lines, made at the first such address and with no line
    /// numbers; `address` then finds it ([`address_location`](Self::address_location)).
    /// A profile of such locations has the granularity of folded stacks: addresses of
    /// one function (a leaf's every sampled instruction) are one stack, not one each.
    /// With no function, the address's own location, as
    /// [`add_address_location`](Self::add_address_location) makes it.
    pub fn add_functions_location(
        &mut self,
        mapping: Option<MappingId>,
        address: u64,
        lines: &[LineSpec],
    ) -> Result<LocationId, PprofError> {
        if lines.is_empty() {
            return self.add_address_location(mapping, address, &[]);
        }
        if let Some(id) = self.address_location(mapping, address) {
            return Ok(id);
        }
        let mapping_id = mapping.map_or(0, |id| id.0);
        let key = (mapping_id, lines.iter().map(|line| line.function).collect());
        let id = match self.functions_locations.get(&key) {
            Some(&id) => id,
            None => {
                let functions_only: Vec<LineSpec> = lines
                    .iter()
                    .map(|line| LineSpec {
                        line: None,
                        column: None,
                        ..*line
                    })
                    .collect();
                let id = self.add_address_location(mapping, address, &functions_only)?;
                self.functions_locations.insert(key, id);
                id
            }
        };
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
        // The cap's own account (`over_limit`) says what went to its stand-in.
        let _placement =
            self.samples
                .add(stack.iter().map(|location| location.0), values, &interned);
        self.scratch = interned;
        Ok(())
    }

    /// Caps the distinct samples at `samples` ([`Samples::set_limit`]).
    pub fn set_sample_limit(&mut self, samples: usize, stand_in: LocationId) {
        self.samples.set_limit(samples, stand_in);
    }

    /// The values folded into the stand-in of [`set_sample_limit`](Self::set_sample_limit),
    /// summed per sample type (empty when nothing was).
    pub fn over_limit(&self) -> &[i64] {
        self.samples.over_limit()
    }

    /// The number of distinct (stack, labels) samples so far.
    pub fn sample_count(&self) -> usize {
        self.samples.len()
    }

    /// The sum of each sample type's values so far.
    pub fn totals(&self) -> Vec<i64> {
        let mut totals = vec![0i64; self.sample_types.len()];
        for sample in &self.samples.samples {
            for (total, value) in totals.iter_mut().zip(&sample.value) {
                *total = total.saturating_add(*value);
            }
        }
        totals
    }

    /// An empty sample set of this builder (a run's total, for
    /// [`Samples::absorb`]).
    pub fn new_samples(&self) -> Samples {
        Samples::new(self.identity)
    }

    /// The samples added so far, leaving none (and the cap, if one was set): the
    /// mappings, functions and locations stay for the samples added next. The next
    /// samples get room for as many as were taken: a long run's intervals are alike, and
    /// growing the index from empty every interval rehashed it again and again.
    pub fn take_samples(&mut self) -> Samples {
        let mut empty = Samples::new(self.identity);
        empty.samples.reserve(self.samples.len());
        empty.index.reserve(self.samples.len(), |_| 0);
        empty.limit = self.samples.limit;
        std::mem::replace(&mut self.samples, empty)
    }

    /// The profile, every mapping, function and location the builder has.
    pub fn build(mut self) -> Profile {
        if let Some(main) = self.main_mapping {
            self.move_mapping_first(main);
        }
        let metadata = std::mem::take(&mut self.metadata);
        let mut strings = self.strings;
        let header = ProfileHeader::new(&metadata, |text| strings.intern(text));
        Profile {
            sample_type: self.sample_types,
            sample: self.samples.samples,
            mapping: self.mappings,
            location: self.locations,
            function: self.functions,
            string_table: strings.table,
            ..header.profile(&metadata)
        }
    }

    /// The profile of `samples` (of this builder) with only the mappings, functions,
    /// locations and strings they use, numbered from 1 in their order here, with
    /// `main_mapping` first: an interval's profile, or a run's total, from a builder
    /// that keeps a long run's locations.
    pub fn profile_of(
        &self,
        samples: &Samples,
        metadata: &ProfileMetadata,
        main_mapping: Option<MappingId>,
    ) -> Result<Profile, PprofError> {
        self.encode_profile_of(samples, metadata, main_mapping)?
            .decode()
    }

    /// The samples of `samples` (of this builder) read with its names, in their order:
    /// what printing them needs (folded stacks), without [`Self::profile_of`]'s
    /// renumbered copy or a lookup table per id.
    pub fn named_samples<'a>(
        &'a self,
        samples: &'a Samples,
    ) -> Result<impl Iterator<Item = NamedSample<'a>> + 'a, PprofError> {
        if samples.builder != self.identity {
            return Err(PprofError::ForeignSamples);
        }
        Ok(samples.samples.iter().map(move |sample| NamedSample {
            builder: self,
            sample,
        }))
    }

    /// `key` as a label key of this builder's samples, if any sample can have it.
    pub fn label_key(&self, key: &str) -> Option<LabelKey> {
        self.strings.indices.get(key).copied().map(LabelKey)
    }

    fn string(&self, index: i64) -> &str {
        usize::try_from(index)
            .ok()
            .and_then(|index| self.strings.table.get(index))
            .map_or("", String::as_str)
    }
}

/// A label key interned by a [`ProfileBuilder`] ([`ProfileBuilder::label_key`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LabelKey(i64);

/// One sample of a builder's [`Samples`] with the builder's names
/// ([`ProfileBuilder::named_samples`]).
#[derive(Debug, Clone, Copy)]
pub struct NamedSample<'a> {
    builder: &'a ProfileBuilder,
    sample: &'a proto::Sample,
}

/// What a frame of a [`NamedSample`] is called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameName<'a> {
    /// A function (an inlined one before the function it was inlined into).
    Function(&'a str),
    /// An address with no symbol for it: the name of its mapping's file, if it has a
    /// mapping.
    Unsymbolized { filename: Option<&'a str> },
}

impl<'a> NamedSample<'a> {
    /// The sample's values, one per sample type.
    pub fn values(&self) -> &'a [i64] {
        &self.sample.value
    }

    /// The text of the sample's first label `key` with a text.
    pub fn text_label(&self, key: LabelKey) -> Option<&'a str> {
        let builder: &'a ProfileBuilder = self.builder;
        self.sample
            .label
            .iter()
            .find(|label| label.key == key.0 && label.str != 0)
            .map(|label| builder.string(label.str))
    }

    /// The stack's locations from the root to the leaf.
    pub fn locations_root_first(&self) -> impl Iterator<Item = NamedLocation<'a>> + 'a {
        let builder: &'a ProfileBuilder = self.builder;
        let sample: &'a proto::Sample = self.sample;
        sample.location_id.iter().rev().filter_map(move |&id| {
            let location = builder
                .locations
                .get(usize::try_from(id).ok()?.checked_sub(1)?)?;
            Some(NamedLocation { builder, location })
        })
    }

    /// The stack's frames from the root to the leaf; a location's inlined functions
    /// outermost first.
    pub fn frames_root_first(&self) -> impl Iterator<Item = FrameName<'a>> + 'a {
        self.locations_root_first()
            .flat_map(|location| location.frames_root_first())
    }
}

/// A location of a [`NamedSample`]'s stack.
#[derive(Debug, Clone, Copy)]
pub struct NamedLocation<'a> {
    builder: &'a ProfileBuilder,
    location: &'a proto::Location,
}

impl<'a> NamedLocation<'a> {
    /// The location's id in its builder: the same for every sample that has it.
    pub fn id(&self) -> LocationId {
        LocationId(self.location.id)
    }

    /// The location's frames, its inlined functions outermost first; an address with
    /// no symbol is one frame, its file's.
    pub fn frames_root_first(&self) -> impl Iterator<Item = FrameName<'a>> + 'a {
        let builder: &'a ProfileBuilder = self.builder;
        let location: &'a proto::Location = self.location;
        let unsymbolized = location.line.is_empty().then(|| {
            let filename = usize::try_from(location.mapping_id)
                .ok()
                .and_then(|id| id.checked_sub(1))
                .and_then(|index| builder.mappings.get(index))
                .map(|mapping| builder.string(mapping.filename));
            FrameName::Unsymbolized { filename }
        });
        let functions = location.line.iter().rev().map(move |line| {
            let name = usize::try_from(line.function_id)
                .ok()
                .and_then(|id| id.checked_sub(1))
                .and_then(|index| builder.functions.get(index))
                .map_or("", |function| builder.string(function.name));
            FrameName::Function(name)
        });
        unsymbolized.into_iter().chain(functions)
    }
}

/// `source` as mapping `id` of a profile whose strings `string` renumbers.
fn renumbered_mapping(
    source: &proto::Mapping,
    id: u64,
    string: &mut impl FnMut(i64) -> i64,
) -> proto::Mapping {
    proto::Mapping {
        id,
        filename: string(source.filename),
        build_id: string(source.build_id),
        ..source.clone()
    }
}

/// A profile's fields beside its tables and samples, their strings interned.
struct ProfileHeader {
    period_type: Option<proto::ValueType>,
    comment: Vec<i64>,
    default_sample_type: i64,
}

impl ProfileHeader {
    fn new(metadata: &ProfileMetadata, mut intern: impl FnMut(&str) -> i64) -> Self {
        let period_type = metadata
            .period
            .as_ref()
            .map(|(kind, unit, _)| proto::ValueType {
                r#type: intern(kind),
                unit: intern(unit),
            });
        let comment = metadata.comments.iter().map(|text| intern(text)).collect();
        let default_sample_type = metadata
            .default_sample_type
            .as_deref()
            .map_or(0, &mut intern);
        ProfileHeader {
            period_type,
            comment,
            default_sample_type,
        }
    }

    /// A profile of no samples with these fields and `metadata`'s numbers.
    fn profile(self, metadata: &ProfileMetadata) -> Profile {
        Profile {
            sample_type: Vec::new(),
            sample: Vec::new(),
            mapping: Vec::new(),
            location: Vec::new(),
            function: Vec::new(),
            string_table: Vec::new(),
            drop_frames: 0,
            keep_frames: 0,
            time_nanos: metadata.time_nanos,
            duration_nanos: metadata.duration_nanos,
            period_type: self.period_type,
            period: metadata.period.as_ref().map_or(0, |(_, _, period)| *period),
            comment: self.comment,
            default_sample_type: self.default_sample_type,
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

impl Samples {
    fn new(builder: u64) -> Self {
        Samples {
            builder,
            samples: Vec::new(),
            index: HashTable::new(),
            limit: None,
            over_limit: Vec::new(),
        }
    }

    /// Caps the distinct samples at `samples`: a new (stack, labels) beyond them is
    /// counted under a stack of `stand_in` alone with its labels, so memory stays
    /// bounded however many distinct stacks a long run brings;
    /// [`over_limit`](Self::over_limit) says how much was folded. (Stand-ins of labels
    /// not seen before may still be added: the bound is the cap plus the distinct label
    /// sets.)
    pub fn set_limit(&mut self, samples: usize, stand_in: LocationId) {
        self.limit = Some(SampleLimit { samples, stand_in });
    }

    /// The values folded into the stand-in of [`set_limit`](Self::set_limit), summed
    /// per sample type (empty when nothing was).
    pub fn over_limit(&self) -> &[i64] {
        &self.over_limit
    }

    /// The number of distinct (stack, labels) samples.
    pub fn len(&self) -> usize {
        self.samples.len()
    }

    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    /// Adds every sample of `other` (of the same builder), as
    /// [`ProfileBuilder::add_sample`] would: consecutive intervals' samples into the
    /// run's total, with no string, function or location interned again. Returns the
    /// indices in `other` (ascending) of the samples the cap ([`set_limit`]
    /// (Self::set_limit)) counted under its stand-in, so that a caller keeping another
    /// form of the total (folded stacks) can place them alike.
    pub fn absorb(&mut self, other: &Samples) -> Result<Vec<usize>, PprofError> {
        if other.builder != self.builder {
            return Err(PprofError::ForeignSamples);
        }
        let mut labels: Vec<LabelWords> = Vec::new();
        let mut capped = Vec::new();
        for (index, sample) in other.samples.iter().enumerate() {
            labels.clear();
            labels.extend(sample.label.iter().map(label_words));
            if self.add(sample.location_id.iter().copied(), &sample.value, &labels)
                == Placement::StandIn
            {
                capped.push(index);
            }
        }
        Ok(capped)
    }

    /// Adds `values` to the sample of `stack` (ids checked by the caller) with `labels`,
    /// and says where they went.
    fn add(
        &mut self,
        stack: impl Iterator<Item = u64> + Clone,
        values: &[i64],
        labels: &[LabelWords],
    ) -> Placement {
        let hash = sample_hash(stack.clone(), labels.iter().copied());
        let samples = &self.samples;
        if let Some(&index) = self.index.find(hash, |&index| {
            sample_matches(&samples[index], stack.clone(), labels)
        }) {
            for (total, value) in self.samples[index].value.iter_mut().zip(values) {
                *total = total.saturating_add(*value);
            }
            return Placement::Own;
        }
        if let Some(limit) = self.limit {
            let is_stand_in = stack.clone().eq(std::iter::once(limit.stand_in.0));
            if self.samples.len() >= limit.samples && !is_stand_in {
                if self.over_limit.is_empty() {
                    self.over_limit = vec![0; values.len()];
                }
                for (total, value) in self.over_limit.iter_mut().zip(values) {
                    *total = total.saturating_add(*value);
                }
                // Into the stand-in's sample: its own stack is never over the cap.
                self.add(std::iter::once(limit.stand_in.0), values, labels);
                return Placement::StandIn;
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
            location_id: stack.collect(),
            value: values.to_vec(),
            label,
        });
        let samples = &self.samples;
        self.index
            .insert_unique(hash, index, |&index| stored_sample_hash(&samples[index]));
        Placement::Own
    }
}

/// Where [`Samples::add`] counted a sample's values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Placement {
    /// Under its own stack, new or not.
    Own,
    /// Under the cap's stand-in.
    StandIn,
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
    gzip(&profile.encode_to_vec(), out)
}

/// Writes a profile's message `encoded` gzip-compressed.
fn gzip(encoded: &[u8], out: &mut dyn Write) -> Result<(), PprofError> {
    // The fastest level, as Go's runtime/pprof writes its profiles: three times faster
    // than the default on a profile of 100,000 stacks, for a file a few percent larger.
    let mut encoder = flate2::write::GzEncoder::new(out, flate2::Compression::fast());
    encoder.write_all(encoded)?;
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
