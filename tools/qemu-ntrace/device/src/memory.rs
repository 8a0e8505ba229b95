//! The trace block's memory: a byte region shared with the guest, accessed as aligned
//! little-endian 32-bit words with atomic operations only.

use std::fmt;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

/// Bytes per access: registers and trace words are 32-bit.
const WORD: usize = 4;

/// Why [`SharedMemory::from_raw`] refused a region.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MemoryError {
    #[error("shared memory pointer is null")]
    Null,
    #[error("shared memory at {address:#x} is not aligned to 4 bytes")]
    Misaligned { address: usize },
    #[error("shared memory length {length:#x} is not a whole number of 32-bit words")]
    Length { length: usize },
}

/// A region the guest reads and writes concurrently (the plugin maps the file QEMU maps
/// as the guest's BAR), so every access is an atomic 32-bit operation on an aligned word:
/// guest stores are never torn by ours, and ours are never half-seen. There are no
/// accesses of other sizes from this side, so no mixed-size atomics either.
pub struct SharedMemory {
    words: NonNull<AtomicU32>,
    /// Length in bytes, a multiple of 4.
    length: usize,
    /// Whether `words` is a `Box<[AtomicU32]>` of `length / 4` words this value frees.
    owned: bool,
}

// SAFETY: the memory is only accessed through `&AtomicU32`, which is Sync; an owned
// allocation is freed exactly once, by Drop, whichever thread drops it.
unsafe impl Send for SharedMemory {}
// SAFETY: as for Send: every access through a shared reference is atomic.
unsafe impl Sync for SharedMemory {}

impl SharedMemory {
    /// `length` bytes of zeroed memory owned by this value, rounded up to whole words
    /// (tests, and a block no guest shares).
    pub fn owned(length: usize) -> SharedMemory {
        let words = length.div_ceil(WORD);
        let allocation: Box<[AtomicU32]> = (0..words).map(|_| AtomicU32::new(0)).collect();
        // `into_raw` gives up the Box so that no `Box` (asserting unique ownership) is
        // alive while shared references to its words are in use; Drop rebuilds it.
        let pointer = Box::into_raw(allocation) as *mut AtomicU32;
        SharedMemory {
            // A Box's pointer is never null (a dangling, aligned one for zero words).
            words: NonNull::new(pointer).unwrap_or(NonNull::dangling()),
            length: words * WORD,
            owned: true,
        }
    }

    /// The `length` bytes at `pointer`, typically a `MAP_SHARED` mapping of the file QEMU
    /// maps as the guest's BAR. Not freed on drop.
    ///
    /// # Safety
    ///
    /// For as long as the returned value (or the [`TraceBlock`](crate::TraceBlock) owning
    /// it) lives, `pointer..pointer + length` must stay mapped readable and writable, and
    /// every other access to it from this process must be atomic (the guest's accesses,
    /// made by QEMU's generated code or by another process through the same file, are
    /// ordinary hardware accesses to coherent memory, as for any shared-memory IPC).
    pub unsafe fn from_raw(pointer: *mut u8, length: usize) -> Result<SharedMemory, MemoryError> {
        let words = NonNull::new(pointer.cast::<AtomicU32>()).ok_or(MemoryError::Null)?;
        let address = pointer as usize;
        if address % std::mem::align_of::<AtomicU32>() != 0 {
            return Err(MemoryError::Misaligned { address });
        }
        if length % WORD != 0 {
            return Err(MemoryError::Length { length });
        }
        Ok(SharedMemory {
            words,
            length,
            owned: false,
        })
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.length
    }

    /// Whether the region has no bytes.
    pub fn is_empty(&self) -> bool {
        self.length == 0
    }

    /// The region as words (little-endian values), for loops that must not pay
    /// [`Self::load`]'s alignment check.
    pub(crate) fn words(&self) -> &[AtomicU32] {
        // SAFETY: `words` points to `length / 4` initialised, aligned words that stay
        // valid while `self` lives (an allocation we own, or the caller's promise in
        // `from_raw`). `AtomicU32` has interior mutability, so a shared slice of it allows
        // the concurrent stores of other threads and of the guest.
        unsafe { std::slice::from_raw_parts(self.words.as_ptr(), self.length / WORD) }
    }

    /// The word at byte `offset`.
    ///
    /// # Panics
    ///
    /// If `offset` is not a multiple of 4 or the word is past the end.
    fn word(&self, offset: usize) -> &AtomicU32 {
        assert!(
            offset % WORD == 0,
            "shared memory offset {offset:#x} is not word-aligned"
        );
        &self.words()[offset / WORD]
    }

    /// The little-endian word at byte `offset` (relaxed: registers have no read side
    /// effects, and the poll only compares).
    ///
    /// # Panics
    ///
    /// If `offset` is not a multiple of 4 or the word is past the end.
    pub fn load(&self, offset: usize) -> u32 {
        u32::from_le(self.word(offset).load(Ordering::Relaxed))
    }

    /// Stores a little-endian word at byte `offset`, released: trace words stored before
    /// a write pointer is published are visible before it.
    ///
    /// # Panics
    ///
    /// If `offset` is not a multiple of 4 or the word is past the end.
    pub fn store(&self, offset: usize, value: u32) {
        self.word(offset).store(value.to_le(), Ordering::Release);
    }

