use crate::error::EncodeError;
use crate::tcode;
use crate::types::{AddressWidth, Body, Message, MessageOptions, Process, ResourceFull};

const MAX_SRC_BITS: u8 = 12;
const IDLE: u8 = 0xff;

/// A variable-length field to emit: a plain value, or an address field value (address bits
/// [XLEN-1:1]) that is subject to MSB extension.
#[derive(Clone, Copy)]
enum Var {
    Plain(u64),
    Address(u64),
}

/// Fields of one message, collected and validated before anything is written so that a
/// rejected message leaves the output untouched.
struct Fields {
    tcode: u8,
    fixed: [(u64, u32); 2],
    fixed_count: usize,
    vars: [Var; 4],
    var_count: usize,
}

impl Fields {
    fn new(tcode: u8) -> Self {
        Fields {
            tcode,
            fixed: [(0, 0); 2],
            fixed_count: 0,
            vars: [Var::Plain(0); 4],
            var_count: 0,
        }
    }

    fn fixed(
        &mut self,
        field: &'static str,
        value: u64,
        bits: u32,
    ) -> Result<&mut Self, EncodeError> {
        if value >> bits != 0 {
            return Err(EncodeError::FieldOutOfRange { field, value });
        }
        if let Some(slot) = self.fixed.get_mut(self.fixed_count) {
            *slot = (value, bits);
            self.fixed_count += 1;
        }
        Ok(self)
    }

    fn var(&mut self, var: Var) -> &mut Self {
        if let Some(slot) = self.vars.get_mut(self.var_count) {
            *slot = var;
            self.var_count += 1;
        }
        self
    }
}

/// Packs MDO bits LSB-first into bytes with their MSEO bits.
struct BitWriter<'a> {
    out: &'a mut Vec<u8>,
    pending: u8,
    filled: u32,
}

impl BitWriter<'_> {
    fn fixed(&mut self, mut value: u64, mut bits: u32) {
        while bits > 0 {
            let take = (6 - self.filled).min(bits);
            self.pending |= ((value & ((1 << take) - 1)) as u8) << self.filled;
            self.filled += take;
            value >>= take;
            bits -= take;
            if self.filled == 6 {
                self.out.push(self.pending << 2);
                self.pending = 0;
                self.filled = 0;
            }
        }
    }

    /// Emits `bits` bits of `value` (zero above bit 63), which must end on a byte boundary,
    /// and marks the last byte with `mseo`.
    fn var(&mut self, mut value: u64, mut bits: u32, mseo: u8) {
        loop {
            let take = 6 - self.filled;
            self.pending |= ((value & ((1 << take) - 1)) as u8) << self.filled;
            value >>= take;
            bits = bits.saturating_sub(take);
            self.filled = 0;
            if bits == 0 {
                self.out.push(self.pending << 2 | mseo);
                self.pending = 0;
                return;
            }
            self.out.push(self.pending << 2);
            self.pending = 0;
        }
    }
}

/// Minimal field length (in bits, ending on a byte boundary) for `value` when the field
/// starts with `room` bits left in the current byte.
fn plain_length(value: u64, room: u32) -> u32 {
    let needed = (64 - value.leading_zeros()).max(1);
    if needed <= room {
        room
    } else {
        room + (needed - room).div_ceil(6) * 6
    }
}

/// What the decoder makes of the low `length` bits of an address field.
fn extend(value: u64, length: u32, top: u32) -> u64 {
    let low = if length >= 64 {
        value
    } else {
        value & ((1u64 << length) - 1)
    };
    if length <= top && (low >> (length - 1)) & 1 == 1 {
        low | ((u64::MAX << length) & (u64::MAX >> (63 - top)))
    } else {
        low
    }
}

/// Minimal whole-MDO field length such that the decoder's MSB extension reproduces `value`;
/// an extra all-zero MDO is added when the top bit would otherwise be wrongly extended.
fn extended_length(value: u64, room: u32, top: u32) -> u32 {
    let mut length = room;
    // Terminates: once length exceeds `top`, extension no longer applies and every bit of
    // `value` (at most top+1 bits) is present.
    while length < 64 + 6 {
        if extend(value, length, top) == value {
            return length;
        }
        length += 6;
    }
    length
}

/// Encodes messages into the N-Trace byte format (MSEO in bits 1..0, MDO in bits 7..2).
#[derive(Clone, Copy, Debug)]
pub struct MessageEncoder {
    options: MessageOptions,
}

