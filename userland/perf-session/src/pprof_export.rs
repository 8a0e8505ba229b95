//! A session's samples as a pprof profile (`rvperf export --pprof`): every stack
//! (callchain, else CTR call stack, else the sampled address, as the flame graph's
//! collapse stage takes them) as pprof locations in the mappings the recording's MMAP2
//! records name, with their build ids, each address symbolized once into its inline
//! stack of functions; and folded stacks (a trace's call stacks, which have names but no
//! addresses) as a profile of function-only locations.
//!
//! Sample types: `samples`/`count`; `cpu`/`nanoseconds` when every event's samples say
//! how much CPU time they stand for (a clock event's period is nanoseconds; a sample of
//! an event sampled at a frequency stands for one period of that frequency); and each
//! other event's period sum as `<event>`/`count`.

use std::collections::HashMap;

use perf_abi::sys::bindings as abi;
use pprof::{
    EncodedProfile, FunctionSpec, LabelSpec, LabelValue, LineSpec, LocationId, MappingId,
    MappingSpec, MappingSymbols, Profile, ProfileBuilder, ProfileMetadata, SampleType, Samples,
};
use rustc_hash::FxHashMap;

use crate::processes::Processes;
use profiles::folded::push_frame;
use profiles::FoldedStacks;
use symbolize::{is_kernel_address, Symbolized, KERNEL_DSO, KERNEL_START};

use crate::fold::{branch_stack_kinds, stack_addresses, BranchStackKind, StackAddress};
use crate::processes::thread_id;
use crate::session::{Session, SessionError};

/// Which labels each sample carries (pprof `-tagfocus`, Pyroscope series).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SampleLabels {
    /// `pid` and `comm`: one sample per stack and process.
    #[default]
    Process,
    /// `pid`, `tid` and `comm`.
    Thread,
    /// `comm` only: processes of one command merged, so a long run's profile grows
    /// with its commands, not with its process ids.
    Command,
    /// None: every process's equal stacks merged.
    None,
}

/// The name of user addresses in no mapping, in a profile by file offsets.
const UNKNOWN_FRAME: &str = "[unknown]";

/// Which address a location of a user-space file carries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum LocationAddresses {
    /// The process's run-time address, in a mapping per process mapping (as recorded).
    #[default]
    Runtime,
    /// The offset in the file, in one mapping per file (start 0): the same code of
    /// every process (position-independent code loaded at random addresses) is one
    /// location, so a profile of many processes grows with the code, not the processes;
    /// addresses in no mapping are one `[unknown]` location.
    FileOffsets,
}

/// How many locations a profile has: one per sampled address, or one per function.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum LocationGranularity {
    /// One location per address (and mapping): `go tool pprof -disasm` and
    /// `-addresses` see every sampled instruction and its line.
    #[default]
    Address,
    /// One location per mapping and inline stack of functions, with no line numbers
    /// ([`pprof::ProfileBuilder::add_functions_location`]): the granularity of folded
    /// stacks, at which a flame graph is drawn. Each sampled instruction of a leaf is
    /// then one stack, not one each: a long run's profile grows with its call paths,
    /// not with the instructions they end at.
    Function,
}

/// How [`pprof_profile`] builds the profile.
#[derive(Debug, Clone, Copy, Default)]
#[non_exhaustive]
pub struct PprofOptions {
    pub labels: SampleLabels,
    /// What the session's symbolizer gives (its inline option): pprof's `has_*` flags
    /// of each mapping say so, so pprof does not symbolize again.
    pub symbols: MappingSymbols,
}

impl PprofOptions {
    pub fn new(labels: SampleLabels, symbols: MappingSymbols) -> Self {
        Self { labels, symbols }
    }
}

/// Errors of an export.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PprofExportError {
    #[error(transparent)]
    Session(#[from] SessionError),
    #[error(transparent)]
    Pprof(#[from] pprof::PprofError),
}

/// The profile, and how many samples went into it.
#[derive(Debug)]
pub struct PprofExport {
    pub profile: Profile,
    pub samples: u64,
}

/// What one event's samples are worth in each sample type.
#[derive(Debug, Clone, Copy)]
struct EventValues {
    /// The column of this event's period (`<event>`/`count`), or none for a clock event,
    /// whose period is the cpu column.
    period_column: Option<usize>,
    cpu: CpuTime,
}

/// How much CPU time a sample of an event stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CpuTime {
    /// A clock event: the period is nanoseconds.
    Period,
    /// Sampled at a frequency: one period of it.
    PerSample(i64),
    /// Not known (a fixed period of a hardware event).
    Unknown,
}

