//! The encoder: sequences → packets, compressed as the fill rules allow, padded with Nops
//! so that synchronisation points start a unit, written a 32-bit word at a time into a
//! growing buffer or a ring.

use std::collections::BTreeMap;

use crate::error::EncodeError;
use crate::fill::{fill, low_mask, packets_needed, FillRule, LastValues};
use crate::types::{Header, OutgoingSequence, PcGranularity, StreamOptions};

/// Where the encoder writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum BufferMode {
    /// A buffer that grows as needed: only its start is a synchronisation point.
    #[default]
    Linear,
    /// A circular RAM buffer of `bytes` bytes (a multiple of 32, at least
    /// [`MINIMUM_RING_BYTES`]) with eight synchronisation points; old data is overwritten.
    Ring { bytes: u64 },
}

/// The smallest ring: each eighth must hold the longest unit (Change Hart, PC, Privilege,
/// PC: 53 packets, counted as 56 with a full Change Hart) after its synchronisation point.
pub const MINIMUM_RING_BYTES: u64 = 256;

/// The encoder's settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct SequenceEncoderOptions {
    pub buffer: BufferMode,
    pub pc_granularity: PcGranularity,
}

impl SequenceEncoderOptions {
    #[must_use]
    pub fn with_buffer(mut self, buffer: BufferMode) -> Self {
        self.buffer = buffer;
        self
    }

    #[must_use]
    pub fn with_pc_granularity(mut self, pc_granularity: PcGranularity) -> Self {
        self.pc_granularity = pc_granularity;
        self
    }
}

/// What an encoder wrote.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct EncodedTrace {
    /// The buffer: what was written of a linear buffer or of a ring that never wrapped,
    /// the whole ring once it wrapped.
    pub bytes: Vec<u8>,
    /// When the ring wrapped: the byte offset of its oldest data (the write pointer).
    pub wrap_offset: Option<u64>,
}

impl EncodedTrace {
    /// The decoder options that read this trace as `buffer` wrote it.
    #[must_use]
    pub fn stream_options(
        &self,
        buffer: BufferMode,
        pc_granularity: PcGranularity,
    ) -> StreamOptions {
        let buffer_bytes = match buffer {
            BufferMode::Linear => None,
            BufferMode::Ring { bytes } => Some(bytes),
        };
        StreamOptions::default()
            .with_buffer_bytes(buffer_bytes)
            .with_pc_granularity(pc_granularity)
            .with_wrap_offset(self.wrap_offset)
    }
}

/// Whether the decoder, starting at the last synchronisation point, knows the current
/// hart without a Change Hart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum HartKnown {
    /// No Change Hart was ever sent: a decoder takes hart 0, and so does the stream.
    NeverChanged,
    /// A Change Hart since the last synchronisation point selected the current hart.
    Selected,
    /// Harts were changed before the last synchronisation point: the first unit after it
    /// starts with Change Hart.
    MustResend,
}

/// Encodes units of sequences: see the crate documentation for the rules.
#[derive(Debug)]
pub struct SequenceEncoder {
    options: SequenceEncoderOptions,
    output: Vec<u8>,
    /// The word being filled and how many packets it holds.
    word: u32,
    word_packets: u32,
    /// Packets written so far (including those in `word`).
    position: u64,
    /// Packets between synchronisation points, `None` in a linear buffer.
    spacing: Option<u64>,
    /// The next synchronisation point, as a packet position.
    next_sync: u64,
    /// Ring size, bytes written to it so far.
    ring_bytes: u64,
    bytes_written: u64,
    hart: u64,
    hart_known: HartKnown,
    harts: BTreeMap<u64, LastValues>,
    /// The packets of the unit being planned.
    scratch: Vec<u8>,
}

