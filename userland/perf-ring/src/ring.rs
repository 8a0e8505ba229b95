//! The mmap'd perf ring buffer and its optional AUX area.
//!
//! # Memory ordering
//!
//! The first page (`struct perf_event_mmap_page`) is shared with the kernel,
//! which is the only writer of `data_head`/`aux_head`; we are the only writer
//! of `data_tail`/`aux_tail`. The kernel's side (kernel/events/ring_buffer.c)
//! is: read `data_tail`, then write record bytes, then `smp_wmb()`, then store
//! `data_head`. So:
//!
//! * loading `data_head` with **Acquire** makes every record byte the kernel
//!   wrote before publishing that head visible to our subsequent reads (the
//!   Acquire pairs with the kernel's write barrier before its head store);
//! * storing `data_tail` with **Release** orders all our reads of the records
//!   before the store, so the kernel (which reads the tail and then an
//!   `smp_mb()` before overwriting) never reuses space we are still reading.
//!
//! Between those two points the bytes in `[tail, head)` are not written by
//! the kernel, which is what makes handing out `&[u8]` views into the mapping
//! sound for as long as the tail is not advanced. Views are therefore tied to
//! a [`RecordBatch`]/[`AuxChunk`] borrow, and the tail moves only when that
//! guard is dropped. The AUX area follows the same protocol with
//! `aux_head`/`aux_tail`, except in snapshot mode, where the kernel overwrites
//! freely and no tail is written.

use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::ptr::addr_of_mut;
use std::sync::atomic::{AtomicU64, Ordering};

use memmap2::{MmapOptions, MmapRaw};
use perf_abi::{
    parse_record, Record, RecordError, SampleFormat, TimeConversion, RECORD_HEADER_SIZE,
};
use perf_event_open_sys::bindings::perf_event_mmap_page;

use crate::Event;

#[derive(Debug, thiserror::Error)]
pub enum RingError {
    #[error(
        "perf event {event:?}: ring buffer needs a power-of-two number of data pages, got {pages}"
    )]
    InvalidPageCount { event: String, pages: usize },
    #[error("perf event {event:?}: mmap of {what} ({pages} pages) failed: {source}")]
    Mmap {
        event: String,
        what: &'static str,
        pages: usize,
        source: io::Error,
    },
    #[error("perf event {event:?}: its PMU has no AUX area support: {source}")]
    AuxUnsupported { event: String, source: io::Error },
    #[error("perf event {event:?}: the AUX area is already mapped")]
    AuxAlreadyMapped { event: String },
    #[error("perf event {event:?}: corrupt record at ring position {position}: size {size}, {available} bytes published")]
    CorruptRecord {
        event: String,
        position: u64,
        size: u64,
        available: u64,
    },
    #[error("perf event {event:?}: cannot duplicate its fd: {source}")]
    Dup { event: String, source: io::Error },
}

/// A record's bytes in the ring: contiguous, or split by the buffer's end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RawData<'a> {
    Single(&'a [u8]),
    Split(&'a [u8], &'a [u8]),
}

impl<'a> RawData<'a> {
    pub fn len(&self) -> usize {
        match self {
            Self::Single(bytes) => bytes.len(),
            Self::Split(first, second) => first.len() + second.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops the first `count` bytes (count <= len).
    fn skip(self, count: usize) -> Self {
        match self {
            Self::Single(bytes) => Self::Single(&bytes[count..]),
            Self::Split(first, second) if count >= first.len() => {
                Self::Single(&second[count - first.len()..])
            }
            Self::Split(first, second) => Self::Split(&first[count..], second),
        }
    }

    pub fn copy_to(&self, out: &mut Vec<u8>) {
        match self {
            Self::Single(bytes) => out.extend_from_slice(bytes),
            Self::Split(first, second) => {
                out.extend_from_slice(first);
                out.extend_from_slice(second);
            }
        }
    }

    /// The bytes as one slice: borrowed when contiguous, else copied into
    /// `scratch` (cleared first).
    pub fn contiguous<'s>(&self, scratch: &'s mut Vec<u8>) -> &'s [u8]
    where
        'a: 's,
    {
        match *self {
            Self::Single(bytes) => bytes,
            Self::Split(..) => {
                scratch.clear();
                self.copy_to(scratch);
                scratch
            }
        }
    }
}

/// One record from the ring, header decoded, body borrowed.
#[derive(Debug, Clone, Copy)]
pub struct RawRecord<'a> {
    pub record_type: u32,
    pub misc: u16,
    /// The body, without the 8-byte header.
    pub body: RawData<'a>,
    /// Ring position (byte count since the buffer was created) of the header.
    pub position: u64,
}