const NANOSECONDS_PER_SECOND: u64 = 1_000_000_000;
const SAMPLES_COLUMN: usize = 0;
const CPU_COLUMN: usize = 1;

/// The sample types of a recording and each event's place in them.
struct Columns {
    sample_types: Vec<(String, String)>,
    events: Vec<EventValues>,
    cpu: bool,
    comments: Vec<String>,
}

fn columns(session: &Session<'_>) -> Columns {
    let reader = session.reader();
    let names = reader.event_names();
    let mut events: Vec<EventValues> = Vec::new();
    let mut cpu_times = Vec::new();
    let mut sampling = Vec::new();
    for attr in reader.attrs() {
        let attr = &attr.attr;
        // perf's side-band carrier (`dummy:u`) never samples: it has no column.
        let dummy = attr.type_ == abi::PERF_TYPE_SOFTWARE
            && attr.config == u64::from(abi::PERF_COUNT_SW_DUMMY);
        sampling.push(!dummy);
        let clock = attr.type_ == abi::PERF_TYPE_SOFTWARE
            && (attr.config == u64::from(abi::PERF_COUNT_SW_CPU_CLOCK)
                || attr.config == u64::from(abi::PERF_COUNT_SW_TASK_CLOCK));
        let cpu = if clock {
            CpuTime::Period
        } else if attr.freq() != 0 && attr.sample_freq > 0 {
            // At most a second per sample: the value fits i64.
            CpuTime::PerSample((NANOSECONDS_PER_SECOND / attr.sample_freq) as i64)
        } else {
            CpuTime::Unknown
        };
        if !dummy {
            cpu_times.push(cpu);
        }
        events.push(EventValues {
            period_column: None,
            cpu,
        });
    }
    let cpu = !cpu_times.is_empty() && cpu_times.iter().all(|&time| time != CpuTime::Unknown);
    let mut sample_types = vec![("samples".to_owned(), "count".to_owned())];
    if cpu {
        sample_types.push(("cpu".to_owned(), "nanoseconds".to_owned()));
    }
    let mut comments = Vec::new();
    for (index, event) in events.iter_mut().enumerate() {
        if !sampling[index] || (event.cpu == CpuTime::Period && cpu) {
            continue;
        }
        let name = names
            .get(index)
            .map(|name| sample_type_name(name))
            .filter(|name| !name.is_empty())
            .map_or_else(|| format!("event{index}"), str::to_owned);
        event.period_column = Some(sample_types.len());
        sample_types.push((name, "count".to_owned()));
        if let CpuTime::PerSample(nanoseconds) = event.cpu {
            comments.push(format!(
                "cpu/nanoseconds of {}: {nanoseconds} ns per sample (its sampling frequency)",
                sample_types.last().map_or("", |(name, _)| name.as_str())
            ));
        }
    }
    Columns {
        sample_types,
        events,
        cpu,
        comments,
    }
}

/// An event's name as a pprof sample type, which `pprof -sample_index` selects by name:
/// without perf's modifiers (`cycles:u`) and period terms (`cycles/period=1000000/`);
/// a PMU's event (`rvperf_ctr/branches/`, `cpu/cycles/`) keeps its PMU.
fn sample_type_name(event: &str) -> &str {
    let event = match event.rsplit_once(':') {
        Some((name, modifiers)) if !modifiers.contains('/') => name,
        _ => event,
    };
    match event.split_once('/') {
        Some((name, terms))
            if terms
                .trim_end_matches('/')
                .split(',')
                .all(|term| term.contains('=')) =>
        {
            name
        }
        _ => event,
    }
}

/// A pprof profile being built from stacks of addresses of processes whose mappings a
/// [`Processes`] knows: each address placed in its mapping (with the mapping's build
/// id) and symbolized once; the kernel's addresses in one `[kernel.kallsyms]` mapping.
/// [`pprof_profile`] feeds it a recording's samples, `rvperf daemon` its in-kernel
/// counts.
#[derive(Debug)]
pub struct StackProfile {
    builder: ProfileBuilder,
    symbols: MappingSymbols,
    kernel_mapping: MappingId,
    /// Mapping ids by (file, mapping start, file offset).
    mappings: FxHashMap<(usize, u64, u64), MappingId>,
    /// Build ids for files whose MMAP2 records carry none (a perf.data header's list,
    /// or read from the files).
    file_build_ids: HashMap<String, Vec<u8>>,
    /// Leaf samples per user mapping since the last interval ([`take_interval`]
    /// (Self::take_interval)): the most sampled is the profile's program.
    leaf_samples: FxHashMap<MappingId, u64>,
    /// Leaf samples per user mapping of the intervals taken: the run's program.
    run_leaf_samples: FxHashMap<MappingId, u64>,
    stack: Vec<LocationId>,
    addresses: LocationAddresses,
    granularity: LocationGranularity,
    /// Each location's frames folded ([`Self::folded_of`]), kept for the builder's
    /// life: a location never changes once made, and a long run's intervals and its
    /// merged profile fold the same locations again and again.
    folded_pieces: FxHashMap<LocationId, Box<str>>,
}

