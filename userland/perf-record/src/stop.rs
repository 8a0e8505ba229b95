//! Stopping a recording from outside its loop: SIGINT and SIGTERM, as perf record
//! stops on them, once the caller has installed the handlers; or a request in code.

use std::sync::atomic::{AtomicI32, Ordering};

use nix::errno::Errno;
use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};

/// The last stop requested (a signal number; 0 for none). Process-wide, as the
/// signal dispositions that set it are.
static STOP_SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn request_stop(signal: libc::c_int) {
    STOP_SIGNAL.store(signal, Ordering::Relaxed);
}

/// The stop handlers could not be installed.
#[derive(Debug, thiserror::Error)]
#[error("cannot handle {}", signal.as_str())]
pub struct StopHandlerError {
    pub signal: Signal,
    pub source: Errno,
}

/// Whether, and by which signal, the recording was asked to stop. The recording loop
/// checks it after each round; what the rings hold is still written. The flag is
/// process-wide (signal handlers are): every `StopFlag` reads the same one.
#[derive(Debug, Clone, Copy, Default)]
pub struct StopFlag {
    /// Only this module makes one, so that the flag's meaning stays documented here.
    _private: (),
}

impl StopFlag {
    /// A flag that [`StopFlag::request`] sets, and SIGINT/SIGTERM too once
    /// [`StopFlag::install_signal_handlers`] has run.
    pub fn new() -> StopFlag {
        StopFlag { _private: () }
    }

    /// Makes SIGINT and SIGTERM stop the recording instead of ending the process.
    /// The handlers are installed without SA_RESTART, so the signal interrupts the
    /// recorder's poll, which returns at once. The caller decides how the process
    /// ends afterwards (perf raises the signal again once its output is written).
    pub fn install_signal_handlers(&self) -> Result<(), StopHandlerError> {
        let action = SigAction::new(
            SigHandler::Handler(request_stop),
            SaFlags::empty(),
            SigSet::empty(),
        );
        for signal in [Signal::SIGINT, Signal::SIGTERM] {
            // SAFETY: `request_stop` only stores to an atomic, which is async-signal-safe.
            unsafe { sigaction(signal, &action) }
                .map_err(|source| StopHandlerError { signal, source })?;
        }
        Ok(())
    }

    /// Asks the recording to stop as if `signal` had arrived.
    pub fn request(&self, signal: Signal) {
        STOP_SIGNAL.store(signal as i32, Ordering::Relaxed);
    }

    /// The signal that asked the recording to stop, if one did.
    pub fn requested(&self) -> Option<Signal> {
        Signal::try_from(STOP_SIGNAL.load(Ordering::Relaxed)).ok()
    }
}
