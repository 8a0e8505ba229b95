//! Exact execution counts of every instruction of a riscv64 program, from a full run
//! under `qemu-riscv64` with one instruction per translation block and the exec log
//! (`trace_gen::qemu`): the ground truth that sampled profiles are measured against.
//!
//! A run of 20 M instructions writes about 1.7 GB of log, so the log never touches the
//! disk: QEMU writes it into a FIFO that this process reads while QEMU runs, keeping
//! only one counter per distinct address.
//!
//! Counts files hold one `0xADDRESS COUNT` line per instruction address, sorted by
//! address; `#` starts a comment line. Both the ground truth and profiles converted to
//! per-address counts use this format.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use trace_gen::qemu::{ExecLogReader, QemuError, QemuUser, RunOutput};

/// Executions per instruction address.
pub type InstructionCounts = HashMap<u64, u64>;

/// Errors while producing, writing or reading execution counts.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CountsError {
    /// Running QEMU or reading its exec log failed.
    #[error(transparent)]
    Qemu(#[from] QemuError),
    /// The temporary directory or the FIFO for the exec log could not be made.
    #[error("cannot create the FIFO {} for QEMU's exec log: {reason}", path.display())]
    Fifo {
        /// Where the FIFO was to be made.
        path: PathBuf,
        /// Why it could not be.
        reason: String,
    },
    /// The program did not exit with status 0, so its counts are not the run that was
    /// asked for.
    #[error("{} exited with status {status} under QEMU: {stderr}", program.display())]
    ProgramFailed {
        /// The guest program.
        program: PathBuf,
        /// Its exit status (128 + signal when killed).
        status: i32,
        /// The end of its standard error.
        stderr: String,
    },
    /// QEMU's exec log had no `Trace` line: QEMU logged nothing.
    #[error("QEMU's exec log for {} holds no executed instruction", program.display())]
    EmptyLog {
        /// The guest program.
        program: PathBuf,
    },
    /// A counts file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The counts file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// A line of a counts file is not `0xADDRESS COUNT`, or repeats an address.
    #[error("{}:{line}: {reason}: {text:?}", path.display())]
    Parse {
        /// The counts file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong with it.
        reason: &'static str,
        /// The line.
        text: String,
    },
}

/// The exact counts of one run and what the program printed.
#[derive(Debug, Clone)]
pub struct GroundTruth {
    /// Executions per instruction address.
    pub counts: InstructionCounts,
    /// Instructions retired in all (the sum of `counts`).
    pub instructions: u64,
    /// The guest's exit status and output.
    pub output: RunOutput,
}

/// Runs `program ARGS` under `qemu` with one instruction per translation block and
/// counts how often every instruction address executes. The environment is empty and
/// standard output a pipe, as in `QemuUser::run_logged`, so the C library's start-up
/// code retires the same instructions on every run of the same path.
///
/// A non-zero exit status is an error: the counts would not be of the run asked for.
pub fn instruction_counts(
    qemu: &QemuUser,
    program: &Path,
    args: &[&str],
) -> Result<GroundTruth, CountsError> {
    let directory = tempfile::Builder::new()
        .prefix("rvperf-ground-truth")
        .tempdir()
        .map_err(|error| CountsError::Fifo {
            path: std::env::temp_dir(),
            reason: error.to_string(),
        })?;
    let fifo = directory.path().join("exec.log");
    make_fifo(&fifo)?;

    let reader_finished = AtomicBool::new(false);
    let (run, counts) = std::thread::scope(|scope| {
        let runner = scope.spawn(|| {
            let run = qemu.run_logged(program, args, &fifo);
            release_reader(&fifo, &reader_finished);
            run
        });
        let counts = count_exec_log(&fifo);
        reader_finished.store(true, Ordering::Release);
        // The runner only fails to join if it panicked; pass that panic on.
        let run = runner
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (run, counts)
    });
    let output = run?;
    if !output.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail_start = stderr.len().saturating_sub(500);
        let tail_start = (tail_start..stderr.len())
            .find(|&index| stderr.is_char_boundary(index))
            .unwrap_or(stderr.len());
        return Err(CountsError::ProgramFailed {
            program: program.to_owned(),
            status: output.status_code,
            stderr: stderr[tail_start..].trim_end().to_owned(),
        });
    }
    let counts = counts?;
    let instructions: u64 = counts.values().sum();
    if instructions == 0 {
        return Err(CountsError::EmptyLog {
            program: program.to_owned(),
        });
    }
    Ok(GroundTruth {
        counts,
        instructions,
        output,
    })
}

/// Counts the executions of every address in a QEMU exec log (a file or a FIFO),
/// streaming it.
pub fn count_exec_log(log: &Path) -> Result<InstructionCounts, QemuError> {
    let file = File::open(log).map_err(|source| QemuError::LogOpen {
        path: log.to_owned(),
        source,
    })?;
    let reader = BufReader::with_capacity(1 << 16, PatientReader { file });
    let mut counts = InstructionCounts::new();
    for pc in ExecLogReader::new(reader) {
        *counts.entry(pc?).or_insert(0) += 1;
    }
    Ok(counts)
}

/// QEMU writes its log one line per `write` (it line-buffers it). A reader that waits
/// in `read` on the FIFO is woken for every line, and those wake-ups cost more than
/// QEMU's own work; pausing after a short read lets hundreds of lines collect in the
/// pipe first. A regular file only reads short at its end.
#[derive(Debug)]
struct PatientReader {
    file: File,
}

impl PatientReader {
    /// Well under the time QEMU takes to fill a 64 KiB pipe (about 800 lines at
    /// 1 µs each), so QEMU does not block on a full pipe.
    const PAUSE: Duration = Duration::from_micros(200);
}