/// An interval of a long run ([`StackProfile::take_interval`]): its profile, encoded
/// (what a daemon writes), and its samples for the run's total.
#[derive(Debug)]
pub struct IntervalProfile {
    pub profile: EncodedProfile,
    pub samples: Samples,
}

/// An address of a stack, leaf first, and whether it is the sampled instruction or a
/// return address (looked up one byte earlier, inside its call).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StackFrame {
    Instruction(u64),
    ReturnAddress(u64),
    /// No address: a named stand-in (`[stack lost]`) for frames a source could not
    /// keep, so its samples still count.
    Placeholder(&'static str),
}

impl StackFrame {
    /// The address the frame is looked up at: the instruction's own, a return
    /// address's byte before (inside its call); 0 for a placeholder.
    pub fn lookup_address(self) -> u64 {
        match self {
            StackFrame::Instruction(address) => address,
            StackFrame::ReturnAddress(address) => address.saturating_sub(1),
            StackFrame::Placeholder(_) => 0,
        }
    }
}

impl StackProfile {
    pub fn new(
        sample_types: &[SampleType<'_>],
        kernel_build_id: Option<&[u8]>,
        file_build_ids: HashMap<String, Vec<u8>>,
        symbols: MappingSymbols,
    ) -> Self {
        let mut builder = ProfileBuilder::new(sample_types);
        let kernel_mapping = builder.mapping(&MappingSpec {
            start: KERNEL_START,
            limit: u64::MAX,
            file_offset: 0,
            filename: KERNEL_DSO,
            build_id: kernel_build_id,
            symbols,
        });
        StackProfile {
            builder,
            symbols,
            kernel_mapping,
            mappings: FxHashMap::default(),
            file_build_ids,
            leaf_samples: FxHashMap::default(),
            run_leaf_samples: FxHashMap::default(),
            stack: Vec::new(),
            addresses: LocationAddresses::Runtime,
            granularity: LocationGranularity::Address,
            folded_pieces: FxHashMap::default(),
        }
    }

    /// Locations of user-space files by `addresses`.
    pub fn with_addresses(mut self, addresses: LocationAddresses) -> Self {
        self.addresses = addresses;
        self
    }

    /// Locations by `granularity`.
    pub fn with_granularity(mut self, granularity: LocationGranularity) -> Self {
        self.granularity = granularity;
        self
    }

    /// Adds `values` to the stack `frames` (leaf first) of process `pid`, as its
    /// mappings are now.
    pub fn add_stack(
        &mut self,
        processes: &mut Processes,
        pid: u32,
        frames: impl IntoIterator<Item = StackFrame>,
        values: &[i64],
        labels: &[LabelSpec<'_>],
    ) -> Result<(), pprof::PprofError> {
        self.stack.clear();
        for frame in frames {
            let lookup = frame.lookup_address();
            let location = if let StackFrame::Placeholder(name) = frame {
                self.placeholder_location(name)?
            } else if is_kernel_address(lookup) {
                match self
                    .builder
                    .address_location(Some(self.kernel_mapping), lookup)
                {
                    Some(location) => location,
                    None => {
                        let symbolized = processes.symbolizer().symbolize_unmapped(lookup, 1);
                        let lines = function_lines(&mut self.builder, &symbolized);
                        self.new_location(Some(self.kernel_mapping), lookup, &lines)?
                    }
                }
            } else {
                let mut location_address = lookup;
                // The file's number, when its mapping has no build id yet.
                let mut missing_build_id = None;
                let mapping = match processes.mapped_file(pid, lookup) {
                    Some(file) => {
                        let key = match self.addresses {
                            LocationAddresses::Runtime => {
                                (file.index, file.mapping_start, file.mapping_file_offset)
                            }
                            LocationAddresses::FileOffsets => {
                                location_address = file.file_offset;
                                (file.index, 0, 0)
                            }
                        };
                        let mapping = match self.mappings.get(&key) {
                            Some(&mapping) => mapping,
                            None => {
                                let build_id = file.build_id.or_else(|| {
                                    self.file_build_ids.get(file.recorded).map(Vec::as_slice)
                                });
                                let (start, limit, file_offset) = match self.addresses {
                                    LocationAddresses::Runtime => (
                                        file.mapping_start,
                                        file.mapping_end,
                                        file.mapping_file_offset,
                                    ),
                                    // The whole file at address 0: addresses are offsets.
                                    LocationAddresses::FileOffsets => (0, KERNEL_START, 0),
                                };
                                let mapping = self.builder.mapping(&MappingSpec {
                                    start,
                                    limit,
                                    file_offset,
                                    filename: file.recorded,
                                    build_id,
                                    symbols: self.symbols,
                                });
                                if build_id.is_none() {
                                    missing_build_id = Some(file.index);
                                }
                                self.mappings.insert(key, mapping);
                                mapping
                            }
                        };
                        Some(mapping)
                    }
                    None => None,
                };
                if mapping.is_none() && self.addresses == LocationAddresses::FileOffsets {
                    // An address in no mapping (a return address read from code without
                    // frame pointers, mostly): one `[unknown]` location for all, so such
                    // addresses do not grow a long run's profile.
                    let function = self.builder.function(&FunctionSpec {
                        name: UNKNOWN_FRAME,
                        system_name: UNKNOWN_FRAME,
                        filename: None,
                        start_line: None,
                    });
                    let location = self.builder.function_location(function)?;
                    self.stack.push(location);
                    continue;
                }
                if let (Some(mapping), true) = (mapping, self.stack.is_empty()) {
                    *self.leaf_samples.entry(mapping).or_default() += 1;
                }
                match self.builder.address_location(mapping, location_address) {
                    Some(location) => location,
                    None => {
                        let symbolized = processes.symbolizer().symbolize(pid, lookup);
                        // The kernel's record had no build id (it could not read the
                        // note, as of files on 9p): the file's own, now it is read.
                        if let (Some(mapping), Some(index)) = (mapping, missing_build_id) {
                            if let Some(build_id) = processes.symbolizer().file_build_id(index) {
                                self.builder.set_missing_build_id(mapping, build_id);
                            }
                        }
                        let lines = function_lines(&mut self.builder, &symbolized);
                        self.new_location(mapping, location_address, &lines)?
                    }
                }
            };
            self.stack.push(location);
        }
        self.builder.add_sample(&self.stack, values, labels)
    }

    /// The location of an address no location was found for, by the granularity.
    fn new_location(
        &mut self,
        mapping: Option<MappingId>,
        address: u64,
        lines: &[LineSpec],
    ) -> Result<LocationId, pprof::PprofError> {
        match self.granularity {
            LocationGranularity::Address => {
                self.builder.add_address_location(mapping, address, lines)
            }
            LocationGranularity::Function => {
                self.builder.add_functions_location(mapping, address, lines)
            }
        }
    }

    /// The number of distinct (stack, labels) samples so far.
    pub fn sample_count(&self) -> usize {
        self.builder.sample_count()
    }

    /// The location of a name alone (`[stack lost]`), for stacks of
    /// [`StackFrame::Placeholder`] or a stand-in of [`Samples::set_limit`].
    pub fn placeholder_location(&mut self, name: &str) -> Result<LocationId, pprof::PprofError> {
        let function = self.builder.function(&FunctionSpec {
            name,
            system_name: name,
            filename: None,
            start_line: None,
        });
        self.builder.function_location(function)
    }

    /// The profile, its most sampled user mapping first (pprof's program).
    pub fn finish(mut self, metadata: ProfileMetadata) -> Profile {
        if let Some(main) = most_sampled(&self.leaf_samples) {
            self.builder.set_main_mapping(main);
        }
        self.builder.set_metadata(metadata);
        self.builder.build()
    }

    /// Ends an interval of a long run: the profile of the stacks added since the last
    /// (with only the mappings, functions and locations they use, its most sampled
    /// user mapping first) and its samples, for the run's total ([`Samples::absorb`]
    /// into [`new_samples`](Self::new_samples)). The mappings, functions and locations
    /// stay, so the next interval symbolizes only addresses not seen before.
    pub fn take_interval(
        &mut self,
        metadata: &ProfileMetadata,
    ) -> Result<IntervalProfile, pprof::PprofError> {
        let samples = self.builder.take_samples();
        let profile =
            self.builder
                .encode_profile_of(&samples, metadata, most_sampled(&self.leaf_samples))?;
        for (mapping, count) in self.leaf_samples.drain() {
            let total = self.run_leaf_samples.entry(mapping).or_default();
            *total = total.saturating_add(count);
        }
        Ok(IntervalProfile { profile, samples })
    }

    /// An empty sample set for a run's total of [`take_interval`](Self::take_interval)'s
    /// samples.
    pub fn new_samples(&self) -> Samples {
        self.builder.new_samples()
    }

    /// The profile of `samples` (a run's total), the run's most sampled user mapping
    /// first, encoded.
    pub fn encode_profile_of(
        &self,
        samples: &Samples,
        metadata: &ProfileMetadata,
    ) -> Result<EncodedProfile, pprof::PprofError> {
        self.builder
            .encode_profile_of(samples, metadata, most_sampled(&self.run_leaf_samples))
    }

    /// The folded stacks of `samples` (a run's total, or an interval's), weighted by
    /// value `column`: root first, a location's inline functions outermost first, a
    /// location without a function as its mapping's file (`[libc.so.6]`) or
    /// `[unknown]`, under the sample's `comm` label when it has one (the flame graph's
    /// tower per command). Read from the builder's own tables, not from a written
    /// profile's renumbered copy.
    pub fn folded_of(
        &mut self,
        samples: &Samples,
        column: usize,
    ) -> Result<FoldedStacks, pprof::PprofError> {
        let mut folded = FoldedStacks::new();
        self.fold_each(samples, column, |_, line, weight| {
            folded.add_line(line.text(), weight);
        })?;
        Ok(folded)
    }

    /// Each of `samples` folded as [`folded_of`](Self::folded_of) folds it, handed to
    /// `each` with its index in `samples` and its weight: for a caller that adds one
    /// interval's lines to more than one set of folded stacks (its own, the run's).
    pub fn fold_each(
        &mut self,
        samples: &Samples,
        column: usize,
        mut each: impl FnMut(usize, FoldedLine<'_>, u64),
    ) -> Result<(), pprof::PprofError> {
        let comm_key = self.builder.label_key("comm");
        // Each location's frames folded once for the run: a run's stacks share most of
        // their locations, and a stack's line is then its locations' pieces joined.
        let pieces = &mut self.folded_pieces;
        let mut line = String::new();
        for (sample_index, sample) in self.builder.named_samples(samples)?.enumerate() {
            line.clear();
            let comm = comm_key.and_then(|key| sample.text_label(key));
            if let Some(comm) = comm {
                push_frame(&mut line, comm);
            }
            let command_end = comm.map(|_| line.len());
            for (index, location) in sample.locations_root_first().enumerate() {
                let piece = pieces.entry(location.id()).or_insert_with(|| {
                    let mut piece = String::new();
                    for (index, frame) in location.frames_root_first().enumerate() {
                        if index > 0 {
                            piece.push(';');
                        }
                        match frame {
                            pprof::FrameName::Function(name) => push_frame(&mut piece, name),
                            pprof::FrameName::Unsymbolized { filename } => push_frame(
                                &mut piece,
                                &filename
                                    .map_or_else(|| "[unknown]".to_owned(), unsymbolized_frame),
                            ),
                        }
                    }
                    piece.into_boxed_str()
                });
                if index > 0 || comm.is_some() {
                    line.push(';');
                }
                line.push_str(piece);
            }
            let weight = sample.values().get(column).copied().unwrap_or(0);
            each(
                sample_index,
                FoldedLine {
                    line: &line,
                    command_end,
                },
                u64::try_from(weight).unwrap_or(0),
            );
        }
        Ok(())
    }
}

/// One sample's folded line ([`StackProfile::fold_each`]).
#[derive(Debug, Clone, Copy)]
pub struct FoldedLine<'a> {
    line: &'a str,
    /// Where the command's frame ends, if the sample has one.
    command_end: Option<usize>,
}

impl<'a> FoldedLine<'a> {
    /// The whole line: the command's frame (if the sample has one), then the stack.
    pub fn text(&self) -> &'a str {
        self.line
    }

    /// The line's first frame, the sample's command, if it has one: what a line for
    /// the same sample with another stack (a cap's stand-in) starts with.
    pub fn command_frame(&self) -> Option<&'a str> {
        self.command_end.and_then(|end| self.line.get(..end))
    }
}

