//! Reading perf.data for `script`, `report`, `flamegraph` and `autofdo`: samples with
//! their process, command name and symbols, whichever tool wrote the file.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use perf_abi::ctr::{CtrRecord, CtrRecords, RVPERF_AUXTRACE_CTR};
use perf_abi::{parse_record, Mmap2FileId, Record, Sample, SampleFormat};
use perf_data::{ExitedThreads, PerfDataReader, RawRecord, Threads, AUXTRACE_RECORD_SIZE};
use symbolize::{Symbolizer, SymbolizerOptions};

/// Process address spaces (in the symbolizer) and threads with their command names,
/// built from the side-band records in time order, as perf builds them.
pub struct Processes {
    threads: Threads,
    symbolizer: Symbolizer,
}

/// Where a sample's instruction pointer lands.
pub struct Place {
    pub dso: String,
    pub symbol: Option<String>,
    /// Where that function starts: functions of one name (static functions of
    /// several files) are told apart by it, as in perf report.
    pub function_start: Option<u64>,
    /// The offset in the mapped file, for an address in a file mapping.
    pub file_offset: Option<u64>,
}

/// A sample as the tools weigh it: the record, its event and the weight perf gives it.
pub struct SampleEvent<'a> {
    /// Index into the reader's attrs: the sample's event (for samples decoded from AUX
    /// data, the event that recorded it).
    pub attr_index: Option<usize>,
    /// perf's `sample->period`: [`Sample::period_or_attr`] with the event's attr.
    pub period: u64,
    pub sample: Sample<'a>,
}

/// A pid or tid as perf keeps it (`pid_t`): -1 when the sample has none.
pub fn thread_id(id: Option<u32>) -> i32 {
    // The kernel writes pid_t values into u32 fields: -1 is u32::MAX.
    id.map_or(-1, |id| i32::from_ne_bytes(id.to_ne_bytes()))
}

/// Where to find the recorded programs' files, and how much to resolve.
#[derive(Debug, Clone, Default)]
pub struct SymbolOptions {
    /// perf's `--symfs`: a recording made on another machine, such as the riscv64
    /// guest, is read on the host against a copy of that machine's files.
    pub symfs: Option<PathBuf>,
    pub kallsyms: Option<PathBuf>,
    pub vmlinux: Option<PathBuf>,
    /// Inline stacks and lines (slower); otherwise functions from symbol tables.
    pub inlines: bool,
}

impl Processes {
    pub fn new(options: SymbolOptions) -> Self {
        let defaults = SymbolizerOptions::default();
        Self {
            threads: Threads::new(),
            symbolizer: Symbolizer::new(SymbolizerOptions {
                symfs: options.symfs,
                kallsyms: options.kallsyms,
                vmlinux: options.vmlinux,
                inlines: options.inlines,
                ..defaults
            }),
        }
    }

    /// Symbolization for `reader`'s recording: files under `symfs` when given, kernel
    /// symbols from `kallsyms`, else from perf's build-id cache copy for the recorded
    /// kernel, else from this machine's /proc/kallsyms when the recording was made here
    /// (same host name and kernel release, as perf assumes).
    pub fn for_recording(reader: &PerfDataReader<'_>, options: SymbolOptions) -> Self {
        let mut options = options;
        if options.kallsyms.is_none() {
            // As perf report: the copy perf record cached for the recorded kernel's
            // build id, else this machine's own when the recording was made here.
            let kernel_build_id = reader
                .info()
                .build_ids
                .iter()
                .find(|entry| entry.filename == "[kernel.kallsyms]")
                .map(|entry| entry.build_id.as_slice());
            options.kallsyms = kernel_build_id
                .and_then(|build_id| {
                    symbolize::cached_kallsyms(
                        &SymbolizerOptions::default().build_id_dirs,
                        build_id,
                    )
                })
                .or_else(|| {
                    (options.symfs.is_none() && recorded_here(reader))
                        .then(|| PathBuf::from("/proc/kallsyms"))
                });
        }
        let mut processes = Self::new(options);
        // perf_session__open: AUX data may name threads after their EXIT.
        if reader.info().features.contains(&perf_data::HEADER_AUXTRACE) {
            processes.keep_exited_threads();
        }
        processes.expect_build_ids(reader);
        processes.symbolizer.preload_kernel();
        processes
    }

