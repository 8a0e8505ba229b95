//! The recorded processes as perf builds them from the side band, in time order: each
//! process's address space (the symbolizer's, with perf's fork and exec rules) and
//! the threads with their command names.

use std::path::PathBuf;

use perf_abi::sys::bindings as abi;
use perf_abi::{parse_record, Mmap2FileId, Record, SampleFormat};
use perf_data::{ExitedThreads, PerfDataReader, Threads};
use symbolize::{MappedFile, Problem, RecordedFile, Symbolizer, SymbolizerOptions};

/// Process address spaces (in the symbolizer) and threads with their command names.
#[derive(Debug)]
pub struct Processes {
    threads: Threads,
    symbolizer: Symbolizer,
}

/// Where a sample's instruction pointer lands.
#[derive(Debug, Clone)]
pub struct Place {
    pub dso: String,
    pub symbol: Option<String>,
    /// Where that function starts: functions of one name (static functions of
    /// several files) are told apart by it, as in perf report.
    pub function_start: Option<u64>,
    /// The offset in the mapped file, for an address in a file mapping.
    pub file_offset: Option<u64>,
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
    pub inlines: InlineFrames,
}

/// Whether inlined functions are frames of their own.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum InlineFrames {
    /// Functions from symbol tables only: fast.
    #[default]
    Outermost,
    /// Inline stacks and lines from DWARF.
    Shown,
}

/// A pid or tid as perf keeps it (`pid_t`): -1 when the sample has none.
pub fn thread_id(id: Option<u32>) -> i32 {
    // The kernel writes pid_t values into u32 fields: -1 is u32::MAX.
    id.map_or(-1, |id| i32::from_ne_bytes(id.to_ne_bytes()))
}

/// perf's mark on the FORK records it synthesizes for running tasks (`util/event.h`;
/// the bit COMM records use for exec).
const PERF_RECORD_MISC_FORK_EXEC: u16 = 1 << 13;

impl Processes {
    /// Processes whose files are looked up with `options` (nothing is read before a
    /// symbol is asked for).
    pub fn new(options: SymbolOptions) -> Self {
        let defaults = SymbolizerOptions::default();
        Self {
            threads: Threads::new(),
            symbolizer: Symbolizer::new(SymbolizerOptions {
                symfs: options.symfs,
                kallsyms: options.kallsyms,
                vmlinux: options.vmlinux,
                inlines: options.inlines == InlineFrames::Shown,
                ..defaults
            }),
        }
    }

