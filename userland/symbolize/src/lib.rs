//! Addresses from recordings to functions, source lines and inline stacks,
//! for flame graphs and AutoFDO profiles.
//!
//! Two layers:
//!
//! * [`ObjectSymbolizer`] is one ELF file, built from its bytes: no I/O, no
//!   knowledge of processes. Function names come from the symbol table
//!   (`object`), lines and inline stacks from DWARF (`addr2line`), and what
//!   addr2line does not give — each frame's function start line
//!   (`DW_AT_decl_line` through abstract origins and specifications) and
//!   discriminators — straight from `gimli`. DWARF is loaded (and
//!   decompressed) on the first lookup that needs it, sharing the file's
//!   bytes. [`KernelSymbols`] is the same for a kallsyms file.
//!   [`FunctionTable`] is an object's function symbols with their names
//!   demangled once, for callers that name many addresses (`rvperf decode`).
//!   This is the one symbol table of rvperf: every command names a function
//!   by the same rules (perf's choice among aliases, Rust and C++ demangling).
//!   [`ImageFunctions`] puts the tables of several files at their load
//!   biases, to name addresses of a trace decoder's code image.
//! * [`Symbolizer`] is the I/O and caching layer: it builds each process's
//!   address space from perf MMAP2/FORK/COMM records, finds files (perf's
//!   build-id cache, a `--symfs` root, the recorded path), their separate
//!   debug files (`/usr/lib/debug` by build id and `.gnu_debuglink`, dwz
//!   supplementary files), the kernel (kallsyms, vmlinux with its KASLR
//!   offset), reads each file on its first sample, caches frames per
//!   (file, address) so a million samples cost a few thousand lookups, and
//!   collects [`Problem`]s — one per file and kind, with counts — instead
//!   of failing or printing per sample.
//!
//! Frames are innermost first, as `addr2line -i` prints them.

mod address_space;
mod demangle;
mod dwarf;
mod error;
mod frame;
mod function_table;
mod image_functions;
mod kallsyms;
mod locate;
mod object_symbolizer;
mod problem;
mod symbolizer;
mod symbols;

pub use demangle::demangle;
pub use error::SymbolizeError;
pub use frame::{Frame, FunctionSymbol};
pub use function_table::FunctionTable;
pub use image_functions::{FunctionTotal, ImageFunctions, MappedRange};
pub use kallsyms::{KallsymsParser, KernelSymbols};
pub use locate::{
    binary_candidates, build_id_link, cached_kallsyms, cached_vdso, kernel_image_candidates,
    VDSO_NAME,
};
pub use object_symbolizer::{DebugLink, ObjectSymbolizer, SupplementaryLink};
pub use problem::Problem;
pub use symbolizer::{
    is_kernel_address, FileLocation, MappedFile, RecordedFile, Symbolized, Symbolizer,
    SymbolizerOptions, KERNEL_DSO, KERNEL_START, KERNEL_TEXT_SYMBOL,
};
pub use symbols::FunctionEntry;