/// The mapping with the most leaf samples (the lowest id of equals).
fn most_sampled(leaf_samples: &FxHashMap<MappingId, u64>) -> Option<MappingId> {
    leaf_samples
        .iter()
        .max_by_key(|&(&mapping, &samples)| (samples, std::cmp::Reverse(mapping)))
        .map(|(&mapping, _)| mapping)
}

/// The `pid`, `comm` (and `tid`) labels `labels` asks for.
pub fn sample_labels<'a>(
    labels: SampleLabels,
    pid: i32,
    tid: i32,
    comm: &'a str,
) -> Vec<LabelSpec<'a>> {
    let number = |key, value: i32| LabelSpec {
        key,
        value: LabelValue::Number {
            value: i64::from(value),
            unit: None,
        },
    };
    let comm = LabelSpec {
        key: "comm",
        value: LabelValue::Text(comm),
    };
    match labels {
        SampleLabels::Process => vec![number("pid", pid), comm],
        SampleLabels::Thread => vec![number("pid", pid), number("tid", tid), comm],
        SampleLabels::Command => vec![comm],
        SampleLabels::None => Vec::new(),
    }
}

/// Reads the session to its end and builds the pprof profile of its samples.
pub fn pprof_profile(
    session: &mut Session<'_>,
    options: PprofOptions,
) -> Result<PprofExport, PprofExportError> {
    let columns = columns(session);
    let sample_types: Vec<SampleType<'_>> = columns
        .sample_types
        .iter()
        .map(|(kind, unit)| SampleType { kind, unit })
        .collect();
    let reader = session.reader();
    let kernel_build_id = reader
        .info()
        .build_ids
        .iter()
        .find(|entry| entry.filename == KERNEL_DSO)
        .map(|entry| entry.build_id.clone());
    // The build ids the header lists, for files whose MMAP2 records carry none.
    let header_build_ids: HashMap<String, Vec<u8>> = reader
        .info()
        .build_ids
        .iter()
        .map(|entry| (entry.filename.clone(), entry.build_id.clone()))
        .collect();
    let mut profile = StackProfile::new(
        &sample_types,
        kernel_build_id.as_deref(),
        header_build_ids,
        options.symbols,
    );
    let branch_stacks = branch_stack_kinds(reader);
    let mut addresses: Vec<StackAddress> = Vec::new();
    let mut values = vec![0i64; sample_types.len()];
    let mut samples = 0u64;
    let mut first_time: Option<u64> = None;
    let mut last_time: Option<u64> = None;
    let mut comm = String::new();
    while let Some(sampled) = session.next_sample()? {
        let sample = &sampled.sample;
        samples += 1;
        if let Some(time) = sample.time {
            first_time = Some(first_time.map_or(time, |first| first.min(time)));
            last_time = Some(last_time.map_or(time, |last| last.max(time)));
        }
        let pid = sample.pid.unwrap_or(u32::MAX);
        let kind = sampled
            .attr_index
            .and_then(|index| branch_stacks.get(index).copied())
            .unwrap_or(BranchStackKind::Branches);
        stack_addresses(sample, kind, &mut addresses);
        values.fill(0);
        values[SAMPLES_COLUMN] = 1;
        // Periods are read from the file: they saturate into i64.
        let period = i64::try_from(sampled.period).unwrap_or(i64::MAX);
        if let Some(event) = sampled
            .attr_index
            .and_then(|index| columns.events.get(index))
        {
            if columns.cpu {
                values[CPU_COLUMN] = match event.cpu {
                    CpuTime::Period => period,
                    CpuTime::PerSample(nanoseconds) => nanoseconds,
                    CpuTime::Unknown => 0,
                };
            }
            if let Some(column) = event.period_column {
                values[column] = period;
            }
        }
        let processes = session.processes();
        comm.clear();
        comm.push_str(processes.comm(thread_id(sample.pid), thread_id(sample.tid)));
        let labels = sample_labels(
            options.labels,
            thread_id(sample.pid),
            thread_id(sample.tid),
            &comm,
        );
        let frames = addresses.iter().map(|address| match address.kind {
            crate::fold::AddressKind::Instruction => StackFrame::Instruction(address.address),
            crate::fold::AddressKind::ReturnAddress => StackFrame::ReturnAddress(address.address),
        });
        profile.add_stack(processes, pid, frames, &values, &labels)?;
    }
    let duration = match (first_time, last_time) {
        (Some(first), Some(last)) => i64::try_from(last - first).unwrap_or(i64::MAX),
        _ => 0,
    };
    let profile = profile.finish(ProfileMetadata {
        time_nanos: 0,
        duration_nanos: duration,
        period: None,
        comments: columns.comments,
        default_sample_type: Some(if columns.cpu { "cpu" } else { "samples" }.to_owned()),
    });
    Ok(PprofExport { profile, samples })
}