impl SequenceEncoder {
    pub fn new(options: SequenceEncoderOptions) -> Result<Self, EncodeError> {
        let (spacing, ring_bytes, output) = match options.buffer {
            BufferMode::Linear => (None, 0, Vec::new()),
            BufferMode::Ring { bytes } => {
                if bytes % 32 != 0 || bytes < MINIMUM_RING_BYTES {
                    return Err(EncodeError::BadRingSize {
                        bytes,
                        minimum: MINIMUM_RING_BYTES,
                    });
                }
                let length =
                    usize::try_from(bytes).map_err(|_| EncodeError::RingTooLarge { bytes })?;
                let mut output = Vec::new();
                output
                    .try_reserve_exact(length)
                    .map_err(|_| EncodeError::RingTooLarge { bytes })?;
                output.resize(length, 0);
                (Some(bytes / 8 * 2), bytes, output)
            }
        };
        Ok(Self {
            options,
            output,
            word: 0,
            word_packets: 0,
            position: 0,
            spacing,
            next_sync: 0,
            ring_bytes,
            bytes_written: 0,
            hart: 0,
            hart_known: HartKnown::NeverChanged,
            harts: BTreeMap::new(),
            scratch: Vec::new(),
        })
    }

    pub fn options(&self) -> SequenceEncoderOptions {
        self.options
    }

    /// Packets written so far.
    pub fn packets_written(&self) -> u64 {
        self.position
    }

    /// Writes `sequences` of `hart` as one unit: never across a synchronisation point
    /// (Nops pad up to it first), preceded by Change Hart when the decoder would not
    /// otherwise know the hart. Nothing is written when a sequence is refused.
    pub fn write_unit(
        &mut self,
        hart: u64,
        sequences: &[OutgoingSequence],
    ) -> Result<(), EncodeError> {
        for sequence in sequences {
            self.check(sequence)?;
        }
        if let Some(spacing) = self.spacing {
            // After a synchronisation point every value goes out in full and a Change
            // Hart may lead: the longest the unit can be.
            let packets =
                sequences.iter().map(longest_packets).sum::<u64>() + VALUE_SEQUENCE_PACKETS;
            if packets > spacing {
                return Err(EncodeError::UnitTooLong { packets, spacing });
            }
        }
        if self.position == self.next_sync {
            self.pass_sync_point();
        }
        let mut planned = self.plan(hart, sequences);
        let length = self.scratch.len() as u64;
        if self.position + length > self.next_sync {
            let padding = self.next_sync - self.position;
            for _ in 0..padding {
                self.push_packet(0);
            }
            self.pass_sync_point();
            planned = self.plan(hart, sequences);
        }
        let sent_change_hart = self.needs_change_hart(hart);
        let packets = core::mem::take(&mut self.scratch);
        for &packet in &packets {
            self.push_packet(packet);
        }
        self.scratch = packets;
        if sent_change_hart {
            self.hart_known = HartKnown::Selected;
        }
        self.hart = hart;
        self.harts.insert(hart, planned);
        Ok(())
    }

    /// Pads the last word with Nops and hands over the buffer.
    pub fn finish(mut self) -> EncodedTrace {
        while self.word_packets != 0 {
            self.push_packet(0);
        }
        match self.options.buffer {
            BufferMode::Linear => EncodedTrace {
                bytes: self.output,
                wrap_offset: None,
            },
            BufferMode::Ring { .. } => {
                if self.bytes_written > self.ring_bytes {
                    EncodedTrace {
                        bytes: self.output,
                        wrap_offset: Some(self.bytes_written % self.ring_bytes),
                    }
                } else {
                    // `bytes_written <= ring_bytes`, which fits `usize` (the ring does).
                    self.output
                        .truncate(usize::try_from(self.bytes_written).unwrap_or(usize::MAX));
                    EncodedTrace {
                        bytes: self.output,
                        wrap_offset: None,
                    }
                }
            }
        }
    }

    fn check(&self, sequence: &OutgoingSequence) -> Result<(), EncodeError> {
        match *sequence {
            OutgoingSequence::Pc { address }
                if address & low_bits(self.options.pc_granularity) != 0 =>
            {
                Err(EncodeError::MisalignedPc { address })
            }
            OutgoingSequence::Privilege(privilege) if privilege.packet().is_none() => {
                Err(EncodeError::BadPrivilege {
                    level: privilege.level,
                })
            }
            _ => Ok(()),
        }
    }

