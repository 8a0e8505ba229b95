//! An open perf event: the fd from perf_event_open(2) and its ioctls.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use perf_event_open_sys::bindings::{perf_event_attr, PERF_FLAG_FD_CLOEXEC};
use perf_event_open_sys::{ioctls, perf_event_open};

const PARANOID_PATH: &str = "/proc/sys/kernel/perf_event_paranoid";

/// Failures of perf_event_open and of the event ioctls. The errno is each variant's
/// `source`, not part of its message, so that an error chain prints it once.
#[derive(Debug, thiserror::Error)]
pub enum EventError {
    #[error(
        "permission denied opening perf event {event:?}: kernel.perf_event_paranoid is {paranoid} \
         ({PARANOID_PATH}); lower it (e.g. `sysctl kernel.perf_event_paranoid=1`, -1 for \
         CPU-wide and kernel sampling) or grant CAP_PERFMON (CAP_SYS_ADMIN before Linux 5.8)"
    )]
    PermissionDenied {
        event: String,
        /// The sysctl value, or why it could not be read.
        paranoid: String,
        source: io::Error,
    },
    #[error(
        "perf event {event:?} is not supported by this kernel or CPU (or its attr is invalid)"
    )]
    Unsupported { event: String, source: io::Error },
    #[error("perf_event_open failed for {event:?}")]
    Open { event: String, source: io::Error },
    #[error("ioctl {request} failed on perf event {event:?}")]
    Ioctl {
        event: String,
        request: &'static str,
        source: io::Error,
    },
}

/// One perf event fd, closed on drop.
#[derive(Debug)]
pub struct Event {
    fd: OwnedFd,
    name: String,
}

fn read_paranoid() -> String {
    match std::fs::read_to_string(PARANOID_PATH) {
        Ok(text) => text.trim().to_owned(),
        Err(error) => format!("unreadable ({error})"),
    }
}

impl Event {
    /// Opens `attr` for `pid` (0 = this process, -1 = all) on `cpu` (-1 = any),
    /// optionally in `group`'s group. PERF_FLAG_FD_CLOEXEC is always added so
    /// spawned children do not inherit the fd. `name` is used in errors only.
    pub fn open(
        name: &str,
        attr: &perf_event_attr,
        pid: i32,
        cpu: i32,
        group: Option<&Event>,
        flags: u64,
    ) -> Result<Self, EventError> {
        let mut attr = *attr;
        if attr.size == 0 {
            attr.size = std::mem::size_of::<perf_event_attr>() as u32;
        }
        let group_fd = group.map_or(-1, |leader| leader.fd.as_raw_fd());
        let flags = flags | u64::from(PERF_FLAG_FD_CLOEXEC);
        // SAFETY: `attr` is a fully initialised perf_event_attr owned by this
        // frame whose `size` matches the struct; the kernel only reads it (and
        // may write `size` back on E2BIG, which stays inside the struct).
        let fd = unsafe { perf_event_open(&mut attr, pid, cpu, group_fd, flags as libc::c_ulong) };
        if fd < 0 {
            let source = io::Error::last_os_error();
            let event = name.to_owned();
            return Err(match source.raw_os_error() {
                Some(libc::EACCES | libc::EPERM) => EventError::PermissionDenied {
                    event,
                    paranoid: read_paranoid(),
                    source,
                },
                Some(libc::ENOENT | libc::EOPNOTSUPP | libc::EINVAL | libc::ENODEV) => {
                    EventError::Unsupported { event, source }
                }
                _ => EventError::Open { event, source },
            });
        }
        // SAFETY: perf_event_open returned a fresh fd that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Self {
            fd,
            name: name.to_owned(),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    fn ioctl_result(&self, request: &'static str, result: libc::c_int) -> Result<(), EventError> {
        if result < 0 {
            return Err(EventError::Ioctl {
                event: self.name.clone(),
                request,
                source: io::Error::last_os_error(),
            });
        }
        Ok(())
    }

    pub fn enable(&self) -> Result<(), EventError> {
        // SAFETY: the fd is a live perf event fd owned by self; ENABLE takes no pointer.
        let result = unsafe { ioctls::ENABLE(self.fd.as_raw_fd(), 0) };
        self.ioctl_result("PERF_EVENT_IOC_ENABLE", result)
    }

    pub fn disable(&self) -> Result<(), EventError> {
        // SAFETY: the fd is a live perf event fd owned by self; DISABLE takes no pointer.
        let result = unsafe { ioctls::DISABLE(self.fd.as_raw_fd(), 0) };
        self.ioctl_result("PERF_EVENT_IOC_DISABLE", result)
    }

    /// The kernel's id for this event, as found in PERF_SAMPLE_ID/IDENTIFIER.
    pub fn id(&self) -> Result<u64, EventError> {
        let mut id = 0u64;
        // SAFETY: the fd is a live perf event fd; `id` is a valid, writable u64
        // for the duration of the call, which is all PERF_EVENT_IOC_ID writes.
        let result = unsafe { ioctls::ID(self.fd.as_raw_fd(), &mut id) };
        self.ioctl_result("PERF_EVENT_IOC_ID", result)?;
        Ok(id)
    }

    /// Sends this event's records into `target`'s ring buffer (same CPU or
    /// same task required by the kernel), so one mmap serves a whole group.
    pub fn set_output(&self, target: &Event) -> Result<(), EventError> {
        // SAFETY: both fds are live perf event fds; SET_OUTPUT takes an fd, no pointer.
        let result = unsafe { ioctls::SET_OUTPUT(self.fd.as_raw_fd(), target.fd.as_raw_fd()) };
        self.ioctl_result("PERF_EVENT_IOC_SET_OUTPUT", result)
    }

    /// Reads the counter as laid out by the attr's read_format, into `buffer`.
    /// Returns the number of bytes read.
    pub fn read_counter(&self, buffer: &mut [u8]) -> Result<usize, EventError> {
        let mut file =
            std::fs::File::from(self.fd.try_clone().map_err(|source| EventError::Ioctl {
                event: self.name.clone(),
                request: "dup",
                source,
            })?);
        io::Read::read(&mut file, buffer).map_err(|source| EventError::Ioctl {
            event: self.name.clone(),
            request: "read",
            source,
        })
    }
}

impl AsFd for Event {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}
