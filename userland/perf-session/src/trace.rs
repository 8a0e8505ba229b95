//! Profiles from a decoded instruction trace: the code that ran (ELF files placed at
//! their load addresses, [`TraceCode`]), and the consumers of any protocol's trace
//! elements ([`trace_elements::ElementSource`]): call-stack flame graphs
//! ([`fold_trace`]) and exact execution counts for AutoFDO ([`count_trace`]).
//!
//! A trace has no MMAP records: the files are the caller's (`--elf FILE@LOAD`), placed
//! as a process would map them, and named by the same symbolizer as perf.data samples
//! ([`Processes`]), in one address space ([`TRACE_PID`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use code_image::{load_elf, CodeImage, ElfInfo, FileDecodeInfo, ImageError, Xlen};
use profiles::{
    AddressRange, Branch, BranchCountOptions, BranchCounts, BranchSampler, CallStackOptions,
    CallStackStatistics, CallStacks, FoldedStacks, SamplerOptions, SamplerOptionsError,
    SamplerStatistics, StackCollapser, StackWeight, StopsKeepStacks, TraceCounts,
};
use symbolize::{FunctionTable, ImageFunctions, MappedRange, ObjectSymbolizer, SymbolizeError};
use trace_elements::{ElementSource, TraceElement};

use crate::fold::SymbolizerStacks;
use crate::processes::{Processes, SymbolOptions};

/// The process id a trace's files are mapped in for the symbolizer: a trace of one
/// program has one address space (a trace of several carries their contexts, which a
/// later recording format maps to processes).
pub const TRACE_PID: u32 = 0;

/// An ELF file the traced code came from, and where its lowest loadable segment was
/// (`None`: at its link addresses).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlacedElf {
    pub path: PathBuf,
    pub load_address: Option<u64>,
}

/// Why the code of a trace could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TraceCodeError {
    #[error("cannot read ELF {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Image(#[from] ImageError),
}

/// A file of the trace's code whose symbols could not be read: its code decodes, its
/// functions have no names.
#[derive(Debug)]
pub struct UnnamedFile {
    pub path: PathBuf,
    pub error: SymbolizeError,
}

/// One loaded file.
#[derive(Debug)]
struct TraceFile {
    path: PathBuf,
    info: ElfInfo,
}

/// A file of a trace's code as loaded: its path as given and what the loader found
/// (where its segments went, its bias and build id).
#[derive(Debug, Clone, Copy)]
pub struct LoadedFile<'a> {
    pub path: &'a Path,
    pub info: &'a ElfInfo,
}

/// The code a trace ran: one image of every file, each file's decode options, its
/// functions by image address.
#[derive(Debug)]
pub struct TraceCode {
    image: CodeImage,
    decode_infos: Vec<FileDecodeInfo>,
    functions: ImageFunctions,
    files: Vec<TraceFile>,
    unnamed: Vec<UnnamedFile>,
}

impl TraceCode {
    /// Loads `elves` (RISC-V files) in order: the first file is image file 0.
    pub fn load(elves: &[PlacedElf]) -> Result<Self, TraceCodeError> {
        let mut image = CodeImage::new();
        let mut functions = ImageFunctions::new();
        let mut files = Vec::with_capacity(elves.len());
        let mut unnamed = Vec::new();
        for PlacedElf { path, load_address } in elves {
            let bytes: Arc<[u8]> = std::fs::read(path)
                .map_err(|source| TraceCodeError::Read {
                    path: path.clone(),
                    source,
                })?
                .into();
            let name = path.display().to_string();
            let info = load_elf(&mut image, &name, &bytes, *load_address)?;
            // load_elf read the file as an ELF already: what the symbolizer refuses of it
            // (a malformed note, say) leaves the code decodable, without names.
            let table = match ObjectSymbolizer::new(&name, bytes) {
                Ok(object) => object.function_table(),
                Err(error) => {
                    unnamed.push(UnnamedFile {
                        path: path.clone(),
                        error,
                    });
                    FunctionTable::default()
                }
            };
            let file = functions.add_file(table, info.bias);
            debug_assert_eq!(file, info.file_index);
            files.push(TraceFile {
                path: path.clone(),
                info,
            });
        }
        for segment in image.segments() {
            functions.add_range(MappedRange {
                start: segment.start,
                end: segment.end,
                file: segment.file,
            });
        }
        Ok(Self {
            decode_infos: image.file_decode_infos(),
            image,
            functions,
            files,
            unnamed,
        })
    }

