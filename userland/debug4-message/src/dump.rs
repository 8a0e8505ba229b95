//! One line of text per sequence, for `rvperf decode --output messages`.

use core::fmt::{self, Write};

use crate::types::{
    CustomHeader, Half, InterruptEnable, LocatedSequence, PrivilegeCause, Sequence, Value,
};

struct Shown(Value);

impl fmt::Display for Shown {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Value::Known(value) => write!(formatter, "{value:#x}"),
            Value::Partial {
                low_bits,
                known_bits,
            } => write!(formatter, "{low_bits:#x} (low {known_bits} bits only)"),
        }
    }
}

/// Writes one line (without newline) describing `located`:
///
/// `0x00000010.1  hart 0  PC 0x80001234  [6 packets]`
///
/// The offset is the header's byte, `.0` for the low half and `.1` for the high half;
/// values are hex, counts decimal.
pub fn dump_sequence(located: &LocatedSequence, out: &mut impl Write) -> fmt::Result {
    let half = match located.half {
        Half::Low => 0,
        Half::High => 1,
    };
    write!(
        out,
        "{:#010x}.{half}  hart {}  ",
        located.offset, located.hart
    )?;
    match located.sequence {
        Sequence::Nops { count } => write!(out, "Nop x{count}")?,
        Sequence::Skipped { bytes } => write!(
            out,
            "skipped {bytes} bytes before the first synchronisation point"
        )?,
        Sequence::Pc(value) => write!(out, "PC {}", Shown(value))?,
        Sequence::BranchTaken => out.write_str("Branch Taken")?,
        Sequence::BranchNotTaken => out.write_str("Branch Not Taken")?,
        Sequence::TraceEnabled { version } => write!(out, "Trace Enabled version {version}")?,
        Sequence::TraceDisabled => out.write_str("Trace Disabled")?,
        Sequence::Privilege(privilege) => {
            let cause = match privilege.cause {
                PrivilegeCause::Interrupt => "interrupt",
                PrivilegeCause::Other => "other",
            };
            let enable = match privilege.interrupts {
                InterruptEnable::Enabled => 1,
                InterruptEnable::Disabled => 0,
            };
            write!(
                out,
                "Privilege Level prv={} ie={enable} cause={cause}",
                privilege.level
            )?
        }
        Sequence::ChangeHart { hart } => write!(out, "Change Hart {hart}")?,
        Sequence::LoadAddress(value) => write!(out, "Load Address {}", Shown(value))?,
        Sequence::StoreAddress(value) => write!(out, "Store Address {}", Shown(value))?,
        Sequence::LoadData { value } => write!(out, "Load Data {value:#x}")?,
        Sequence::StoreData { value } => write!(out, "Store Data {value:#x}")?,
        Sequence::Timestamp(value) => write!(out, "Timestamp {}", Shown(value))?,
        Sequence::Custom { header, value } => {
            let code = match header {
                CustomHeader::Custom14 => 14,
                CustomHeader::Custom15 => 15,
            };
            write!(out, "Custom {code} {value:#x}")?
        }
    }
    match located.sequence {
        Sequence::Nops { .. } | Sequence::Skipped { .. } => Ok(()),
        _ => write!(out, "  [{} packets]", located.packets),
    }
}