    /// The build ids the recording lists for its files (HEADER_BUILD_ID): a file found
    /// with another build id is the wrong file, and is not used.
    fn expect_build_ids(&mut self, reader: &perf_data::PerfDataReader<'_>) {
        self.symbolizer.add_build_ids(
            reader
                .info()
                .build_ids
                .iter()
                .map(|entry| (entry.filename.clone(), entry.build_id.clone())),
        );
    }

    /// Threads keep their names after their EXIT, as in `perf report` (perf script
    /// forgets them: a later sample of the thread shows `:TID`).
    pub fn keep_exited_threads(&mut self) {
        self.threads.set_exited(ExitedThreads::Keep);
    }

    /// Whether [`observe`](Self::observe) uses records of this type, which must then
    /// be applied in time order with the samples.
    pub fn is_side_band(record_type: u32) -> bool {
        use perf_abi::sys::bindings as b;
        matches!(
            record_type,
            b::PERF_RECORD_MMAP
                | b::PERF_RECORD_MMAP2
                | b::PERF_RECORD_COMM
                | b::PERF_RECORD_FORK
                | b::PERF_RECORD_EXIT
        )
    }

    /// Applies a side-band record; returns true if it was one.
    pub fn observe(&mut self, record_type: u32, misc: u16, body: &[u8]) -> bool {
        use perf_abi::sys::bindings as b;
        // perf looks up (creates) the thread of a user-space mapping, not of the
        // kernel's own.
        let kernel_mapping =
            u32::from(misc) & b::PERF_RECORD_MISC_CPUMODE_MASK == b::PERF_RECORD_MISC_KERNEL;
        // Only the leading fields are used, so the sample_id trailer layout is irrelevant.
        let Ok(record) = parse_record(record_type, misc, body, &SampleFormat::default()) else {
            return false;
        };
        match record {
            Record::Mmap(mmap) => {
                if !kernel_mapping {
                    self.threads.mmap(mmap.pid as i32, mmap.tid as i32);
                }
                let filename = String::from_utf8_lossy(mmap.filename);
                self.symbolizer
                    .add_mapping(mmap.pid, mmap.addr, mmap.len, mmap.pgoff, &filename, None);
                true
            }
            Record::Mmap2(mmap) => {
                if !kernel_mapping {
                    self.threads.mmap(mmap.pid as i32, mmap.tid as i32);
                }
                let filename = String::from_utf8_lossy(mmap.filename);
                let build_id = match mmap.file_id {
                    Mmap2FileId::BuildId(id) => Some(id),
                    Mmap2FileId::Inode { .. } => None,
                };
                self.symbolizer.add_mapping(
                    mmap.pid, mmap.addr, mmap.len, mmap.pgoff, &filename, build_id,
                );
                true
            }
            Record::Comm(comm) => {
                if comm.exec {
                    self.symbolizer.exec(comm.pid);
                }
                self.threads.set_comm(
                    comm.pid as i32,
                    comm.tid as i32,
                    &String::from_utf8_lossy(comm.comm),
                );
                true
            }
            Record::Fork(task) => {
                // A FORK perf synthesized for a task found running (its own misc bit,
                // PERF_RECORD_MISC_FORK_EXEC) shares no mappings with its parent: the
                // task's own MMAP records follow (machine__process_fork_event).
                let synthesized = misc & PERF_RECORD_MISC_FORK_EXEC != 0;
                if task.pid != task.ppid && !synthesized {
                    self.symbolizer.fork(task.ppid, task.pid);
                }
                self.threads.fork(
                    task.pid as i32,
                    task.ppid as i32,
                    task.tid as i32,
                    task.ptid as i32,
                );
                true
            }
            Record::Exit(task) => {
                self.threads.exit(task.tid as i32);
                true
            }
            _ => false,
        }
    }

    /// The command name perf shows for a sample of `pid`/`tid` at this point of the
    /// recording: `:TID` for a thread whose name is not known yet (or any more).
    pub fn comm(&mut self, pid: i32, tid: i32) -> &str {
        self.threads.comm(pid, tid)
    }

    /// The file and function `ip` of process `pid` is in (the function compiled out of
    /// line, as perf report names it).
    pub fn place(&mut self, pid: u32, ip: u64) -> Place {
        let symbolized = self.symbolizer.symbolize(pid, ip);
        Place {
            dso: symbolized.dso.to_string(),
            symbol: symbolized
                .frames
                .last()
                .and_then(|frame| frame.function.clone()),
            function_start: symbolized.function_start,
            file_offset: symbolized.file_offset,
        }
    }