    /// A synchronisation point is at the write position: every hart's next value of
    /// each kind goes out in full, and the first unit names its hart if harts ever
    /// changed.
    fn pass_sync_point(&mut self) {
        self.harts.clear();
        if self.hart_known != HartKnown::NeverChanged {
            self.hart_known = HartKnown::MustResend;
        }
        self.next_sync = match self.spacing {
            Some(spacing) => self.position.saturating_add(spacing),
            None => u64::MAX,
        };
    }

    /// Whether a unit of `hart` starts with Change Hart.
    fn needs_change_hart(&self, hart: u64) -> bool {
        hart != self.hart || self.hart_known == HartKnown::MustResend
    }

    /// Fills `scratch` with the unit's packets; returns the hart's last values after it.
    fn plan(&mut self, hart: u64, sequences: &[OutgoingSequence]) -> LastValues {
        let mut last = self.harts.get(&hart).copied().unwrap_or_default();
        let mut packets = core::mem::take(&mut self.scratch);
        packets.clear();
        if self.needs_change_hart(hart) {
            push_value(&mut packets, Header::ChangeHart, FillRule::Zero, hart, None);
        }
        let shift = self.options.pc_granularity.shift();
        // The PC after Trace Enabled goes out in full: a decoder restarts there, and its
        // last PC may not be this stream's (a ring read without its write pointer, data
        // dropped before the restart).
        let mut restart_pc = false;
        for sequence in sequences {
            match *sequence {
                OutgoingSequence::Pc { address } => {
                    let value = address >> shift;
                    let fill_from = if restart_pc { None } else { last.pc };
                    restart_pc = false;
                    push_value(
                        &mut packets,
                        Header::Pc,
                        FillRule::LastValue,
                        value,
                        fill_from,
                    );
                    last.pc = Some(value);
                }
                OutgoingSequence::BranchTaken => packets.push(Header::BranchTaken.packet()),
                OutgoingSequence::BranchNotTaken => packets.push(Header::BranchNotTaken.packet()),
                OutgoingSequence::TraceEnabled => {
                    packets.extend([Header::TraceEnabled.packet(), 0]);
                    restart_pc = true;
                }
                OutgoingSequence::TraceDisabled => packets.push(Header::TraceDisabled.packet()),
                OutgoingSequence::Privilege(privilege) => {
                    // `check` refused levels without a packet.
                    let argument = privilege.packet().unwrap_or(0);
                    packets.extend([Header::PrivilegeLevel.packet(), argument]);
                }
                OutgoingSequence::LoadAddress { address } => {
                    let rule = FillRule::LastValue;
                    push_value(
                        &mut packets,
                        Header::LoadAddress,
                        rule,
                        address,
                        last.load_address,
                    );
                    last.load_address = Some(address);
                }
                OutgoingSequence::StoreAddress { address } => {
                    let rule = FillRule::LastValue;
                    push_value(
                        &mut packets,
                        Header::StoreAddress,
                        rule,
                        address,
                        last.store_address,
                    );
                    last.store_address = Some(address);
                }
                OutgoingSequence::LoadData { value } => {
                    push_value(
                        &mut packets,
                        Header::LoadData,
                        FillRule::SignExtend,
                        value,
                        None,
                    );
                }
                OutgoingSequence::StoreData { value } => {
                    push_value(
                        &mut packets,
                        Header::StoreData,
                        FillRule::SignExtend,
                        value,
                        None,
                    );
                }
                OutgoingSequence::Timestamp { time } => {
                    push_value(
                        &mut packets,
                        Header::Timestamp,
                        FillRule::LastValue,
                        time,
                        last.timestamp,
                    );
                    last.timestamp = Some(time);
                }
                OutgoingSequence::Custom { header, value } => {
                    let header = Header::from_packet(header.packet());
                    push_value(&mut packets, header, FillRule::Zero, value, None);
                }
            }
        }
        self.scratch = packets;
        last
    }

