//! Decoding must not allocate, even for very long (corrupt, all-zero) fields. A counting
//! global allocator, active only on the test's own thread, checks it.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use ntrace_message::{Body, MessageDecoder, MessageOptions};

struct Counting;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: every call is forwarded unchanged to the system allocator; the counters are
// const-initialised thread locals without destructors, so touching them never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.with(Cell::get) {
            ALLOCATIONS.with(|n| n.set(n.get() + 1));
        }
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn decoding_long_zero_fields_does_not_allocate() {
    let mut stream = vec![0x0C];
    stream.resize(1 + 2_000_000, 0x00);
    stream.push(0x03);
    stream.extend_from_slice(&[0xFF; 1000]);
    stream.extend_from_slice(&[0x70, 0xD0, 0x1D, 0x1D, 0xF8, 0xFF]);
    stream.extend(std::iter::repeat_n(0x00, 500_000));

    COUNTING.with(|c| c.set(true));
    let mut decoder = MessageDecoder::new(&stream, MessageOptions::default());
    let first = decoder.next_message();
    let second = decoder.next_message();
    let third = decoder.next_message();
    let fourth = decoder.next_message();
    COUNTING.with(|c| c.set(false));

    assert_eq!(ALLOCATIONS.with(Cell::get), 0, "decoder allocated");
    assert_eq!(first.unwrap().unwrap().body, Body::DirectBranch { icnt: 0 });
    assert!(matches!(
        second.unwrap().unwrap().body,
        Body::IndirectBranchHist { icnt: 0x7D, .. }
    ));
    assert!(third.is_err());
    assert_eq!(fourth, Ok(None));
}
