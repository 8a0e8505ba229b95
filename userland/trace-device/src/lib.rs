//! The user side of the `rvtrace` driver (`kmod-shim/rvtrace`): `/dev/rvtrace`'s ABI
//! ([`abi`]), the device ([`TraceDevice`]: describe, configure, start, stop, status, wait)
//! and [`Drain`], which reads the sink memory through the driver's read-only mapping
//! while the hardware writes it, keeping up with the wrap and counting what it lost.
//!
//! The arithmetic of the circular buffer is the shared register map's
//! (`trace_control::ram_sink::unread`), the one the driver's counts come from.

pub mod abi;

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use memmap2::{Mmap, MmapOptions};
use nix::errno::Errno;

pub use abi::{Config, Info, Status};

/// Where the driver's misc device is.
pub const DEVICE_PATH: &str = "/dev/rvtrace";

/// What went wrong with the device; each names the operation.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    #[error("{path}: no trace device (is the rvtrace module loaded, and does the machine have a trace block?)")]
    NoDevice { path: PathBuf },
    #[error(
        "{path}: tracing sees every process and the kernel: it needs CAP_PERFMON or CAP_SYS_ADMIN"
    )]
    PermissionDenied { path: PathBuf },
    #[error("{path}: another process is tracing (the device has one owner at a time)")]
    Busy { path: PathBuf },
    #[error("{path}: cannot open")]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the trace device refused {operation}")]
    Ioctl {
        operation: &'static str,
        source: Errno,
    },
    #[error("the trace device speaks ABI version {found}; this rvperf knows {known}")]
    AbiVersion { found: u32, known: u32 },
    #[error("cannot map the trace device's sink memory")]
    Map { source: std::io::Error },
    #[error("the driver reports a buffer [{offset:#x}, +{bytes:#x}) outside the {mapped:#x} bytes of sink memory")]
    BufferOutsideMapping {
        offset: u64,
        bytes: u64,
        mapped: u64,
    },
}

nix::ioctl_read!(
    ioctl_get_info,
    abi::IOC_MAGIC,
    abi::number::GET_INFO,
    abi::Info
);
nix::ioctl_write_ptr!(
    ioctl_configure,
    abi::IOC_MAGIC,
    abi::number::CONFIGURE,
    abi::Config
);
nix::ioctl_none!(ioctl_start, abi::IOC_MAGIC, abi::number::START);
nix::ioctl_none!(ioctl_stop, abi::IOC_MAGIC, abi::number::STOP);
nix::ioctl_read!(
    ioctl_get_status,
    abi::IOC_MAGIC,
    abi::number::GET_STATUS,
    abi::Status
);
nix::ioctl_readwrite!(ioctl_wait, abi::IOC_MAGIC, abi::number::WAIT, abi::Wait);

/// The error of an ioctl the device refused.
fn refused(operation: &'static str) -> impl Fn(Errno) -> DeviceError {
    move |source| DeviceError::Ioctl { operation, source }
}

/// An open `/dev/rvtrace`: while it is open, this process owns the trace block; closing
/// it (or dying) stops the trace and resets the block.
#[derive(Debug)]
pub struct TraceDevice {
    file: File,
    info: Info,
}

/// Why a wait ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitEnd {
    /// The byte count was reached, the trace stopped or the timeout passed.
    Returned,
    /// A signal came (EINTR); the status is still current.
    Interrupted,
}

impl TraceDevice {
    /// Opens the device at `path` and reads its description.
    pub fn open(path: &Path) -> Result<TraceDevice, DeviceError> {
        let file = OpenOptions::new().read(true).open(path).map_err(|source| {
            let path = path.to_path_buf();
            match source.raw_os_error().map(Errno::from_raw) {
                Some(Errno::ENOENT | Errno::ENODEV | Errno::ENXIO) => {
                    DeviceError::NoDevice { path }
                }
                Some(Errno::EACCES | Errno::EPERM) => DeviceError::PermissionDenied { path },
                Some(Errno::EBUSY) => DeviceError::Busy { path },
                _ => DeviceError::Open { path, source },
            }
        })?;
        let mut info = Info::default();
        // SAFETY: GET_INFO writes one `struct rvtrace_info`, which `Info` is (layout
        // checked against the header by tests/uapi_layout.rs), into `info`.
        unsafe { ioctl_get_info(file.as_raw_fd(), &mut info) }.map_err(refused("GET_INFO"))?;
        if info.abi_version != abi::ABI_VERSION {
            return Err(DeviceError::AbiVersion {
                found: info.abi_version,
                known: abi::ABI_VERSION,
            });
        }
        Ok(TraceDevice { file, info })
    }

