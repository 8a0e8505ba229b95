//! Opening perf.data files for `script`, `report`, `flamegraph` and `autofdo`, and
//! showing what their session reports: progress, undecoded AUX data, losses and the
//! symbolizer's problems. The reading itself is `perf_session`'s.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use perf_data::PerfDataReader;
use perf_session::{Lost, Processes, Session, SymbolOptions, UndecodedAux};

/// Where the recorded programs' files and the kernel's symbols are: the arguments of
/// every command that names what a recording sampled.
#[derive(Debug, Clone, clap::Args)]
pub struct SymbolArgs {
    /// Look for the recorded programs' files under this directory (like perf's
    /// `--symfs`), for recordings made on another machine.
    #[arg(long, value_name = "DIR")]
    pub symfs: Option<PathBuf>,
    /// Kernel symbols for kernel addresses (a copy of the recording machine's
    /// /proc/kallsyms).
    #[arg(long, value_name = "FILE")]
    pub kallsyms: Option<PathBuf>,
}

impl SymbolArgs {
    /// The session's symbol options for these arguments (functions from symbol tables).
    pub fn options(&self) -> SymbolOptions {
        SymbolOptions {
            symfs: self.symfs.clone(),
            kallsyms: self.kallsyms.clone(),
            ..SymbolOptions::default()
        }
    }
}

/// Opens a perf.data file, naming it in errors; `-` reads a stream from standard input
/// (`perf record -o - | rvperf script -i -`).
pub fn open(path: &Path) -> Result<PerfDataReader<'static>> {
    if path == Path::new("-") {
        let mut data = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin().lock(), &mut data)
            .context("cannot read perf.data from standard input")?;
        return PerfDataReader::from_vec(data, "<stdin>")
            .context("cannot read perf.data from standard input");
    }
    PerfDataReader::open(path).with_context(|| format!("cannot read {}", path.display()))
}

/// Shows a percentage on stderr while `session` reads a large file (`path`), when
/// stderr is a terminal; [`clear_progress`] removes it.
pub fn show_progress(session: &mut Session<'_>, path: &Path) {
    use std::io::IsTerminal;
    // Files smaller than this read in well under a second.
    const WORTH_SHOWING: u64 = 64 << 20;
    let total = std::fs::metadata(path).map_or(0, |metadata| metadata.len());
    if total < WORTH_SHOWING || !std::io::stderr().is_terminal() {
        return;
    }
    let mut shown = 0;
    session.set_progress(move |offset| {
        let percent = offset.saturating_mul(100) / total.max(1);
        if percent > shown {
            shown = percent;
            eprint!("\rrvperf: reading {percent:3}%");
        }
    });
}

/// Removes what [`show_progress`] showed, if anything, and says which AUX data the
/// session could not decode.
pub fn finish_reading(session: &Session<'_>, path: &Path) {
    use std::io::IsTerminal;
    let total = std::fs::metadata(path).map_or(0, |metadata| metadata.len());
    if total >= 64 << 20 && std::io::stderr().is_terminal() {
        eprint!("\r{:20}\r", "");
    }
    if let Some(undecoded) = session.undecoded_aux() {
        warn_undecoded(&undecoded);
    }
}

fn warn_undecoded(undecoded: &UndecodedAux) {
    let kind = undecoded
        .auxtrace_type
        .map_or("without AUXTRACE_INFO".to_owned(), |t| {
            format!("of type {t}")
        });
    eprintln!(
        "rvperf: {} AUXTRACE chunks ({} bytes) {kind} not decoded: rvperf decodes \
         the AUX data of rvperf_ctr only",
        undecoded.chunks, undecoded.bytes
    );
}

/// Prints each problem the symbolizer met once (missing files, build id
/// mismatches, missing debug info, addresses outside every mapping) on stderr.
pub fn warn_problems(processes: &Processes) {
    for problem in processes.problems() {
        eprintln!("rvperf: warning: {problem}");
    }
}

/// perf report's warnings about losses, one line each on stderr.
pub fn warn_lost(lost: &Lost) {
    if lost.chunks > 0 {
        eprintln!(
            "rvperf: warning: processed {} events and lost {} chunks! Check IO/CPU overload.",
            lost.events, lost.chunks
        );
    }
    if lost.lost_samples > 0 {
        let processed = lost.processed_samples();
        eprintln!(
            "rvperf: warning: processed {processed} samples and lost {:.2}%!",
            100.0 * lost.lost_samples as f64 / processed as f64
        );
    }
}
