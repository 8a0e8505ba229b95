//! Profiles built from samples or traces, independent of where they came from (perf
//! callchains, CTR branch stacks, the trace elements of N-Trace or any other trace
//! protocol): stacks collapsed to folded stacks and drawn as flame graphs, call stacks
//! reconstructed from a trace ([`CallStacks`]), execution counts (one sink,
//! [`BranchCounts`], fed by branch stacks or by a trace's instruction ranges through
//! [`TraceCounts`]), the LBR-style branch-stack samples a complete trace would have
//! given ([`BranchSampler`]) and AutoFDO sample profiles with writers for the formats
//! LLVM and GCC read.
//!
//! The crate does no file I/O: writers append to a `Vec<u8>` or an `io::Write` the
//! caller owns, so the CLI decides where bytes go (and writes then renames).

pub mod autofdo;
pub mod branch_counts;
pub mod branch_sampler;
pub mod call_stacks;
pub mod collapse;
#[cfg(feature = "flamegraph")]
pub mod flamegraph;
pub mod folded;
pub mod sample_profile;
pub mod trace_counts;

pub use autofdo::{
    build_sample_profile, llvm_base_discriminator, llvm_duplication_factor, Discriminators,
    PlacementOptions, PlacementStats, SourceFrame,
};
pub use branch_counts::{
    AddressRange, Branch, BranchCountOptions, BranchCounts, InstructionCounts, RefusedRanges,
};
pub use branch_sampler::{
    BranchSample, BranchSampler, SamplerOptions, SamplerOptionsError, SamplerStatistics,
};
pub use call_stacks::{
    CallStackOptions, CallStackStatistics, CallStacks, FunctionOf, StackWeight, StopsKeepStacks,
    UNKNOWN_CALLER,
};
pub use collapse::{StackCollapser, StackSymbols};
pub use folded::FoldedStacks;
pub use sample_profile::{BodySample, FunctionProfile, LineLocation, SampleProfile};
pub use trace_counts::{TraceCountStatistics, TraceCounts};

mod encoding;
pub mod gcc_afdo;
pub mod llvm_extbinary;
pub mod llvm_text;

pub use gcc_afdo::write_gcc_afdo;
pub use llvm_extbinary::{write_llvm_extbinary, ProfileSummary, SummaryEntry};
pub use llvm_text::write_llvm_text;

/// A sample profile that a format cannot represent. Writers check the whole profile
/// before writing, so an error never leaves half a profile behind.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProfileWriteError {
    /// A function or call target without a name: nothing could match it.
    #[error("a function or call target has an empty name")]
    EmptyName,
    /// Both compilers' formats end a name at its first NUL byte.
    #[error("name {name:?} contains a NUL byte")]
    NameContainsNul { name: String },
    /// LLVM's text format separates fields with spaces and tells a body line from an
    /// inlined call site by whether the text after `offset: ` starts with a digit.
    #[error(
        "name {name:?} cannot be written in LLVM's text format (whitespace, or a leading digit)"
    )]
    NameNotTextSafe { name: String },
    /// GCC's gcov strings carry a 32-bit byte length.
    #[error("a name of {length} bytes is longer than a gcov string can hold")]
    NameTooLong { length: usize },
    /// A gcov section or record holds more entries than its 32-bit count can say.
    #[error("{count} {what} do not fit a 32-bit gcov count")]
    TooManyEntries { what: &'static str, count: usize },
    /// GCC reads counts as its signed 64-bit `gcov_type`.
    #[error("count {count} in {function} is larger than GCC's signed 64-bit counter")]
    CountTooLarge { function: String, count: u64 },
    /// Adding counts (merging GCC name aliases, or LLVM's summary total) passed `u64::MAX`.
    #[error("the sum of the counts of {function} does not fit 64 bits")]
    CountOverflow { function: String },
    /// GCC keeps the line offset in the upper 16 bits of a 32-bit location.
    #[error("line offset {line_offset} in {function} does not fit GCC's 16-bit line offset")]
    LineOffsetTooLarge { function: String, line_offset: u32 },
    /// GCC keeps the discriminator in the lower 16 bits of a 32-bit location.
    #[error("discriminator {discriminator} in {function} does not fit GCC's 16 bits")]
    DiscriminatorTooLarge {
        function: String,
        discriminator: u32,
    },
}