    /// The trace block.
    pub fn info(&self) -> &Info {
        &self.info
    }

    pub fn configure(&self, config: &Config) -> Result<(), DeviceError> {
        // SAFETY: CONFIGURE reads one `struct rvtrace_config` from `config`.
        unsafe { ioctl_configure(self.file.as_raw_fd(), config) }
            .map(drop)
            .map_err(refused("the configuration"))
    }

    pub fn start(&self) -> Result<(), DeviceError> {
        // SAFETY: START takes no argument.
        unsafe { ioctl_start(self.file.as_raw_fd()) }
            .map(drop)
            .map_err(refused("START"))
    }

    /// Stops tracing: the encoders, funnel and sink flushed, the block back in reset;
    /// the sink memory keeps the trace.
    pub fn stop(&self) -> Result<(), DeviceError> {
        // SAFETY: STOP takes no argument.
        unsafe { ioctl_stop(self.file.as_raw_fd()) }
            .map(drop)
            .map_err(refused("STOP"))
    }

    pub fn status(&self) -> Result<Status, DeviceError> {
        let mut status = Status::default();
        // SAFETY: GET_STATUS writes one `struct rvtrace_status` into `status`.
        unsafe { ioctl_get_status(self.file.as_raw_fd(), &mut status) }
            .map_err(refused("GET_STATUS"))?;
        Ok(status)
    }

    /// Sleeps until `until_bytes` have been written since the start, tracing stopped,
    /// `timeout_ms` passed (0: none) or a signal came.
    pub fn wait(
        &self,
        until_bytes: u64,
        timeout_ms: u32,
    ) -> Result<(Status, WaitEnd), DeviceError> {
        let mut request = abi::Wait {
            size: size_of::<abi::Wait>() as u32,
            timeout_ms,
            until_bytes,
            status: Status::default(),
        };
        // SAFETY: WAIT reads and writes one `struct rvtrace_wait` in `request`.
        match unsafe { ioctl_wait(self.file.as_raw_fd(), &mut request) } {
            Ok(_) => Ok((request.status, WaitEnd::Returned)),
            Err(Errno::EINTR) => Ok((request.status, WaitEnd::Interrupted)),
            Err(source) => Err(DeviceError::Ioctl {
                operation: "WAIT",
                source,
            }),
        }
    }

    /// The sink memory, mapped read-only.
    pub fn map_sink(&self) -> Result<SinkMemory, DeviceError> {
        let length = usize::try_from(self.info.sink_size).map_err(|_| DeviceError::Map {
            source: std::io::Error::from(std::io::ErrorKind::InvalidData),
        })?;
        // SAFETY: the mapping is of device memory the trace hardware writes while it is
        // mapped; it is never turned into a `&[u8]` (which would promise it does not
        // change), only copied from through raw pointers by `SinkMemory::copy`.
        let map = unsafe { MmapOptions::new().len(length).map(&self.file) }
            .map_err(|source| DeviceError::Map { source })?;
        Ok(SinkMemory { map })
    }
}

/// The sink memory, mapped read-only (offset 0: its first byte).
#[derive(Debug)]
pub struct SinkMemory {
    map: Mmap,
}

