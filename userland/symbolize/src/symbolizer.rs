//! The I/O and caching layer: process address spaces from perf records,
//! files found on disk, the kernel, a cache per (file, address), and the
//! problems seen on the way.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use rustc_hash::FxHashMap;

use crate::address_space::{AddressSpace, Mapping};
use crate::locate::{binary_candidates, debug_candidates, supplementary_candidates};
use crate::{Frame, FunctionEntry, KallsymsParser, KernelSymbols, ObjectSymbolizer, Problem};

/// Where the [`Symbolizer`] looks for files and what it produces.
#[derive(Debug, Clone)]
pub struct SymbolizerOptions {
    /// Root under which recorded paths are looked up (perf's `--symfs`),
    /// for recordings made on another machine. When set, the recorded paths
    /// themselves are not tried.
    pub symfs: Option<PathBuf>,
    /// A kallsyms file (such as a copy of `/proc/kallsyms` taken on the
    /// recording machine) for kernel addresses. Without it or `vmlinux`,
    /// kernel addresses are not symbolized.
    pub kallsyms: Option<PathBuf>,
    /// An uncompressed kernel image with symbols (and ideally DWARF), for
    /// kernel lines and inline frames.
    pub vmlinux: Option<PathBuf>,
    /// perf build-id caches: `<dir>/.build-id/<xx>/<rest>/elf`. Default
    /// `~/.debug`.
    pub build_id_dirs: Vec<PathBuf>,
    /// Separate debug file trees: `<dir>/.build-id/<xx>/<rest>.debug` and
    /// `<dir>/<recorded directory>/<debuglink>`. Default `/usr/lib/debug`.
    pub debug_dirs: Vec<PathBuf>,
    /// Whole inline stacks with lines (the default); `false` gives only the
    /// outermost function from the symbol table, which is faster.
    pub inlines: bool,
}

impl Default for SymbolizerOptions {
    fn default() -> Self {
        let home_cache = std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".debug"));
        SymbolizerOptions {
            symfs: None,
            kallsyms: None,
            vmlinux: None,
            build_id_dirs: home_cache.into_iter().collect(),
            debug_dirs: vec![PathBuf::from("/usr/lib/debug")],
            inlines: true,
        }
    }
}

/// A place in a mapped file: which file (of this symbolizer) and the offset
/// in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileLocation {
    file: usize,
    offset: u64,
}

/// A file of the recording as its MMAP/MMAP2 records named it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordedFile<'a> {
    /// The path as recorded.
    pub recorded: &'a str,
    /// The build id the MMAP2 record carried.
    pub build_id: Option<&'a [u8]>,
}

/// Where an address of a process is in the file mapped there
/// ([`Symbolizer::mapped_file`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MappedFile<'a> {
    /// The symbolizer's number for the file (its path and build id): equal for every
    /// mapping of the file, so callers can keep answers per file.
    pub index: usize,
    /// The path as recorded.
    pub recorded: &'a str,
    /// The build id the MMAP2 record carried.
    pub build_id: Option<&'a [u8]>,
    /// The offset of the address in the file.
    pub file_offset: u64,
    /// The mapping the address is in: its first address, one past its last, and the
    /// file offset mapped at its start (what a pprof mapping says).
    pub mapping_start: u64,
    pub mapping_end: u64,
    pub mapping_file_offset: u64,
}

/// What an address is.
#[derive(Debug, Clone)]
pub struct Symbolized {
    /// Short name of the file (`libc.so.6`), `[kernel.kallsyms]`, a kernel
    /// module as `[name]`, or `[unknown]`.
    pub dso: Rc<str>,
    /// The file that was read for it, when one was.
    pub dso_path: Option<Rc<Path>>,
    /// The link-time address inside the file.
    pub vaddr: Option<u64>,
    /// The offset in the mapped file, for an address in a file mapping (what perf
    /// prints for an address without a symbol there).
    pub file_offset: Option<u64>,
    /// Where the function symbol containing the address starts (link-time, or
    /// run-time for kallsyms): it tells apart functions of one name, as perf's
    /// reports do.
    pub function_start: Option<u64>,
    /// The inline stack, innermost first; empty when no function is known.
    pub frames: Rc<[Frame]>,
}

/// The path a kernel frame names as its source when the running kernel named its
/// function ([`Symbolizer::add_kernel_function`]), not a file.
const KERNEL_NAMED_BY_KERNEL: &str = "[the running kernel]";

/// perf's name of the kernel, as a DSO and at the start of the kernel's mapping's
/// name (`[kernel.kallsyms]_text`: the symbol whose run-time address is its pgoff).
pub const KERNEL_DSO: &str = "[kernel.kallsyms]";

/// The symbol perf places the kernel by (`ref_reloc_sym`): its kernel mapping is
/// `[kernel.kallsyms]_text`, with `_text`'s run-time address.
pub const KERNEL_TEXT_SYMBOL: &str = "_text";
const UNKNOWN_DSO: &str = "[unknown]";