impl MessageEncoder {
    /// An encoder producing the layout described by `options`.
    pub fn new(options: MessageOptions) -> Self {
        MessageEncoder { options }
    }

    /// The options this encoder was created with.
    pub fn options(&self) -> MessageOptions {
        self.options
    }

    /// Appends `count` idle bytes (0xFF).
    pub fn encode_idle(&self, count: usize, out: &mut Vec<u8>) {
        out.resize(out.len().saturating_add(count), IDLE);
    }

    /// Appends the encoding of `message` (its offset and length are ignored).
    pub fn encode_message(&self, message: &Message, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        self.encode(message.src, &message.body, message.timestamp, out)
    }

    /// Appends one message with the given SRC, fields and optional TSTAMP to `out`. Variable
    /// fields use the fewest bytes possible. On error nothing is appended.
    pub fn encode(
        &self,
        src: u16,
        body: &Body,
        timestamp: Option<u64>,
        out: &mut Vec<u8>,
    ) -> Result<(), EncodeError> {
        let src_bits = self.options.src_bits;
        if src_bits > MAX_SRC_BITS {
            return Err(EncodeError::InvalidSrcBits { src_bits });
        }
        if u32::from(src) >> src_bits != 0 {
            return Err(EncodeError::SrcOutOfRange { src, src_bits });
        }
        let mut fields = self.fields(body, timestamp)?;
        if let Some(timestamp) = timestamp {
            fields.var(Var::Plain(timestamp));
        }

        let mut writer = BitWriter {
            out,
            pending: 0,
            filled: 0,
        };
        writer.fixed(u64::from(fields.tcode), 6);
        writer.fixed(u64::from(src), u32::from(src_bits));
        for &(value, bits) in fields.fixed.iter().take(fields.fixed_count) {
            writer.fixed(value, bits);
        }
        let top = self.options.address_width.top_field_bit();
        let count = fields.var_count;
        for (index, var) in fields.vars.iter().take(count).enumerate() {
            let room = 6 - writer.filled;
            let (value, length) = match *var {
                Var::Plain(value) => (value, plain_length(value, room)),
                Var::Address(value) if self.options.address_msb_extension => {
                    (value, extended_length(value, room, top))
                }
                Var::Address(value) => (value, plain_length(value, room)),
            };
            let mseo = if index + 1 == count { 0b11 } else { 0b01 };
            writer.var(value, length, mseo);
        }
        Ok(())
    }

    fn address(&self, field: &'static str, address: u64) -> Result<Var, EncodeError> {
        if address & 1 != 0 {
            return Err(EncodeError::OddAddress { field, address });
        }
        if self.options.address_width == AddressWidth::Bits32 && address > u64::from(u32::MAX) {
            return Err(EncodeError::FieldOutOfRange {
                field,
                value: address,
            });
        }
        Ok(Var::Address(address >> 1))
    }