    fn push_packet(&mut self, packet: u8) {
        self.word |= u32::from(packet & 0xf) << (4 * self.word_packets);
        self.word_packets += 1;
        self.position += 1;
        if self.word_packets == 8 {
            let bytes = self.word.to_le_bytes();
            match self.options.buffer {
                BufferMode::Linear => self.output.extend_from_slice(&bytes),
                BufferMode::Ring { .. } => {
                    // The ring is a whole number of words long: the word fits before its end.
                    let start = (self.bytes_written % self.ring_bytes) as usize;
                    if let Some(slot) = self.output.get_mut(start..start + 4) {
                        slot.copy_from_slice(&bytes);
                    }
                }
            }
            self.bytes_written += 4;
            self.word = 0;
            self.word_packets = 0;
        }
    }
}

/// Packets of a full value sequence: header, size and 16 value packets.
const VALUE_SEQUENCE_PACKETS: u64 = 18;

/// The most packets `sequence` can take.
fn longest_packets(sequence: &OutgoingSequence) -> u64 {
    match sequence {
        OutgoingSequence::BranchTaken
        | OutgoingSequence::BranchNotTaken
        | OutgoingSequence::TraceDisabled => 1,
        OutgoingSequence::TraceEnabled | OutgoingSequence::Privilege(_) => 2,
        OutgoingSequence::Pc { .. }
        | OutgoingSequence::LoadAddress { .. }
        | OutgoingSequence::StoreAddress { .. }
        | OutgoingSequence::LoadData { .. }
        | OutgoingSequence::StoreData { .. }
        | OutgoingSequence::Timestamp { .. }
        | OutgoingSequence::Custom { .. } => VALUE_SEQUENCE_PACKETS,
    }
}

/// The address bits a PC sequence does not carry.
const fn low_bits(granularity: PcGranularity) -> u64 {
    (1u64 << granularity.shift()) - 1
}

/// Appends header, size and the fewest value packets the fill rule needs.
fn push_value(
    packets: &mut Vec<u8>,
    header: Header,
    rule: FillRule,
    value: u64,
    last: Option<u64>,
) {
    let count = packets_needed(rule, value, last);
    debug_assert_eq!(
        fill(rule, value & low_mask(count), count, last),
        Some(value)
    );
    packets.push(header.packet());
    packets.push(count - 1);
    for index in 0..count {
        packets.push(((value >> (4 * u32::from(index))) & 0xf) as u8);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::SequenceDecoder;
    use crate::types::{Sequence, StreamOptions, Value};

    /// Each PC sequence of `bytes`: its value and how many packets carried it.
    fn pcs(bytes: &[u8]) -> Vec<(Value, u64)> {
        let mut decoder = SequenceDecoder::new(bytes, StreamOptions::default());
        let mut found = Vec::new();
        while let Some(located) = decoder.next_sequence().unwrap() {
            if let Sequence::Pc(value) = located.sequence {
                found.push((value, located.packets));
            }
        }
        found
    }

    #[test]
    fn the_pc_after_trace_enabled_goes_out_in_full() {
        let mut encoder = SequenceEncoder::new(SequenceEncoderOptions::default()).unwrap();
        let units: [&[OutgoingSequence]; 4] = [
            &[
                OutgoingSequence::TraceEnabled,
                OutgoingSequence::Pc {
                    address: 0x8000_1000,
                },
            ],
            &[
                OutgoingSequence::Pc {
                    address: 0x8000_1010,
                },
                OutgoingSequence::TraceDisabled,
            ],
            // The restart shares all but the low bits with the last PC sent.
            &[
                OutgoingSequence::TraceEnabled,
                OutgoingSequence::Pc {
                    address: 0x8000_1020,
                },
            ],
            &[OutgoingSequence::Pc {
                address: 0x8000_1024,
            }],
        ];
        for unit in units {
            encoder.write_unit(0, unit).unwrap();
        }
        let found = pcs(&encoder.finish().bytes);
        let full = VALUE_SEQUENCE_PACKETS;
        assert_eq!(
            found,
            [
                (Value::Known(0x8000_1000), full),
                (Value::Known(0x8000_1010), 3),
                (Value::Known(0x8000_1020), full),
                // Compression goes on from the full value.
                (Value::Known(0x8000_1024), 3),
            ]
        );
    }
}