/// Lowest kernel address on 64-bit Linux (the upper half on every
/// architecture rvperf records: x86-64, AArch64, RISC-V Sv39/48/57). Exported
/// profiles start the kernel's pseudo-mapping here.
pub const KERNEL_START: u64 = 0xffff_0000_0000_0000;

/// Whether `address` is in the kernel's half of a 64-bit address space, which the
/// symbolizer names from kallsyms or vmlinux, never from a process's mappings.
pub fn is_kernel_address(address: u64) -> bool {
    address >= KERNEL_START
}

/// Cache keys of the two kernel sources, beside the file indices.
const VMLINUX_KEY: usize = usize::MAX;
const KALLSYMS_KEY: usize = usize::MAX - 1;

#[derive(Debug)]
struct FileEntry {
    /// The path as recorded (MMAP2 filename).
    recorded: String,
    dso: Rc<str>,
    /// The build id the MMAP2 record carried.
    build_id: Option<Vec<u8>>,
    state: FileState,
    samples: u64,
    bad_debug_info: Option<BadDebugInfo>,
}

/// The first DWARF error of a file and how many addresses had one.
#[derive(Debug)]
struct BadDebugInfo {
    first_error: String,
    addresses: u64,
}

/// A kernel symbol and its address in the recorded kernel.
#[derive(Debug)]
struct RuntimeAnchor {
    symbol: String,
    address: u64,
}

#[derive(Debug)]
enum FileState {
    /// Not needed yet: files are read on their first sample.
    Pending,
    Ready {
        path: Rc<Path>,
        object: Box<ObjectSymbolizer>,
    },
    Unusable(Unusable),
}

#[derive(Debug)]
enum Unusable {
    /// Anonymous memory, `[heap]`, `[stack]`, JIT code: nothing to read.
    NotAFile,
    NotFound,
    Unreadable {
        path: PathBuf,
        reason: String,
    },
    Mismatch {
        path: PathBuf,
        expected: Vec<u8>,
        found: Vec<u8>,
    },
}

impl Unusable {
    /// The problem to report for a file recorded as `recorded`.
    fn problem(&self, recorded: &str, samples: u64) -> Option<Problem> {
        match self {
            Unusable::NotAFile => None,
            Unusable::NotFound => Some(Problem::FileNotFound {
                file: recorded.to_owned(),
                samples,
            }),
            Unusable::Unreadable { path, reason } => Some(Problem::Unreadable {
                file: path.clone(),
                reason: reason.clone(),
                samples,
            }),
            Unusable::Mismatch {
                path,
                expected,
                found,
            } => Some(Problem::BuildIdMismatch {
                file: path.clone(),
                expected: expected.clone(),
                found: found.clone(),
                samples,
            }),
        }
    }
}

#[derive(Debug, Default)]
struct Kernel {
    loaded: bool,
    /// kallsyms being read and parsed on another thread
    /// ([`Symbolizer::preload_kernel`]).
    kallsyms_loader: Option<std::thread::JoinHandle<Result<KernelSymbols, String>>>,
    kallsyms: Option<(Rc<Path>, KernelSymbols)>,
    vmlinux: Option<(Rc<Path>, ObjectSymbolizer)>,
    /// A kernel symbol and its address in the recorded kernel, from the
    /// `[kernel.kallsyms]_text` MMAP record: the KASLR offset to vmlinux.
    runtime_anchor: Option<RuntimeAnchor>,
    /// Files given in the options that could not be used.
    unusable: Vec<Unusable>,
    samples: u64,
    /// Samples at kernel addresses with no kernel symbols to look them up in.
    unresolved: u64,
    modules: HashMap<String, Rc<str>>,
    dso: Option<Rc<str>>,
}

/// Symbolizes the addresses of a recording: per-process address spaces
/// built from MMAP/MMAP2, FORK and COMM-exec records, the kernel from
/// kallsyms or vmlinux, and ELF files found by build id, `--symfs` root or
/// path. Files are read on their first sample; each (file, address) is
/// looked up once.
#[derive(Debug)]
pub struct Symbolizer {
    options: SymbolizerOptions,
    files: Vec<FileEntry>,
    /// The files recorded under each name (one a build id): looked up by the name
    /// without an owned key (a machine starting processes all the time maps the same few
    /// files over and over).
    file_indices: FxHashMap<String, Vec<usize>>,
    expected_build_ids: HashMap<String, Vec<u8>>,
    processes: FxHashMap<u32, AddressSpace>,
    kernel: Kernel,
    cache: FxHashMap<(usize, u64), Rc<[Frame]>>,
    /// Without inline frames (and for kallsyms, keyed `KALLSYMS_KEY`), a function's
    /// frame by (file, function start): the
    /// demangling of its name is done once per function, not per address in it.
    function_frames: FxHashMap<(usize, u64), Rc<[Frame]>>,
    no_frames: Rc<[Frame]>,
    unknown: Rc<str>,
    outside_mappings: u64,
    /// MMAP/MMAP2 records ignored because their file offsets pass the end of the
    /// 64-bit space.
    invalid_mappings: u64,
}