    fn fields(&self, body: &Body, timestamp: Option<u64>) -> Result<Fields, EncodeError> {
        let mut f = Fields::new(body.tcode());
        match *body {
            Body::Ownership { process } => {
                let Process {
                    privilege, context, ..
                } = process;
                if privilege > 3 {
                    return Err(EncodeError::FieldOutOfRange {
                        field: "PROCESS.PRV",
                        value: privilege.into(),
                    });
                }
                if context >> (64 - Process::CONTEXT_SHIFT) != 0 {
                    return Err(EncodeError::FieldOutOfRange {
                        field: "PROCESS.CONTEXT",
                        value: context,
                    });
                }
                f.var(Var::Plain(process.to_field()));
            }
            Body::DirectBranch { icnt } => {
                f.var(Var::Plain(icnt));
            }
            Body::IndirectBranch { btype, icnt, uaddr } => {
                let uaddr = self.address("U-ADDR", uaddr)?;
                f.fixed("B-TYPE", btype.bits().into(), 2)?
                    .var(Var::Plain(icnt))
                    .var(uaddr);
            }
            Body::Error { etype, ecode } => {
                f.fixed("ETYPE", etype.into(), 4)?.var(Var::Plain(ecode));
            }
            Body::ProgTraceSync { sync, icnt, faddr }
            | Body::DirectBranchSync { sync, icnt, faddr } => {
                let faddr = self.address("F-ADDR", faddr)?;
                f.fixed("SYNC", sync.0.into(), 4)?
                    .var(Var::Plain(icnt))
                    .var(faddr);
            }
            Body::IndirectBranchSync {
                sync,
                btype,
                icnt,
                faddr,
            } => {
                let faddr = self.address("F-ADDR", faddr)?;
                f.fixed("SYNC", sync.0.into(), 4)?
                    .fixed("B-TYPE", btype.bits().into(), 2)?
                    .var(Var::Plain(icnt))
                    .var(faddr);
            }
            Body::ResourceFull(resource) => match resource {
                ResourceFull::IcntOverflow { icnt } => {
                    f.fixed("RCODE", 0, 4)?.var(Var::Plain(icnt));
                }
                ResourceFull::HistOverflow { hist } => {
                    f.fixed("RCODE", 1, 4)?.var(Var::Plain(hist));
                }
                ResourceFull::RepeatedHist { hist, repeat } => {
                    f.fixed("RCODE", 2, 4)?
                        .var(Var::Plain(hist))
                        .var(Var::Plain(repeat));
                }
                ResourceFull::Other {
                    rcode,
                    rdata,
                    count,
                } => {
                    if rcode <= 2 {
                        return Err(EncodeError::Ambiguous {
                            tcode: tcode::RESOURCE_FULL,
                            reason: "RCODE 0..=2 must use the typed ResourceFull variants",
                        });
                    }
                    if !(1..=2).contains(&count) {
                        return Err(EncodeError::FieldOutOfRange {
                            field: "RDATA count",
                            value: count.into(),
                        });
                    }
                    if count == 1 && rdata[1] != 0 {
                        return Err(EncodeError::Ambiguous {
                            tcode: tcode::RESOURCE_FULL,
                            reason: "RDATA[1] is set but count is 1",
                        });
                    }
                    if count == 1 && timestamp.is_some() {
                        return Err(EncodeError::Ambiguous {
                            tcode: tcode::RESOURCE_FULL,
                            reason: "TSTAMP after a single RDATA of a reserved RCODE decodes as RDATA[1]",
                        });
                    }
                    f.fixed("RCODE", rcode.into(), 4)?.var(Var::Plain(rdata[0]));
                    if count == 2 {
                        f.var(Var::Plain(rdata[1]));
                    }
                }
            },
            Body::IndirectBranchHist {
                btype,
                icnt,
                uaddr,
                hist,
            } => {
                let uaddr = self.address("U-ADDR", uaddr)?;
                f.fixed("B-TYPE", btype.bits().into(), 2)?
                    .var(Var::Plain(icnt))
                    .var(uaddr)
                    .var(Var::Plain(hist));
            }
            Body::IndirectBranchHistSync {
                sync,
                btype,
                icnt,
                faddr,
                hist,
            } => {
                let faddr = self.address("F-ADDR", faddr)?;
                f.fixed("SYNC", sync.0.into(), 4)?
                    .fixed("B-TYPE", btype.bits().into(), 2)?
                    .var(Var::Plain(icnt))
                    .var(faddr)
                    .var(Var::Plain(hist));
            }
            Body::RepeatBranch { bcnt } => {
                f.var(Var::Plain(bcnt));
            }
            Body::ProgTraceCorrelation {
                evcode,
                cdf,
                icnt,
                hist,
            } => {
                match (cdf, hist) {
                    (0, Some(_)) => {
                        return Err(EncodeError::Ambiguous {
                            tcode: tcode::PROG_TRACE_CORRELATION,
                            reason: "CDF 0 means no HIST field",
                        })
                    }
                    (1, None) => {
                        return Err(EncodeError::Ambiguous {
                            tcode: tcode::PROG_TRACE_CORRELATION,
                            reason: "CDF 1 requires a HIST field",
                        })
                    }
                    (2 | 3, None) if timestamp.is_some() => {
                        return Err(EncodeError::Ambiguous {
                            tcode: tcode::PROG_TRACE_CORRELATION,
                            reason: "TSTAMP without HIST under a reserved CDF decodes as HIST",
                        })
                    }
                    _ => {}
                }
                f.fixed("EVCODE", evcode.0.into(), 4)?
                    .fixed("CDF", cdf.into(), 2)?
                    .var(Var::Plain(icnt));
                if let Some(hist) = hist {
                    f.var(Var::Plain(hist));
                }
            }
            Body::Other { tcode } => return Err(EncodeError::UnknownLayout { tcode }),
        }
        Ok(f)
    }
}
