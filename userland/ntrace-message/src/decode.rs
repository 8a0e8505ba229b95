use core::fmt;

use crate::error::MessageError;
use crate::layout::{self, Kind};
use crate::types::{
    Body, BranchType, CorrelationEvent, Message, MessageOptions, Process, ResourceFull, SyncReason,
};

const MSEO_END_OF_FIELD: u8 = 0b01;
const MSEO_RESERVED: u8 = 0b10;
const MSEO_END_OF_MESSAGE: u8 = 0b11;

/// Largest SRC width the decoder honours: `Message::src` is a `u16`, and it keeps the
/// TCODE+SRC+fixed header within the 30 bits of five bytes.
const MAX_DECODE_SRC_BITS: u8 = 16;

/// Variable-length fields kept per message: the longest layouts (IndirectBranchHist and
/// IndirectBranchHistSync) define three, plus TSTAMP. Further fields are only counted.
const MAX_VAR_FIELDS: usize = 4;

/// Bit 0 of every byte of a little-endian word: the low MSEO bits of 8 message bytes.
const LOW_BITS: u64 = 0x0101_0101_0101_0101;

/// Where the variable-length fields of a message of at most 8 bytes lie in its MDO bit
/// stream (6 bits per byte), looked up by its field-end bytes. Field `k` is cut out with two
/// shifts, `stream << left[k] >> right[k]`, which drop the bits after and before it.
#[derive(Clone, Copy, Debug)]
struct FieldShifts {
    /// End of the first field, in bits; 0 when there are more fields than slots, so that the
    /// parser's check that the first field ends past the header rejects the message.
    first_end: u8,
    /// 64 minus the end of each field.
    left: [u8; MAX_VAR_FIELDS],
    /// `left` plus the start of each field, the first excepted: it starts after the header,
    /// whose width the parser adds. Slots past `count` start and end where the last field
    /// ends: a right shift of 64, which wraps to a harmless 0 for their junk values.
    right: [u8; MAX_VAR_FIELDS],
    /// Number of fields.
    count: u8,
}

/// [`FieldShifts`] indexed by the bit mask of the bytes with MSEO 01 or 11 (bit k for byte k).
static FIELD_SHIFTS: [FieldShifts; 256] = {
    let mut table = [FieldShifts {
        first_end: 0,
        left: [0; MAX_VAR_FIELDS],
        right: [0; MAX_VAR_FIELDS],
        count: 0,
    }; 256];
    let mut markers = 0;
    while markers < 256 {
        let mut entry = FieldShifts {
            first_end: 0,
            left: [0; MAX_VAR_FIELDS],
            right: [0; MAX_VAR_FIELDS],
            count: 0,
        };
        let mut count = 0;
        let mut begin = 0;
        let mut byte = 0;
        while byte < 8 {
            if markers & (1 << byte) != 0 {
                let end = 6 * (byte as u8 + 1);
                if count < MAX_VAR_FIELDS {
                    entry.left[count] = 64 - end;
                    entry.right[count] = 64 - end + begin;
                }
                if count == 0 {
                    entry.first_end = end;
                }
                begin = end;
                count += 1;
            }
            byte += 1;
        }
        if count <= MAX_VAR_FIELDS {
            let mut slot = count;
            while slot < MAX_VAR_FIELDS {
                entry.left[slot] = 64 - begin;
                entry.right[slot] = 64;
                slot += 1;
            }
            entry.count = count as u8;
            table[markers] = entry;
        }
        markers += 1;
    }
    table
};

/// Per-TCODE header shape for the configured SRC width, looked up once per message.
#[derive(Clone, Copy, Debug)]
struct HeaderShape {
    kind: Kind,
    /// TCODE + SRC + fixed-length fields.
    bits: u8,
    /// Bytes holding nothing but header bits.
    full_bytes: u8,
    /// MDO bits in those bytes (6 per byte); [`u8::MAX`] for layouts the fast path leaves
    /// to the byte path, so that no field end lies past them.
    header_only_bits: u8,
}