    /// The symbolizer, for callers that look addresses up themselves.
    pub fn symbolizer(&mut self) -> &mut Symbolizer {
        &mut self.symbolizer
    }

    /// Prints each problem the symbolizer met once (missing files, build id
    /// mismatches, missing debug info, addresses outside every mapping) on stderr.
    pub fn report_problems(&self) {
        for problem in self.symbolizer.problems() {
            eprintln!("rvperf: warning: {problem}");
        }
    }
}

/// Whether the recording was made on this machine, running this kernel.
fn recorded_here(reader: &PerfDataReader<'_>) -> bool {
    let read = |path: &str| {
        std::fs::read_to_string(path)
            .map(|text| text.trim().to_owned())
            .ok()
    };
    let info = reader.info();
    info.hostname.is_some()
        && info.hostname == read("/proc/sys/kernel/hostname")
        && info.os_release == read("/proc/sys/kernel/osrelease")
}

/// The size of `path`, for progress display (0 when unknown).
pub fn file_size(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |metadata| metadata.len())
}

/// Opens a perf.data file, naming it in errors; `-` reads a stream from standard input
/// (`perf record -o - | rvperf script -i -`).
pub fn open(path: &Path) -> Result<PerfDataReader<'static>> {
    if path == Path::new("-") {
        let mut data = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin().lock(), &mut data)
            .context("cannot read perf.data from standard input")?;
        return PerfDataReader::from_vec(data, "<stdin>")
            .context("cannot read perf.data from standard input");
    }
    PerfDataReader::open(path).with_context(|| format!("cannot read {}", path.display()))
}

/// Walks every record in time order, as perf script does: side-band records (MMAP,
/// COMM, FORK, EXIT) update `processes` and samples go to `visit`, interleaved by their
/// timestamps. The file's order is not time order: each CPU's buffer is written in
/// turn, so a child's FORK can come after its exec and mmaps, and a sample can come
/// before the mmap it falls in. Records are sorted with perf's ordered-events rules
/// (`tools/perf/util/ordered-events.c`): at each FINISHED_ROUND record, every queued
/// record not newer than the newest time seen before the previous round marker is
/// delivered, oldest first and in file order among equal times, so memory holds about
/// two rounds of records, not the file. A record without a time (no sample_id_all, or
/// time 0 as on the records perf synthesizes from /proc at the start) is not queued
/// but delivered at once, as perf delivers it. As in perf, records wait unparsed and a
/// sample is parsed when it is delivered.
pub fn for_each_sample<'a>(
    reader: &'a PerfDataReader<'_>,
    file_size: u64,
    processes: &mut Processes,
    mut visit: impl FnMut(&mut Processes, &SampleEvent<'a>) -> Result<()>,
) -> Result<u64> {
    let mut records = reader.records();
    let mut samples = 0;
    let mut queue = OrderedEvents::default();
    let mut deliver = |processes: &mut Processes, event: TimedEvent<'a>| -> Result<()> {
        match event {
            TimedEvent::Record(record) if record.record_type == SAMPLE => {
                let sample = reader.parse_sample(&record)?;
                visit(processes, &weighed(reader, record.attr_index, sample))
            }
            TimedEvent::Record(record) => {
                processes.observe(record.record_type, record.misc, record.body);
                Ok(())
            }
            TimedEvent::Ctr(ctr) => {
                // The SAMPLE `rvperf record` converts the record into, as read back.
                let sample = Sample {
                    id: None,
                    ..perf_data::ctr::ctr_sample(&ctr, 0)
                };
                visit(processes, &weighed(reader, Some(0), sample))
            }
        }
    };
    let mut progress = Progress::new(file_size);
    let mut aux = AuxDecoding::default();
    while let Some(record) = records.next_record()? {
        progress.at(record.offset);
        match record.record_type {
            AUXTRACE_INFO => aux.info(&record),
            AUXTRACE => {
                for ctr in aux.records(&record)? {
                    samples += 1;
                    let time = Some(ctr.header.time);
                    if let Some(event) = queue.queue(time, TimedEvent::Ctr(ctr)) {
                        deliver(processes, event)?;
                    }
                }
            }
            SAMPLE => {
                samples += 1;
                let time = reader.record_time(&record);
                if let Some(event) = queue.queue(time, TimedEvent::Record(record)) {
                    deliver(processes, event)?;
                }
            }
            FINISHED_ROUND => {
                for event in queue.finish_round() {
                    deliver(processes, event)?;
                }
            }
            record_type if Processes::is_side_band(record_type) => {
                let time = reader.record_time(&record);
                if let Some(event) = queue.queue(time, TimedEvent::Record(record)) {
                    deliver(processes, event)?;
                }
            }
            _ => {}
        }
    }
    for event in queue.finish() {
        deliver(processes, event)?;
    }
    progress.done();
    aux.report_undecoded();
    Ok(samples)
}