impl Symbolizer {
    pub fn new(options: SymbolizerOptions) -> Self {
        Symbolizer {
            options,
            files: Vec::new(),
            file_indices: FxHashMap::default(),
            expected_build_ids: HashMap::new(),
            processes: FxHashMap::default(),
            kernel: Kernel::default(),
            cache: FxHashMap::default(),
            function_frames: FxHashMap::default(),
            no_frames: Rc::from(Vec::new()),
            unknown: Rc::from(UNKNOWN_DSO),
            outside_mappings: 0,
            invalid_mappings: 0,
        }
    }

    /// A mapping of `filename` at `start..start + length` of process `pid`,
    /// from an MMAP or MMAP2 record (`build_id` when the record carries
    /// one). The kernel's own record (`[kernel.kallsyms]_text`) gives the
    /// address the kernel was loaded at.
    pub fn add_mapping(
        &mut self,
        pid: u32,
        start: u64,
        length: u64,
        file_offset: u64,
        filename: &str,
        build_id: Option<&[u8]>,
    ) {
        if let Some(symbol) = filename.strip_prefix(KERNEL_DSO) {
            // perf puts the run-time address of the named symbol in pgoff.
            if !symbol.is_empty() {
                self.kernel.runtime_anchor = Some(RuntimeAnchor {
                    symbol: symbol.to_owned(),
                    address: file_offset,
                });
            }
            return;
        }
        let known = self.file_indices.get(filename).and_then(|indices| {
            indices
                .iter()
                .copied()
                .find(|&index| self.files[index].build_id.as_deref() == build_id)
        });
        let file = match known {
            Some(index) => index,
            None => {
                let index = self.files.len();
                self.files.push(FileEntry {
                    recorded: filename.to_owned(),
                    dso: Rc::from(short_name(filename)),
                    build_id: build_id.map(<[u8]>::to_vec),
                    state: FileState::Pending,
                    samples: 0,
                    bad_debug_info: None,
                });
                self.file_indices
                    .entry(filename.to_owned())
                    .or_default()
                    .push(index);
                index
            }
        };
        match Mapping::new(start, length, file_offset, file) {
            Some(mapping) => self.processes.entry(pid).or_default().insert(mapping),
            None => self.invalid_mappings += 1,
        }
    }

    /// The build id each file had when recorded (perf.data's
    /// HEADER_BUILD_ID): files found with another build id are not used.
    pub fn add_build_ids(&mut self, entries: impl IntoIterator<Item = (String, Vec<u8>)>) {
        self.expected_build_ids.extend(entries);
    }

    /// `child_pid` starts with a copy of `parent_pid`'s mappings.
    pub fn fork(&mut self, parent_pid: u32, child_pid: u32) {
        if parent_pid == child_pid {
            return;
        }
        if let Some(space) = self.processes.get(&parent_pid).cloned() {
            self.processes.insert(child_pid, space);
        }
    }

    /// `pid` executed a new program: its old mappings are gone.
    pub fn exec(&mut self, pid: u32) {
        self.processes.remove(&pid);
    }

    /// Forgets process `pid`'s mappings (an ended process whose addresses will not be
    /// asked for again: a long-running profiler keeps only the living).
    pub fn remove_process(&mut self, pid: u32) {
        self.processes.remove(&pid);
    }

    /// What `address` of process `pid` is. Kernel addresses go to
    /// kallsyms/vmlinux; so do addresses in no user mapping when the kernel
    /// symbols know them.
    pub fn symbolize(&mut self, pid: u32, address: u64) -> Symbolized {
        match self.symbolize_mapped(pid, address) {
            Some(symbolized) => symbolized,
            None => self.symbolize_unmapped(address, 1),
        }
    }

    /// [`symbolize`](Self::symbolize) for an address in a mapping of
    /// process `pid` as the mappings are now; `None` for a kernel address
    /// or one in no mapping, which a caller may look up later with
    /// [`symbolize_unmapped`](Self::symbolize_unmapped) (the answer does not
    /// depend on the process or the time), for instance once the kernel
    /// symbols loading on another thread are ready.
    pub fn symbolize_mapped(&mut self, pid: u32, address: u64) -> Option<Symbolized> {
        let location = self.locate(pid, address)?;
        Some(self.symbolize_location(location))
    }

