//! The command `rvperf record -- CMD ARGS...` samples, started the way Linux perf starts
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

use anyhow::{bail, Context, Result};
use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sys::signal::{kill, signal, SigHandler, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::{fork, pipe2, read, write, ForkResult, Pid};

/// How a workload ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exit {
    /// It exited with this status (WEXITSTATUS).
    Code(i32),
    /// A signal killed it (WTERMSIG).
    Signal(Signal),
}

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Exit::Code(code) => write!(f, "exited with status {code}"),
            Exit::Signal(signal) => write!(f, "was killed by {}", signal.as_str()),
        }
    }
}

/// A forked workload, held before its exec until [`Workload::release`]. Dropped before
/// it has been reaped, it is cancelled (held) or sent SIGTERM (released), and reaped:
/// an error of the recorder never leaves the command running on its own.
#[derive(Debug)]
pub(crate) struct Workload {
    pid: Pid,
    program: String,
    /// The go pipe's write end, until the release.
    go: Option<OwnedFd>,
    /// The exec-error pipe's read end, until the release has read it.
    exec_error: Option<OwnedFd>,
    exit: Option<Exit>,
}

/// The status of the child's failed exec: the shell's "command not found" status.
const EXEC_FAILED: i32 = 127;

impl Workload {
    /// Forks the workload, which waits for [`Workload::release`] before its exec.
    pub(crate) fn start(command: &[String]) -> Result<Workload> {
        let Some(program) = command.first() else {
            bail!("no command to run");
        };
        // Everything the child needs is made here: between fork and exec it may only
        // make async-signal-safe calls, and allocating is not one.
        let arguments = command
            .iter()
            .map(|argument| {
                CString::new(argument.as_bytes())
                    .with_context(|| format!("command argument {argument:?} contains a NUL byte"))
            })
            .collect::<Result<Vec<CString>>>()?;
        let mut argv: Vec<*const c_char> = arguments.iter().map(|a| a.as_ptr()).collect();
        argv.push(std::ptr::null());
        let (go_read, go_write) = pipe2(OFlag::O_CLOEXEC).context("cannot create a pipe")?;
        let (error_read, error_write) = pipe2(OFlag::O_CLOEXEC).context("cannot create a pipe")?;
        // SAFETY: the child runs only async-signal-safe code (`hold_then_exec`: signal,
        // close, read, execvp, write, _exit) on memory prepared before the fork, and
        // never returns into Rust code that could allocate, unwind or run destructors.
        match unsafe { fork() }.context("cannot fork the workload")? {
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

    pub(crate) fn pid(&self) -> i32 {
        self.pid.as_raw()
    }

    /// Lets the workload exec; fails with "cannot run 'CMD': REASON" (the workload
    /// reaped) when the exec fails.
    pub(crate) fn release(&mut self) -> Result<()> {
        if let Some(go) = self.go.take() {
            retry_interrupted(|| write(&go, b"g")).context("cannot release the workload")?;
        }
        let Some(exec_error) = self.exec_error.take() else {
            return Ok(());
        };
        let mut errno = [0u8; 4];
        let mut filled = 0;
        while filled < errno.len() {
            match retry_interrupted(|| read(&exec_error, &mut errno[filled..]))
                .context("cannot learn whether the workload started")?
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
        bail!("cannot run '{}': {reason}", self.program)
    }

    /// The workload's end, if it has ended (not blocking).
    pub(crate) fn try_wait(&mut self) -> Result<Option<Exit>> {
        if self.exit.is_none() {
            let status = retry_interrupted(|| waitpid(self.pid, Some(WaitPidFlag::WNOHANG)))
                .context("cannot wait for the workload")?;
            self.exit = exit_of(status);
        }
        Ok(self.exit)
    }

    /// Ends the workload as perf does when the recording stops first: SIGTERM if it
    /// still runs, then waits for it. Returns how it ended.
    pub(crate) fn terminate(&mut self) -> Result<Exit> {
        if self.try_wait()?.is_none() {
            // Not yet released: closing the go pipe makes it exit instead of exec.
            self.go = None;
            let _ = kill(self.pid, Signal::SIGTERM);
        }
        self.wait()
    }

    /// Waits for the workload to end.
    fn wait(&mut self) -> Result<Exit> {
        // Released workloads no longer read the go pipe; held ones exit on its end.
        self.go = None;
        loop {
            if let Some(exit) = self.exit {
                return Ok(exit);
            }
            let status = retry_interrupted(|| waitpid(self.pid, None))
                .context("cannot wait for the workload")?;
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

fn exit_of(status: WaitStatus) -> Option<Exit> {
    match status {
        WaitStatus::Exited(_, code) => Some(Exit::Code(code)),
        WaitStatus::Signaled(_, signal, _) => Some(Exit::Signal(signal)),
        _ => None,
    }
}

/// Repeats `call` while a signal handler (rvperf's SIGINT/SIGTERM) interrupts it.
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
