//! Queued direct-branch history (HIST) bits.
//!
//! HIST fields arrive in IndirectBranchHist messages and in ResourceFull messages
//! (RCODE 1, or RCODE 2 with a repeat count) before the I-CNT that covers their branches,
//! so the bits wait here until the walk reaches the branches. A pattern with a repeat
//! count stays one entry however large the count, and consecutive identical patterns
//! merge, so a loop of a billion iterations needs one entry, not a billion bits.

use std::collections::VecDeque;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Pattern {
    /// Branch bits without the stop bit; the first branch is the most significant bit.
    bits: u64,
    /// Number of branch bits (1..=63).
    length: u8,
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    pattern: Pattern,
    /// How many times the whole pattern is still to be played.
    repeats: u64,
}

/// Error: a HIST value without its stop bit (zero).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MissingStopBit;

#[derive(Clone, Debug, Default)]
pub(crate) struct HistoryQueue {
    /// The play being consumed, kept out of `entries` so the common case is a shift.
    current: u64,
    /// Bits of `current` not consumed yet; the next one is bit `remaining - 1`.
    remaining: u8,
    entries: VecDeque<Entry>,
}

impl HistoryQueue {
    /// Queues the branch bits of a HIST field (MSB = stop bit), `repeat` times.
    pub(crate) fn push(&mut self, hist: u64, repeat: u64) -> Result<(), MissingStopBit> {
        if hist == 0 {
            return Err(MissingStopBit);
        }
        let length = (63 - hist.leading_zeros()) as u8;
        if length == 0 || repeat == 0 {
            return Ok(());
        }
        let pattern = Pattern {
            bits: hist & ((1u64 << length) - 1),
            length,
        };
        if let Some(last) = self.entries.back_mut() {
            // Plays are sequential, so more repeats of the last pattern can always be
            // appended to it.
            if last.pattern == pattern {
                last.repeats = last.repeats.saturating_add(repeat);
                return Ok(());
            }
        }
        self.entries.push_back(Entry {
            pattern,
            repeats: repeat,
        });
        Ok(())
    }

    /// Queues one play of a HIST field: a branch message's own. Its walk most often
    /// consumed everything before, and then the bits become the current play without
    /// touching the queue (once per message: the queue's bookkeeping showed in profiles).
    #[inline]
    pub(crate) fn push_once(&mut self, hist: u64) -> Result<(), MissingStopBit> {
        if self.remaining == 0 && self.entries.is_empty() && hist > 1 {
            let length = (63 - hist.leading_zeros()) as u8;
            self.current = hist & ((1u64 << length) - 1);
            self.remaining = length;
            return Ok(());
        }
        self.push(hist, 1)
    }

    /// The next branch outcome (`true` = taken), in execution order.
    #[inline]
    pub(crate) fn next(&mut self) -> Option<bool> {
        if self.remaining == 0 && !self.refill() {
            return None;
        }
        self.remaining -= 1;
        Some((self.current >> self.remaining) & 1 == 1)
    }

    /// Moves one play of the front pattern into `current`.
    fn refill(&mut self) -> bool {
        let Some(entry) = self.entries.front_mut() else {
            return false;
        };
        self.current = entry.pattern.bits;
        self.remaining = entry.pattern.length;
        entry.repeats -= 1;
        if entry.repeats == 0 {
            self.entries.pop_front();
        }
        true
    }

    /// Whether the queue holds exactly the branch bits of `hist` (a HIST field with its
    /// stop bit), unplayed.
    #[inline]
    pub(crate) fn holds_only(&self, hist: u64) -> bool {
        if hist == 0 {
            return false;
        }
        let length = 63 - hist.leading_zeros();
        self.entries.is_empty()
            && u32::from(self.remaining) == length
            && (length == 0 || self.current == hist & ((1u64 << length) - 1))
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.remaining == 0 && self.entries.is_empty()
    }

    /// Bits still queued (saturating), for error messages.
    pub(crate) fn len(&self) -> u64 {
        self.entries
            .iter()
            .fold(u64::from(self.remaining), |total, entry| {
                total.saturating_add(
                    entry
                        .repeats
                        .saturating_mul(u64::from(entry.pattern.length)),
                )
            })
    }

    /// Approximate heap bytes held.
    pub(crate) fn footprint(&self) -> usize {
        self.entries.capacity() * std::mem::size_of::<Entry>()
    }

    pub(crate) fn clear(&mut self) {
        self.remaining = 0;
        if !self.entries.is_empty() {
            self.entries.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(queue: &mut HistoryQueue) -> String {
        std::iter::from_fn(|| queue.next())
            .map(|taken| if taken { '1' } else { '0' })
            .collect()
    }

    #[test]
    fn reads_from_the_bit_after_the_stop_bit_down_to_the_lsb() {
        // Spec 8.3: 0b101 = not taken, then taken; 0b10000 = four not taken; 0b1 = none.
        let mut queue = HistoryQueue::default();
        queue.push(0b101, 1).unwrap();
        queue.push(0b1, 1).unwrap();
        queue.push(0b10000, 1).unwrap();
        queue.push(0xF, 1).unwrap();
        assert_eq!(drain(&mut queue), "01".to_owned() + "0000" + "111");
        assert!(queue.is_empty());
    }

    #[test]
    fn repeated_history_plays_the_pattern_repeat_times() {
        // Spec 9.3: RDATA 0b1_01 with HREPEAT=150 equals pattern 01 played 150 times.
        let mut queue = HistoryQueue::default();
        queue.push(0b101, 150).unwrap();
        assert_eq!(queue.len(), 300);
        assert_eq!(drain(&mut queue), "01".repeat(150));
    }

    #[test]
    fn merges_identical_patterns_without_reordering() {
        let mut queue = HistoryQueue::default();
        queue.push(0b110, 1).unwrap();
        for _ in 0..1000 {
            queue.push(0b1_0110, 1).unwrap();
        }
        assert_eq!(queue.entries.len(), 2);
        assert_eq!(queue.next(), Some(true));
        assert_eq!(
            queue.entries.len(),
            1,
            "the first play moved out of the queue"
        );
        queue.push(0b1_0110, 1).unwrap();
        assert_eq!(drain(&mut queue), "0".to_owned() + &"0110".repeat(1001));
    }

    #[test]
    fn push_once_plays_like_push() {
        let fields = [0b101, 0b1, 0b10000, 0xF, u64::MAX, 0b101, 0b101];
        let mut once = HistoryQueue::default();
        let mut queued = HistoryQueue::default();
        for (index, &hist) in fields.iter().enumerate() {
            once.push_once(hist).unwrap();
            queued.push(hist, 1).unwrap();
            assert_eq!(once.len(), queued.len());
            if index % 2 == 0 {
                // Consume part of it, so that later fields meet a non-empty queue too.
                assert_eq!(once.next(), queued.next());
            }
        }
        assert_eq!(drain(&mut once), drain(&mut queued));
        assert_eq!(once.push_once(0), Err(MissingStopBit));
        once.push_once(0b1).unwrap();
        assert!(once.is_empty());
    }

    #[test]
    fn a_zero_hist_has_no_stop_bit() {
        assert_eq!(HistoryQueue::default().push(0, 1), Err(MissingStopBit));
    }

    #[test]
    fn full_width_hist_keeps_63_bits() {
        let mut queue = HistoryQueue::default();
        queue.push(u64::MAX, 1).unwrap();
        assert_eq!(queue.len(), 63);
        assert_eq!(drain(&mut queue), "1".repeat(63));
    }
}
