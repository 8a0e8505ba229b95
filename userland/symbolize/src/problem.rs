//! What kept addresses from being symbolized fully, one entry per file and
//! kind, so a command prints one line for each.

use std::fmt;
use std::path::PathBuf;

use crate::error::hex;

/// A problem seen while symbolizing, with how many sampled addresses (sample ips,
/// callchain frames, branch-stack entries) it affected.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Problem {
    /// No candidate file exists for a mapped file (searched by build id,
    /// under the symfs root, and at its recorded path).
    FileNotFound { file: String, samples: u64 },
    /// A file exists but could not be read or parsed.
    Unreadable {
        file: PathBuf,
        reason: String,
        samples: u64,
    },
    /// The only files found belong to another build than the recorded one;
    /// they were not used.
    BuildIdMismatch {
        file: PathBuf,
        expected: Vec<u8>,
        found: Vec<u8>,
        samples: u64,
    },
    /// The file has no DWARF and no separate debug file was found: function
    /// names only, no lines or inline frames.
    MissingDebugInfo { file: PathBuf, samples: u64 },
    /// The DWARF is malformed at some addresses; they fell back to the
    /// symbol table.
    BadDebugInfo {
        file: PathBuf,
        reason: String,
        addresses: u64,
    },
    /// Kernel addresses were sampled but no kallsyms or vmlinux was given
    /// (or none could be read).
    NoKernelSymbols { samples: u64 },
    /// Addresses in no mapping of their process and not in the kernel.
    OutsideMappings { samples: u64 },
    /// MMAP/MMAP2 records ignored because the file offsets of their range pass
    /// the end of the 64-bit space (a corrupt recording).
    InvalidMappings { mappings: u64 },
}

impl fmt::Display for Problem {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::FileNotFound { file, samples } => {
                write!(formatter, "{file}: not found ({samples} sampled addresses)")
            }
            Problem::Unreadable {
                file,
                reason,
                samples,
            } => write!(
                formatter,
                "{}: cannot be used: {reason} ({samples} sampled addresses)",
                file.display()
            ),
            Problem::BuildIdMismatch {
                file,
                expected,
                found,
                samples,
            } => write!(
                formatter,
                "{}: build id {} but the recording expects {}; not used ({samples} sampled addresses)",
                file.display(),
                hex(found),
                hex(expected)
            ),
            Problem::MissingDebugInfo { file, samples } => write!(
                formatter,
                "{}: no debug info, function names only ({samples} sampled addresses)",
                file.display()
            ),
            Problem::BadDebugInfo {
                file,
                reason,
                addresses,
            } => write!(
                formatter,
                "{}: bad debug info at {addresses} addresses, e.g. {reason}",
                file.display()
            ),
            Problem::NoKernelSymbols { samples } => write!(
                formatter,
                "no kernel symbols (give a kallsyms file or vmlinux) ({samples} sampled addresses)"
            ),
            Problem::OutsideMappings { samples } => {
                write!(formatter, "{samples} sampled addresses outside every mapping")
            }
            Problem::InvalidMappings { mappings } => write!(
                formatter,
                "{mappings} mmap records ignored: their file offsets pass the end of the 64-bit space"
            ),
        }
    }
}
