use core::fmt;

use crate::error::MessageError;
use crate::layout::{self, Kind};
use crate::types::{Body, BranchType, Message, MessageOptions, Process, ResourceFull, SyncReason};

const MSEO_END_OF_FIELD: u8 = 0b01;
const MSEO_RESERVED: u8 = 0b10;
const MSEO_END_OF_MESSAGE: u8 = 0b11;

/// Largest SRC width the decoder honours: `Message::src` is a `u16`, and it keeps the
/// TCODE+SRC+fixed header within the 30 bits of five bytes.
const MAX_DECODE_SRC_BITS: u8 = 16;

/// Variable-length fields kept per message: the longest layouts (IndirectBranchHist and
/// IndirectBranchHistSync) define three, plus TSTAMP. Further fields are only counted.
const MAX_VAR_FIELDS: usize = 4;

/// A failed parse: the error, and where decoding resumes.
type Failure = (MessageError, usize);

/// Decodes N-Trace messages from a byte slice, one at a time, without allocating.
///
/// The slice must begin at a message boundary (or idle); use
/// [`MessageDecoder::sync_forward`] for buffers that may begin inside a message.
pub struct MessageDecoder<'a> {
    data: &'a [u8],
    pos: usize,
    base: u64,
    options: MessageOptions,
    src_bits: u32,
    src_mask: u32,
    idle_bytes: u64,
    skipped_bytes: u64,
}

impl fmt::Debug for MessageDecoder<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MessageDecoder")
            .field("len", &self.data.len())
            .field("position", &self.position())
            .field("base", &self.base)
            .field("options", &self.options)
            .field("idle_bytes", &self.idle_bytes)
            .field("skipped_bytes", &self.skipped_bytes)
            .finish()
    }
}

impl<'a> MessageDecoder<'a> {
    /// A decoder over `data`, which is assumed to start at a message boundary.
    pub fn new(data: &'a [u8], options: MessageOptions) -> Self {
        let src_bits = u32::from(options.src_bits.min(MAX_DECODE_SRC_BITS));
        MessageDecoder {
            data,
            pos: 0,
            base: 0,
            options,
            src_bits,
            src_mask: (1u32 << src_bits) - 1,
            idle_bytes: 0,
            skipped_bytes: 0,
        }
    }

    /// Reports offsets as `base` plus the position in the slice, for input read in chunks.
    pub fn with_base_offset(mut self, base: u64) -> Self {
        self.base = base;
        self
    }

    /// The options this decoder was created with.
    pub fn options(&self) -> MessageOptions {
        self.options
    }

    /// Offset (base included) of the next byte to be examined.
    #[inline]
    pub fn position(&self) -> u64 {
        self.offset_of(self.pos)
    }

    /// Idle bytes (MSEO=11 between messages) skipped so far.
    #[inline]
    pub fn idle_bytes(&self) -> u64 {
        self.idle_bytes
    }

    /// Bytes thrown away so far by resynchronisation after errors and by
    /// [`MessageDecoder::sync_forward`].
    #[inline]
    pub fn skipped_bytes(&self) -> u64 {
        self.skipped_bytes
    }