impl<'a> RawRecord<'a> {
    /// Parses via perf-abi, copying into `scratch` only if the record wraps.
    pub fn parse<'s>(
        &self,
        format: &SampleFormat,
        scratch: &'s mut Vec<u8>,
    ) -> Result<Record<'s>, RecordError>
    where
        'a: 's,
    {
        parse_record(
            self.record_type,
            self.misc,
            self.body.contiguous(scratch),
            format,
        )
    }

    /// Total size including the header, as counted by data_head/data_tail.
    pub fn size(&self) -> usize {
        self.body.len() + RECORD_HEADER_SIZE
    }
}

/// How the AUX area is consumed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuxMode {
    /// We advance aux_tail; the kernel stops (and flags TRUNCATED) when full.
    Consume,
    /// Mapped read-only: the kernel overwrites old data and aux_tail is never
    /// written; read while the event is disabled.
    Snapshot,
}

#[derive(Debug)]
struct AuxArea {
    map: MmapRaw,
    size: usize,
    mode: AuxMode,
}

/// The metadata page plus 2^n data pages of one event (and whatever events
/// were redirected into it with [`Event::set_output`]).
#[derive(Debug)]
pub struct RingBuffer {
    map: MmapRaw,
    fd: OwnedFd,
    event: String,
    page_size: usize,
    data_offset: usize,
    data_size: usize,
    aux: Option<AuxArea>,
}

pub fn page_size() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(size).unwrap_or(4096)
}

impl RingBuffer {
    /// Maps `data_pages` (a power of two) data pages after the metadata page.
    pub fn new(event: &Event, data_pages: usize) -> Result<Self, RingError> {
        let name = event.name().to_owned();
        if !data_pages.is_power_of_two() {
            return Err(RingError::InvalidPageCount {
                event: name,
                pages: data_pages,
            });
        }
        let page_size = page_size();
        let fd = event
            .as_fd()
            .try_clone_to_owned()
            .map_err(|source| RingError::Dup {
                event: name.clone(),
                source,
            })?;
        let map = MmapOptions::new()
            .len((1 + data_pages) * page_size)
            .map_raw(fd.as_raw_fd())
            .map_err(|source| RingError::Mmap {
                event: name.clone(),
                what: "ring buffer",
                pages: 1 + data_pages,
                source,
            })?;
        let mut ring = Self {
            map,
            fd,
            event: name,
            page_size,
            data_offset: page_size,
            data_size: data_pages * page_size,
            aux: None,
        };
        // Kernels since 4.1 publish where the data area is; older ones leave 0
        // and use the page after the metadata page.
        let meta = ring.meta();
        // SAFETY: `meta` points at the live, page-aligned metadata page; these
        // fields are written by the kernel once at mmap time, before we read.
        let (offset, size) = unsafe { ((*meta).data_offset, (*meta).data_size) };
        if offset != 0 && size != 0 {
            ring.data_offset = offset as usize;
            ring.data_size = size as usize;
        }
        Ok(ring)
    }

    fn meta(&self) -> *mut perf_event_mmap_page {
        self.map.as_mut_ptr().cast()
    }

    fn meta_atomic(&self, field: fn(*mut perf_event_mmap_page) -> *mut u64) -> &AtomicU64 {
        // SAFETY: the field pointer lies inside the metadata page, which stays
        // mapped while `self` lives and is 8-byte aligned (page-aligned struct
        // of u64 fields); all concurrent access (ours and the kernel's) to the
        // head/tail words is atomic-sized.
        unsafe { AtomicU64::from_ptr(field(self.meta())) }
    }

    /// The conversion from the hardware's time counter (on RISC-V the `time` CSR) to
    /// perf time that the kernel publishes in the metadata page, when it does
    /// (`cap_user_time_zero`): how perf turns Intel PT's TSC into sample times. Read
    /// under the page's sequence lock.
    pub fn time_conversion(&self) -> Option<TimeConversion> {
        let meta = self.meta();
        for _ in 0..1000 {
            // SAFETY: `meta` points at the live metadata page (mapped while `self`
            // lives); the kernel updates these fields under `lock`, a sequence count
            // read before and after with volatile loads, as the perf_event.h comment
            // prescribes for user-space readers.
            let (before, page, after) = unsafe {
                let before = std::ptr::read_volatile(addr_of_mut!((*meta).lock));
                std::sync::atomic::fence(Ordering::Acquire);
                let page = std::ptr::read_volatile(meta);
                std::sync::atomic::fence(Ordering::Acquire);
                let after = std::ptr::read_volatile(addr_of_mut!((*meta).lock));
                (before, page, after)
            };
            if before != after || before % 2 == 1 {
                continue;
            }
            // SAFETY: the capabilities union is a u64 of bit fields either way.
            let capabilities = unsafe { page.__bindgen_anon_1.capabilities };
            // Bit 4: cap_user_time_zero; bit 5: cap_user_time_short.
            if capabilities & (1 << 4) == 0 {
                return None;
            }
            let short = capabilities & (1 << 5) != 0;
            return Some(TimeConversion {
                shift: page.time_shift,
                mult: page.time_mult,
                zero: page.time_zero,
                cycles: if short { page.time_cycles } else { 0 },
                mask: if short { page.time_mask } else { u64::MAX },
            });
        }
        None
    }

