//! Reading perf.data for `script` and `report`: samples with their process, command
//! name and symbol, whichever tool wrote the file.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use code_image::ElfSymbols;
use perf_abi::ctr::{CtrRecords, RVPERF_AUXTRACE_CTR};
use perf_abi::{parse_record, Record, SampleFormat};
use perf_data::{
    BranchEntry, BranchStack, PerfDataReader, RawRecord, Sample, AUXTRACE_RECORD_SIZE,
};

/// A mapping of a file into a process.
#[derive(Clone, Debug)]
struct Mapping {
    end: u64,
    file_offset: u64,
    filename: String,
}

/// Process address spaces and command names, built from the side-band records in file
/// order, and the symbols of the files they map (loaded once each, on first use).
#[derive(Default)]
pub struct Processes {
    maps: HashMap<u32, BTreeMap<u64, Mapping>>,
    comms: HashMap<u32, String>,
    files: HashMap<String, Option<ElfSymbols>>,
    symfs: Option<PathBuf>,
}

/// Where a sample's instruction pointer lands.
pub struct Place {
    pub dso: String,
    pub symbol: Option<String>,
}

impl Processes {
    /// Files named by the recording are looked up under `symfs` when given (perf's
    /// `--symfs`): a recording made on another machine, such as the riscv64 guest, is
    /// read on the host against a copy of that machine's files.
    pub fn new(symfs: Option<PathBuf>) -> Self {
        Self {
            symfs,
            ..Self::default()
        }
    }

    /// Applies a side-band record; returns true if it was one.
    pub fn observe(&mut self, record_type: u32, misc: u16, body: &[u8]) -> bool {
        // Only the leading fields are used, so the sample_id trailer layout is irrelevant.
        let Ok(record) = parse_record(record_type, misc, body, &SampleFormat::default()) else {
            return false;
        };
        match record {
            Record::Mmap(mmap) => {
                self.map(mmap.pid, mmap.addr, mmap.len, mmap.pgoff, mmap.filename);
                true
            }
            Record::Mmap2(mmap) => {
                self.map(mmap.pid, mmap.addr, mmap.len, mmap.pgoff, mmap.filename);
                true
            }
            Record::Comm(comm) => {
                self.comms
                    .insert(comm.tid, String::from_utf8_lossy(comm.comm).into_owned());
                true
            }
            Record::Fork(task) => {
                if let Some(parent) = self.maps.get(&task.ppid).cloned() {
                    self.maps.entry(task.pid).or_insert(parent);
                }
                if let Some(comm) = self.comms.get(&task.ptid).cloned() {
                    self.comms.entry(task.tid).or_insert(comm);
                }
                true
            }
            _ => false,
        }
    }

    fn map(&mut self, pid: u32, start: u64, length: u64, file_offset: u64, filename: &[u8]) {
        let filename = String::from_utf8_lossy(filename).into_owned();
        let end = start.saturating_add(length);
        self.maps.entry(pid).or_default().insert(
            start,
            Mapping {
                end,
                file_offset,
                filename,
            },
        );
    }

    pub fn comm(&self, tid: u32) -> &str {
        self.comms.get(&tid).map_or(":unknown", String::as_str)
    }