    /// The file and offset `address` of process `pid` maps, as the mappings
    /// are now; `None` where [`symbolize_mapped`](Self::symbolize_mapped)
    /// declines. Counts the address for [`problems`](Self::problems). The
    /// answer for a location never changes, so a caller that looks up many
    /// addresses may keep its own results per location and call
    /// [`symbolize_location`](Self::symbolize_location) once for each.
    pub fn locate(&mut self, pid: u32, address: u64) -> Option<FileLocation> {
        if is_kernel_address(address) {
            return None;
        }
        let mapping = *self.processes.get(&pid)?.find(address)?;
        // Inside the mapping, whose offsets `Mapping::new` checked.
        let offset = mapping.offset_of(address)?;
        self.files[mapping.file].samples += 1;
        Some(FileLocation {
            file: mapping.file,
            offset,
        })
    }

    /// The file `address` of process `pid` maps, as the mappings are now, named as
    /// its MMAP/MMAP2 record named it; nothing is read from disk and nothing counted
    /// (for callers with a file of their own, such as an AutoFDO profile's binary).
    pub fn mapped_file(&self, pid: u32, address: u64) -> Option<MappedFile<'_>> {
        let mapping = self.processes.get(&pid)?.find(address)?;
        let entry = &self.files[mapping.file];
        Some(MappedFile {
            index: mapping.file,
            recorded: &entry.recorded,
            build_id: entry.build_id.as_deref(),
            file_offset: mapping.offset_of(address)?,
            mapping_start: mapping.start,
            mapping_end: mapping.end,
            mapping_file_offset: mapping.file_offset,
        })
    }

    /// The build id file `index` ([`MappedFile::index`]) carries in its own notes, once
    /// it has been read for symbols: for files whose MMAP2 records carried none (MMAP
    /// records, or a kernel that could not read the note, as of files on 9p).
    pub fn file_build_id(&self, index: usize) -> Option<&[u8]> {
        match &self.files.get(index)?.state {
            FileState::Ready { object, .. } => object.build_id(),
            _ => None,
        }
    }

    /// Every file mapped so far, as recorded (path and the MMAP2 build id), in the
    /// order they were first mapped.
    pub fn recorded_files(&self) -> impl Iterator<Item = RecordedFile<'_>> {
        self.files.iter().map(|entry| RecordedFile {
            recorded: &entry.recorded,
            build_id: entry.build_id.as_deref(),
        })
    }

    /// What is at `location` (from [`locate`](Self::locate)).
    pub fn symbolize_location(&mut self, location: FileLocation) -> Symbolized {
        self.symbolize_in_file(location.file, location.offset)
    }

    /// What a kernel address, or an address in no user mapping, is; counted
    /// as `occurrences` sampled addresses in [`problems`](Self::problems).
    pub fn symbolize_unmapped(&mut self, address: u64, occurrences: u64) -> Symbolized {
        if is_kernel_address(address) || self.kernel_knows(address) {
            return self.symbolize_kernel(address, occurrences);
        }
        self.outside_mappings += occurrences;
        self.unknown_symbolized()
    }

    /// Problems seen so far, one per file and kind, with sample counts.
    pub fn problems(&self) -> Vec<Problem> {
        let mut problems = Vec::new();
        for entry in self.files.iter().filter(|entry| entry.samples > 0) {
            let samples = entry.samples;
            match &entry.state {
                FileState::Pending => {}
                FileState::Unusable(unusable) => {
                    problems.extend(unusable.problem(&entry.recorded, samples));
                }
                FileState::Ready { path, object } => {
                    // Only a problem when lines and inline frames were asked for.
                    if self.options.inlines && !object.has_debug_info() {
                        problems.push(Problem::MissingDebugInfo {
                            file: path.to_path_buf(),
                            samples,
                        });
                    }
                    if let Some(bad) = &entry.bad_debug_info {
                        problems.push(Problem::BadDebugInfo {
                            file: path.to_path_buf(),
                            reason: bad.first_error.clone(),
                            addresses: bad.addresses,
                        });
                    }
                }
            }
        }
        let kernel = &self.kernel;
        if kernel.samples > 0 {
            for unusable in &kernel.unusable {
                problems.extend(unusable.problem(KERNEL_DSO, kernel.samples));
            }
            if let Some((path, vmlinux)) = &kernel.vmlinux {
                // As for every other file: lines are missing only where they are asked for.
                if self.options.inlines && !vmlinux.has_debug_info() {
                    problems.push(Problem::MissingDebugInfo {
                        file: path.to_path_buf(),
                        samples: kernel.samples,
                    });
                }
            }
        }
        if kernel.unresolved > 0 {
            problems.push(Problem::NoKernelSymbols {
                samples: kernel.unresolved,
            });
        }
        if self.outside_mappings > 0 {
            problems.push(Problem::OutsideMappings {
                samples: self.outside_mappings,
            });
        }
        if self.invalid_mappings > 0 {
            problems.push(Problem::InvalidMappings {
                mappings: self.invalid_mappings,
            });
        }
        problems
    }

    fn unknown_symbolized(&self) -> Symbolized {
        Symbolized {
            dso: Rc::clone(&self.unknown),
            dso_path: None,
            vaddr: None,
            file_offset: None,
            function_start: None,
            frames: Rc::clone(&self.no_frames),
        }
    }

    fn symbolize_in_file(&mut self, index: usize, file_offset: u64) -> Symbolized {
        if matches!(self.files[index].state, FileState::Pending) {
            let entry = &self.files[index];
            let expected = entry
                .build_id
                .clone()
                .or_else(|| self.expected_build_ids.get(&entry.recorded).cloned());
            let state = load_file(&self.options, &entry.recorded, expected.as_deref());
            self.files[index].state = state;
        }
        let entry = &mut self.files[index];
        let FileState::Ready { path, object } = &entry.state else {
            return Symbolized {
                dso: Rc::clone(&entry.dso),
                dso_path: None,
                vaddr: None,
                file_offset: Some(file_offset),
                function_start: None,
                frames: Rc::clone(&self.no_frames),
            };
        };
        let vaddr = object.vaddr_of_offset(file_offset);
        // Looked up on every call, cached or not: the entry borrows its name, and
        // only a function met for the first time has it demangled.
        let function = vaddr.and_then(|vaddr| object.function_entry(vaddr));
        let function_start = function.map(|function| function.address);
        let frames = match vaddr {
            None => Rc::clone(&self.no_frames),
            Some(vaddr) => match self.cache.get(&(index, vaddr)) {
                Some(frames) => Rc::clone(frames),
                None if !self.options.inlines => {
                    let frames =
                        function_frame(&mut self.function_frames, &self.no_frames, index, function);
                    self.cache.insert((index, vaddr), Rc::clone(&frames));
                    frames
                }
                None => {
                    let (frames, error) = frames_of(object, vaddr, self.options.inlines);
                    if let Some(error) = error {
                        let bad = entry.bad_debug_info.get_or_insert(BadDebugInfo {
                            first_error: error,
                            addresses: 0,
                        });
                        bad.addresses += 1;
                    }
                    let frames: Rc<[Frame]> = Rc::from(frames);
                    self.cache.insert((index, vaddr), Rc::clone(&frames));
                    frames
                }
            },
        };
        Symbolized {
            dso: Rc::clone(&entry.dso),
            dso_path: Some(Rc::clone(path)),
            vaddr,
            file_offset: Some(file_offset),
            function_start,
            frames,
        }
    }

    /// Whether a user-space miss is a kernel address after all (32-bit
    /// kernels, or a kallsyms with low addresses).
    fn kernel_knows(&mut self, address: u64) -> bool {
        if self.options.kallsyms.is_none() && self.options.vmlinux.is_none() {
            return false;
        }
        self.load_kernel();
        let offset = self.kernel_offset();
        let kernel = &self.kernel;
        kernel
            .kallsyms
            .as_ref()
            .is_some_and(|(_, symbols)| symbols.function_entry(address).is_some())
            || kernel.vmlinux.as_ref().is_some_and(|(_, vmlinux)| {
                vmlinux
                    .function_entry(address.wrapping_sub(offset))
                    .is_some()
            })
    }

    fn symbolize_kernel(&mut self, address: u64, occurrences: u64) -> Symbolized {
        self.load_kernel();
        let offset = self.kernel_offset();
        let kernel = &mut self.kernel;
        kernel.samples += occurrences;
        let kernel_dso = Rc::clone(kernel.dso.get_or_insert_with(|| Rc::from(KERNEL_DSO)));
        let module = kernel
            .kallsyms
            .as_ref()
            .and_then(|(_, symbols)| symbols.module(address));
        // vmlinux first: it has lines and inline frames, kallsyms only names.
        // Modules are not in it.
        if let (None, Some((path, vmlinux))) = (module, &kernel.vmlinux) {
            let vaddr = address.wrapping_sub(offset);
            let frames = match self.cache.get(&(VMLINUX_KEY, vaddr)) {
                Some(frames) => Rc::clone(frames),
                None => {
                    let (frames, _) = frames_of(vmlinux, vaddr, self.options.inlines);
                    let frames: Rc<[Frame]> = Rc::from(frames);
                    self.cache.insert((VMLINUX_KEY, vaddr), Rc::clone(&frames));
                    frames
                }
            };
            if !frames.is_empty() || kernel.kallsyms.is_none() {
                let function_start = vmlinux
                    .function_entry(vaddr)
                    .map(|function| function.address);
                return Symbolized {
                    dso: kernel_dso,
                    dso_path: Some(Rc::clone(path)),
                    vaddr: Some(vaddr),
                    file_offset: None,
                    function_start,
                    frames,
                };
            }
        }
        let Some((path, symbols)) = &kernel.kallsyms else {
            kernel.unresolved += occurrences;
            return Symbolized {
                dso: kernel_dso,
                dso_path: None,
                vaddr: None,
                file_offset: None,
                function_start: None,
                frames: Rc::clone(&self.no_frames),
            };
        };
        let function = symbols.function_entry(address);
        let frames = match self.cache.get(&(KALLSYMS_KEY, address)) {
            Some(frames) => Rc::clone(frames),
            None => {
                // One frame per function, shared by its addresses (kallsyms has
                // names only), its name demangled once.
                let frames = function_frame(
                    &mut self.function_frames,
                    &self.no_frames,
                    KALLSYMS_KEY,
                    function,
                );
                self.cache
                    .insert((KALLSYMS_KEY, address), Rc::clone(&frames));
                frames
            }
        };
        let dso = match module {
            Some(module) => Rc::clone(
                kernel
                    .modules
                    .entry(module.to_owned())
                    .or_insert_with(|| Rc::from(format!("[{module}]"))),
            ),
            None => kernel_dso,
        };
        Symbolized {
            dso,
            dso_path: Some(Rc::clone(path)),
            vaddr: Some(address),
            file_offset: None,
            function_start: function.map(|function| function.address),
            frames,
        }
    }

    /// How far the recorded kernel was moved from vmlinux's link-time
    /// addresses (KASLR): from the kernel's MMAP record, else from kallsyms.
    fn kernel_offset(&self) -> u64 {
        let Some((_, vmlinux)) = &self.kernel.vmlinux else {
            return 0;
        };
        let from_record = self
            .kernel
            .runtime_anchor
            .as_ref()
            .and_then(|anchor| Some((anchor.address, vmlinux.symbol_address(&anchor.symbol)?)));
        let from_kallsyms = || {
            let (_, kallsyms) = self.kernel.kallsyms.as_ref()?;
            ["_text", "_stext"].iter().find_map(|symbol| {
                Some((
                    kallsyms.symbol_address(symbol)?,
                    vmlinux.symbol_address(symbol)?,
                ))
            })
        };
        from_record
            .or_else(from_kallsyms)
            .map_or(0, |(runtime, link)| runtime.wrapping_sub(link))
    }

    /// Adds a kernel function the running kernel named (`name` at `address`, `size`
    /// bytes, in `module` or the kernel itself): kernel addresses are then looked up
    /// among the functions so added as among a kallsyms file's. For a profiler that
    /// asks the kernel to name the addresses it samples instead of reading every line
    /// of `/proc/kallsyms` (`rvperf daemon`). An address must be named before it is
    /// symbolized: a kernel address symbolized with no function known stays unnamed.
    pub fn add_kernel_function(
        &mut self,
        address: u64,
        size: u64,
        name: &str,
        module: Option<&str>,
    ) {
        let (_, symbols) = self.kernel.kallsyms.get_or_insert_with(|| {
            (
                Rc::from(Path::new(KERNEL_NAMED_BY_KERNEL)),
                KernelSymbols::empty(),
            )
        });
        symbols.add_function(address, size, name, module);
    }

    /// Whether a kernel function known so far (read from kallsyms or added by
    /// [`add_kernel_function`](Self::add_kernel_function)) contains `address`.
    /// Does not read kallsyms.
    pub fn knows_kernel_function(&self, address: u64) -> bool {
        self.kernel
            .kallsyms
            .as_ref()
            .is_some_and(|(_, symbols)| symbols.function_entry(address).is_some())
    }

    /// Starts reading and parsing the kallsyms file on another thread, so
    /// that it overlaps the reading of the samples: a running kernel's
    /// /proc/kallsyms is over 100,000 lines that the kernel formats on each
    /// read. The first kernel address waits for it.
    pub fn preload_kernel(&mut self) {
        if self.kernel.loaded || self.kernel.kallsyms_loader.is_some() {
            return;
        }
        let Some(path) = self.options.kallsyms.clone() else {
            return;
        };
        // Without a thread (spawning failed), the first kernel address reads it.
        self.kernel.kallsyms_loader = std::thread::Builder::new()
            .name("kallsyms".to_owned())
            .spawn(move || read_kallsyms(&path))
            .ok();
    }

    fn load_kernel(&mut self) {
        if self.kernel.loaded {
            return;
        }
        self.kernel.loaded = true;
        if let Some(path) = self.options.kallsyms.clone() {
            let parsed = match self.kernel.kallsyms_loader.take() {
                Some(loader) => loader
                    .join()
                    .unwrap_or_else(|_| Err("the kallsyms reader failed".to_owned())),
                None => read_kallsyms(&path),
            };
            match parsed {
                Ok(symbols) => self.kernel.kallsyms = Some((Rc::from(path), symbols)),
                Err(reason) => self
                    .kernel
                    .unusable
                    .push(Unusable::Unreadable { path, reason }),
            }
        }
        if let Some(path) = self.options.vmlinux.clone() {
            // perf records the running kernel's build id under this name.
            let expected = self.expected_build_ids.get(KERNEL_DSO);
            match read_object(&path) {
                Ok(object) if mismatch(expected, object.build_id()) => {
                    self.kernel.unusable.push(Unusable::Mismatch {
                        path,
                        expected: expected.cloned().unwrap_or_default(),
                        found: object.build_id().unwrap_or_default().to_vec(),
                    });
                }
                Ok(mut object) => {
                    find_debug_files(&self.options, &path, &path, &mut object);
                    self.kernel.vmlinux = Some((Rc::from(path), object));
                }
                Err(reason) => self
                    .kernel
                    .unusable
                    .push(Unusable::Unreadable { path, reason }),
            }
        }
    }
}