    pub fn image(&self) -> &CodeImage {
        &self.image
    }

    /// Each file's decode options, by image file index (what the decoders take).
    pub fn decode_infos(&self) -> &[FileDecodeInfo] {
        &self.decode_infos
    }

    /// The functions of every file, by image address.
    pub fn functions(&self) -> &ImageFunctions {
        &self.functions
    }

    /// Files whose functions have no names, and why.
    pub fn unnamed_files(&self) -> &[UnnamedFile] {
        &self.unnamed
    }

    /// The register width of the first file (which decides the trace's address width).
    pub fn xlen(&self) -> Option<Xlen> {
        self.files.first().and_then(|file| file.info.xlen())
    }

    /// The entry points of the files: where a program's stack starts empty.
    pub fn entry_points(&self) -> Vec<u64> {
        self.files
            .iter()
            .filter_map(|file| file.info.entry)
            .collect()
    }

    /// The files in load order (the image's file numbers).
    pub fn loaded_files(&self) -> impl Iterator<Item = LoadedFile<'_>> {
        self.files.iter().map(|file| LoadedFile {
            path: &file.path,
            info: &file.info,
        })
    }

    /// The index of the file at `path` (as given to [`load`](Self::load)).
    pub fn file_index(&self, path: &Path) -> Option<usize> {
        self.files.iter().position(|file| file.path == path)
    }

    /// A symbolizer with every file mapped in [`TRACE_PID`] as a process would map it,
    /// and a kernel image (a file in the kernel's half of the address space, such as a
    /// `--kcore` copy) as its vmlinux, unless `options` name one: the symbolizer names
    /// kernel addresses from the kernel's symbols only.
    pub fn processes(&self, mut options: SymbolOptions) -> Processes {
        let is_kernel_image = |file: &TraceFile| {
            !file.info.mappings.is_empty()
                && file
                    .info
                    .mappings
                    .iter()
                    .all(|mapping| symbolize::is_kernel_address(mapping.start))
        };
        // The symbolizer opens recorded paths, which are absolute.
        let absolute =
            |path: &Path| std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        if options.vmlinux.is_none() {
            options.vmlinux = self
                .files
                .iter()
                .find(|file| is_kernel_image(file))
                .map(|file| absolute(&file.path));
        }
        let mut processes = Processes::new(options);
        let symbolizer = processes.symbolizer();
        // A vmlinux moved to where the kernel ran (KASLR): the symbolizer takes the
        // offset from where `_text` ran, as from perf's `[kernel.kallsyms]_text` record.
        if let Some(kernel) = self
            .files
            .iter()
            .find(|file| is_kernel_image(file) && file.info.bias != 0)
        {
            let text = std::fs::File::open(&kernel.path).ok().and_then(|file| {
                symbolize::ObjectSymbolizer::symbols_only(&kernel.path.display().to_string(), &file)
                    .ok()?
                    .symbol_address(symbolize::KERNEL_TEXT_SYMBOL)
            });
            if let Some(text) = text {
                symbolizer.add_mapping(
                    TRACE_PID,
                    0,
                    0,
                    text.wrapping_add(kernel.info.bias),
                    &format!("{}{}", symbolize::KERNEL_DSO, symbolize::KERNEL_TEXT_SYMBOL),
                    None,
                );
            }
        }
        for file in &self.files {
            if is_kernel_image(file) {
                continue;
            }
            let path = absolute(&file.path);
            let name = path.display().to_string();
            for mapping in &file.info.mappings {
                symbolizer.add_mapping(
                    TRACE_PID,
                    mapping.start,
                    mapping.size,
                    mapping.file_offset,
                    &name,
                    file.info.build_id.as_deref(),
                );
            }
        }
        processes
    }

    /// The counts of `all` that are in file `file`, at its link-time addresses (what
    /// its debug info describes): ranges inside the file, branches with both ends in
    /// it (a call into another file is not the file's to profile).
    pub fn counts_of_file(&self, all: &BranchCounts, file: usize) -> BranchCounts {
        let mut counts = BranchCounts::new(BranchCountOptions::default());
        let Some(info) = self.files.get(file).map(|file| &file.info) else {
            return counts;
        };
        let inside = |address: u64| {
            info.mappings
                .iter()
                .any(|mapping| address >= mapping.start && address - mapping.start < mapping.size)
        };
        for (range, &count) in &all.ranges {
            if inside(range.first) && inside(range.last) {
                counts.add_range(
                    AddressRange {
                        first: info.link_address(range.first),
                        last: info.link_address(range.last),
                    },
                    count,
                );
            }
        }
        for (branch, &count) in &all.branches {
            if inside(branch.from) && inside(branch.to) {
                counts.add_branch(
                    Branch {
                        from: info.link_address(branch.from),
                        to: info.link_address(branch.to),
                    },
                    count,
                );
            }
        }
        counts
    }
}