/// A failed parse: the error, and where decoding resumes.
type Failure = (MessageError, usize);

/// The variable-length fields of one message, as a parser found them. Generic so that the
/// short path computes only the fields the message kind reads, from its bit stream.
trait Fields {
    /// Fields in the message, which may exceed [`MAX_VAR_FIELDS`].
    fn count(&self) -> usize;
    /// Value of field `k` (< [`MAX_VAR_FIELDS`]); junk when `k` >= `count`.
    fn value(&self, k: usize) -> u64;
    /// Width in bits of field `k` (for the address MSB extension); junk like the value.
    fn length(&self, k: usize) -> u32;
}

/// Fields gathered into arrays, by the byte path and [`MessageDecoder::parse_16`].
struct VarFields {
    /// Field values; slots at `count` and above may hold junk.
    values: [u64; MAX_VAR_FIELDS],
    /// Field widths in bits.
    lengths: [u32; MAX_VAR_FIELDS],
    /// Fields in the message.
    count: usize,
}

impl Fields for VarFields {
    #[inline(always)]
    fn count(&self) -> usize {
        self.count
    }

    #[inline(always)]
    fn value(&self, k: usize) -> u64 {
        self.values.get(k).copied().unwrap_or(0)
    }

    #[inline(always)]
    fn length(&self, k: usize) -> u32 {
        self.lengths.get(k).copied().unwrap_or(0)
    }
}

/// Fields of a message of at most 8 bytes, cut out of its MDO bit stream on demand.
struct ShortFields {
    /// The message's MDO bits, first byte lowest (48 bits).
    stream: u64,
    /// Where its fields lie.
    shifts: FieldShifts,
    /// TCODE + SRC + fixed-length fields, where field 0 begins.
    header_bits: u32,
}

impl ShortFields {
    /// Right shift that brings field `k` down to bit 0 after the left shift.
    #[inline(always)]
    fn right(&self, k: usize) -> u32 {
        let right = u32::from(self.shifts.right.get(k).copied().unwrap_or(0));
        if k == 0 {
            right + self.header_bits
        } else {
            right
        }
    }
}

impl Fields for ShortFields {
    #[inline(always)]
    fn count(&self) -> usize {
        usize::from(self.shifts.count)
    }

    #[inline(always)]
    fn value(&self, k: usize) -> u64 {
        let left = u32::from(self.shifts.left.get(k).copied().unwrap_or(0));
        // `left` < 64, and `right` <= 64 with 64 (wrapping to 0) only in junk slots.
        self.stream.wrapping_shl(left).wrapping_shr(self.right(k))
    }

    #[inline(always)]
    fn length(&self, k: usize) -> u32 {
        // The field runs from `right - left` to `64 - left`.
        64u32.wrapping_sub(self.right(k))
    }
}

/// Why a message's variable-length fields do not fit its layout. The byte path reports it
/// as a [`MessageError`]; the fast paths leave such messages to the byte path.
#[derive(Clone, Copy, Debug)]
enum FieldFault {
    /// Fewer fields than the layout requires.
    Missing,
    /// More fields than the layout defines, plus a TSTAMP.
    Extra,
    /// The named address field has bit 63 set, which would be address bit 64.
    AddressTooWide(&'static str),
}

/// Checks the field count against the `required` and `defined` fields of a layout and
/// returns the TSTAMP (one field after the defined ones), if present. Runs before any field
/// is read: slots at `count` and above may hold junk.
#[inline(always)]
fn timestamp(
    fields: &impl Fields,
    required: usize,
    defined: usize,
) -> Result<Option<u64>, FieldFault> {
    let count = fields.count();
    if count < required {
        return Err(FieldFault::Missing);
    }
    if count > defined + 1 {
        return Err(FieldFault::Extra);
    }
    Ok((count == defined + 1).then(|| fields.value(defined)))
}

/// Decodes N-Trace messages from a byte slice, one at a time, without allocating.
///
/// The slice must begin at a message boundary (or idle); use
/// [`MessageDecoder::sync_forward`] for buffers that may begin inside a message.
#[derive(Clone)]
pub struct MessageDecoder<'a> {
    data: &'a [u8],
    pos: usize,
    base: u64,
    options: MessageOptions,
    src_bits: u32,
    src_mask: u32,
    headers: [HeaderShape; 64],
    /// Highest address-field bit that MSB extension fills, and the mask up to it.
    address_top: u32,
    address_mask: u64,
    idle_bytes: u64,
    skipped_bytes: u64,
    byte_path_only: bool,
}