/// The one frame of `function` (none without one) in `file` (a file's index or
/// `KALLSYMS_KEY`), shared by all its addresses: its name is demangled on its first.
fn function_frame(
    function_frames: &mut FxHashMap<(usize, u64), Rc<[Frame]>>,
    no_frames: &Rc<[Frame]>,
    file: usize,
    function: Option<FunctionEntry<'_>>,
) -> Rc<[Frame]> {
    match function {
        None => Rc::clone(no_frames),
        Some(function) => Rc::clone(
            function_frames
                .entry((file, function.address))
                .or_insert_with(|| Rc::from([Frame::from_linkage_name(function.linkage_name)])),
        ),
    }
}

/// The frames of `vaddr`, and the DWARF error that made them fall back to
/// the symbol table.
fn frames_of(object: &ObjectSymbolizer, vaddr: u64, inlines: bool) -> (Vec<Frame>, Option<String>) {
    let from_symbol = || {
        object
            .function_entry(vaddr)
            .map(|function| Frame::from_linkage_name(function.linkage_name))
            .into_iter()
            .collect()
    };
    if !inlines {
        return (from_symbol(), None);
    }
    match object.frames(vaddr) {
        Ok(frames) => (frames, None),
        Err(error) => (from_symbol(), Some(error.to_string())),
    }
}

