//! The implicit-return stack (spec 9.2), mirrored from the encoder.

/// How the encoder's implicit-return stack behaves once it is full. The spec does not say
/// (see docs/ntrace-errata.md); a decoder must mirror its encoder exactly, because a
/// return is implicit only when the encoder's stack gave the right address.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReturnStackModel {
    /// A circular buffer of N entries with a saturating count: a push onto a full stack
    /// forgets the oldest entry. rvperf's encoder model.
    #[default]
    DropOldest,
    /// The N-Trace reference code's buffer (`NexRv -enco -cs N`, and its decoder): pushes
    /// wrap around N + 1 slots but pops around N, so once pushes have wrapped, pops skip a
    /// slot and later returns are mostly reported explicitly (while a stale older entry
    /// may still match and be implicit). Only the same model decodes such traces.
    ReferenceCode,
}

/// What a walk did to the return stack, for replaying the walk (`memo`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StackOp {
    Push(u64),
    /// An explicitly reported return dropped the newest entry.
    Discard,
    /// An implicit return popped this entry and went there.
    Pop(u64),
}

/// Entries a replay's check can track above the stack (pushed by the walk itself).
const REPLAY_PUSHES: usize = 16;

/// A return-address stack of fixed capacity, kept in a ring of slots: pushes and pops
/// are a store or load and an index update, whatever the model.
#[derive(Clone, Debug)]
pub(crate) struct ReturnStack {
    slots: Box<[u64]>,
    /// Slot of the newest entry.
    top: usize,
    /// Entries that can be popped (saturates at the capacity).
    count: usize,
    capacity: usize,
    /// Slots pushes wrap around: the capacity, or one more under
    /// [`ReturnStackModel::ReferenceCode`]. Pops always wrap around `capacity`.
    push_slots: usize,
    /// What lies below the entries: nothing, or (in a speculative decode of a trace
    /// chunk) the unknown entries the encoder pushed before the chunk.
    base: StackBase,
    /// Pops that found no entry while the base was unknown: each one needed an entry
    /// pushed before the chunk, so the speculative decode may differ from the true.
    pub(crate) base_pops: u64,
    /// Entries from before the chunk dropped without their value being needed (an
    /// explicitly reported return pops the encoder's stack too): the true stack has
    /// that many fewer below, which the join accounts for.
    pub(crate) base_discards: u64,
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
    /// A stack that forgets its oldest entry when full.
    pub(crate) fn new(capacity: usize) -> Self {
        Self::with_model(capacity, ReturnStackModel::DropOldest)
    }