/// A sample of event `attr_index` with the weight perf gives it.
fn weighed<'a>(
    reader: &PerfDataReader<'_>,
    attr_index: Option<usize>,
    sample: Sample<'a>,
) -> SampleEvent<'a> {
    let attr = attr_index.and_then(|index| reader.attrs().get(index));
    let period = attr.map_or(sample.period.unwrap_or(0), |attr| {
        sample.period_or_attr(&attr.attr)
    });
    SampleEvent {
        attr_index,
        period,
        sample,
    }
}

/// perf's ordered-events queue: records wait here, sorted by time, until a round
/// marker says no older record can still come. (Also how `rvperf inject` orders
/// what it writes.)
pub(crate) struct OrderedEvents<T> {
    pending: Vec<Timed<T>>,
    /// Queued so far, to keep file order among records of one time.
    sequence: u64,
    /// The newest time queued.
    newest: u64,
    /// What the next FINISHED_ROUND delivers up to: the newest time seen before
    /// the previous one.
    next_flush: u64,
}

impl<T> Default for OrderedEvents<T> {
    fn default() -> Self {
        Self {
            pending: Vec::new(),
            sequence: 0,
            newest: 0,
            next_flush: 0,
        }
    }
}

impl<T> OrderedEvents<T> {
    /// Queues `event`, or hands it back to be delivered at once when it has no
    /// time (`None`, 0 or all ones: `ordered_events__queue` refuses those).
    pub(crate) fn queue(&mut self, time: Option<u64>, event: T) -> Option<T> {
        let time = match time {
            Some(time) if time != 0 && time != u64::MAX => time,
            _ => return Some(event),
        };
        self.newest = self.newest.max(time);
        self.sequence += 1;
        self.pending.push(Timed {
            time,
            sequence: self.sequence,
            event,
        });
        None
    }

    /// A FINISHED_ROUND record: the records up to the limit the previous round
    /// set, oldest first.
    pub(crate) fn finish_round(&mut self) -> impl Iterator<Item = T> + '_ {
        let limit = self.next_flush;
        self.next_flush = self.newest;
        self.flush(limit)
    }

    /// The end of the file: everything left, oldest first.
    pub(crate) fn finish(&mut self) -> impl Iterator<Item = T> + '_ {
        self.flush(u64::MAX)
    }

    fn flush(&mut self, limit: u64) -> impl Iterator<Item = T> + '_ {
        // Sorting what is mostly sorted already is close to linear.
        self.pending
            .sort_by_key(|timed| (timed.time, timed.sequence));
        let ready = self.pending.partition_point(|timed| timed.time <= limit);
        self.pending.drain(..ready).map(|timed| timed.event)
    }
}

/// A record waiting for its turn in time order; `sequence` keeps file order among
/// records of one time.
struct Timed<T> {
    time: u64,
    sequence: u64,
    event: T,
}

/// What waits in the ordered-events queue: small, and parsed when delivered.
enum TimedEvent<'a> {
    /// A SAMPLE or side-band record of the file.
    Record(RawRecord<'a>),
    /// An rvperf_ctr record of AUX data, delivered as the sample it converts to.
    Ctr(CtrRecord<'a>),
}

/// AUX data kept in the file as PERF_RECORD_AUXTRACE, decoded into samples: rvperf_ctr
/// records (`rvperf record --keep-aux`). Other trace types are counted and reported.
#[derive(Default)]
struct AuxDecoding {
    /// The AUXTRACE_INFO type, once seen.
    auxtrace_type: Option<u32>,
    undecoded_chunks: u64,
    undecoded_bytes: u64,
}

impl AuxDecoding {
    fn info(&mut self, record: &RawRecord<'_>) {
        self.auxtrace_type = record
            .body
            .get(..4)
            .map(|word| u32::from_le_bytes([word[0], word[1], word[2], word[3]]));
    }

    /// The rvperf_ctr records of one AUXTRACE chunk (none for other trace types).
    fn records<'a>(&mut self, record: &RawRecord<'a>) -> Result<Vec<CtrRecord<'a>>> {
        if self.auxtrace_type != Some(RVPERF_AUXTRACE_CTR) {
            self.undecoded_chunks += 1;
            self.undecoded_bytes += record.aux_data.len() as u64;
            return Ok(Vec::new());
        }
        let data_at = record.offset + AUXTRACE_RECORD_SIZE;
        let mut records = CtrRecords::new(record.aux_data);
        let mut decoded = Vec::new();
        while let Some(ctr) = records
            .next_record()
            .with_context(|| format!("rvperf_ctr AUXTRACE data at file offset {data_at:#x}"))?
        {
            decoded.push(ctr);
        }
        Ok(decoded)
    }

    fn report_undecoded(&self) {
        if self.undecoded_chunks > 0 {
            let kind = self
                .auxtrace_type
                .map_or("without AUXTRACE_INFO".to_owned(), |t| {
                    format!("of type {t}")
                });
            eprintln!(
                "rvperf: {} AUXTRACE chunks ({} bytes) {kind} not decoded: rvperf decodes \
                 the AUX data of rvperf_ctr only",
                self.undecoded_chunks, self.undecoded_bytes
            );
        }
    }
}

