//! The command a recording samples (`rvperf record -- CMD ARGS...`), started the way Linux perf starts
//! its workload (`evlist__prepare_workload`): forked at once, but held before its
//! `exec` until the recorder has opened its events with `enable_on_exec`, so that the
//! command's first instruction is sampled and nothing of rvperf's is.
//!
//! Two close-on-exec pipes join the two processes. The child blocks reading the *go*
//! pipe: one byte means exec, end of file (the recorder gave up) means exit. The
//! *exec-error* pipe tells the recorder how the exec went: end of file when it
//! succeeded (the exec closed the child's end), the errno when it failed.

use std::ffi::{c_char, CString};
use std::os::fd::OwnedFd;

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sys::signal::{kill, signal, SigHandler, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::{fork, pipe2, read, write, ForkResult, Pid};

/// How a workload ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkloadExit {
    /// It exited with this status (WEXITSTATUS).
    Code(i32),
    /// A signal killed it (WTERMSIG).
    Signal(Signal),
}

impl std::fmt::Display for WorkloadExit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WorkloadExit::Code(code) => write!(f, "exited with status {code}"),
            WorkloadExit::Signal(signal) => write!(f, "was killed by {}", signal.as_str()),
        }
    }
}

/// Why a workload could not be started, released or waited for. The errno is each
/// variant's `source`, not part of its message, so that an error chain prints it once.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    #[error("no command to run")]
    NoCommand,
    #[error("command argument {argument:?} contains a NUL byte")]
    NulByte {
        argument: String,
        source: std::ffi::NulError,
    },
    #[error("cannot create a pipe")]
    Pipe { source: Errno },
    #[error("cannot fork the workload")]
    Fork { source: Errno },
    #[error("cannot release the workload")]
    Release { source: Errno },
    #[error("cannot learn whether the workload started")]
    ExecStatus { source: Errno },
    /// The exec failed: `reason` is the errno's description (perf's wording).
    #[error("cannot run '{program}': {reason}")]
    Exec { program: String, reason: String },
    #[error("cannot wait for the workload")]
    Wait { source: Errno },
}

/// A forked workload, held before its exec until [`Workload::release`]. Dropped before
/// it has been reaped, it is cancelled (held) or sent SIGTERM (released), and reaped:
/// an error of the recorder never leaves the command running on its own.
#[derive(Debug)]
pub struct Workload {
    pid: Pid,
    program: String,
    /// The go pipe's write end, until the release.
    go: Option<OwnedFd>,
    /// The exec-error pipe's read end, until the release has read it.
    exec_error: Option<OwnedFd>,
    exit: Option<WorkloadExit>,
}

/// The status of the child's failed exec: the shell's "command not found" status.
const EXEC_FAILED: i32 = 127;

impl Workload {
    /// Forks the workload, which waits for [`Workload::release`] before its exec.
    pub fn start(command: &[String]) -> Result<Workload, WorkloadError> {
        let Some(program) = command.first() else {
            return Err(WorkloadError::NoCommand);
        };
        // Everything the child needs is made here: between fork and exec it may only
        // make async-signal-safe calls, and allocating is not one.
        let arguments = command
            .iter()
            .map(|argument| {
                CString::new(argument.as_bytes()).map_err(|source| WorkloadError::NulByte {
                    argument: argument.clone(),
                    source,
                })
            })
            .collect::<Result<Vec<CString>, WorkloadError>>()?;
        let mut argv: Vec<*const c_char> = arguments.iter().map(|a| a.as_ptr()).collect();
        argv.push(std::ptr::null());
        let pipe = || pipe2(OFlag::O_CLOEXEC).map_err(|source| WorkloadError::Pipe { source });
        let (go_read, go_write) = pipe()?;
        let (error_read, error_write) = pipe()?;
        // SAFETY: the child runs only async-signal-safe code (`hold_then_exec`: signal,
        // close, read, execvp, write, _exit) on memory prepared before the fork, and
        // never returns into Rust code that could allocate, unwind or run destructors.
        match unsafe { fork() }.map_err(|source| WorkloadError::Fork { source })? {
            ForkResult::Child => hold_then_exec(go_read, go_write, error_read, error_write, &argv),
            ForkResult::Parent { child } => Ok(Workload {
                pid: child,
                program: program.clone(),
                go: Some(go_write),
                exec_error: Some(error_read),
                exit: None,
            }),
        }
    }

    /// The workload's process id.
    pub fn pid(&self) -> i32 {
        self.pid.as_raw()
    }