    pub(crate) fn with_model(capacity: usize, model: ReturnStackModel) -> Self {
        let push_slots = match model {
            ReturnStackModel::DropOldest => capacity,
            ReturnStackModel::ReferenceCode => capacity + 1,
        };
        Self {
            slots: vec![0; push_slots].into_boxed_slice(),
            top: 0,
            count: 0,
            capacity,
            push_slots,
            base: StackBase::Empty,
            base_pops: 0,
            base_discards: 0,
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

    /// The entries, oldest first: what pops would give, in reverse.
    pub(crate) fn entries(&self) -> std::vec::IntoIter<u64> {
        let mut entries = Vec::with_capacity(self.count);
        let mut slot = self.top;
        for _ in 0..self.count {
            entries.push(self.slots[slot]);
            slot = if slot == 0 {
                self.capacity - 1
            } else {
                slot - 1
            };
        }
        entries.reverse();
        entries.into_iter()
    }

    /// The true stack of a speculative decode that saw no base pop: `below` (the true
    /// stack when it started, oldest first) under the entries it pushed, the oldest
    /// dropped past the capacity as the encoder dropped them. Only for
    /// [`ReturnStackModel::DropOldest`], whose contents are its entries alone (the
    /// parallel decoder decodes the reference code's stack serially).
    pub(crate) fn rebase(&mut self, below: impl DoubleEndedIterator<Item = u64>) {
        if self.base == StackBase::Unknown {
            let pushed: Vec<u64> = self.entries().collect();
            let room = self.capacity.saturating_sub(pushed.len());
            let mut kept: Vec<u64> = below.rev().take(room).collect();
            kept.reverse();
            self.clear();
            for address in kept.into_iter().chain(pushed) {
                self.push(address);
            }
        }
        self.base = StackBase::Empty;
    }

    #[inline]
    pub(crate) fn push(&mut self, return_address: u64) {
        if self.capacity == 0 {
            return;
        }
        if self.count == self.capacity {
            // The encoder dropped its oldest entry too: nothing from before is left.
            self.base = StackBase::Empty;
        }
        self.top = if self.top + 1 >= self.push_slots {
            0
        } else {
            self.top + 1
        };
        self.slots[self.top] = return_address;
        if self.count < self.capacity {
            self.count += 1;
        }
    }

    #[inline]
    pub(crate) fn pop(&mut self) -> Option<u64> {
        if self.count == 0 {
            if self.base == StackBase::Unknown {
                self.base_pops += 1;
            }
            return None;
        }
        self.count -= 1;
        let address = self.slots[self.top];
        self.top = if self.top == 0 {
            self.capacity - 1
        } else {
            self.top - 1
        };
        Some(address)
    }

    /// Drops the newest entry, whose value is not needed.
    #[inline]
    pub(crate) fn discard(&mut self) {
        if self.count == 0 {
            if self.base == StackBase::Unknown {
                self.base_discards += 1;
            }
            return;
        }
        self.pop();
    }

    /// The entry `depth` below the newest, if known (under the drop-oldest model).
    fn peek(&self, depth: usize) -> Option<u64> {
        if depth >= self.count || self.push_slots != self.capacity {
            return None;
        }
        let slot = (self.top + self.capacity - depth) % self.capacity;
        Some(self.slots[slot])
    }

    /// Applies a replayed walk's operations if every [`StackOp::Pop`] would pop the entry
    /// it names, as walking would have; otherwise changes nothing and returns false.
    /// Walks that pop are replayed only under [`ReturnStackModel::DropOldest`], whose
    /// entries [`Self::peek`] can read, and only while the walk's pushes cannot overflow
    /// the stack (which would drop an entry a later pop reads).
    pub(crate) fn replay(&mut self, ops: &[StackOp]) -> bool {
        if ops.iter().any(|op| matches!(op, StackOp::Pop(_))) {
            // Check first: the walk's own pushes on top, then the entries below.
            let mut pushed = [0u64; REPLAY_PUSHES];
            let mut pushed_count = 0;
            let mut depth = 0;
            for &op in ops {
                match op {
                    StackOp::Push(address) => {
                        if pushed_count == REPLAY_PUSHES
                            || self.count - depth.min(self.count) + pushed_count + 1 > self.capacity
                        {
                            return false;
                        }
                        pushed[pushed_count] = address;
                        pushed_count += 1;
                    }
                    StackOp::Discard | StackOp::Pop(_) => {
                        let found = if pushed_count > 0 {
                            pushed_count -= 1;
                            Some(pushed[pushed_count])
                        } else {
                            depth += 1;
                            self.peek(depth - 1)
                        };
                        if let StackOp::Pop(expected) = op {
                            if found != Some(expected) {
                                return false;
                            }
                        } else if found.is_none() {
                            // A discard below the known entries counts differently.
                            return false;
                        }
                    }
                }
            }
        }
        for &op in ops {
            match op {
                StackOp::Push(address) => self.push(address),
                StackOp::Discard => self.discard(),
                StackOp::Pop(_) => {
                    self.pop();
                }
            }
        }
        true
    }

    /// Approximate heap bytes held.
    pub(crate) fn footprint(&self) -> usize {
        self.slots.len() * 8
    }

    pub(crate) fn clear(&mut self) {
        self.top = 0;
        self.count = 0;
        self.base = StackBase::Empty;
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.count
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replay_pops_only_what_the_stack_holds() {
        let mut stack = ReturnStack::new(4);
        stack.push(0x100);
        stack.push(0x200);
        // The walk called (0x300), returned to it, then returned to 0x200.
        let walk = [
            StackOp::Push(0x300),
            StackOp::Pop(0x300),
            StackOp::Pop(0x200),
        ];
        let mut other = stack.clone();
        assert!(stack.replay(&walk));
        assert_eq!(stack.entries().collect::<Vec<_>>(), [0x100]);
        // Another caller's entry on top: the walk would have gone elsewhere.
        other.pop();
        other.push(0x250);
        let before: Vec<u64> = other.entries().collect();
        assert!(!other.replay(&walk));
        assert_eq!(
            other.entries().collect::<Vec<_>>(),
            before,
            "changed on refusal"
        );
        // Pushes that would overflow the stack before a pop: refused.
        let mut full = ReturnStack::new(2);
        full.push(0x10);
        full.push(0x20);
        assert!(!full.replay(&[StackOp::Push(0x30), StackOp::Pop(0x30)]));
        // The reference code's ring is not read ahead: refused.
        let mut reference = ReturnStack::with_model(4, ReturnStackModel::ReferenceCode);
        reference.push(0x100);
        assert!(!reference.replay(&[StackOp::Pop(0x100)]));
        // Without pops, nothing is checked.
        assert!(reference.replay(&[StackOp::Push(0x110), StackOp::Discard]));
    }

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
    fn drop_oldest_matches_a_bounded_deque_for_any_sequence() {
        // A pseudo-random mix of pushes and pops, long enough to wrap many times.
        let mut reference = std::collections::VecDeque::new();
        let mut stack = ReturnStack::new(5);
        let mut state = 1u32;
        for step in 0..10_000u64 {
            state = state.wrapping_mul(1_103_515_245).wrapping_add(12345);
            if (state >> 16) % 3 != 0 {
                if reference.len() == 5 {
                    reference.pop_front();
                }
                reference.push_back(step);
                stack.push(step);
            } else {
                assert_eq!(stack.pop(), reference.pop_back(), "step {step}");
            }
        }
    }

    #[test]
    fn reference_code_model_skips_a_slot_after_pushes_wrapped() {
        // Slots 0..=3 for a depth of 3: the first push goes to slot 1, the fourth wraps
        // to slot 0. Popping from slot 0 moves to slot 2 (wrapping around 3), so the
        // third push (slot 3) is skipped and the second comes back instead.
        let mut stack = ReturnStack::with_model(3, ReturnStackModel::ReferenceCode);
        for address in [0x10, 0x20, 0x30, 0x40] {
            stack.push(address);
        }
        assert_eq!(stack.len(), 3);
        assert_eq!(stack.pop(), Some(0x40));
        assert_eq!(stack.pop(), Some(0x20));
        assert_eq!(stack.pop(), Some(0x10));
        assert_eq!(stack.pop(), None);
        // Without a wrap both models are the same stack.
        let mut stack = ReturnStack::with_model(3, ReturnStackModel::ReferenceCode);
        for address in [0x10, 0x20, 0x30] {
            stack.push(address);
        }
        assert_eq!(stack.pop(), Some(0x30));
        assert_eq!(stack.pop(), Some(0x20));
        assert_eq!(stack.pop(), Some(0x10));
    }

    #[test]
    fn zero_capacity_never_remembers() {
        for model in [
            ReturnStackModel::DropOldest,
            ReturnStackModel::ReferenceCode,
        ] {
            let mut stack = ReturnStack::with_model(0, model);
            stack.push(0x10);
            assert_eq!(stack.pop(), None);
        }
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
