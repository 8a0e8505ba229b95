//! The pull decoder: packets → sequences, with the fill state of every hart.

use std::collections::BTreeMap;
use std::ops::Range;

use crate::error::Debug4Error;
use crate::fill::{fill, FillRule, LastValues};
use crate::types::{
    CustomHeader, Half, Header, LocatedSequence, Privilege, Sequence, StreamOptions, Value,
};

/// Decodes sequences one at a time: `Ok(None)` at the end of the data; after an error
/// the next call resumes at the next synchronisation point, with every hart's last
/// values forgotten and hart 0 current (what a decoder starting there would know).
#[derive(Debug)]
pub struct SequenceDecoder<'a> {
    data: &'a [u8],
    options: StreamOptions,
    spacing: Option<u64>,
    /// The packet ranges to read, in time order: for a wrapped buffer, from the first
    /// synchronisation point after the oldest data to the end, then from the start to
    /// the write pointer.
    regions: [Range<u64>; 2],
    region: usize,
    /// Next packet to read, an index into the buffer's packets.
    position: u64,
    /// Packets skipped before the first synchronisation point of a wrapped buffer, still
    /// to be reported.
    unreported_skip: Option<u64>,
    hart: u64,
    harts: BTreeMap<u64, LastValues>,
}

/// What the decoder knows, beyond the bytes, to read a value sequence.
struct ValueSequence {
    sent: u64,
    packets: u8,
}

impl<'a> SequenceDecoder<'a> {
    pub fn new(data: &'a [u8], options: StreamOptions) -> Self {
        let total = (data.len() as u64).saturating_mul(2);
        let spacing = options.sync_spacing_packets();
        let (regions, unreported_skip) = match options.wrap_offset {
            None => ([0..total, 0..0], None),
            Some(wrap) => {
                let wrap = wrap.saturating_mul(2).min(total);
                let first_sync = match spacing {
                    Some(spacing) => wrap.div_ceil(spacing).saturating_mul(spacing).min(total),
                    // Only the buffer start is known: nothing before the end can be read.
                    None => total,
                };
                let skipped = first_sync - wrap;
                (
                    [first_sync..total, 0..wrap],
                    (skipped != 0).then_some(skipped),
                )
            }
        };
        let position = regions[0].start;
        Self {
            data,
            options,
            spacing,
            regions,
            region: 0,
            position,
            unreported_skip,
            hart: 0,
            harts: BTreeMap::new(),
        }
    }

    pub fn options(&self) -> StreamOptions {
        self.options
    }

    /// Byte offset of the next packet to read (the half is dropped).
    pub fn position(&self) -> u64 {
        self.position / 2
    }

    /// The hart sequences belong to now.
    pub fn hart(&self) -> u64 {
        self.hart
    }

    pub fn next_sequence(&mut self) -> Result<Option<LocatedSequence>, Debug4Error> {
        if let Some(packets) = self.unreported_skip.take() {
            let wrap = self.options.wrap_offset.unwrap_or(0);
            return Ok(Some(LocatedSequence {
                offset: wrap.min(self.data.len() as u64),
                half: Half::Low,
                packets,
                hart: self.hart,
                sequence: Sequence::Skipped {
                    bytes: packets.div_ceil(2),
                },
            }));
        }
        loop {
            let Some(region) = self.regions.get(self.region).cloned() else {
                return Ok(None);
            };
            if self.position >= region.end {
                self.region += 1;
                if let Some(next) = self.regions.get(self.region) {
                    self.position = next.start;
                }
                continue;
            }
            let start = self.position;
            return match self.sequence_at(start, region.end) {
                Ok((packets, sequence)) => {
                    self.position = start + packets;
                    Ok(Some(LocatedSequence {
                        offset: start / 2,
                        half: Half::of_nibble(start),
                        packets,
                        hart: self.hart,
                        sequence,
                    }))
                }
                Err(error) => {
                    self.resynchronise_after(start, region.end);
                    Err(error)
                }
            };
        }
    }

    /// Moves to the first synchronisation point after packet `packet`, forgetting what a
    /// decoder starting there could not know.
    fn resynchronise_after(&mut self, packet: u64, region_end: u64) {
        self.position = match self.spacing {
            Some(spacing) => (packet / spacing)
                .saturating_add(1)
                .saturating_mul(spacing)
                .min(region_end),
            None => region_end,
        };
        self.hart = 0;
        self.harts.clear();
    }

    fn packet(&self, index: u64) -> u8 {
        let byte = usize::try_from(index / 2)
            .ok()
            .and_then(|byte| self.data.get(byte))
            .copied()
            .unwrap_or(0);
        match Half::of_nibble(index) {
            Half::Low => byte & 0xf,
            Half::High => byte >> 4,
        }
    }

