//! Waiting for ring buffer wake-ups (wakeup_events/wakeup_watermark).

use std::os::fd::{AsRawFd, BorrowedFd};
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum PollError {
    #[error("poll on {count} perf fds failed: {source}")]
    Poll {
        count: usize,
        source: std::io::Error,
    },
}

/// Readiness of one fd after [`poll_readable`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PollStatus {
    /// The ring buffer crossed its wakeup threshold.
    pub readable: bool,
    /// The event can produce no more data (e.g. the monitored task exited).
    pub hung_up: bool,
}

/// Waits until one of `fds` is readable or hung up, or `timeout` passes
/// (None waits forever). A signal interrupting the wait counts as a timeout:
/// every status is returned not-ready and the caller polls again.
pub fn poll_readable(
    fds: &[BorrowedFd<'_>],
    timeout: Option<Duration>,
) -> Result<Vec<PollStatus>, PollError> {
    let mut pollfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|fd| libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let timeout_ms = timeout.map_or(-1, |t| i32::try_from(t.as_millis()).unwrap_or(i32::MAX));
    // SAFETY: `pollfds` is a live, exclusively borrowed array of exactly
    // `len` pollfd structs; poll only writes their revents fields.
    let result = unsafe {
        libc::poll(
            pollfds.as_mut_ptr(),
            pollfds.len() as libc::nfds_t,
            timeout_ms,
        )
    };
    if result < 0 {
        let source = std::io::Error::last_os_error();
        if source.raw_os_error() == Some(libc::EINTR) {
            return Ok(vec![PollStatus::default(); fds.len()]);
        }
        return Err(PollError::Poll {
            count: fds.len(),
            source,
        });
    }
    Ok(pollfds
        .iter()
        .map(|pollfd| PollStatus {
            readable: pollfd.revents & libc::POLLIN != 0,
            hung_up: pollfd.revents & (libc::POLLHUP | libc::POLLERR) != 0,
        })
        .collect())
}