    /// The part of the input not decoded yet.
    pub fn remaining(&self) -> &'a [u8] {
        self.data.get(self.pos..).unwrap_or(&[])
    }

    #[inline]
    fn offset_of(&self, index: usize) -> u64 {
        self.base.wrapping_add(index as u64)
    }

    /// Skips to the first message start after the next byte with MSEO=11, for buffers that
    /// begin in the middle of a message. Returns the offset of that message start, or `None`
    /// (with the decoder at the end) when there is none.
    pub fn sync_forward(&mut self) -> Option<u64> {
        let start = self.pos;
        let len = self.data.len();
        let Some(end) = self
            .data
            .get(start..)
            .and_then(|rest| rest.iter().position(|&b| b & 3 == MSEO_END_OF_MESSAGE))
        else {
            self.skipped_bytes = self.skipped_bytes.wrapping_add(len.saturating_sub(start) as u64);
            self.pos = len.max(start);
            return None;
        };
        let after = start + end + 1;
        self.skipped_bytes = self.skipped_bytes.wrapping_add((after - start) as u64);
        let mut pos = after;
        while let Some(&b) = self.data.get(pos) {
            if b & 3 != MSEO_END_OF_MESSAGE {
                break;
            }
            pos += 1;
        }
        self.idle_bytes = self.idle_bytes.wrapping_add((pos - after) as u64);
        self.pos = pos;
        (pos < len).then(|| self.offset_of(pos))
    }

    /// Decodes the next message, skipping idle bytes before it. `Ok(None)` at the end of the
    /// input. After an error the decoder has already moved past the bad message (just after
    /// the next byte with MSEO=11), so calling again resynchronises.
    #[inline]
    pub fn next_message(&mut self) -> Result<Option<Message>, MessageError> {
        let data = self.data;
        let mut pos = self.pos;
        while let Some(&b) = data.get(pos) {
            // Any MSEO=11 byte where a message should start is idle: Table 5 allows more
            // 11s after a message end, and 0xFF is the canonical idle byte.
            if b & 3 != MSEO_END_OF_MESSAGE {
                break;
            }
            pos += 1;
        }
        self.idle_bytes = self.idle_bytes.wrapping_add((pos - self.pos) as u64);
        self.pos = pos;
        if pos >= data.len() {
            return Ok(None);
        }
        match self.parse(pos) {
            Ok((message, end)) => {
                self.pos = end;
                Ok(Some(message))
            }
            Err((error, resume)) => {
                // Always at least one byte forward, so callers looping on errors terminate.
                let resume = resume.max(pos + 1).min(data.len());
                self.skipped_bytes = self.skipped_bytes.wrapping_add((resume - pos) as u64);
                self.pos = resume;
                Err(error)
            }
        }
    }

    /// Index just after the first byte with MSEO=11 at or after `from`.
    fn resync_after(&self, from: usize) -> usize {
        self.data
            .get(from..)
            .and_then(|rest| rest.iter().position(|&b| b & 3 == MSEO_END_OF_MESSAGE))
            .map_or(self.data.len(), |k| from + k + 1)
    }

    /// Parses the message whose first byte is at `start` (known to exist and not to be idle).
    /// Returns the message and the index just after it.
    #[inline(always)]
    fn parse(&self, start: usize) -> Result<(Message, usize), Failure> {
        let data = self.data;
        let offset = self.offset_of(start);
        let truncated = || (MessageError::Truncated { offset }, data.len());
        let first = *data.get(start).ok_or_else(truncated)?;
        match first & 3 {
            MSEO_END_OF_FIELD => {
                return Err((MessageError::InvalidMessageStart { offset }, self.resync_after(start)))
            }
            MSEO_RESERVED => {
                return Err((
                    MessageError::ReservedMseo {
                        offset,
                        byte_offset: offset,
                    },
                    self.resync_after(start),
                ))
            }
            _ => {}
        }
        let tcode = first >> 2;
        let layout = layout::layout(tcode);
        if layout.kind == Kind::Other {
            return self.parse_other(start, tcode);
        }
        let kind = layout.kind;

        // Header: TCODE, SRC and the fixed-length fields, at most 6+16+6 = 28 bits.
        let header_bits = 6 + self.src_bits + u32::from(layout.fixed_bits);
        let full_bytes = (header_bits / 6) as usize;
        let shared_bits = header_bits % 6;
        let mut header = u32::from(first >> 2);
        let mut i = start + 1;
        let header_end = start + full_bytes;
        while i < header_end {
            let b = *data.get(i).ok_or_else(truncated)?;
            match b & 3 {
                0 => {}
                MSEO_END_OF_FIELD => {
                    return Err((
                        MessageError::UnexpectedFieldEnd {
                            offset,
                            byte_offset: self.offset_of(i),
                        },
                        self.resync_after(i),
                    ))
                }
                MSEO_RESERVED => {
                    return Err((
                        MessageError::ReservedMseo {
                            offset,
                            byte_offset: self.offset_of(i),
                        },
                        self.resync_after(i),
                    ))
                }
                _ => {
                    let bits_present = 6 * (i - start + 1) as u32;
                    return Err((
                        MessageError::MissingField {
                            offset,
                            tcode,
                            field: layout::header_field_name(kind, self.src_bits, bits_present),
                        },
                        i + 1,
                    ));
                }
            }
            header |= u32::from(b >> 2) << (6 * (i - start) as u32);
            i += 1;
        }
        if shared_bits != 0 {
            // The last header byte also carries the first bits of the first variable field;
            // its MSEO belongs to that field and is handled by the loop below.
            let b = *data.get(i).ok_or_else(truncated)?;
            header |= (u32::from(b >> 2) & ((1 << shared_bits) - 1)) << (6 * full_bytes as u32);
        }

        // Variable-length fields: each runs to the end of the byte whose MSEO is 01 or 11.
        let mut fields = [0u64; MAX_VAR_FIELDS];
        let mut lengths = [0u32; MAX_VAR_FIELDS];
        let mut count = 0usize;
        let mut acc = 0u64;
        let mut shift = 0u32;
        let mut wide = false;
        let mut skip = shared_bits;
        loop {
            let b = *data.get(i).ok_or_else(truncated)?;
            let mdo = u64::from(b >> 2) >> skip;
            if shift < 64 {
                acc |= mdo << shift;
                if shift > 58 {
                    wide |= mdo >> (64 - shift) != 0;
                }
            } else {
                // Zero padding beyond bit 63 is legal (corrupt all-zero traces look like
                // this); it only needs checking, not storing.
                wide |= mdo != 0;
            }
            shift = shift.saturating_add(6 - skip);
            skip = 0;
            let mseo = b & 3;
            if mseo != 0 {
                if mseo == MSEO_RESERVED {
                    return Err((
                        MessageError::ReservedMseo {
                            offset,
                            byte_offset: self.offset_of(i),
                        },
                        self.resync_after(i),
                    ));
                }
                if wide {
                    let fixed = header >> (6 + self.src_bits);
                    return Err((
                        MessageError::FieldTooWide {
                            offset,
                            field: layout::var_field_name(kind, fixed, count),
                        },
                        self.resync_after(i),
                    ));
                }
                if let (Some(field), Some(length)) = (fields.get_mut(count), lengths.get_mut(count)) {
                    *field = acc;
                    *length = shift;
                }
                count += 1;
                acc = 0;
                shift = 0;
                if mseo == MSEO_END_OF_MESSAGE {
                    break;
                }
            }
            i += 1;
        }
        let end = i + 1;

        let src = ((header >> 6) & self.src_mask) as u16;
        let fixed = header >> (6 + self.src_bits);
        let (required, defined) = match kind {
            Kind::Ownership | Kind::DirectBranch | Kind::Error | Kind::RepeatBranch => (1, 1),
            Kind::IndirectBranch
            | Kind::ProgTraceSync
            | Kind::DirectBranchSync
            | Kind::IndirectBranchSync => (2, 2),
            Kind::IndirectBranchHist | Kind::IndirectBranchHistSync => (3, 3),
            Kind::ResourceFull => match fixed & 0xf {
                0 | 1 => (1, 1),
                2 => (2, 2),
                // Reserved and vendor RCODEs: one or two RDATA fields, layout unknown.
                _ => (1, 2),
            },
            Kind::ProgTraceCorrelation => match (fixed >> 4) & 3 {
                0 => (1, 1),
                1 => (2, 2),
                // Reserved CDF: HIST when a second field is there.
                _ => (1, 2),
            },
            Kind::Other => (0, 0),
        };
        if count < required {
            return Err((
                MessageError::MissingField {
                    offset,
                    tcode,
                    field: layout::var_field_name(kind, fixed, count),
                },
                end,
            ));
        }
        if count > defined + 1 {
            return Err((MessageError::ExtraFields { offset, tcode }, end));
        }
        let timestamp = if count == defined + 1 {
            fields.get(defined).copied()
        } else {
            None
        };
        let field = |k: usize| fields.get(k).copied().unwrap_or(0);
        let address = |k: usize, name: &'static str| {
            self.address(field(k), lengths.get(k).copied().unwrap_or(0))
                .ok_or((MessageError::FieldTooWide { offset, field: name }, end))
        };
        let sync = SyncReason((fixed & 0xf) as u8);
        let body = match kind {
            Kind::Ownership => Body::Ownership {
                process: Process::from_field(field(0)),
            },
            Kind::DirectBranch => Body::DirectBranch { icnt: field(0) },
            Kind::IndirectBranch => Body::IndirectBranch {
                btype: BranchType::from_bits(fixed as u8),
                icnt: field(0),
                uaddr: address(1, "U-ADDR")?,
            },
            Kind::Error => Body::Error {
                etype: (fixed & 0xf) as u8,
                ecode: field(0),
            },
            Kind::ProgTraceSync => Body::ProgTraceSync {
                sync,
                icnt: field(0),
                faddr: address(1, "F-ADDR")?,
            },
            Kind::DirectBranchSync => Body::DirectBranchSync {
                sync,
                icnt: field(0),
                faddr: address(1, "F-ADDR")?,
            },
            Kind::IndirectBranchSync => Body::IndirectBranchSync {
                sync,
                btype: BranchType::from_bits((fixed >> 4) as u8),
                icnt: field(0),
                faddr: address(1, "F-ADDR")?,
            },
            Kind::ResourceFull => Body::ResourceFull(match fixed & 0xf {
                0 => ResourceFull::IcntOverflow { icnt: field(0) },
                1 => ResourceFull::HistOverflow { hist: field(0) },
                2 => ResourceFull::RepeatedHist {
                    hist: field(0),
                    repeat: field(1),
                },
                rcode => {
                    let present = count.min(defined);
                    ResourceFull::Other {
                        rcode: rcode as u8,
                        rdata: [field(0), if present > 1 { field(1) } else { 0 }],
                        count: present as u8,
                    }
                }
            }),
            Kind::IndirectBranchHist => Body::IndirectBranchHist {
                btype: BranchType::from_bits(fixed as u8),
                icnt: field(0),
                uaddr: address(1, "U-ADDR")?,
                hist: field(2),
            },
            Kind::IndirectBranchHistSync => Body::IndirectBranchHistSync {
                sync,
                btype: BranchType::from_bits((fixed >> 4) as u8),
                icnt: field(0),
                faddr: address(1, "F-ADDR")?,
                hist: field(2),
            },
            Kind::RepeatBranch => Body::RepeatBranch { bcnt: field(0) },
            Kind::ProgTraceCorrelation => Body::ProgTraceCorrelation {
                evcode: (fixed & 0xf) as u8,
                cdf: ((fixed >> 4) & 3) as u8,
                icnt: field(0),
                hist: (count.min(defined) > 1).then(|| field(1)),
            },
            Kind::Other => Body::Other { tcode },
        };
        Ok((
            Message {
                offset,
                length: u32::try_from(end - start).unwrap_or(u32::MAX),
                src,
                timestamp,
                body,
            },
            end,
        ))
    }

    /// Turns an F-ADDR/U-ADDR field of `length` bits into an address: MSB extension (spec
    /// 8.2) when enabled, then the shift that restores address bit 0. `None` when the field
    /// has bit 63 set, which would be address bit 64.
    #[inline]
    fn address(&self, field: u64, length: u32) -> Option<u64> {
        let mut value = field;
        let top = self.options.address_width.top_field_bit();
        if self.options.address_msb_extension
            && length != 0
            && length <= top
            && (value >> (length - 1)) & 1 == 1
        {
            value |= (u64::MAX << length) & (u64::MAX >> (63 - top));
        }
        (value >> 63 == 0).then_some(value << 1)
    }

    /// Vendor-defined or reserved TCODE: the layout is unknown, so only the message end and
    /// the SRC field (always second, spec 3.2) are extracted.
    #[cold]
    fn parse_other(&self, start: usize, tcode: u8) -> Result<(Message, usize), Failure> {
        let data = self.data;
        let offset = self.offset_of(start);
        let rest = data.get(start + 1..).unwrap_or(&[]);
        let Some(k) = rest.iter().position(|&b| b & 2 != 0) else {
            return Err((MessageError::Truncated { offset }, data.len()));
        };
        let i = start + 1 + k;
        let last = rest.get(k).copied().unwrap_or(0);
        if last & 3 == MSEO_RESERVED {
            return Err((
                MessageError::ReservedMseo {
                    offset,
                    byte_offset: self.offset_of(i),
                },
                self.resync_after(i),
            ));
        }
        let end = i + 1;
        let mut header = 0u32;
        // Up to five bytes hold TCODE plus a 16-bit SRC; a short message leaves SRC's top
        // bits zero rather than failing, so the message is still surfaced.
        for (j, b) in data.get(start..end).unwrap_or(&[]).iter().take(5).enumerate() {
            header |= u32::from(b >> 2) << (6 * j as u32);
        }
        Ok((
            Message {
                offset,
                length: u32::try_from(end - start).unwrap_or(u32::MAX),
                src: ((header >> 6) & self.src_mask) as u16,
                timestamp: None,
                body: Body::Other { tcode },
            },
            end,
        ))
    }
}

impl Iterator for MessageDecoder<'_> {
    type Item = Result<Message, MessageError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        self.next_message().transpose()
    }
}

impl core::iter::FusedIterator for MessageDecoder<'_> {}
