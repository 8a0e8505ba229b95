//! `rvperf report`: the functions samples fall in, with percentages.

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use crate::perf_input::{file_size, for_each_sample, open, Processes, SymbolOptions};

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Input file.
    #[arg(short = 'i', long = "input", default_value = "perf.data")]
    input: PathBuf,
    /// Look for the recorded programs' files under this directory (like perf's
    /// `--symfs`), for recordings made on another machine.
    #[arg(long, value_name = "DIR")]
    symfs: Option<PathBuf>,
    /// Kernel symbols for kernel addresses (a copy of the recording machine's
    /// /proc/kallsyms).
    #[arg(long, value_name = "FILE")]
    kallsyms: Option<PathBuf>,
    /// How many entries to print.
    #[arg(long, default_value_t = 30)]
    top: usize,
}

pub fn run(arguments: &ReportArgs) -> Result<()> {
    let reader = open(&arguments.input)?;
    let mut processes = Processes::for_recording(
        &reader,
        SymbolOptions {
            symfs: arguments.symfs.clone(),
            kallsyms: arguments.kallsyms.clone(),
            ..SymbolOptions::default()
        },
    );
    // (command, dso, symbol) -> summed sample periods.
    let mut totals: HashMap<(String, String, String), u64> = HashMap::new();
    let mut total_period = 0u64;
    let samples = for_each_sample(
        &reader,
        file_size(&arguments.input),
        &mut processes,
        |processes, _, sample| {
            let pid = sample.pid.unwrap_or(-1) as u32;
            let tid = sample.tid.unwrap_or(-1) as u32;
            let ip = sample.ip.unwrap_or(0);
            let period = sample.period.unwrap_or(1).max(1);
            let place = processes.place(pid, ip);
            let symbol = place.symbol.unwrap_or_else(|| format!("{ip:#x}"));
            *totals
                .entry((processes.comm(tid).to_owned(), place.dso, symbol))
                .or_default() += period;
            total_period += period;
            Ok(())
        },
    )?;
    let mut ranked: Vec<_> = totals.into_iter().collect();
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let names = reader.event_names().join(", ");
    writeln!(out, "# Samples: {samples} of event '{names}'")?;
    writeln!(
        out,
        "# Overhead  Command          Shared Object        Symbol"
    )?;
    for ((command, dso, symbol), period) in ranked.into_iter().take(arguments.top) {
        let share = 100.0 * period as f64 / total_period.max(1) as f64;
        writeln!(out, "  {share:6.2}%  {command:<16} {dso:<20} [.] {symbol}")?;
    }
    Ok(())
}