    /// Symbolization for `reader`'s recording: files under `symfs` when given, kernel
    /// symbols from `kallsyms`, else from perf's build-id cache copy for the recorded
    /// kernel, else from this machine's /proc/kallsyms when the recording was made here
    /// (same host name and kernel release, as perf assumes). The kernel's symbols are
    /// read on another thread meanwhile.
    pub fn for_recording(reader: &PerfDataReader<'_>, options: SymbolOptions) -> Self {
        let mut options = options;
        if options.kallsyms.is_none() {
            // As perf report: the copy perf record cached for the recorded kernel's
            // build id, else this machine's own when the recording was made here.
            let kernel_build_id = reader
                .info()
                .build_ids
                .iter()
                .find(|entry| entry.filename == symbolize::KERNEL_DSO)
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
        // The build ids the recording lists for its files (HEADER_BUILD_ID): a file
        // found with another build id is the wrong file, and is not used.
        processes.symbolizer.add_build_ids(
            reader
                .info()
                .build_ids
                .iter()
                .map(|entry| (entry.filename.clone(), entry.build_id.clone())),
        );
        processes.symbolizer.preload_kernel();
        processes
    }

    /// Threads keep their names after their EXIT, as in `perf report` (perf script
    /// forgets them: a later sample of the thread shows `:TID`).
    pub fn keep_exited_threads(&mut self) {
        self.threads.set_exited(ExitedThreads::Keep);
    }

    /// Whether [`observe`](Self::observe) uses records of this type, which must then
    /// be applied in time order with the samples.
    pub fn is_side_band(record_type: u32) -> bool {
        matches!(
            record_type,
            abi::PERF_RECORD_MMAP
                | abi::PERF_RECORD_MMAP2
                | abi::PERF_RECORD_COMM
                | abi::PERF_RECORD_FORK
                | abi::PERF_RECORD_EXIT
        )
    }

    /// Applies a side-band record (MMAP, MMAP2, COMM, FORK, EXIT; others, and records
    /// too short for their leading fields, are ignored).
    pub fn observe(&mut self, record_type: u32, misc: u16, body: &[u8]) {
        // perf looks up (creates) the thread of a user-space mapping, not of the
        // kernel's own.
        let kernel_mapping =
            u32::from(misc) & abi::PERF_RECORD_MISC_CPUMODE_MASK == abi::PERF_RECORD_MISC_KERNEL;
        // Only the leading fields are used, so the sample_id trailer layout is irrelevant.
        let Ok(record) = parse_record(record_type, misc, body, &SampleFormat::default()) else {
            return;
        };
        match record {
            Record::Mmap(mmap) => {
                if !kernel_mapping {
                    self.threads
                        .mmap(thread_id(Some(mmap.pid)), thread_id(Some(mmap.tid)));
                }
                let filename = String::from_utf8_lossy(mmap.filename);
                self.symbolizer
                    .add_mapping(mmap.pid, mmap.addr, mmap.len, mmap.pgoff, &filename, None);
            }
            Record::Mmap2(mmap) => {
                if !kernel_mapping {
                    self.threads
                        .mmap(thread_id(Some(mmap.pid)), thread_id(Some(mmap.tid)));
                }
                let filename = String::from_utf8_lossy(mmap.filename);
                let build_id = match mmap.file_id {
                    Mmap2FileId::BuildId(id) => Some(id),
                    Mmap2FileId::Inode { .. } => None,
                };
                self.symbolizer.add_mapping(
                    mmap.pid, mmap.addr, mmap.len, mmap.pgoff, &filename, build_id,
                );
            }
            Record::Comm(comm) => {
                if comm.exec {
                    self.symbolizer.exec(comm.pid);
                }
                self.threads.set_comm(
                    thread_id(Some(comm.pid)),
                    thread_id(Some(comm.tid)),
                    &String::from_utf8_lossy(comm.comm),
                );
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
                    thread_id(Some(task.pid)),
                    thread_id(Some(task.ppid)),
                    thread_id(Some(task.tid)),
                    thread_id(Some(task.ptid)),
                );
            }
            Record::Exit(task) => self.threads.exit(thread_id(Some(task.tid))),
            _ => {}
        }
    }

    /// Forgets an ended process's mappings, once nothing more of it is to be named.
    pub fn forget_process(&mut self, pid: u32) {
        self.symbolizer.remove_process(pid);
    }

    /// Names thread `tid` of process `pid` (a process found running, from /proc).
    pub fn name_thread(&mut self, pid: i32, tid: i32, comm: &str) {
        self.threads.set_comm(pid, tid, comm);
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

    /// Which file, file offset and build id `address` of process `pid` is in, as the
    /// address space is now (at the time of the sample being delivered); nothing is
    /// read from disk.
    pub fn mapped_file(&self, pid: u32, address: u64) -> Option<MappedFile<'_>> {
        self.symbolizer.mapped_file(pid, address)
    }

    /// Every file mapped so far, in the order first mapped.
    pub fn recorded_files(&self) -> impl Iterator<Item = RecordedFile<'_>> {
        self.symbolizer.recorded_files()
    }

    /// The symbolizer, for callers that look addresses up themselves.
    pub fn symbolizer(&mut self) -> &mut Symbolizer {
        &mut self.symbolizer
    }

    /// The problems the symbolizer met, once each (missing files, build id
    /// mismatches, missing debug info, addresses outside every mapping).
    pub fn problems(&self) -> Vec<Problem> {
        self.symbolizer.problems()
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