impl SinkMemory {
    pub fn len(&self) -> u64 {
        self.map.len() as u64
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Appends `length` bytes from `offset` to `out`.
    fn copy(&self, offset: u64, length: u64, out: &mut Vec<u8>) {
        let (Ok(offset), Ok(length)) = (usize::try_from(offset), usize::try_from(length)) else {
            return;
        };
        let end = offset.saturating_add(length).min(self.map.len());
        if offset >= end {
            return;
        }
        let length = end - offset;
        out.reserve(length);
        let source = self.map.as_ptr();
        // SAFETY: `[offset, end)` is inside the mapping (clamped above); `out` has room
        // for `length` more bytes (reserved) and the regions cannot overlap (one is the
        // device's mapping, the other the heap). The hardware may write the source
        // meanwhile: the bytes are plain data, and `Drain` checks afterwards whether
        // the part it copied was overwritten.
        unsafe {
            std::ptr::copy_nonoverlapping(
                source.add(offset),
                out.as_mut_ptr().add(out.len()),
                length,
            );
            out.set_len(out.len() + length);
        }
    }
}

/// Bytes the sink overwrote before they were read: a gap in the trace at `offset` of
/// the drained stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gap {
    /// Offset in the drained bytes where the gap is (the bytes after it come later in
    /// the trace than the bytes before it, with `lost` bytes missing between).
    pub offset: u64,
    pub lost: u64,
}

/// Reads a running sink's new bytes, in order, through its mapping.
#[derive(Debug, Default)]
pub struct Drain {
    /// Bytes of the trace accounted for: read or lost.
    consumed: u64,
    /// Bytes handed out.
    drained: u64,
    gaps: Vec<Gap>,
}

impl Drain {
    pub fn new() -> Drain {
        Drain::default()
    }

    /// The bytes the sink wrote since the last call, appended to `out`, oldest first.
    /// Reads the status before and after copying: bytes the sink overwrote meanwhile are
    /// dropped from the copy and counted as a gap, never handed out torn.
    pub fn drain(
        &mut self,
        device: &TraceDevice,
        sink: &SinkMemory,
        out: &mut Vec<u8>,
    ) -> Result<u64, DeviceError> {
        let status = device.status()?;
        self.drain_with(&status, sink, out, || device.status())
    }

    /// [`Drain::drain`] from a status already read (a wait's), then `recheck`.
    pub fn drain_with(
        &mut self,
        status: &Status,
        sink: &SinkMemory,
        out: &mut Vec<u8>,
        recheck: impl FnOnce() -> Result<Status, DeviceError>,
    ) -> Result<u64, DeviceError> {
        let buffer_end = status.buffer_offset.checked_add(status.buffer_bytes);
        if status.buffer_bytes == 0 || buffer_end.is_none_or(|end| end > sink.len()) {
            return Err(DeviceError::BufferOutsideMapping {
                offset: status.buffer_offset,
                bytes: status.buffer_bytes,
                mapped: sink.len(),
            });
        }
        let write_offset = status.write_offset.saturating_sub(status.buffer_offset);
        let unread = trace_control::ram_sink::unread(
            status.buffer_bytes,
            status.bytes_written,
            write_offset,
            self.consumed,
        );
        if unread.is_empty() && unread.lost == 0 {
            return Ok(0);
        }
        if unread.lost > 0 {
            self.record_gap(unread.lost);
            self.consumed += unread.lost;
        }
        let start = out.len();
        sink.copy(
            status.buffer_offset + unread.first.start,
            unread.first.end - unread.first.start,
            out,
        );
        sink.copy(
            status.buffer_offset + unread.second.start,
            unread.second.end - unread.second.start,
            out,
        );
        let copied = (out.len() - start) as u64;
        // The sink may have overtaken the copy: what it wrote past one buffer beyond our
        // starting point overwrote that many of the copied bytes, oldest first.
        let after = if status.flags & abi::status_flag::RUNNING != 0 {
            recheck()?.bytes_written
        } else {
            status.bytes_written
        };
        let overwritten = after
            .saturating_sub(self.consumed.saturating_add(status.buffer_bytes))
            .min(copied);
        if overwritten > 0 {
            out.drain(start..start + overwritten as usize);
            self.record_gap(overwritten);
        }
        self.consumed += copied;
        let kept = copied - overwritten;
        self.drained += kept;
        Ok(kept)
    }

    /// `lost` bytes missing at the current end of the drained bytes (one gap with the
    /// previous one if nothing came between).
    fn record_gap(&mut self, lost: u64) {
        match self.gaps.last_mut() {
            Some(last) if last.offset == self.drained => last.lost += lost,
            _ => self.gaps.push(Gap {
                offset: self.drained,
                lost,
            }),
        }
    }

    /// Bytes handed out so far.
    pub fn drained(&self) -> u64 {
        self.drained
    }