/// `libc.so.6` of `/usr/lib/x86_64-linux-gnu/libc.so.6 (deleted)`;
/// `[vdso]` stays `[vdso]`.
fn short_name(recorded: &str) -> &str {
    let path = recorded.strip_suffix(" (deleted)").unwrap_or(recorded);
    if !path.starts_with('/') || path.starts_with("//") {
        return path;
    }
    path.rsplit('/')
        .find(|part| !part.is_empty())
        .unwrap_or(path)
}

/// Whether the recorded name is a path to a file (not `//anon`, `[heap]`,
/// `/memfd:jit (deleted)`, `/dev/zero`, SysV shared memory...).
fn names_a_file(recorded: &str) -> bool {
    recorded.starts_with('/')
        && !recorded.starts_with("//")
        && !["/memfd:", "/dev/", "/SYSV", "/anon_hugepage"]
            .iter()
            .any(|prefix| recorded.starts_with(prefix))
}

/// Whether a file's build id rules it out: both known and different (a
/// file without one is taken on trust).
fn mismatch(expected: Option<impl AsRef<[u8]>>, found: Option<&[u8]>) -> bool {
    matches!((expected, found), (Some(expected), Some(found)) if expected.as_ref() != found)
}

/// Reads and parses a kallsyms file a line at a time.
fn read_kallsyms(path: &Path) -> Result<KernelSymbols, String> {
    use std::io::BufRead;
    let file = std::fs::File::open(path).map_err(|error| error.to_string())?;
    let mut reader = std::io::BufReader::with_capacity(1 << 16, file);
    let mut parser = KallsymsParser::new(&path.display().to_string());
    let mut line = String::new();
    loop {
        line.clear();
        match reader.read_line(&mut line) {
            Ok(0) => break,
            Ok(_) => parser.line(&line).map_err(|error| error.to_string())?,
            Err(error) => return Err(error.to_string()),
        }
    }
    parser.finish().map_err(|error| error.to_string())
}