impl Read for PatientReader {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        let read = self.file.read(buffer)?;
        if read > 0 && read < buffer.len() / 2 {
            std::thread::sleep(Self::PAUSE);
        }
        Ok(read)
    }
}

/// The standard library cannot make FIFOs and this crate has no unsafe code, so the
/// coreutils command makes it.
fn make_fifo(path: &Path) -> Result<(), CountsError> {
    let failed = |reason: String| CountsError::Fifo {
        path: path.to_owned(),
        reason,
    };
    let output = Command::new("mkfifo")
        .arg("-m")
        .arg("600")
        .arg(path)
        .stdin(Stdio::null())
        .output()
        .map_err(|error| failed(format!("cannot run mkfifo: {error}")))?;
    if !output.status.success() {
        return Err(failed(
            String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        ));
    }
    Ok(())
}

/// Called once QEMU has exited. The reader's `open` of the FIFO waits for a writer, and
/// QEMU never opened it when it failed to start; a writer that opens and closes at once
/// turns that wait into end of file. Opening without blocking fails while no reader is
/// there, which covers both "the reader has not reached `open` yet" (retry) and "the
/// reader is done" (stop).
fn release_reader(fifo: &Path, reader_finished: &AtomicBool) {
    while !reader_finished.load(Ordering::Acquire) {
        let opened = OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(fifo);
        if opened.is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Writes `counts` as a counts file, sorted by address.
pub fn write_counts(path: &Path, counts: &InstructionCounts) -> Result<(), CountsError> {
    let io_error = |source| CountsError::Io {
        path: path.to_owned(),
        source,
    };
    let mut sorted: Vec<(u64, u64)> = counts.iter().map(|(&pc, &count)| (pc, count)).collect();
    sorted.sort_unstable();
    let mut writer = BufWriter::new(File::create(path).map_err(io_error)?);
    for (pc, count) in sorted {
        writeln!(writer, "{pc:#x} {count}").map_err(io_error)?;
    }
    writer.flush().map_err(io_error)
}

/// Reads a counts file. A repeated address is an error rather than summed: it means
/// the file was not made per address as the format says.
pub fn read_counts(path: &Path) -> Result<InstructionCounts, CountsError> {
    let io_error = |source| CountsError::Io {
        path: path.to_owned(),
        source,
    };
    let reader = BufReader::new(File::open(path).map_err(io_error)?);
    let mut counts = InstructionCounts::new();
    for (index, line) in reader.lines().enumerate() {
        let line = line.map_err(io_error)?;
        let parse_error = |reason| CountsError::Parse {
            path: path.to_owned(),
            line: index + 1,
            reason,
            text: line.clone(),
        };
        let text = line.trim();
        if text.is_empty() || text.starts_with('#') {
            continue;
        }
        let mut fields = text.split_whitespace();
        let (Some(address), Some(count), None) = (fields.next(), fields.next(), fields.next())
        else {
            return Err(parse_error("expected two fields, 0xADDRESS COUNT"));
        };
        let address = address
            .strip_prefix("0x")
            .and_then(|hex| u64::from_str_radix(hex, 16).ok())
            .ok_or_else(|| parse_error("address is not 0x followed by hex digits"))?;
        let count = count
            .parse::<u64>()
            .map_err(|_| parse_error("count is not a decimal number"))?;
        if counts.insert(address, count).is_some() {
            return Err(parse_error("address listed twice"));
        }
    }
    Ok(counts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_files_round_trip_and_reject_bad_lines() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("counts");
        let counts = InstructionCounts::from([(0x10_0a2, 7), (0x10_000, 1), (u64::MAX - 1, 0)]);
        write_counts(&path, &counts).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "0x10000 1\n0x100a2 7\n0xfffffffffffffffe 0\n"
        );
        assert_eq!(read_counts(&path).unwrap(), counts);

        for (text, reason) in [
            ("0x10 1 2\n", "expected two fields, 0xADDRESS COUNT"),
            ("10 1\n", "address is not 0x followed by hex digits"),
            ("0x10 -1\n", "count is not a decimal number"),
            ("# comment\n\n0x10 1\n0x10 2\n", "address listed twice"),
        ] {
            std::fs::write(&path, text).unwrap();
            match read_counts(&path) {
                Err(CountsError::Parse {
                    reason: found,
                    line,
                    ..
                }) => {
                    assert_eq!(found, reason, "{text:?}");
                    assert_eq!(line, text.lines().count(), "{text:?}");
                }
                other => panic!("{text:?}: expected a parse error, got {other:?}"),
            }
        }
    }

    #[test]
    fn exec_log_is_counted_per_address() {
        let directory = tempfile::tempdir().unwrap();
        let log = directory.path().join("exec.log");
        std::fs::write(
            &log,
            "Trace 0: 0x1 [0/10/0/0] _start\nTrace 0: 0x1 [0/12/0/0] \n\
             Linking TBs 0x1 [12] index 0 -> 0x2 [10]\nTrace 0: 0x1 [0/10/0/0] _start\n",
        )
        .unwrap();
        assert_eq!(
            count_exec_log(&log).unwrap(),
            InstructionCounts::from([(0x10, 2), (0x12, 1)])
        );
    }

    #[test]
    fn qemu_that_cannot_start_does_not_hang_the_reader() {
        let qemu = QemuUser::with_version("/nonexistent/qemu-riscv64", (10, 0, 0));
        let error = instruction_counts(&qemu, Path::new("/nonexistent/program"), &[]).unwrap_err();
        assert!(
            matches!(error, CountsError::Qemu(QemuError::Spawn { .. })),
            "{error}"
        );
    }
}
