//! The implicit-return stack (spec 9.2), mirrored from the encoder.

use std::collections::VecDeque;

/// A return-address stack that forgets its oldest entry when full, as encoders do
/// (the reference encoder's saturating counter with a circular buffer behaves the same
/// for every push/pop sequence whose results can matter: see docs/ntrace-errata.md).
#[derive(Clone, Debug)]
pub(crate) struct ReturnStack {
    entries: VecDeque<u64>,
    capacity: usize,
}

impl ReturnStack {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            entries: VecDeque::with_capacity(capacity),
            capacity,
        }
    }

    pub(crate) fn push(&mut self, return_address: u64) {
        if self.capacity == 0 {
            return;
        }
        if self.entries.len() == self.capacity {
            self.entries.pop_front();
        }
        self.entries.push_back(return_address);
    }

    pub(crate) fn pop(&mut self) -> Option<u64> {
        self.entries.pop_back()
    }

    /// Approximate heap bytes held.
    pub(crate) fn footprint(&self) -> usize {
        self.entries.capacity() * 8
    }

    pub(crate) fn clear(&mut self) {
        self.entries.clear();
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