    /// Lets the workload exec; fails with "cannot run 'CMD': REASON" (the workload
    /// reaped) when the exec fails.
    pub fn release(&mut self) -> Result<(), WorkloadError> {
        if let Some(go) = self.go.take() {
            retry_interrupted(|| write(&go, b"g"))
                .map_err(|source| WorkloadError::Release { source })?;
        }
        let Some(exec_error) = self.exec_error.take() else {
            return Ok(());
        };
        let mut errno = [0u8; 4];
        let mut filled = 0;
        while filled < errno.len() {
            match retry_interrupted(|| read(&exec_error, &mut errno[filled..]))
                .map_err(|source| WorkloadError::ExecStatus { source })?
            {
                0 => break,
                read => filled += read,
            }
        }
        if filled == 0 {
            return Ok(());
        }
        let _ = self.wait();
        let reason = if filled == errno.len() {
            Errno::from_raw(i32::from_ne_bytes(errno)).desc()
        } else {
            "the exec failed"
        };
        Err(WorkloadError::Exec {
            program: self.program.clone(),
            reason: reason.to_owned(),
        })
    }

    /// The workload's end, if it has ended (not blocking).
    pub fn try_wait(&mut self) -> Result<Option<WorkloadExit>, WorkloadError> {
        if self.exit.is_none() {
            let status = retry_interrupted(|| waitpid(self.pid, Some(WaitPidFlag::WNOHANG)))
                .map_err(|source| WorkloadError::Wait { source })?;
            self.exit = exit_of(status);
        }
        Ok(self.exit)
    }

    /// Ends the workload as perf does when the recording stops first: SIGTERM if it
    /// still runs, then waits for it. Returns how it ended.
    pub fn terminate(&mut self) -> Result<WorkloadExit, WorkloadError> {
        if self.try_wait()?.is_none() {
            // Not yet released: closing the go pipe makes it exit instead of exec.
            self.go = None;
            let _ = kill(self.pid, Signal::SIGTERM);
        }
        self.wait()
    }

    /// Waits for the released workload to end by itself.
    pub fn wait_for_exit(&mut self) -> Result<WorkloadExit, WorkloadError> {
        self.wait()
    }

    /// Waits for the workload to end.
    fn wait(&mut self) -> Result<WorkloadExit, WorkloadError> {
        // Released workloads no longer read the go pipe; held ones exit on its end.
        self.go = None;
        loop {
            if let Some(exit) = self.exit {
                return Ok(exit);
            }
            let status = retry_interrupted(|| waitpid(self.pid, None))
                .map_err(|source| WorkloadError::Wait { source })?;
            self.exit = exit_of(status);
        }
    }
}

impl Drop for Workload {
    fn drop(&mut self) {
        if self.exit.is_none() {
            let _ = self.terminate();
        }
    }
}

fn exit_of(status: WaitStatus) -> Option<WorkloadExit> {
    match status {
        WaitStatus::Exited(_, code) => Some(WorkloadExit::Code(code)),
        WaitStatus::Signaled(_, signal, _) => Some(WorkloadExit::Signal(signal)),
        _ => None,
    }
}

/// Repeats `call` while a signal handler (the recorder's SIGINT/SIGTERM) interrupts it.
fn retry_interrupted<T>(mut call: impl FnMut() -> nix::Result<T>) -> nix::Result<T> {
    loop {
        match call() {
            Err(Errno::EINTR) => continue,
            other => return other,
        }
    }
}

/// The child, between fork and exec: async-signal-safe calls only.
fn hold_then_exec(
    go_read: OwnedFd,
    go_write: OwnedFd,
    error_read: OwnedFd,
    error_write: OwnedFd,
    argv: &[*const c_char],
) -> ! {
    // The recorder's SIGINT/SIGTERM handlers were inherited (exec would reset them,
    // but a SIGTERM must kill a child still held), and Rust ignores SIGPIPE, which
    // exec would keep: the command gets the default dispositions.
    for held in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGPIPE] {
        // SAFETY: SIG_DFL installs no handler, so no code of ours can run in a
        // signal context; sigaction is async-signal-safe.
        let _ = unsafe { signal(held, SigHandler::SigDfl) };
    }
    drop(go_write);
    drop(error_read);
    let mut go = [0u8; 1];
    let released = loop {
        match read(&go_read, &mut go) {
            Err(Errno::EINTR) => continue,
            Ok(1) => break true,
            _ => break false,
        }
    };
    if released {
        // SAFETY: `argv` is a NULL-terminated array of pointers to NUL-terminated
        // strings (argv[0] the program), all made before the fork and alive in this
        // copy of the parent's memory. execvp only returns on failure.
        unsafe { libc::execvp(argv[0], argv.as_ptr()) };
        let errno = Errno::last_raw().to_ne_bytes();
        let _ = write(&error_write, &errno);
    }
    // SAFETY: _exit ends the process at once, without running atexit handlers or
    // destructors (which are not async-signal-safe here).
    unsafe { libc::_exit(EXEC_FAILED) }
}