/// A percentage on stderr while a large file is read, when stderr is a terminal.
struct Progress {
    total: u64,
    shown: u64,
    enabled: bool,
}

impl Progress {
    /// Files smaller than this read in well under a second.
    const WORTH_SHOWING: u64 = 64 << 20;

    fn new(total: u64) -> Self {
        use std::io::IsTerminal;
        let enabled = total >= Self::WORTH_SHOWING && std::io::stderr().is_terminal();
        Self {
            total,
            shown: 0,
            enabled,
        }
    }

    #[inline]
    fn at(&mut self, offset: u64) {
        if !self.enabled {
            return;
        }
        let percent = offset.saturating_mul(100) / self.total.max(1);
        if percent > self.shown {
            self.shown = percent;
            eprint!("\rrvperf: reading {percent:3}%");
        }
    }

    fn done(&self) {
        if self.enabled {
            eprint!("\r{:20}\r", "");
        }
    }
}

/// perf's mark on the FORK records it synthesizes for running tasks (`util/event.h`;
/// the bit COMM records use for exec).
const PERF_RECORD_MISC_FORK_EXEC: u16 = 1 << 13;

const SAMPLE: u32 = perf_abi::sys::bindings::PERF_RECORD_SAMPLE;
/// Record types of the perf tool (not the kernel).
const FINISHED_ROUND: u32 = perf_data::PERF_RECORD_FINISHED_ROUND;
const AUXTRACE_INFO: u32 = perf_data::PERF_RECORD_AUXTRACE_INFO;
const AUXTRACE: u32 = perf_data::PERF_RECORD_AUXTRACE;

#[cfg(test)]
mod tests {
    use perf_data::RawRecord;

    use super::{OrderedEvents, TimedEvent};

    /// A side-band event told apart by its record type.
    fn event(tag: u32) -> TimedEvent<'static> {
        TimedEvent::Record(RawRecord {
            attr_index: Some(0),
            record_type: tag,
            misc: 0,
            body: &[],
            aux_data: &[],
            offset: 0,
        })
    }

    fn tags<'a>(events: impl Iterator<Item = TimedEvent<'a>>) -> Vec<u32> {
        events
            .map(|event| match event {
                TimedEvent::Record(record) => record.record_type,
                TimedEvent::Ctr(..) => u32::MAX,
            })
            .collect()
    }

    #[test]
    fn records_come_out_a_round_late_in_time_order_and_timeless_ones_at_once() {
        let mut queue = OrderedEvents::default();
        assert!(queue.queue(Some(10), event(1)).is_none());
        assert!(queue.queue(Some(5), event(2)).is_none());
        // No time, time 0 (perf's synthesized records) and all ones: not queued.
        for time in [None, Some(0), Some(u64::MAX)] {
            assert!(matches!(
                queue.queue(time, event(3)),
                Some(TimedEvent::Record(RawRecord { record_type: 3, .. }))
            ));
        }
        // The first round delivers nothing: it only sets the limit of the next.
        assert_eq!(tags(queue.finish_round()), Vec::<u32>::new());
        assert!(queue.queue(Some(7), event(4)).is_none());
        assert!(queue.queue(Some(12), event(5)).is_none());
        // Equal times keep their file order.
        assert!(queue.queue(Some(7), event(6)).is_none());
        assert_eq!(tags(queue.finish_round()), [2, 4, 6, 1]);
        assert_eq!(tags(queue.finish()), [5]);
    }
}