    /// The file and function `ip` of process `pid` is in.
    pub fn place(&mut self, pid: u32, ip: u64) -> Place {
        let mapping = self
            .maps
            .get(&pid)
            .and_then(|maps| maps.range(..=ip).next_back())
            .filter(|(_, mapping)| ip < mapping.end)
            .map(|(&start, mapping)| (start, mapping.clone()));
        let Some((start, mapping)) = mapping else {
            let dso = if ip >= 0xffff_0000_0000_0000 {
                "[kernel.kallsyms]"
            } else {
                "[unknown]"
            };
            return Place {
                dso: dso.to_owned(),
                symbol: None,
            };
        };
        let short = Path::new(&mapping.filename)
            .file_name()
            .map_or(mapping.filename.clone(), |name| {
                name.to_string_lossy().into_owned()
            });
        let symfs = self.symfs.as_deref();
        let elf = self
            .files
            .entry(mapping.filename.clone())
            .or_insert_with(|| {
                let path = match symfs {
                    Some(root) => root.join(mapping.filename.trim_start_matches('/')),
                    None => PathBuf::from(&mapping.filename),
                };
                std::fs::read(path)
                    .ok()
                    .and_then(|bytes| code_image::load_symbols(&mapping.filename, &bytes).ok())
            });
        let symbol = elf.as_ref().and_then(|elf| {
            let vaddr = elf.vaddr_of_offset(mapping.file_offset + (ip - start))?;
            elf.symbols
                .lookup(vaddr)
                .map(|(symbol, _)| symbol.name.clone())
        });
        Place { dso: short, symbol }
    }
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

/// Walks every record: side-band records update `processes` as they come; samples go
/// to `visit` in time order, as perf script shows them. Samples are sorted with perf's
/// round rule: at each FINISHED_ROUND record, every buffered sample not newer than the
/// newest time seen before the previous round marker is final, so memory holds about
/// two rounds of samples, not the file.
pub fn for_each_sample(
    reader: &PerfDataReader<'_>,
    file_size: u64,
    processes: &mut Processes,
    mut visit: impl FnMut(&mut Processes, Option<usize>, &Sample) -> Result<()>,
) -> Result<u64> {
    let mut records = reader.records();
    let mut samples = 0;
    let mut pending: Vec<(u64, u64, Option<usize>, Sample)> = Vec::new();
    let mut newest = 0u64;
    let mut flushable_up_to = 0u64;
    let mut flush = |pending: &mut Vec<(u64, u64, Option<usize>, Sample)>,
                     limit: u64,
                     processes: &mut Processes|
     -> Result<()> {
        pending.sort_by_key(|(time, sequence, _, _)| (*time, *sequence));
        let ready = pending.partition_point(|(time, _, _, _)| *time <= limit);
        for (_, _, attr, sample) in pending.drain(..ready) {
            visit(processes, attr, &sample)?;
        }
        Ok(())
    };
    let mut progress = Progress::new(file_size);
    let mut aux = AuxDecoding::default();
    while let Some(record) = records.next_record()? {
        progress.at(record.offset);
        match record.record_type {
            AUXTRACE_INFO => aux.info(&record),
            AUXTRACE => {
                for sample in aux.samples(&record)? {
                    let time = sample.time.unwrap_or(0);
                    newest = newest.max(time);
                    pending.push((time, samples, Some(0), sample));
                    samples += 1;
                }
            }
            perf_abi::sys::bindings::PERF_RECORD_SAMPLE => {
                let sample = reader.parse_sample(&record)?;
                let time = sample.time.unwrap_or(0);
                newest = newest.max(time);
                pending.push((time, samples, record.attr_index, sample));
                samples += 1;
            }
            FINISHED_ROUND => {
                flush(&mut pending, flushable_up_to, processes)?;
                flushable_up_to = newest;
            }
            _ => {
                processes.observe(record.record_type, record.misc, record.body);
            }
        }
    }
    flush(&mut pending, u64::MAX, processes)?;
    progress.done();
    aux.report_undecoded();
    Ok(samples)
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

    fn samples(&mut self, record: &RawRecord<'_>) -> Result<Vec<Sample>> {
        if self.auxtrace_type != Some(RVPERF_AUXTRACE_CTR) {
            self.undecoded_chunks += 1;
            self.undecoded_bytes += record.aux_data.len() as u64;
            return Ok(Vec::new());
        }
        let data_at = record.offset + AUXTRACE_RECORD_SIZE;
        let mut records = CtrRecords::new(record.aux_data);
        let mut samples = Vec::new();
        while let Some(ctr) = records
            .next_record()
            .with_context(|| format!("rvperf_ctr AUXTRACE data at file offset {data_at:#x}"))?
        {
            samples.push(Sample {
                ip: Some(ctr.header.ip),
                pid: Some(ctr.header.pid as i32),
                tid: Some(ctr.header.tid as i32),
                time: Some(ctr.header.time),
                cpu: Some(ctr.header.cpu),
                period: Some(ctr.header.period),
                id: None,
                callchain: Vec::new(),
                branch_stack: Some(BranchStack {
                    hw_idx: None,
                    entries: ctr
                        .branches()
                        .map(|branch| BranchEntry {
                            from: branch.from,
                            to: branch.to,
                            flags: branch.flags_word,
                        })
                        .collect(),
                }),
            });
        }
        Ok(samples)
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

/// Record types of the perf tool (not the kernel).
const FINISHED_ROUND: u32 = perf_data::PERF_RECORD_FINISHED_ROUND;
const AUXTRACE_INFO: u32 = perf_data::PERF_RECORD_AUXTRACE_INFO;
const AUXTRACE: u32 = perf_data::PERF_RECORD_AUXTRACE;