fn read_object(path: &Path) -> Result<ObjectSymbolizer, String> {
    let bytes = std::fs::read(path).map_err(|error| error.to_string())?;
    ObjectSymbolizer::new(&path.display().to_string(), bytes).map_err(|error| error.to_string())
}

/// Reads `path` whole when its DWARF will be wanted (`inlines`), else only its headers
/// and symbol tables.
fn open_object(path: &Path, inlines: bool) -> Result<ObjectSymbolizer, String> {
    if inlines {
        return read_object(path);
    }
    let file = std::fs::File::open(path).map_err(|error| error.to_string())?;
    ObjectSymbolizer::symbols_only(&path.display().to_string(), &file)
        .map_err(|error| error.to_string())
}

/// Finds and reads the file recorded as `recorded`.
fn load_file(options: &SymbolizerOptions, recorded: &str, expected: Option<&[u8]>) -> FileState {
    let recorded_path = Path::new(recorded.strip_suffix(" (deleted)").unwrap_or(recorded));
    let is_file = names_a_file(recorded);
    let mut problem: Option<Unusable> = None;
    let candidates = binary_candidates(
        options,
        if is_file {
            recorded_path
        } else {
            Path::new("")
        },
        expected,
    );
    for candidate in candidates {
        if !candidate.is_file() {
            continue;
        }
        let mut object = match open_object(&candidate, options.inlines) {
            Ok(object) => object,
            Err(reason) => {
                problem.get_or_insert(Unusable::Unreadable {
                    path: candidate,
                    reason,
                });
                continue;
            }
        };
        if mismatch(expected, object.build_id()) {
            problem.get_or_insert(Unusable::Mismatch {
                path: candidate,
                expected: expected.unwrap_or_default().to_vec(),
                found: object.build_id().unwrap_or_default().to_vec(),
            });
            continue;
        }
        // Function names alone need a separate debug file only for a stripped
        // file's full symbol table.
        if options.inlines || !object.has_symbol_table() {
            find_debug_files(options, recorded_path, &candidate, &mut object);
        }
        return FileState::Ready {
            path: Rc::from(candidate),
            object: Box::new(object),
        };
    }
    FileState::Unusable(problem.unwrap_or(if is_file {
        Unusable::NotFound
    } else {
        Unusable::NotAFile
    }))
}