    /// Replaces the word at `offset` by `new` if it still holds `current`; otherwise (the
    /// guest stored meanwhile) leaves it and returns what it holds.
    ///
    /// # Panics
    ///
    /// If `offset` is not a multiple of 4 or the word is past the end.
    pub fn compare_exchange(&self, offset: usize, current: u32, new: u32) -> Result<u32, u32> {
        self.word(offset)
            .compare_exchange(
                current.to_le(),
                new.to_le(),
                Ordering::AcqRel,
                Ordering::Relaxed,
            )
            .map(u32::from_le)
            .map_err(u32::from_le)
    }

    /// Copies the bytes at `offset` to `out`, word by word.
    ///
    /// # Panics
    ///
    /// If the range is past the end.
    pub fn read_bytes(&self, offset: usize, out: &mut [u8]) {
        let end = offset
            .checked_add(out.len())
            .expect("shared memory range overflows");
        assert!(
            end <= self.length,
            "shared memory range {offset:#x}..{end:#x} is past the end"
        );
        for (index, byte) in out.iter_mut().enumerate() {
            let at = offset + index;
            *byte = self.load(at - at % WORD).to_le_bytes()[at % WORD];
        }
    }

    /// Writes `bytes` at `offset`: whole words with one store, the bytes of a word only
    /// partly covered with a compare-and-swap loop, so that neighbouring bytes the guest
    /// stores concurrently survive.
    ///
    /// # Panics
    ///
    /// If the range is past the end.
    pub fn write_bytes(&self, offset: usize, bytes: &[u8]) {
        let end = offset
            .checked_add(bytes.len())
            .expect("shared memory range overflows");
        assert!(
            end <= self.length,
            "shared memory range {offset:#x}..{end:#x} is past the end"
        );
        let mut at = offset;
        while at < end {
            let word_start = at - at % WORD;
            let covered = (word_start + WORD).min(end) - at;
            let source = &bytes[at - offset..at - offset + covered];
            if covered == WORD {
                self.store(
                    word_start,
                    u32::from_le_bytes([source[0], source[1], source[2], source[3]]),
                );
            } else {
                let mut current = self.load(word_start);
                loop {
                    let mut word = current.to_le_bytes();
                    word[at % WORD..at % WORD + covered].copy_from_slice(source);
                    match self.compare_exchange(word_start, current, u32::from_le_bytes(word)) {
                        Ok(_) => break,
                        Err(now) => current = now,
                    }
                }
            }
            at += covered;
        }
    }
}

impl Drop for SharedMemory {
    fn drop(&mut self) {
        if self.owned {
            let words = std::ptr::slice_from_raw_parts_mut(self.words.as_ptr(), self.length / WORD);
            // SAFETY: `owned` memory came from `Box::into_raw` of exactly this many words
            // in `owned`, and is freed only here; `&mut self` means no reference to it
            // is left.
            drop(unsafe { Box::from_raw(words) });
        }
    }
}

impl fmt::Debug for SharedMemory {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("SharedMemory")
            .field("address", &self.words)
            .field("length", &self.length)
            .field("owned", &self.owned)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_little_endian_and_compare_exchange_reports_the_current_value() {
        let memory = SharedMemory::owned(16);
        memory.store(4, 0x1234_5678);
        let mut bytes = [0u8; 8];
        memory.read_bytes(2, &mut bytes);
        assert_eq!(bytes, [0, 0, 0x78, 0x56, 0x34, 0x12, 0, 0]);
        assert_eq!(memory.compare_exchange(4, 1, 2), Err(0x1234_5678));
        assert_eq!(memory.compare_exchange(4, 0x1234_5678, 2), Ok(0x1234_5678));
        assert_eq!(memory.load(4), 2);
    }

    #[test]
    fn byte_writes_keep_the_rest_of_their_words() {
        let memory = SharedMemory::owned(13);
        assert_eq!(memory.len(), 16);
        for offset in (0..16).step_by(4) {
            memory.store(offset, 0xaaaa_aaaa);
        }
        memory.write_bytes(3, &[1, 2, 3, 4, 5, 6]);
        let mut bytes = [0u8; 16];
        memory.read_bytes(0, &mut bytes);
        assert_eq!(
            bytes,
            [0xaa, 0xaa, 0xaa, 1, 2, 3, 4, 5, 6, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa]
        );
    }

    #[test]
    fn from_raw_refuses_what_it_cannot_access_as_words() {
        let mut backing = [0u32; 4];
        let pointer = backing.as_mut_ptr().cast::<u8>();
        // SAFETY: `backing` outlives every region made here, and nothing else accesses it.
        unsafe {
            assert_eq!(
                SharedMemory::from_raw(std::ptr::null_mut(), 4).unwrap_err(),
                MemoryError::Null
            );
            assert!(matches!(
                SharedMemory::from_raw(pointer.add(1), 4),
                Err(MemoryError::Misaligned { .. })
            ));
            assert_eq!(
                SharedMemory::from_raw(pointer, 6).unwrap_err(),
                MemoryError::Length { length: 6 }
            );
            let memory = SharedMemory::from_raw(pointer, 16).unwrap();
            memory.store(12, 7);
            assert_eq!(memory.load(12), 7);
        }
        assert_eq!(u32::from_le(backing[3]), 7);
    }

    #[test]
    #[should_panic(expected = "not word-aligned")]
    fn misaligned_word_offsets_panic() {
        SharedMemory::owned(8).load(2);
    }
}
