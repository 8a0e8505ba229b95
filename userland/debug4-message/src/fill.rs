//! The fill rules of value sequences, shared by the decoder (to fill missing bits) and the
//! encoder (to send the fewest packets the decoder's rule turns back into the value).

/// Packets of a full value: 16 packets carry 64 bits and need no filling.
pub(crate) const FULL_PACKETS: u8 = 16;

/// How the bits above a value sequence's packets are filled in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FillRule {
    /// From the last value of the same kind (PC, load/store address, timestamp).
    LastValue,
    /// By sign-extending the top packet's bit 3 (load/store data).
    SignExtend,
    /// With zeros (Change Hart, and rvperf's custom sequences).
    Zero,
}

/// The low `packets * 4` bits.
pub(crate) const fn low_mask(packets: u8) -> u64 {
    if packets >= FULL_PACKETS {
        u64::MAX
    } else {
        (1u64 << (4 * packets as u32)) - 1
    }
}

/// The value a sequence of `packets` packets carrying `sent` means, `None` when the rule
/// needs a last value the decoder does not know.
pub(crate) fn fill(rule: FillRule, sent: u64, packets: u8, last: Option<u64>) -> Option<u64> {
    let mask = low_mask(packets);
    let sent = sent & mask;
    if packets >= FULL_PACKETS {
        return Some(sent);
    }
    match rule {
        FillRule::LastValue => last.map(|last| (last & !mask) | sent),
        FillRule::SignExtend => {
            let sign = 1u64 << (4 * u32::from(packets) - 1);
            Some(if sent & sign != 0 { sent | !mask } else { sent })
        }
        FillRule::Zero => Some(sent),
    }
}

/// The fewest packets (1..=16) from which `fill` gives `value` back.
pub(crate) fn packets_needed(rule: FillRule, value: u64, last: Option<u64>) -> u8 {
    (1..FULL_PACKETS)
        .find(|&packets| fill(rule, value, packets, last) == Some(value))
        .unwrap_or(FULL_PACKETS)
}

/// The last value of each "last value" kind of one hart, in the sequences' own units (a
/// PC shifted right by its granularity). `None`: not known since the last synchronisation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct LastValues {
    pub(crate) pc: Option<u64>,
    pub(crate) load_address: Option<u64>,
    pub(crate) store_address: Option<u64>,
    pub(crate) timestamp: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_value_fill_keeps_the_high_bits_of_the_last_value() {
        assert_eq!(
            fill(FillRule::LastValue, 0x34, 2, Some(0x1200)),
            Some(0x1234)
        );
        assert_eq!(fill(FillRule::LastValue, 0x34, 2, None), None);
        assert_eq!(packets_needed(FillRule::LastValue, 0x1234, Some(0x1200)), 2);
        assert_eq!(packets_needed(FillRule::LastValue, 0x1234, Some(0x1234)), 1);
        assert_eq!(packets_needed(FillRule::LastValue, 0x1234, None), 16);
        assert_eq!(packets_needed(FillRule::LastValue, u64::MAX, Some(0)), 16);
    }

    #[test]
    fn sign_extension_needs_the_sign_in_the_top_packet() {
        assert_eq!(fill(FillRule::SignExtend, 0x8, 1, None), Some(u64::MAX - 7));
        assert_eq!(packets_needed(FillRule::SignExtend, 7, None), 1);
        // 8 needs a zero packet above it, or it would read as -8.
        assert_eq!(packets_needed(FillRule::SignExtend, 8, None), 2);
        assert_eq!(packets_needed(FillRule::SignExtend, u64::MAX, None), 1);
        assert_eq!(packets_needed(FillRule::SignExtend, 1 << 63, None), 16);
    }

    #[test]
    fn zero_fill_drops_leading_zero_packets() {
        assert_eq!(packets_needed(FillRule::Zero, 0, None), 1);
        assert_eq!(packets_needed(FillRule::Zero, 0x10, None), 2);
        assert_eq!(fill(FillRule::Zero, 0xabc, 2, None), Some(0xbc));
    }
}