    /// Bytes of data area.
    pub fn data_size(&self) -> usize {
        self.data_size
    }

    pub fn data_head(&self) -> u64 {
        // SAFETY: computing a field address with addr_of_mut does not read.
        self.meta_atomic(|meta| unsafe { addr_of_mut!((*meta).data_head) })
            .load(Ordering::Acquire)
    }

    pub fn data_tail(&self) -> u64 {
        // SAFETY: computing a field address with addr_of_mut does not read.
        self.meta_atomic(|meta| unsafe { addr_of_mut!((*meta).data_tail) })
            .load(Ordering::Relaxed)
    }

    fn set_data_tail(&self, tail: u64) {
        // SAFETY: computing a field address with addr_of_mut does not read.
        self.meta_atomic(|meta| unsafe { addr_of_mut!((*meta).data_tail) })
            .store(tail, Ordering::Release);
    }

    /// Starts reading the records published so far. The tail advances past
    /// the records taken from the batch when it is dropped.
    pub fn read(&mut self) -> RecordBatch<'_> {
        let head = self.data_head();
        let tail = self.data_tail();
        RecordBatch {
            ring: self,
            head,
            tail,
        }
    }

    /// A view of `len` bytes at ring `position`; the caller guarantees the
    /// range lies within the published, unconsumed window.
    fn view(&self, position: u64, len: usize) -> RawData<'_> {
        let start = (position % self.data_size as u64) as usize;
        // SAFETY: data_offset + data_size is within the mapping (checked at
        // mmap by the kernel), and the window [tail, head) the caller reads is
        // not written by the kernel until the tail is released (module docs).
        let slice = |from: usize, count: usize| unsafe {
            std::slice::from_raw_parts(self.map.as_ptr().add(self.data_offset + from), count)
        };
        if start + len <= self.data_size {
            RawData::Single(slice(start, len))
        } else {
            let first = self.data_size - start;
            RawData::Split(slice(start, first), slice(0, len - first))
        }
    }

    /// Maps `pages` (a power of two) of AUX area after the data area.
    pub fn map_aux(&mut self, pages: usize, mode: AuxMode) -> Result<(), RingError> {
        if self.aux.is_some() {
            return Err(RingError::AuxAlreadyMapped {
                event: self.event.clone(),
            });
        }
        if !pages.is_power_of_two() {
            return Err(RingError::InvalidPageCount {
                event: self.event.clone(),
                pages,
            });
        }
        let aux_offset = self.data_offset + self.data_size;
        let aux_size = pages * self.page_size;
        let meta = self.meta();
        // SAFETY: the metadata page is mapped writable; the kernel reads
        // aux_offset/aux_size only during the mmap call below, so plain
        // volatile stores before it suffice.
        unsafe {
            addr_of_mut!((*meta).aux_offset).write_volatile(aux_offset as u64);
            addr_of_mut!((*meta).aux_size).write_volatile(aux_size as u64);
        }
        let mut options = MmapOptions::new();
        options.offset(aux_offset as u64).len(aux_size);
        let mapped = match mode {
            AuxMode::Consume => options.map_raw(self.fd.as_raw_fd()),
            AuxMode::Snapshot => options.map_raw_read_only(self.fd.as_raw_fd()),
        };
        let map = mapped.map_err(|source| match source.raw_os_error() {
            Some(libc::EOPNOTSUPP | libc::EINVAL) => RingError::AuxUnsupported {
                event: self.event.clone(),
                source,
            },
            _ => RingError::Mmap {
                event: self.event.clone(),
                what: "AUX area",
                pages,
                source,
            },
        })?;
        self.aux = Some(AuxArea {
            map,
            size: aux_size,
            mode,
        });
        Ok(())
    }

    pub fn aux_head(&self) -> u64 {
        // SAFETY: computing a field address with addr_of_mut does not read.
        self.meta_atomic(|meta| unsafe { addr_of_mut!((*meta).aux_head) })
            .load(Ordering::Acquire)
    }

    pub fn aux_tail(&self) -> u64 {
        // SAFETY: computing a field address with addr_of_mut does not read.
        self.meta_atomic(|meta| unsafe { addr_of_mut!((*meta).aux_tail) })
            .load(Ordering::Relaxed)
    }

    /// The AUX bytes available now, or None if no AUX area is mapped. In
    /// consume mode that is `[aux_tail, aux_head)` and the tail advances to
    /// the head when the chunk is dropped; in snapshot mode it is the last
    /// (up to) aux-size bytes before the head and nothing is written.
    pub fn read_aux(&mut self) -> Option<AuxChunk<'_>> {
        let aux = self.aux.as_ref()?;
        let head = self.aux_head();
        let size = aux.size as u64;
        let tail = match aux.mode {
            AuxMode::Consume => self.aux_tail(),
            AuxMode::Snapshot => head.saturating_sub(size),
        };
        let len = head.saturating_sub(tail).min(size) as usize;
        let start = (tail % size) as usize;
        // SAFETY: offsets stay within the AUX mapping (start < size and each
        // part is bounded by size); in consume mode the kernel does not write
        // [tail, head) until aux_tail is released in AuxChunk::drop; snapshot
        // readers are told to disable the event first (AuxMode::Snapshot).
        let slice = |from: usize, count: usize| unsafe {
            std::slice::from_raw_parts(aux.map.as_ptr().add(from), count)
        };
        let data = if start + len <= aux.size {
            RawData::Single(slice(start, len))
        } else {
            let first = aux.size - start;
            RawData::Split(slice(start, first), slice(0, len - first))
        };
        Some(AuxChunk {
            data,
            head,
            commit: aux.mode == AuxMode::Consume,
            ring: self,
        })
    }
}