/// How [`fold_trace`] folds. (Inlined frames are the symbol options'.)
#[derive(Debug, Clone, Copy, Default)]
#[non_exhaustive]
pub struct TraceFoldOptions {
    pub weight: StackWeight,
    /// Whether a trace stop keeps the stack (a thread's trace, stopped while it was in
    /// the kernel).
    pub stops: StopsKeepStacks,
}

impl TraceFoldOptions {
    pub fn new(weight: StackWeight) -> Self {
        Self {
            weight,
            stops: StopsKeepStacks::No,
        }
    }

    /// The same, with trace stops keeping the stack as `stops` says.
    pub fn with_stops(mut self, stops: StopsKeepStacks) -> Self {
        self.stops = stops;
        self
    }
}

/// A trace's flame graph and what went into it.
#[derive(Debug)]
pub struct TraceFold {
    pub folded: FoldedStacks,
    pub statistics: CallStackStatistics,
    /// The symbolizer, for its problems (files not found, bad debug info).
    pub processes: Processes,
}

/// Reads `source` to its end and folds the call stacks it ran under, named by
/// `code`'s files through `symbols`.
pub fn fold_trace<S: ElementSource>(
    source: &mut S,
    code: &TraceCode,
    symbols: SymbolOptions,
    options: TraceFoldOptions,
) -> Result<TraceFold, S::Error> {
    let mut stacks = CallStacks::new(
        CallStackOptions::new(options.weight, code.entry_points()).with_stops(options.stops),
    );
    let mut function_of = |address: u64| code.functions.function_start(address);
    source.for_each_element(|element, _| stacks.push(element, &mut function_of))?;
    let mut processes = code.processes(symbols);
    let mut collapser = StackCollapser::new();
    let mut names = SymbolizerStacks {
        symbolizer: processes.symbolizer(),
    };
    let statistics = stacks.collapse_into(&mut collapser, &mut names, TRACE_PID);
    let folded = collapser.finish(&mut names);
    Ok(TraceFold {
        folded,
        statistics,
        processes,
    })
}

/// Reads `source` to its end and counts every range and taken transfer it ran, at
/// image addresses ([`TraceCode::counts_of_file`] takes one file's).
pub fn count_trace<S: ElementSource>(source: &mut S) -> Result<TraceCounts, S::Error> {
    let mut counts = TraceCounts::default();
    source.for_each_element(|element, _| counts.push(element))?;
    Ok(counts)
}

/// The counts an LBR-style sampler would have given (a branch stack every `period`
/// instructions, [`BranchSampler`]): the sampled profile of a trace, to compare with
/// a CTR recording's, built the way a recording's is.
#[derive(Debug)]
pub struct SampledTraceCounts {
    sampler: BranchSampler,
    pub counts: BranchCounts,
}

impl SampledTraceCounts {
    pub fn new(options: SamplerOptions) -> Result<Self, SamplerOptionsError> {
        Ok(Self {
            sampler: BranchSampler::new(options)?,
            counts: BranchCounts::new(BranchCountOptions::default()),
        })
    }

    /// Takes the next element; `instruction_address(start, index)` places a sample in
    /// a range (see [`BranchSampler::add`]).
    pub fn add(
        &mut self,
        element: &TraceElement,
        instruction_address: impl FnMut(u64, u32) -> Option<u64>,
    ) {
        let counts = &mut self.counts;
        let added: Result<(), std::convert::Infallible> =
            self.sampler.add(element, instruction_address, |sample| {
                counts.add_stack(sample.stack.iter().copied());
                Ok(())
            });
        match added {
            Ok(()) => {}
            Err(never) => match never {},
        }
    }

    pub fn statistics(&self) -> SamplerStatistics {
        self.sampler.statistics()
    }
}

/// The GNU build id of an ELF file's bytes, if it is one and has one.
pub fn elf_build_id(bytes: &[u8]) -> Option<Vec<u8>> {
    use object::Object;
    let file = object::File::parse(bytes).ok()?;
    file.build_id().ok().flatten().map(<[u8]>::to_vec)
}