    /// Bytes lost to the sink overtaking the reader.
    pub fn lost(&self) -> u64 {
        self.gaps.iter().map(|gap| gap.lost).sum()
    }

    pub fn gaps(&self) -> &[Gap] {
        &self.gaps
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sink memory of `bytes` (a stand-in for the device's mapping).
    fn sink(bytes: &[u8]) -> SinkMemory {
        let mut map = memmap2::MmapMut::map_anon(bytes.len()).unwrap();
        map.copy_from_slice(bytes);
        SinkMemory {
            map: map.make_read_only().unwrap(),
        }
    }

    fn status(buffer_offset: u64, buffer_bytes: u64, bytes_written: u64, running: bool) -> Status {
        let write_offset = buffer_offset + bytes_written % buffer_bytes;
        Status {
            size: size_of::<Status>() as u32,
            flags: if running {
                abi::status_flag::RUNNING
            } else {
                0
            },
            buffer_offset,
            buffer_bytes,
            write_offset,
            bytes_written,
            ..Status::default()
        }
    }

    #[test]
    fn new_bytes_come_in_order_round_the_buffer_end() {
        // A 16-byte buffer at offset 4 of the mapping.
        let memory: Vec<u8> = (0..24).collect();
        let sink = sink(&memory);
        let mut drain = Drain::new();
        let mut out = Vec::new();
        let first = status(4, 16, 10, true);
        assert_eq!(
            drain
                .drain_with(&first, &sink, &mut out, || Ok(first))
                .unwrap(),
            10
        );
        assert_eq!(out, (4..14).collect::<Vec<u8>>());
        // 12 more: 6 to the buffer's end, 6 from its start.
        out.clear();
        let second = status(4, 16, 22, true);
        assert_eq!(
            drain
                .drain_with(&second, &sink, &mut out, || Ok(second))
                .unwrap(),
            12
        );
        assert_eq!(out, [14, 15, 16, 17, 18, 19, 4, 5, 6, 7, 8, 9]);
        assert_eq!((drain.drained(), drain.lost()), (22, 0));
        assert!(drain.gaps().is_empty());
    }

    #[test]
    fn an_overtaken_reader_records_a_gap_and_reads_from_the_oldest_byte() {
        let memory: Vec<u8> = (0..16).collect();
        let sink = sink(&memory);
        let mut drain = Drain::new();
        let mut out = Vec::new();
        // 40 bytes written into a 16-byte buffer: 24 lost, the 16 newest start at 8.
        let status = status(0, 16, 40, false);
        assert_eq!(
            drain
                .drain_with(&status, &sink, &mut out, || unreachable!())
                .unwrap(),
            16
        );
        assert_eq!(out, [8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7]);
        assert_eq!(
            drain.gaps(),
            [Gap {
                offset: 0,
                lost: 24
            }]
        );
    }

    #[test]
    fn bytes_overwritten_during_the_copy_are_dropped_as_one_gap() {
        let memory: Vec<u8> = (0..16).collect();
        let sink = sink(&memory);
        let mut drain = Drain::new();
        let mut out = Vec::new();
        let before = status(0, 16, 20, true);
        // While copying, the sink wrote 6 more: the 6 oldest copied bytes are stale.
        let after = status(0, 16, 26, true);
        assert_eq!(
            drain
                .drain_with(&before, &sink, &mut out, || Ok(after))
                .unwrap(),
            10
        );
        assert_eq!(out, [10, 11, 12, 13, 14, 15, 0, 1, 2, 3]);
        // 4 lost before the copy and 6 during it: one gap of 10.
        assert_eq!(
            drain.gaps(),
            [Gap {
                offset: 0,
                lost: 10
            }]
        );
        assert_eq!((drain.drained(), drain.lost()), (10, 10));
    }

    #[test]
    fn a_status_outside_the_mapping_is_refused() {
        let sink = sink(&[0; 16]);
        let mut drain = Drain::new();
        let bad = status(8, 16, 4, false);
        assert!(matches!(
            drain.drain_with(&bad, &sink, &mut Vec::new(), || unreachable!()),
            Err(DeviceError::BufferOutsideMapping { .. })
        ));
    }
}
