//! `BPF_MAP_LOOKUP_AND_DELETE_BATCH` on a hash map, which aya 0.14 does not offer: the
//! whole map read and emptied in a few system calls rather than three per entry
//! (next key, lookup, delete), and with no window between an entry's read and its
//! removal in which the kernel's count of it could grow unseen (the kernel reads and
//! deletes each bucket under its lock).

use std::os::fd::{AsFd, AsRawFd, BorrowedFd};

use aya::maps::{HashMap, Map};
use aya::Pod;
use nix::errno::Errno;

/// `enum bpf_cmd` in `include/uapi/linux/bpf.h` (Linux 5.6 and later).
const BPF_MAP_LOOKUP_AND_DELETE_BATCH: libc::c_long = 25;

/// The batch member of `union bpf_attr` (`include/uapi/linux/bpf.h`). The kernel
/// copies `min(size, sizeof(union bpf_attr))` bytes and zeroes the rest, so this
/// member alone is a complete argument.
#[repr(C)]
#[derive(Default)]
struct BatchAttributes {
    /// Where the batch starts (0: from the first bucket); for a hash map, a u32 bucket.
    in_batch: u64,
    /// Where the kernel writes the next batch's start.
    out_batch: u64,
    keys: u64,
    values: u64,
    /// In: room for this many entries; out: how many were written.
    count: u32,
    map_fd: u32,
    elem_flags: u64,
    flags: u64,
}

/// Entries in the first call's buffers; doubled when a bucket holds more (ENOSPC).
const FIRST_CAPACITY: usize = 256;

/// Whether the kernel refused the command itself (older than 5.6: EINVAL; a map type
/// without batch operations: the kernel's own ENOTSUPP, 524, which nix does not name
/// and reads as `UnknownErrno`): the caller falls back to entry-by-entry reads.
pub fn is_unsupported(errno: Errno) -> bool {
    matches!(
        errno,
        Errno::EINVAL | Errno::EOPNOTSUPP | Errno::UnknownErrno
    )
}

/// Reads and deletes every entry of the hash map `map`, appending them to `out`.
pub fn lookup_and_delete_all<K: Pod, V: Pod>(
    map: BorrowedFd<'_>,
    out: &mut Vec<(K, V)>,
) -> Result<(), Errno> {
    let map_fd = u32::try_from(map.as_raw_fd()).map_err(|_| Errno::EBADF)?;
    let mut capacity = FIRST_CAPACITY;
    let mut keys: Vec<K> = Vec::with_capacity(capacity);
    let mut values: Vec<V> = Vec::with_capacity(capacity);
    let mut in_batch: u32 = 0;
    let mut out_batch: u32 = 0;
    let mut first = true;
    loop {
        keys.clear();
        values.clear();
        keys.reserve(capacity);
        values.reserve(capacity);
        let mut attributes = BatchAttributes {
            in_batch: if first {
                0
            } else {
                std::ptr::from_ref(&in_batch) as u64
            },
            out_batch: std::ptr::from_mut(&mut out_batch) as u64,
            keys: keys.as_mut_ptr() as u64,
            values: values.as_mut_ptr() as u64,
            count: u32::try_from(capacity).map_err(|_| Errno::ENOMEM)?,
            map_fd,
            ..BatchAttributes::default()
        };
        // SAFETY: `attributes` is a valid batch member of bpf_attr for this size; the
        // key and value pointers have room for `count` entries of the map's key and
        // value types (K and V are the map's, plain old data), the batch pointers
        // point at u32s (a hash map's batch token) that outlive the call, and the
        // kernel writes nothing else.
        let result = unsafe {
            libc::syscall(
                libc::SYS_bpf,
                BPF_MAP_LOOKUP_AND_DELETE_BATCH,
                std::ptr::from_mut(&mut attributes),
                std::mem::size_of::<BatchAttributes>(),
            )
        };
        let error = (result < 0).then(Errno::last);
        if error == Some(Errno::ENOSPC) {
            // One bucket holds more entries than there is room for: nothing was
            // read; again from the same place with more room.
            capacity = capacity.saturating_mul(2);
            continue;
        }
        if let Some(errno) = error.filter(|errno| *errno != Errno::ENOENT) {
            return Err(errno);
        }
        let written = usize::try_from(attributes.count).unwrap_or(0).min(capacity);
        // SAFETY: the kernel wrote `written` (at most `capacity`) whole entries into
        // each buffer, and K and V are plain old data (any bytes are valid values).
        unsafe {
            keys.set_len(written);
            values.set_len(written);
        }
        out.extend(keys.iter().copied().zip(values.iter().copied()));
        // ENOENT: the last bucket was read (with the entries it returned).
        if error == Some(Errno::ENOENT) {
            return Ok(());
        }
        in_batch = out_batch;
        first = false;
    }
}

/// Every entry of the kernel's hash map `map`, which is left empty. In batches where
/// the kernel has them (each bucket read and emptied under its lock, so no sample is
/// lost between the two); else key by key, where what the probe adds between a key's
/// read and its removal is lost (a window of one system call per key). `batch_reads`
/// is cleared at the kernel's first refusal of the batch command.
pub fn read_and_clear<K: aya::Pod, V: aya::Pod>(
    map: &mut Map,
    batch_reads: &mut bool,
) -> Vec<(K, V)> {
    let mut entries: Vec<(K, V)> = Vec::new();
    if *batch_reads {
        if let Map::HashMap(data) = &*map {
            match lookup_and_delete_all(data.fd().as_fd(), &mut entries) {
                Ok(()) => return entries,
                Err(errno) if is_unsupported(errno) && entries.is_empty() => {
                    *batch_reads = false;
                }
                // Another failure: what was read is kept, the rest waits for the
                // next drain.
                Err(_) => return entries,
            }
        }
    }
    let Ok(mut map) = HashMap::<_, K, V>::try_from(map) else {
        return entries;
    };
    let keys: Vec<K> = map.keys().filter_map(Result::ok).collect();
    entries.reserve(keys.len());
    for key in keys {
        if let Ok(value) = map.get(&key, 0) {
            entries.push((key, value));
        }
        let _ = map.remove(&key);
    }
    entries
}