/// Records between the tail and the head sampled when the batch started.
#[derive(Debug)]
pub struct RecordBatch<'r> {
    ring: &'r RingBuffer,
    head: u64,
    tail: u64,
}

impl RecordBatch<'_> {
    /// Bytes published but not yet taken from this batch.
    pub fn remaining(&self) -> u64 {
        self.head - self.tail
    }

    /// The next record, `Ok(None)` at the end of what was published.
    pub fn next_record(&mut self) -> Result<Option<RawRecord<'_>>, RingError> {
        let available = self.head - self.tail;
        if available == 0 {
            return Ok(None);
        }
        let corrupt = |size: u64| RingError::CorruptRecord {
            event: self.ring.event.clone(),
            position: self.tail,
            size,
            available,
        };
        if available < RECORD_HEADER_SIZE as u64 {
            return Err(corrupt(0));
        }
        let mut header = [0u8; RECORD_HEADER_SIZE];
        let mut scratch = Vec::new();
        header.copy_from_slice(
            self.ring
                .view(self.tail, RECORD_HEADER_SIZE)
                .contiguous(&mut scratch),
        );
        let record_type = u32::from_ne_bytes([header[0], header[1], header[2], header[3]]);
        let misc = u16::from_ne_bytes([header[4], header[5]]);
        let size = u64::from(u16::from_ne_bytes([header[6], header[7]]));
        if size < RECORD_HEADER_SIZE as u64 || size > available {
            return Err(corrupt(size));
        }
        let position = self.tail;
        self.tail += size;
        let body = self
            .ring
            .view(position, size as usize)
            .skip(RECORD_HEADER_SIZE);
        Ok(Some(RawRecord {
            record_type,
            misc,
            body,
            position,
        }))
    }
}

impl Drop for RecordBatch<'_> {
    fn drop(&mut self) {
        self.ring.set_data_tail(self.tail);
    }
}

/// AUX bytes borrowed from the AUX area; releases them on drop (consume mode).
#[derive(Debug)]
pub struct AuxChunk<'r> {
    // Private so the views cannot outlive the chunk whose drop releases them.
    data: RawData<'r>,
    /// The aux_head this chunk ends at.
    pub head: u64,
    commit: bool,
    ring: &'r RingBuffer,
}

impl AuxChunk<'_> {
    pub fn data(&self) -> RawData<'_> {
        self.data
    }
}

impl Drop for AuxChunk<'_> {
    fn drop(&mut self) {
        if self.commit {
            // SAFETY: computing a field address with addr_of_mut does not read.
            self.ring
                .meta_atomic(|meta| unsafe { addr_of_mut!((*meta).aux_tail) })
                .store(self.head, Ordering::Release);
        }
    }
}
