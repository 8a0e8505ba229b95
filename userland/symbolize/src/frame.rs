//! What a lookup answers.

/// One frame of the inline stack at an address. A `Vec<Frame>` or
/// `[Frame]` is innermost first, as addr2line prints it: the function whose
/// code is at the address, then each function it was inlined into, ending
/// with the function that was compiled out of line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Frame {
    /// Demangled name (Rust and C++; C names as they are).
    pub function: Option<String>,
    /// The name as in the symbol table or `DW_AT_linkage_name`
    /// (`DW_AT_name` when there is no linkage name, as for C).
    pub linkage_name: Option<String>,
    /// Source file of `line`.
    pub file: Option<String>,
    /// For the innermost frame the line of the address; for an outer frame
    /// the line of the call (`DW_AT_call_line`) the inner frame was inlined at.
    pub line: Option<u32>,
    /// Column of `line`, when the compiler recorded one.
    pub column: Option<u32>,
    /// For the innermost frame the discriminator of the line table row; for
    /// an outer frame the discriminator of the call site
    /// (`DW_AT_GNU_discriminator` of the inlined subroutine); 0 when none.
    pub discriminator: u32,
    /// `DW_AT_decl_line` of this frame's function: AutoFDO counts lines as
    /// offsets from it.
    pub function_start_line: Option<u32>,
}

impl Frame {
    /// A frame known only from a symbol: a name, no source position.
    pub(crate) fn from_linkage_name(linkage_name: &str) -> Frame {
        Frame {
            function: Some(crate::demangle(linkage_name).into_owned()),
            linkage_name: Some(linkage_name.to_owned()),
            ..Frame::default()
        }
    }
}

/// The function symbol containing an address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionSymbol {
    /// The name as in the symbol table.
    pub linkage_name: String,
    /// The demangled name.
    pub name: String,
    /// Link-time address of the first byte.
    pub address: u64,
    /// Extent in bytes: the symbol's size, or the distance to the next
    /// function when the symbol has no size.
    pub size: u64,
}
