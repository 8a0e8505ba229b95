//! Waiting for ring buffer wake-ups (wakeup_events/wakeup_watermark).

use std::os::fd::BorrowedFd;
use std::time::Duration;

use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

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
    let mut pollfds: Vec<PollFd<'_>> = fds
        .iter()
        .map(|fd| PollFd::new(*fd, PollFlags::POLLIN))
        .collect();
    let timeout = match timeout {
        None => PollTimeout::NONE,
        // Over i32::MAX milliseconds (24 days): as long as poll waits.
        Some(timeout) => PollTimeout::try_from(timeout).unwrap_or(PollTimeout::MAX),
    };
    match poll(&mut pollfds, timeout) {
        Ok(_) => {}
        Err(Errno::EINTR) => return Ok(vec![PollStatus::default(); fds.len()]),
        Err(errno) => {
            return Err(PollError::Poll {
                count: fds.len(),
                source: std::io::Error::from(errno),
            })
        }
    }
    Ok(pollfds
        .iter()
        .map(|pollfd| {
            let revents = pollfd.revents().unwrap_or(PollFlags::empty());
            PollStatus {
                readable: revents.contains(PollFlags::POLLIN),
                hung_up: revents.intersects(PollFlags::POLLHUP | PollFlags::POLLERR),
            }
        })
        .collect())
}
