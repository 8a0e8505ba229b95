//! TCODE values of the N-Trace 1.0 messages (spec Table 8).

/// Ownership message (7.1).
pub const OWNERSHIP: u8 = 2;
/// DirectBranch message (7.2).
pub const DIRECT_BRANCH: u8 = 3;
/// IndirectBranch message (7.3).
pub const INDIRECT_BRANCH: u8 = 4;
/// Error message (7.4).
pub const ERROR: u8 = 8;
/// ProgTraceSync message (7.5).
pub const PROG_TRACE_SYNC: u8 = 9;
/// DirectBranchSync message (7.6).
pub const DIRECT_BRANCH_SYNC: u8 = 11;
/// IndirectBranchSync message (7.7).
pub const INDIRECT_BRANCH_SYNC: u8 = 12;
/// ResourceFull message (7.8).
pub const RESOURCE_FULL: u8 = 27;
/// IndirectBranchHist message (7.9).
pub const INDIRECT_BRANCH_HIST: u8 = 28;
/// IndirectBranchHistSync message (7.10).
pub const INDIRECT_BRANCH_HIST_SYNC: u8 = 29;
/// RepeatBranch message (7.11).
pub const REPEAT_BRANCH: u8 = 30;
/// ProgTraceCorrelation message (7.12).
pub const PROG_TRACE_CORRELATION: u8 = 33;

/// First TCODE of the range Nexus dedicates to vendor-defined messages.
pub const VENDOR_DEFINED_FIRST: u8 = 56;
/// Last TCODE of the range Nexus dedicates to vendor-defined messages.
pub const VENDOR_DEFINED_LAST: u8 = 62;

/// Whether `tcode` is in the vendor-defined range 56..=62.
#[inline]
pub fn is_vendor_defined(tcode: u8) -> bool {
    (VENDOR_DEFINED_FIRST..=VENDOR_DEFINED_LAST).contains(&tcode)
}

/// Whether `tcode` is one of the messages of spec Table 8 (neither vendor-defined nor reserved).
#[inline]
pub fn is_standard(tcode: u8) -> bool {
    matches!(
        tcode,
        OWNERSHIP
            | DIRECT_BRANCH
            | INDIRECT_BRANCH
            | ERROR
            | PROG_TRACE_SYNC
            | DIRECT_BRANCH_SYNC
            | INDIRECT_BRANCH_SYNC
            | RESOURCE_FULL
            | INDIRECT_BRANCH_HIST
            | INDIRECT_BRANCH_HIST_SYNC
            | REPEAT_BRANCH
            | PROG_TRACE_CORRELATION
    )
}

/// Message name as the spec spells it, `"VendorDefined"` for 56..=62 and `"Reserved"` for
/// every other value.
pub fn name(tcode: u8) -> &'static str {
    match tcode {
        OWNERSHIP => "Ownership",
        DIRECT_BRANCH => "DirectBranch",
        INDIRECT_BRANCH => "IndirectBranch",
        ERROR => "Error",
        PROG_TRACE_SYNC => "ProgTraceSync",
        DIRECT_BRANCH_SYNC => "DirectBranchSync",
        INDIRECT_BRANCH_SYNC => "IndirectBranchSync",
        RESOURCE_FULL => "ResourceFull",
        INDIRECT_BRANCH_HIST => "IndirectBranchHist",
        INDIRECT_BRANCH_HIST_SYNC => "IndirectBranchHistSync",
        REPEAT_BRANCH => "RepeatBranch",
        PROG_TRACE_CORRELATION => "ProgTraceCorrelation",
        t if is_vendor_defined(t) => "VendorDefined",
        _ => "Reserved",
    }
}