/// A symbolizer answer's inline stack as pprof lines, innermost first; no line when no
/// function is known (pprof then shows the address).
fn function_lines(builder: &mut ProfileBuilder, symbolized: &Symbolized) -> Vec<LineSpec> {
    symbolized
        .frames
        .iter()
        .filter_map(|frame| {
            let name = frame
                .function
                .as_deref()
                .or(frame.linkage_name.as_deref())?;
            let function = builder.function(&FunctionSpec {
                name,
                system_name: frame.linkage_name.as_deref().unwrap_or(name),
                filename: frame.file.as_deref(),
                start_line: frame.function_start_line,
            });
            Some(LineSpec {
                function,
                line: frame.line,
                column: frame.column,
            })
        })
        .collect()
}

/// How folded stacks name an address of `filename` with no symbol: the file's last
/// path component, in brackets (`[libc.so.6]`, `[kernel.kallsyms]`).
fn unsymbolized_frame(filename: &str) -> String {
    let short = filename.rsplit('/').next().unwrap_or(filename);
    let short = short.trim_start_matches('[').trim_end_matches(']');
    format!("[{short}]")
}

/// Folded stacks (root first, `;`-separated names, as a trace's call stacks give them)
/// as a profile of function-only locations with one sample type.
pub fn folded_pprof(
    folded: &FoldedStacks,
    sample_type: SampleType<'_>,
) -> Result<Profile, pprof::PprofError> {
    let mut builder = ProfileBuilder::new(&[sample_type]);
    let mut stack: Vec<LocationId> = Vec::new();
    for (frames, weight) in folded.sorted() {
        stack.clear();
        for name in frames.split(';') {
            let function = builder.function(&FunctionSpec {
                name,
                system_name: name,
                filename: None,
                start_line: None,
            });
            stack.push(builder.function_location(function)?);
        }
        // pprof's stacks are leaf first.
        stack.reverse();
        builder.add_sample(&stack, &[i64::try_from(weight).unwrap_or(i64::MAX)], &[])?;
    }
    builder.set_metadata(ProfileMetadata {
        default_sample_type: Some(sample_type.kind.to_owned()),
        ..ProfileMetadata::default()
    });
    Ok(builder.build())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SymbolOptions;

    /// The reference [`StackProfile::folded_of`] is checked against: a written pprof
    /// profile's stacks as folded stacks of one of its values (`column`): root first,
    /// a location's inline functions outermost first, a location without a function as its
    /// mapping's file (`[libc.so.6]`) or `[unknown]`, under the sample's `comm` label when it
    /// has one (the flame graph's tower per command).
    fn profile_folded(profile: &Profile, column: usize) -> FoldedStacks {
        let text = |index: i64| {
            usize::try_from(index)
                .ok()
                .and_then(|index| profile.string_table.get(index))
                .map_or("", String::as_str)
        };
        let functions: FxHashMap<u64, &str> = profile
            .function
            .iter()
            .map(|function| (function.id, text(function.name)))
            .collect();
        let mappings: FxHashMap<u64, String> = profile
            .mapping
            .iter()
            .map(|mapping| (mapping.id, unsymbolized_frame(text(mapping.filename))))
            .collect();
        let locations: FxHashMap<u64, &pprof::proto::Location> = profile
            .location
            .iter()
            .map(|location| (location.id, location))
            .collect();
        let comm_key = profile
            .string_table
            .iter()
            .position(|text| text == "comm")
            .map(|index| index as i64);
        let mut folded = FoldedStacks::new();
        let mut frames: Vec<&str> = Vec::new();
        for sample in &profile.sample {
            frames.clear();
            if let Some(label) = sample
                .label
                .iter()
                .find(|label| Some(label.key) == comm_key && label.str != 0)
            {
                frames.push(text(label.str));
            }
            for id in sample.location_id.iter().rev() {
                let Some(location) = locations.get(id) else {
                    continue;
                };
                if location.line.is_empty() {
                    frames.push(
                        mappings
                            .get(&location.mapping_id)
                            .map_or("[unknown]", String::as_str),
                    );
                }
                for line in location.line.iter().rev() {
                    frames.push(
                        functions
                            .get(&line.function_id)
                            .copied()
                            .unwrap_or("[unknown]"),
                    );
                }
            }
            let weight = sample.value.get(column).copied().unwrap_or(0);
            folded.add(frames.iter().copied(), u64::try_from(weight).unwrap_or(0));
        }
        folded
    }

    /// A run's builder read directly ([`StackProfile::folded_of`]) gives the folded
    /// stacks of the profile it writes, for an interval and for the run's total: kernel
    /// functions from kallsyms, a process's unknown addresses, a stand-in frame, and the
    /// command as the root.
    #[test]
    fn folded_stacks_read_from_the_builder_are_those_of_its_profile() {
        let kallsyms =
            std::env::temp_dir().join(format!("rvperf-folded-of-{}.kallsyms", std::process::id()));
        std::fs::write(
            &kallsyms,
            "ffffffff80001000 T handle_exception\nffffffff80002000 T do_page_fault\nffffffff80003000 T schedule\n",
        )
        .unwrap();
        let mut processes = Processes::new(SymbolOptions {
            kallsyms: Some(kallsyms.clone()),
            ..SymbolOptions::default()
        });
        processes.name_thread(42, 42, "worker");
        processes.name_thread(7, 7, "shell");
        let types = [SampleType {
            kind: "samples",
            unit: "count",
        }];
        let mut profile =
            StackProfile::new(&types, None, HashMap::new(), MappingSymbols::Functions);
        let mut add = |profile: &mut StackProfile, pid: u32, frames: &[StackFrame], count: i64| {
            let comm = processes.comm(pid as i32, pid as i32).to_owned();
            let labels = sample_labels(SampleLabels::Process, pid as i32, pid as i32, &comm);
            profile
                .add_stack(
                    &mut processes,
                    pid,
                    frames.iter().copied(),
                    &[count],
                    &labels,
                )
                .unwrap();
        };
        let kernel = [
            StackFrame::Instruction(0xffff_ffff_8000_2010),
            StackFrame::ReturnAddress(0xffff_ffff_8000_1020),
        ];
        add(&mut profile, 42, &kernel, 3);
        add(
            &mut profile,
            42,
            &[
                StackFrame::Instruction(0x10_000),
                StackFrame::ReturnAddress(0x10_100),
            ],
            2,
        );
        let first = profile.take_interval(&ProfileMetadata::default()).unwrap();
        add(&mut profile, 7, &kernel, 1);
        add(
            &mut profile,
            7,
            &[StackFrame::Placeholder("[stack lost]")],
            4,
        );
        add(&mut profile, 42, &kernel, 5);
        let second = profile.take_interval(&ProfileMetadata::default()).unwrap();
        let mut total = profile.new_samples();
        total.absorb(&first.samples).unwrap();
        total.absorb(&second.samples).unwrap();
        for (what, samples) in [("an interval", &first.samples), ("the run", &total)] {
            let through_profile = profile_folded(
                &profile
                    .encode_profile_of(samples, &ProfileMetadata::default())
                    .and_then(|encoded| encoded.decode())
                    .unwrap(),
                0,
            )
            .to_text();
            assert_eq!(
                profile.folded_of(samples, 0).unwrap().to_text(),
                through_profile,
                "{what}"
            );
        }
        assert_eq!(
            profile.folded_of(&total, 0).unwrap().to_text(),
            "shell;[stack lost] 4\nshell;handle_exception;do_page_fault 1\nworker;[unknown];[unknown] 2\nworker;handle_exception;do_page_fault 8\n"
        );
        // Locations made after a folding (each location's frames are folded once for
        // the run and kept), at places of the stack where others were folded before.
        add(
            &mut profile,
            7,
            &[
                StackFrame::Instruction(0xffff_ffff_8000_3010),
                StackFrame::ReturnAddress(0xffff_ffff_8000_2020),
                StackFrame::ReturnAddress(0xffff_ffff_8000_1020),
            ],
            6,
        );
        add(&mut profile, 42, &kernel, 1);
        let third = profile.take_interval(&ProfileMetadata::default()).unwrap();
        let through_profile = profile_folded(
            &profile
                .encode_profile_of(&third.samples, &ProfileMetadata::default())
                .and_then(|encoded| encoded.decode())
                .unwrap(),
            0,
        )
        .to_text();
        assert_eq!(
            profile.folded_of(&third.samples, 0).unwrap().to_text(),
            through_profile
        );
        assert_eq!(
            through_profile,
            "shell;handle_exception;do_page_fault;schedule 6\nworker;handle_exception;do_page_fault 1\n"
        );
        std::fs::remove_file(kallsyms).unwrap();
    }

    #[test]
    fn sample_types_are_named_without_modifiers_and_period_terms() {
        assert_eq!(sample_type_name("cycles"), "cycles");
        assert_eq!(sample_type_name("cycles:u"), "cycles");
        assert_eq!(sample_type_name("cycles/period=1000000/"), "cycles");
        assert_eq!(sample_type_name("cpu-clock/period=500000/u"), "cpu-clock");
        assert_eq!(sample_type_name("cpu/cycles/"), "cpu/cycles/");
        assert_eq!(
            sample_type_name("rvperf_ctr/branches/:u"),
            "rvperf_ctr/branches/"
        );
    }
}