/// The word of a message of at most 8 bytes ([`MessageDecoder::short_word`]).
#[derive(Clone, Copy)]
struct ShortWord {
    word: u64,
    /// Bit 8k: byte k's MSEO low bit.
    low: u64,
    /// Bit 8k of the message's last byte k.
    stop: u32,
}

/// A message of at most 8 bytes, as [`MessageDecoder::peek_short`] found it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShortMessage {
    bytes: u64,
    length: u8,
}

impl ShortMessage {
    /// `message` (read from `stream`, the buffer whose first byte is at offset 0) as
    /// [`MessageDecoder::peek_short`] would give it: `None` when it is longer than 8
    /// bytes or `stream` does not hold it.
    pub fn of(message: &Message, stream: &[u8]) -> Option<Self> {
        let bytes = message.bytes(stream);
        if bytes.is_empty() || bytes.len() > 8 {
            return None;
        }
        let mut word = [0u8; 8];
        word[..bytes.len()].copy_from_slice(bytes);
        Some(Self {
            bytes: u64::from_le_bytes(word),
            length: bytes.len() as u8,
        })
    }

    /// The message's bytes, first byte lowest, zero above its last: equal values are
    /// equal messages.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Its length in bytes (1 to 8).
    pub fn len(&self) -> usize {
        usize::from(self.length)
    }

