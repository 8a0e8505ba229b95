//! The implicit-return stack (spec 9.2), mirrored from the encoder.

use std::collections::VecDeque;

/// A return-address stack that forgets its oldest entry when full, as encoders do
/// (the reference encoder's saturating counter with a circular buffer behaves the same
/// for every push/pop sequence whose results can matter: see docs/ntrace-errata.md).
#[derive(Clone, Debug)]
pub(crate) struct ReturnStack {
    entries: VecDeque<u64>,
    capacity: usize,
    /// What lies below `entries`: nothing, or (in a speculative decode of a trace chunk)
    /// the unknown entries the encoder pushed before the chunk.
    base: StackBase,
    /// Pops that found `entries` empty while the base was unknown: each one needed an
    /// entry pushed before the chunk, so the speculative decode may differ from the true.
    pub(crate) base_pops: u64,
}

/// What lies below a return stack's known entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StackBase {
    /// Nothing: the stack was empty (or cleared) when its known entries were pushed.
    Empty,
    /// Entries pushed before a speculative decode started, not known to it.
    Unknown,
}

impl ReturnStack {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            entries: VecDeque::with_capacity(capacity),
            capacity,
            base: StackBase::Empty,
            base_pops: 0,
        }
    }

    /// Marks what lies below the known entries as unknown: a speculative decode starting
    /// inside the trace, at a synchronisation that does not reset the encoder's stack.
    pub(crate) fn forget_base(&mut self) {
        if self.capacity > 0 {
            self.base = StackBase::Unknown;
        }
    }

    pub(crate) fn base(&self) -> StackBase {
        self.base
    }

    /// The known entries, oldest first.
    pub(crate) fn entries(&self) -> impl ExactSizeIterator<Item = u64> + '_ {
        self.entries.iter().copied()
    }

    /// The true stack of a speculative decode that saw no base pop: `below` (the true
    /// stack when it started) under the entries it pushed, the oldest dropped past the
    /// capacity as the encoder dropped them.
    pub(crate) fn rebase(&mut self, below: impl DoubleEndedIterator<Item = u64>) {
        if self.base == StackBase::Unknown {
            for address in below.rev() {
                if self.entries.len() == self.capacity {
                    break;
                }
                self.entries.push_front(address);
            }
            self.base = StackBase::Empty;
        }
    }

    pub(crate) fn push(&mut self, return_address: u64) {
        if self.capacity == 0 {
            return;
        }
        if self.entries.len() == self.capacity {
            self.entries.pop_front();
            // The encoder dropped its oldest entry too: nothing from before is left.
            self.base = StackBase::Empty;
        }
        self.entries.push_back(return_address);
    }

    pub(crate) fn pop(&mut self) -> Option<u64> {
        let popped = self.entries.pop_back();
        if popped.is_none() && self.base == StackBase::Unknown {
            self.base_pops += 1;
        }
        popped
    }

    /// Approximate heap bytes held.
    pub(crate) fn footprint(&self) -> usize {
        self.entries.capacity() * 8
    }

    pub(crate) fn clear(&mut self) {
        self.entries.clear();
        self.base = StackBase::Empty;
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drops_the_oldest_entry_when_full() {
        let mut stack = ReturnStack::new(3);
        for address in [0x10, 0x20, 0x30, 0x40] {
            stack.push(address);
        }
        assert_eq!(stack.len(), 3);
        assert_eq!(stack.pop(), Some(0x40));
        assert_eq!(stack.pop(), Some(0x30));
        assert_eq!(stack.pop(), Some(0x20));
        assert_eq!(stack.pop(), None, "0x10 was forgotten");
    }

    #[test]
    fn zero_capacity_never_remembers() {
        let mut stack = ReturnStack::new(0);
        stack.push(0x10);
        assert_eq!(stack.pop(), None);
    }

    #[test]
    fn clear_forgets_everything() {
        let mut stack = ReturnStack::new(32);
        stack.push(1);
        stack.push(2);
        stack.clear();
        assert_eq!(stack.pop(), None);
    }
}
