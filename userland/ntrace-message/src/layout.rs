//! Field layout of each TCODE (spec Table 8 and chapter 7), shared by decoder and encoder.

use crate::tcode;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Ownership,
    DirectBranch,
    IndirectBranch,
    Error,
    ProgTraceSync,
    DirectBranchSync,
    IndirectBranchSync,
    ResourceFull,
    IndirectBranchHist,
    IndirectBranchHistSync,
    RepeatBranch,
    ProgTraceCorrelation,
    Other,
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct Layout {
    pub(crate) kind: Kind,
    /// Total width of the fixed-length fields after TCODE and SRC. In every Table 8 message
    /// all fixed-length fields come before the first variable-length one, so they form a
    /// contiguous header with TCODE and SRC.
    pub(crate) fixed_bits: u8,
}

const fn layout_of(tcode: u8) -> Layout {
    let (kind, fixed_bits) = match tcode {
        tcode::OWNERSHIP => (Kind::Ownership, 0),
        tcode::DIRECT_BRANCH => (Kind::DirectBranch, 0),
        tcode::INDIRECT_BRANCH => (Kind::IndirectBranch, 2),
        tcode::ERROR => (Kind::Error, 4),
        tcode::PROG_TRACE_SYNC => (Kind::ProgTraceSync, 4),
        tcode::DIRECT_BRANCH_SYNC => (Kind::DirectBranchSync, 4),
        tcode::INDIRECT_BRANCH_SYNC => (Kind::IndirectBranchSync, 6),
        tcode::RESOURCE_FULL => (Kind::ResourceFull, 4),
        tcode::INDIRECT_BRANCH_HIST => (Kind::IndirectBranchHist, 2),
        tcode::INDIRECT_BRANCH_HIST_SYNC => (Kind::IndirectBranchHistSync, 6),
        tcode::REPEAT_BRANCH => (Kind::RepeatBranch, 0),
        tcode::PROG_TRACE_CORRELATION => (Kind::ProgTraceCorrelation, 6),
        _ => (Kind::Other, 0),
    };
    Layout { kind, fixed_bits }
}

/// Indexed by TCODE (6 bits), so lookups in the decoder need no bounds reasoning beyond a mask.
pub(crate) static LAYOUTS: [Layout; 64] = {
    let mut table = [Layout {
        kind: Kind::Other,
        fixed_bits: 0,
    }; 64];
    let mut tcode = 0;
    while tcode < 64 {
        table[tcode] = layout_of(tcode as u8);
        tcode += 1;
    }
    table
};

#[inline]
pub(crate) fn layout(tcode: u8) -> Layout {
    LAYOUTS[usize::from(tcode & 0x3f)]
}

/// Fixed-length fields after TCODE and SRC, in wire order, with their widths.
pub(crate) fn fixed_fields(kind: Kind) -> &'static [(&'static str, u8)] {
    match kind {
        Kind::IndirectBranch | Kind::IndirectBranchHist => &[("B-TYPE", 2)],
        Kind::Error => &[("ETYPE", 4)],
        Kind::ProgTraceSync | Kind::DirectBranchSync => &[("SYNC", 4)],
        Kind::IndirectBranchSync | Kind::IndirectBranchHistSync => &[("SYNC", 4), ("B-TYPE", 2)],
        Kind::ResourceFull => &[("RCODE", 4)],
        Kind::ProgTraceCorrelation => &[("EVCODE", 4), ("CDF", 2)],
        Kind::Ownership | Kind::DirectBranch | Kind::RepeatBranch | Kind::Other => &[],
    }
}

/// Names of the variable-length fields the message defines, in wire order, for error
/// reports. `fixed` is the value of the fixed-length fields (RCODE and CDF change the list).
pub(crate) fn var_fields(kind: Kind, fixed: u32) -> &'static [&'static str] {
    match kind {
        Kind::Ownership => &["PROCESS"],
        Kind::DirectBranch => &["I-CNT"],
        Kind::IndirectBranch => &["I-CNT", "U-ADDR"],
        Kind::Error => &["ECODE"],
        Kind::ProgTraceSync | Kind::DirectBranchSync | Kind::IndirectBranchSync => {
            &["I-CNT", "F-ADDR"]
        }
        Kind::ResourceFull => match fixed & 0xf {
            0 | 1 => &["RDATA"],
            2 => &["RDATA", "HREPEAT"],
            _ => &["RDATA", "RDATA"],
        },
        Kind::IndirectBranchHist => &["I-CNT", "U-ADDR", "HIST"],
        Kind::IndirectBranchHistSync => &["I-CNT", "F-ADDR", "HIST"],
        Kind::RepeatBranch => &["B-CNT"],
        Kind::ProgTraceCorrelation => match (fixed >> 4) & 3 {
            0 => &["I-CNT"],
            _ => &["I-CNT", "HIST"],
        },
        Kind::Other => &[],
    }
}

/// Name of variable-length field number `index` for error reports.
pub(crate) fn var_field_name(kind: Kind, fixed: u32, index: usize) -> &'static str {
    let names = var_fields(kind, fixed);
    match names.get(index) {
        Some(name) => name,
        None if index == names.len() => "TSTAMP",
        None => "extra",
    }
}

/// Name of the header field that contains header bit `bit` (TCODE, SRC, then the fixed
/// fields), for reports of messages that end inside their header.
pub(crate) fn header_field_name(kind: Kind, src_bits: u32, bit: u32) -> &'static str {
    if bit < 6 {
        return "TCODE";
    }
    let mut end = 6 + src_bits;
    if bit < end {
        return "SRC";
    }
    for (name, width) in fixed_fields(kind) {
        end += u32::from(*width);
        if bit < end {
            return name;
        }
    }
    var_field_name(kind, 0, 0)
}
