use core::fmt::{self, Write};

use crate::decode::MessageDecoder;
use crate::tcode;
use crate::types::{Body, Message, MessageOptions, Process, ResourceFull, SyncReason};

/// HIST-like values in binary, grouped by four from the LSB so bit positions are countable.
struct Binary(u64);

impl fmt::Display for Binary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let digits = (64 - self.0.leading_zeros()).max(1);
        f.write_str("0b")?;
        for bit in (0..digits).rev() {
            f.write_char(if (self.0 >> bit) & 1 == 1 { '1' } else { '0' })?;
            if bit != 0 && bit % 4 == 0 {
                f.write_char('_')?;
            }
        }
        Ok(())
    }
}

struct Sync(SyncReason);

impl fmt::Display for Sync {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 .0 {
            // Names alone would hide which reserved or vendor code it was.
            8 | 10.. => write!(f, "{}({})", self.0.name(), self.0 .0),
            _ => f.write_str(self.0.name()),
        }
    }
}

fn write_process(out: &mut impl Write, process: Process) -> fmt::Result {
    write!(
        out,
        " process={:#x} format={} prv={} v={} context={:#x}",
        process.to_field(),
        process.format.bits(),
        process.privilege,
        u8::from(process.virtualized),
        process.context
    )
}

/// Writes one line (without newline) describing `message`:
///
/// `0x0000001c  IndirectBranchHist  src=0 btype=Indirect icnt=125 uaddr=0xe hist=0b1111_1111_1110`
///
/// Offsets are hex (at least 8 digits), counts decimal, addresses hex, HIST binary, and
/// `tstamp=` (decimal) ends the line when present. Vendor-defined and reserved messages show
/// their TCODE and raw bytes, taken from `stream` (the buffer starting at offset 0, see
/// [`Message::bytes`]). The format is stable: golden tests pin it.
pub fn dump_message(message: &Message, stream: &[u8], out: &mut impl Write) -> fmt::Result {
    write!(
        out,
        "{:#010x}  {}  src={}",
        message.offset,
        tcode::name(message.tcode()),
        message.src
    )?;
    match message.body {
        Body::Ownership { process } => write_process(out, process)?,
        Body::DirectBranch { icnt } => write!(out, " icnt={icnt}")?,
        Body::IndirectBranch { btype, icnt, uaddr } => {
            write!(out, " btype={} icnt={icnt} uaddr={uaddr:#x}", btype.name())?
        }
        Body::Error { etype, ecode } => write!(out, " etype={etype} ecode={ecode:#x}")?,
        Body::ProgTraceSync { sync, icnt, faddr }
        | Body::DirectBranchSync { sync, icnt, faddr } => {
            write!(out, " sync={} icnt={icnt} faddr={faddr:#x}", Sync(sync))?
        }
        Body::IndirectBranchSync {
            sync,
            btype,
            icnt,
            faddr,
        } => write!(
            out,
            " sync={} btype={} icnt={icnt} faddr={faddr:#x}",
            Sync(sync),
            btype.name()
        )?,
        Body::ResourceFull(resource) => {
            write!(out, " rcode={}", resource.rcode())?;
            match resource {
                ResourceFull::IcntOverflow { icnt } => write!(out, " icnt={icnt}")?,
                ResourceFull::HistOverflow { hist } => write!(out, " hist={}", Binary(hist))?,
                ResourceFull::RepeatedHist { hist, repeat } => {
                    write!(out, " hist={} hrepeat={repeat}", Binary(hist))?
                }
                ResourceFull::Other { rdata, count, .. } => {
                    out.write_str(" rdata=[")?;
                    for (k, value) in rdata.iter().take(usize::from(count)).enumerate() {
                        if k != 0 {
                            out.write_str(", ")?;
                        }
                        write!(out, "{value:#x}")?;
                    }
                    out.write_char(']')?;
                }
            }
        }
        Body::IndirectBranchHist {
            btype,
            icnt,
            uaddr,
            hist,
        } => write!(
            out,
            " btype={} icnt={icnt} uaddr={uaddr:#x} hist={}",
            btype.name(),
            Binary(hist)
        )?,
        Body::IndirectBranchHistSync {
            sync,
            btype,
            icnt,
            faddr,
            hist,
        } => write!(
            out,
            " sync={} btype={} icnt={icnt} faddr={faddr:#x} hist={}",
            Sync(sync),
            btype.name(),
            Binary(hist)
        )?,
        Body::RepeatBranch { bcnt } => write!(out, " bcnt={bcnt}")?,
        Body::ProgTraceCorrelation {
            evcode,
            cdf,
            icnt,
            hist,
        } => {
            write!(out, " evcode={} cdf={cdf} icnt={icnt}", evcode.0)?;
            if let Some(hist) = hist {
                write!(out, " hist={}", Binary(hist))?;
            }
        }
        Body::Other { tcode } => {
            write!(out, " tcode={tcode} bytes=")?;
            let bytes = message.bytes(stream);
            if bytes.is_empty() {
                out.write_str("unavailable")?;
            }
            for (k, byte) in bytes.iter().enumerate() {
                if k != 0 {
                    out.write_char(' ')?;
                }
                write!(out, "{byte:02x}")?;
            }
        }
    }
    if let Some(timestamp) = message.timestamp {
        write!(out, " tstamp={timestamp}")?;
    }
    Ok(())
}

/// Dumps a whole stream: one line per message (see [`dump_message`]), one line per error
/// (`<offset>  <error>  <description>`), then a summary line with the idle and skipped
/// byte counts. Each line ends with a newline.
pub fn dump_stream(stream: &[u8], options: MessageOptions, out: &mut impl Write) -> fmt::Result {
    let mut decoder = MessageDecoder::new(stream, options);
    let mut messages = 0u64;
    let mut errors = 0u64;
    loop {
        match decoder.next_message() {
            Ok(Some(message)) => {
                messages += 1;
                dump_message(&message, stream, out)?;
                out.write_char('\n')?;
            }
            Ok(None) => break,
            Err(error) => {
                errors += 1;
                writeln!(out, "{:#010x}  <error>  {error}", error.offset())?;
            }
        }
    }
    writeln!(
        out,
        "# {messages} messages, {errors} errors, {} idle bytes, {} skipped bytes",
        decoder.idle_bytes(),
        decoder.skipped_bytes()
    )
}