/// Attaches the separate debug file of `object` when it has no DWARF, and
/// the dwz supplementary file its DWARF refers to. What cannot be found is
/// left out: the file then gives what it has.
fn find_debug_files(
    options: &SymbolizerOptions,
    recorded: &Path,
    path: &Path,
    object: &mut ObjectSymbolizer,
) {
    // With function names only, a debug file is wanted for its symbol table when
    // the file has only `.dynsym`, and only that table is read of it.
    let wanted = if options.inlines {
        !object.has_debug_info()
    } else {
        !object.has_symbol_table()
    };
    let mut dwarf_path = path.to_owned();
    if wanted {
        let candidates = debug_candidates(
            options,
            recorded,
            path,
            object.build_id(),
            object.debug_link(),
        );
        for candidate in candidates {
            let name = candidate.display().to_string();
            let attached = if options.inlines {
                std::fs::read(&candidate).is_ok_and(|bytes| {
                    object.attach_debug_file(&name, bytes).is_ok() && object.has_debug_info()
                })
            } else {
                std::fs::File::open(&candidate).is_ok_and(|file| {
                    object.attach_debug_symbols(&name, &file).is_ok() && object.has_symbol_table()
                })
            };
            if attached {
                dwarf_path = candidate;
                break;
            }
        }
    }
    if !options.inlines {
        return;
    }
    let Some(link) = object.supplementary_link().cloned() else {
        return;
    };
    for candidate in supplementary_candidates(options, &dwarf_path, &link) {
        let Ok(bytes) = std::fs::read(&candidate) else {
            continue;
        };
        if object
            .attach_supplementary_file(&candidate.display().to_string(), bytes)
            .is_ok()
        {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_names() {
        assert_eq!(short_name("/usr/lib/libc.so.6"), "libc.so.6");
        assert_eq!(short_name("/tmp/a.out (deleted)"), "a.out");
        assert_eq!(short_name("[vdso]"), "[vdso]");
        assert_eq!(short_name("//anon"), "//anon");
    }

    #[test]
    fn anonymous_memory_is_not_a_file() {
        assert!(names_a_file("/usr/bin/ls"));
        for name in [
            "//anon",
            "[heap]",
            "/memfd:jit (deleted)",
            "/dev/zero",
            "[vdso]",
        ] {
            assert!(!names_a_file(name), "{name}");
        }
    }

    #[test]
    fn addresses_outside_mappings_are_counted() {
        let mut symbolizer = Symbolizer::new(SymbolizerOptions {
            build_id_dirs: Vec::new(),
            ..SymbolizerOptions::default()
        });
        symbolizer.add_mapping(7, 0x1000, 0x1000, 0, "//anon", None);
        let inside = symbolizer.symbolize(7, 0x1800);
        assert_eq!(&*inside.dso, "//anon");
        assert!(inside.frames.is_empty());
        for address in [0x10, 0x2000, 0x3000] {
            let outside = symbolizer.symbolize(7, address);
            assert_eq!(&*outside.dso, UNKNOWN_DSO);
        }
        symbolizer.symbolize(8, 0x1800);
        assert_eq!(
            symbolizer.problems(),
            vec![Problem::OutsideMappings { samples: 4 }]
        );
    }
}