    /// Never: a message has at least one byte (for clippy's `len` convention).
    pub fn is_empty(&self) -> bool {
        self.length == 0
    }
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
        let mut headers = [HeaderShape {
            kind: Kind::Other,
            bits: 0,
            full_bytes: 0,
            header_only_bits: u8::MAX,
        }; 64];
        for (tcode, shape) in (0u8..).zip(headers.iter_mut()) {
            let layout = layout::layout(tcode);
            // At most 6 + 16 + 6 = 28 bits.
            let bits = 6 + src_bits as u8 + layout.fixed_bits;
            *shape = HeaderShape {
                kind: layout.kind,
                bits,
                full_bytes: bits / 6,
                header_only_bits: if layout.kind == Kind::Other {
                    u8::MAX
                } else {
                    bits / 6 * 6
                },
            };
        }
        MessageDecoder {
            data,
            pos: 0,
            base: 0,
            options,
            src_bits,
            src_mask: (1u32 << src_bits) - 1,
            headers,
            address_top: options.address_width.top_field_bit(),
            address_mask: u64::MAX >> (63 - options.address_width.top_field_bit()),
            idle_bytes: 0,
            skipped_bytes: 0,
            byte_path_only: false,
        }
    }

    /// Disables the word-at-a-time fast path, for differential tests of the two parsers.
    #[doc(hidden)]
    pub fn byte_path_only(mut self) -> Self {
        self.byte_path_only = true;
        self
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

    /// The raw bytes of the next message when it is short: at most 8 bytes, starting
    /// right here (not idle) and ending with MSEO=11 within the next 8 bytes of input.
    /// For callers that cache what a message does by its bytes; [`Self::skip_short`]
    /// then moves past it without parsing. `None` for anything else.
    #[inline(always)]
    pub fn peek_short(&self) -> Option<ShortMessage> {
        let ShortWord { word, stop, .. } = self.short_word(self.pos)?;
        // `stop` is bit 8k of byte k, the message's last: keep bytes 0..=k.
        let length = stop / 8 + 1;
        let bytes = if length == 8 {
            word
        } else {
            word & ((1u64 << (8 * length)) - 1)
        };
        Some(ShortMessage {
            bytes,
            length: length as u8,
        })
    }

    /// Moves past the message [`Self::peek_short`] just returned.
    #[inline(always)]
    pub fn skip_short(&mut self, message: ShortMessage) {
        self.pos += usize::from(message.length);
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
            self.skipped_bytes = self
                .skipped_bytes
                .wrapping_add(len.saturating_sub(start) as u64);
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
        // The common case, a well-formed message of at most 8 bytes right here, is kept small
        // enough to inline into the caller; everything else is out of line.
        if !self.byte_path_only {
            if let Some((message, end)) = self.parse_short(self.pos) {
                self.pos = end;
                return Ok(Some(message));
            }
        }
        self.next_message_general()
    }

    /// [`Self::next_message`] for everything but a short message at the current position:
    /// idle bytes, longer messages, the end of the input and errors.
    #[inline(never)]
    fn next_message_general(&mut self) -> Result<Option<Message>, MessageError> {
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
    fn parse(&self, start: usize) -> Result<(Message, usize), Failure> {
        if self.byte_path_only {
            return self.parse_bytes(start);
        }
        match self.parse_short(start).or_else(|| self.parse_16(start)) {
            Some(parsed) => Ok(parsed),
            None => self.parse_bytes(start),
        }
    }

    /// Fast path for well-formed messages of at most 8 bytes: the MSEO bits of one 8-byte
    /// word locate the message end and, through [`FIELD_SHIFTS`], every field end at once, and
    /// the MDO bits are compacted into one contiguous bit stream, so fields are cut out with
    /// shifts instead of a data-dependent branch per byte. Returns `None` for anything else
    /// (idle, errors, longer messages), which [`Self::parse_16`] and the byte-wise
    /// [`Self::parse_bytes`] then handle, so all paths give identical results.
    /// The 8 bytes at `start` when they hold a whole message that starts there: its
    /// word, the MSEO low bits of each byte, and the bit (8k) of its last byte k.
    #[inline(always)]
    fn short_word(&self, start: usize) -> Option<ShortWord> {
        let rest = self.data.get(start..)?;
        let word = u64::from_le_bytes(*rest.first_chunk::<8>()?);
        let low = word & LOW_BITS;
        let high = (word >> 1) & LOW_BITS;
        // Byte 0 with MSEO 01, 10 or 11 (idle) is left to the general path.
        if (low | high) & 1 != 0 {
            return None;
        }
        // Bit 8k of `high` is set when byte k has MSEO 1x: the first one ends the message,
        // unless it is the reserved 10. None in the word: a longer message.
        let stop = high.trailing_zeros();
        if stop == 64 || (low >> stop) & 1 == 0 {
            return None;
        }
        Some(ShortWord { word, low, stop })
    }

    #[inline(always)]
    fn parse_short(&self, start: usize) -> Option<(Message, usize)> {
        let ShortWord { word, low, stop } = self.short_word(start)?;
        let tcode = (word as u8) >> 2;
        let shape = self.headers[usize::from(tcode & 0x3f)];
        // Bit 0 of the MSEO marks both 01 and 11 once 10 is excluded.
        let shifts = FIELD_SHIFTS[gather_lsb(low & (u64::MAX >> (63 - stop))) as usize & 0xff];
        // One test for three fallbacks: a first field end inside the bytes that hold only
        // header bits, more fields than slots (their table entries end the first field at
        // 0) and unknown layouts (whose shapes make every end fail).
        if shifts.first_end <= shape.header_only_bits {
            return None;
        }
        let stream = compact_mdo(word);
        let header_bits = u32::from(shape.bits);
        let header = (stream as u32) & ((1u32 << header_bits) - 1);
        // Fields here are at most 48 bits, so no width check is needed; each message kind
        // cuts out only the fields it reads.
        let fields = ShortFields {
            stream,
            shifts,
            header_bits,
        };
        let end = start + stop as usize / 8 + 1;
        self.build_short(shape.kind, tcode, header, &fields, start, end)
    }

    /// Fast path for well-formed messages of 9 to 16 bytes, like [`Self::parse_short`]. The
    /// MDO stream is kept as two 48-bit halves, and the field ends are gathered to one bit
    /// per byte.
    #[inline(always)]
    fn parse_16(&self, start: usize) -> Option<(Message, usize)> {
        let rest = self.data.get(start..)?;
        let first = u64::from_le_bytes(*rest.first_chunk::<8>()?);
        // The first 8 bytes must hold no MSEO=1x byte, and byte 0 no MSEO=01 either.
        if (first >> 1) & LOW_BITS != 0 || first & 1 != 0 {
            return None;
        }
        let second = u64::from_le_bytes(*rest.get(8..)?.first_chunk::<8>()?);
        let high = (second >> 1) & LOW_BITS;
        let stop = high.trailing_zeros();
        if stop == 64 || (second >> stop) & 1 == 0 {
            return None;
        }
        let tcode = (first as u8) >> 2;
        let header = self.headers[usize::from(tcode & 0x3f)];
        if header.kind == Kind::Other {
            return None;
        }
        let last_byte = 8 + stop / 8;
        let markers =
            (gather_lsb(first) | gather_lsb(second) << 8) & (u32::MAX >> (31 - last_byte));
        let header_bits = u32::from(header.bits);
        if markers.trailing_zeros() < u32::from(header.full_bytes) {
            return None;
        }
        let low_half = compact_mdo(first);
        let high_half = compact_mdo(second);
        let kind = header.kind;
        let header = (low_half as u32) & ((1u32 << header_bits) - 1);

        let mut fields = [0u64; MAX_VAR_FIELDS];
        let mut lengths = [0u32; MAX_VAR_FIELDS];
        let mut count = 0usize;
        let mut begin = header_bits;
        let mut remaining = markers;
        let mut too_long = false;
        for (field, length) in fields.iter_mut().zip(lengths.iter_mut()) {
            let present = remaining != 0;
            count += usize::from(present);
            // No marker left: the field "ends" at bit 198; its junk value is never read and
            // the wrapping shifts keep it harmless.
            let field_end = 6 * (remaining.trailing_zeros() + 1);
            remaining &= remaining.wrapping_sub(1);
            let bits = field_end.wrapping_sub(begin);
            too_long |= present & (bits > 64);
            // Bits from `begin` on, from whichever half holds them (64 bits are enough).
            let spliced =
                low_half.wrapping_shr(begin) | high_half.wrapping_shl(48u32.wrapping_sub(begin));
            let upper = high_half.wrapping_shr(begin.wrapping_sub(48));
            let value = if begin < 48 { spliced } else { upper };
            let mask =
                1u64.wrapping_shl(bits).wrapping_sub(1) | u64::from(bits >= 64).wrapping_neg();
            *field = value & mask;
            *length = bits;
            begin = field_end;
        }
        // Wider than 64 bits, or more fields than slots (ExtraFields): byte path.
        if too_long | (remaining != 0) {
            return None;
        }
        let end = start + last_byte as usize + 1;
        let fields = VarFields {
            values: fields,
            lengths,
            count,
        };
        self.build_short(kind, tcode, header, &fields, start, end)
    }

    /// Byte-at-a-time parser: handles every message, and reports every error.
    #[cold]
    fn parse_bytes(&self, start: usize) -> Result<(Message, usize), Failure> {
        let data = self.data;
        let offset = self.offset_of(start);
        let truncated = || (MessageError::Truncated { offset }, data.len());
        let first = *data.get(start).ok_or_else(truncated)?;
        match first & 3 {
            MSEO_END_OF_FIELD => {
                return Err((
                    MessageError::InvalidMessageStart { offset },
                    self.resync_after(start),
                ))
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
                if let (Some(field), Some(length)) = (fields.get_mut(count), lengths.get_mut(count))
                {
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
        let fields = VarFields {
            values: fields,
            lengths,
            count,
        };
        self.build(kind, tcode, header, &fields, start, end)
    }

    /// Builds the message of `kind` that spans `start..end` from its header (TCODE, SRC and
    /// the fixed-length fields) and its variable-length fields, reporting a mismatch with
    /// the layout as the error it is.
    #[inline(always)]
    fn build(
        &self,
        kind: Kind,
        tcode: u8,
        header: u32,
        fields: &VarFields,
        start: usize,
        end: usize,
    ) -> Result<(Message, usize), Failure> {
        let fixed = header >> (6 + self.src_bits);
        match self.interpret(kind, tcode, fixed, fields) {
            Ok((body, timestamp)) => Ok((self.message(header, start, end, body, timestamp), end)),
            Err(fault) => {
                Err(self.field_failure(fault, kind, tcode, fixed, fields.count(), start, end))
            }
        }
    }

    /// [`Self::build`] for the fast paths, which leave every mismatch to the byte path.
    #[inline(always)]
    fn build_short(
        &self,
        kind: Kind,
        tcode: u8,
        header: u32,
        fields: &impl Fields,
        start: usize,
        end: usize,
    ) -> Option<(Message, usize)> {
        let fixed = header >> (6 + self.src_bits);
        let (body, timestamp) = self.interpret(kind, tcode, fixed, fields).ok()?;
        Some((self.message(header, start, end, body, timestamp), end))
    }

    /// The message that spans `start..end`, with SRC taken from `header`.
    #[inline(always)]
    fn message(
        &self,
        header: u32,
        start: usize,
        end: usize,
        body: Body,
        timestamp: Option<u64>,
    ) -> Message {
        Message {
            offset: self.offset_of(start),
            length: u32::try_from(end - start).unwrap_or(u32::MAX),
            src: ((header >> 6) & self.src_mask) as u16,
            timestamp,
            body,
        }
    }

    /// The error for `fault` in the message of `kind` that spans `start..end`.
    #[cold]
    #[expect(
        clippy::too_many_arguments,
        reason = "what the error names, passed as the hot path has it rather than gathered \
                  into a struct for the rare error"
    )]
    fn field_failure(
        &self,
        fault: FieldFault,
        kind: Kind,
        tcode: u8,
        fixed: u32,
        count: usize,
        start: usize,
        end: usize,
    ) -> Failure {
        let offset = self.offset_of(start);
        let error = match fault {
            FieldFault::Missing => MessageError::MissingField {
                offset,
                tcode,
                field: layout::var_field_name(kind, fixed, count),
            },
            FieldFault::Extra => MessageError::ExtraFields { offset, tcode },
            FieldFault::AddressTooWide(field) => MessageError::FieldTooWide { offset, field },
        };
        (error, end)
    }

    /// Interprets the variable-length fields of a message of `kind` whose fixed-length
    /// fields hold `fixed`: checks the field count against the layout and builds the body
    /// and TSTAMP. Plain functions rather than closures for the checks, so that the results
    /// stay in registers: an out-of-line closure returning its `Result` through memory cost
    /// a store-forwarding stall per message.
    #[inline(always)]
    fn interpret(
        &self,
        kind: Kind,
        tcode: u8,
        fixed: u32,
        fields: &impl Fields,
    ) -> Result<(Body, Option<u64>), FieldFault> {
        let field = |k: usize| fields.value(k);
        let sync = SyncReason((fixed & 0xf) as u8);
        // One dispatch on the kind for both the count check and the body: with a mixed
        // message stream every extra indirect jump is another likely misprediction.
        let parsed = match kind {
            Kind::Ownership => {
                let timestamp = timestamp(fields, 1, 1)?;
                let process = Process::from_field(field(0));
                (Body::Ownership { process }, timestamp)
            }
            Kind::DirectBranch => {
                let timestamp = timestamp(fields, 1, 1)?;
                (Body::DirectBranch { icnt: field(0) }, timestamp)
            }
            Kind::IndirectBranch => {
                let timestamp = timestamp(fields, 2, 2)?;
                let body = Body::IndirectBranch {
                    btype: BranchType::from_bits(fixed as u8),
                    icnt: field(0),
                    uaddr: self.address_field(fields, 1, "U-ADDR")?,
                };
                (body, timestamp)
            }
            Kind::Error => {
                let timestamp = timestamp(fields, 1, 1)?;
                let body = Body::Error {
                    etype: (fixed & 0xf) as u8,
                    ecode: field(0),
                };
                (body, timestamp)
            }
            Kind::ProgTraceSync => {
                let timestamp = timestamp(fields, 2, 2)?;
                let body = Body::ProgTraceSync {
                    sync,
                    icnt: field(0),
                    faddr: self.address_field(fields, 1, "F-ADDR")?,
                };
                (body, timestamp)
            }
            Kind::DirectBranchSync => {
                let timestamp = timestamp(fields, 2, 2)?;
                let body = Body::DirectBranchSync {
                    sync,
                    icnt: field(0),
                    faddr: self.address_field(fields, 1, "F-ADDR")?,
                };
                (body, timestamp)
            }
            Kind::IndirectBranchSync => {
                let timestamp = timestamp(fields, 2, 2)?;
                let body = Body::IndirectBranchSync {
                    sync,
                    btype: BranchType::from_bits((fixed >> 4) as u8),
                    icnt: field(0),
                    faddr: self.address_field(fields, 1, "F-ADDR")?,
                };
                (body, timestamp)
            }
            Kind::ResourceFull => match fixed & 0xf {
                0 => {
                    let timestamp = timestamp(fields, 1, 1)?;
                    let icnt = field(0);
                    (
                        Body::ResourceFull(ResourceFull::IcntOverflow { icnt }),
                        timestamp,
                    )
                }
                1 => {
                    let timestamp = timestamp(fields, 1, 1)?;
                    let hist = field(0);
                    (
                        Body::ResourceFull(ResourceFull::HistOverflow { hist }),
                        timestamp,
                    )
                }
                2 => {
                    let timestamp = timestamp(fields, 2, 2)?;
                    let resource = ResourceFull::RepeatedHist {
                        hist: field(0),
                        repeat: field(1),
                    };
                    (Body::ResourceFull(resource), timestamp)
                }
                rcode => {
                    // Reserved and vendor RCODEs: one or two RDATA fields, layout unknown.
                    let timestamp = timestamp(fields, 1, 2)?;
                    let present = fields.count().min(2);
                    let resource = ResourceFull::Other {
                        rcode: rcode as u8,
                        rdata: [field(0), if present > 1 { field(1) } else { 0 }],
                        count: present as u8,
                    };
                    (Body::ResourceFull(resource), timestamp)
                }
            },
            Kind::IndirectBranchHist => {
                let timestamp = timestamp(fields, 3, 3)?;
                let body = Body::IndirectBranchHist {
                    btype: BranchType::from_bits(fixed as u8),
                    icnt: field(0),
                    uaddr: self.address_field(fields, 1, "U-ADDR")?,
                    hist: field(2),
                };
                (body, timestamp)
            }
            Kind::IndirectBranchHistSync => {
                let timestamp = timestamp(fields, 3, 3)?;
                let body = Body::IndirectBranchHistSync {
                    sync,
                    btype: BranchType::from_bits((fixed >> 4) as u8),
                    icnt: field(0),
                    faddr: self.address_field(fields, 1, "F-ADDR")?,
                    hist: field(2),
                };
                (body, timestamp)
            }
            Kind::RepeatBranch => {
                let timestamp = timestamp(fields, 1, 1)?;
                (Body::RepeatBranch { bcnt: field(0) }, timestamp)
            }
            Kind::ProgTraceCorrelation => {
                let cdf = ((fixed >> 4) & 3) as u8;
                // Reserved CDF 2 and 3: HIST when a second field is there.
                let defined = if cdf == 0 { 1 } else { 2 };
                let required = if cdf == 1 { 2 } else { 1 };
                let timestamp = timestamp(fields, required, defined)?;
                let body = Body::ProgTraceCorrelation {
                    evcode: CorrelationEvent((fixed & 0xf) as u8),
                    cdf,
                    icnt: field(0),
                    hist: (fields.count().min(defined) > 1).then(|| field(1)),
                };
                (body, timestamp)
            }
            Kind::Other => (Body::Other { tcode }, None),
        };
        Ok(parsed)
    }

    /// Address field number `k` of `fields`, see [`Self::address`].
    #[inline(always)]
    fn address_field(
        &self,
        fields: &impl Fields,
        k: usize,
        name: &'static str,
    ) -> Result<u64, FieldFault> {
        self.address(fields.value(k), fields.length(k))
            .ok_or(FieldFault::AddressTooWide(name))
    }

    /// Turns an F-ADDR/U-ADDR field of `length` bits into an address: MSB extension (spec
    /// 8.2) when enabled, then the shift that restores address bit 0. `None` when the field
    /// has bit 63 set, which would be address bit 64.
    #[inline(always)]
    fn address(&self, field: u64, length: u32) -> Option<u64> {
        // The option never changes, so this branch is always predicted; without it, the
        // extension's dozen instructions were paid on every address.
        if !self.options.address_msb_extension {
            return (field >> 63 == 0).then_some(field << 1);
        }
        // Branch-free: whether the extension applies depends on trace data.
        let msb = field.checked_shr(length.wrapping_sub(1)).unwrap_or(0) & 1;
        let applies =
            self.options.address_msb_extension & (length <= self.address_top) & (msb == 1);
        let fill = u64::MAX.checked_shl(length).unwrap_or(0) & self.address_mask;
        let value = field | (fill & 0u64.wrapping_sub(u64::from(applies)));
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
        for (j, b) in data
            .get(start..end)
            .unwrap_or(&[])
            .iter()
            .take(5)
            .enumerate()
        {
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

/// Gathers bit 0 of each of the 8 bytes of `word` into bits 0..8 (byte k to bit k).
#[inline(always)]
fn gather_lsb(word: u64) -> u32 {
    ((word & 0x0101_0101_0101_0101).wrapping_mul(0x0102_0408_1020_4080) >> 56) as u32
}

/// Compacts the MDO bits (7..2) of 8 bytes into a contiguous 48-bit stream, first byte
/// lowest, by merging neighbouring groups in three doubling steps.
#[inline(always)]
fn compact_mdo(word: u64) -> u64 {
    let x = (word >> 2) & 0x3F3F_3F3F_3F3F_3F3F;
    let x = (x & 0x003F_003F_003F_003F) | ((x >> 2) & 0x0FC0_0FC0_0FC0_0FC0);
    let x = (x & 0x0000_0FFF_0000_0FFF) | ((x >> 4) & 0x00FF_F000_00FF_F000);
    (x & 0x0000_0000_00FF_FFFF) | ((x >> 8) & 0x0000_FFFF_FF00_0000)
}

impl Iterator for MessageDecoder<'_> {
    type Item = Result<Message, MessageError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        self.next_message().transpose()
    }
}

impl core::iter::FusedIterator for MessageDecoder<'_> {}