    /// The sequence whose header is at `start`, with the packets it takes; `end` is
    /// where the readable region stops.
    fn sequence_at(&mut self, start: u64, end: u64) -> Result<(u64, Sequence), Debug4Error> {
        let header = Header::from_packet(self.packet(start));
        let offset = start / 2;
        let half = Half::of_nibble(start);
        let truncated = Debug4Error::Truncated {
            offset,
            half,
            header,
        };
        // The one packet after a header that takes one (version, privilege).
        let argument = || {
            let index = start + 1;
            if index < end {
                Ok(self.packet(index))
            } else {
                Err(truncated)
            }
        };
        match header {
            Header::Nop => {
                let mut index = start + 1;
                while index < end && self.packet(index) == 0 {
                    index += 1;
                }
                let count = index - start;
                Ok((count, Sequence::Nops { count }))
            }
            Header::BranchTaken => Ok((1, Sequence::BranchTaken)),
            Header::BranchNotTaken => Ok((1, Sequence::BranchNotTaken)),
            Header::TraceDisabled => Ok((1, Sequence::TraceDisabled)),
            Header::TraceEnabled => {
                let version = argument()?;
                if version != 0 {
                    return Err(Debug4Error::BadVersion {
                        offset,
                        half,
                        version,
                    });
                }
                Ok((2, Sequence::TraceEnabled { version }))
            }
            Header::PrivilegeLevel => {
                Ok((2, Sequence::Privilege(Privilege::from_packet(argument()?))))
            }
            Header::Reserved => Err(Debug4Error::ReservedHeader { offset, half }),
            Header::Pc
            | Header::ChangeHart
            | Header::LoadAddress
            | Header::StoreAddress
            | Header::LoadData
            | Header::StoreData
            | Header::Timestamp
            | Header::Custom14
            | Header::Custom15 => {
                let value = self.value_at(start, end).ok_or(truncated)?;
                // Header, size packet, then the value's packets.
                let packets = 2 + u64::from(value.packets);
                let sequence = self.fill_value(header, value, offset, half)?;
                Ok((packets, sequence))
            }
        }
    }

    /// The value sequence after the header at `start`, `None` when it runs past `end`.
    fn value_at(&self, start: u64, end: u64) -> Option<ValueSequence> {
        let size = start.checked_add(1).filter(|&index| index < end)?;
        let packets = self.packet(size) + 1;
        let last = size.checked_add(u64::from(packets))?;
        if last >= end {
            return None;
        }
        let mut sent = 0u64;
        for index in 0..packets {
            let packet = self.packet(size + 1 + u64::from(index));
            sent |= u64::from(packet) << (4 * u32::from(index));
        }
        Some(ValueSequence { sent, packets })
    }

    fn fill_value(
        &mut self,
        header: Header,
        value: ValueSequence,
        offset: u64,
        half: Half,
    ) -> Result<Sequence, Debug4Error> {
        let ValueSequence { sent, packets } = value;
        let shift = self.options.pc_granularity.shift();
        let hart = self.hart;
        let last = self.harts.entry(hart).or_default();
        // Fills from and updates one "last value" of the current hart.
        let filled = |last: &mut Option<u64>| match fill(FillRule::LastValue, sent, packets, *last)
        {
            Some(value) => {
                *last = Some(value);
                Value::Known(value)
            }
            None => Value::Partial {
                low_bits: sent,
                known_bits: 4 * packets,
            },
        };
        let sign_extended = || fill(FillRule::SignExtend, sent, packets, None).unwrap_or(sent);
        Ok(match header {
            Header::Pc => match filled(&mut last.pc) {
                Value::Known(value) => {
                    if value >> (64 - shift) != 0 {
                        // The bits beyond the address would be lost: forget the value
                        // rather than keep a wrong one.
                        last.pc = None;
                        return Err(Debug4Error::ValueTooWide {
                            offset,
                            half,
                            header,
                            value,
                        });
                    }
                    Sequence::Pc(Value::Known(value << shift))
                }
                Value::Partial {
                    low_bits,
                    known_bits,
                } => Sequence::Pc(Value::Partial {
                    low_bits: low_bits << shift,
                    known_bits: known_bits + shift as u8,
                }),
            },
            Header::LoadAddress => Sequence::LoadAddress(filled(&mut last.load_address)),
            Header::StoreAddress => Sequence::StoreAddress(filled(&mut last.store_address)),
            Header::Timestamp => Sequence::Timestamp(filled(&mut last.timestamp)),
            Header::LoadData => Sequence::LoadData {
                value: sign_extended(),
            },
            Header::StoreData => Sequence::StoreData {
                value: sign_extended(),
            },
            Header::ChangeHart => {
                self.hart = sent;
                Sequence::ChangeHart { hart: sent }
            }
            Header::Custom14 => Sequence::Custom {
                header: CustomHeader::Custom14,
                value: sent,
            },
            // Only value headers reach here; the rest are the other custom header.
            _ => Sequence::Custom {
                header: CustomHeader::Custom15,
                value: sent,
            },
        })
    }
}

/// Whether `bytes` look like rvperf's debug trace module data: after any Nops of the
/// first word and an optional Change Hart, a Trace Enabled of version 0 (how the encoder
/// starts every trace).
#[must_use]
pub fn detect(bytes: &[u8]) -> bool {
    let mut decoder = SequenceDecoder::new(bytes, StreamOptions::default());
    let mut seen_change_hart = false;
    loop {
        match decoder.next_sequence() {
            Ok(Some(LocatedSequence {
                sequence: Sequence::Nops { count },
                ..
            })) if count < 8 => {}
            Ok(Some(LocatedSequence {
                sequence: Sequence::ChangeHart { .. },
                offset,
                ..
            })) if !seen_change_hart && offset < 12 => seen_change_hart = true,
            Ok(Some(LocatedSequence {
                sequence: Sequence::TraceEnabled { version: 0 },
                ..
            })) => return true,
            _ => return false,
        }
    }
}
