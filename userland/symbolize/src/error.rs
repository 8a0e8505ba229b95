//! The one error type of the crate.

/// What went wrong, with the file (and address) it went wrong at.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SymbolizeError {
    /// The bytes are not an ELF file `object` can read.
    #[error("{file}: not a readable ELF file: {source}")]
    Parse {
        file: String,
        #[source]
        source: object::Error,
    },
    /// A debug section could not be read or decompressed.
    #[error("{file}: cannot read section {section}: {source}")]
    Section {
        file: String,
        section: &'static str,
        #[source]
        source: object::Error,
    },
    /// A debug section's header points past the end of the file.
    #[error("{file}: section {section} extends past the end of the file")]
    SectionTruncated { file: String, section: &'static str },
    /// The DWARF of the file is malformed where the lookup needed it.
    #[error("{file}: bad DWARF{}: {source}", at_address(*.address))]
    Dwarf {
        file: String,
        /// The address being looked up, when there was one.
        address: Option<u64>,
        #[source]
        source: gimli::Error,
    },
    /// The separate debug file belongs to another build of the file.
    #[error("{file}: debug file {debug_file} has build id {found}, expected {expected}", found = hex(found), expected = hex(expected))]
    DebugFileMismatch {
        file: String,
        debug_file: String,
        expected: Vec<u8>,
        found: Vec<u8>,
    },
    /// A kallsyms line does not have the `address type name [module]` shape.
    #[error("{file}:{line}: not a kallsyms line: {reason}")]
    Kallsyms {
        file: String,
        line: usize,
        reason: &'static str,
    },
    /// Every kallsyms address is zero: the file was read without the
    /// privilege to see addresses (kptr_restrict).
    #[error("{file}: every kallsyms address is 0 (read it as root or lower kernel.kptr_restrict)")]
    KallsymsHidden { file: String },
}

fn at_address(address: Option<u64>) -> String {
    match address {
        Some(address) => format!(" at {address:#x}"),
        None => String::new(),
    }
}

/// A build id as `perf buildid-list` and file names under `.build-id/` spell it.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}
