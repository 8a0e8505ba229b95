//! `rvperf report`: the functions samples fall in, with percentages.

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use perf_abi::sys::bindings as abi;

use crate::perf_input::{file_size, for_each_sample, open, thread_id, Processes, SymbolOptions};

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
    // perf report keeps the names of exited threads.
    processes.keep_exited_threads();
    let events = reader.event_names();
    // Per event: (command, dso, level, symbol) -> summed sample periods.
    let mut totals: Vec<HashMap<Row, u64>> = vec![HashMap::new(); events.len()];
    let mut counts = vec![EventTotals::default(); events.len()];
    for_each_sample(
        &reader,
        file_size(&arguments.input),
        &mut processes,
        |processes, sampled| {
            let Some(event) = sampled.attr_index.filter(|&index| index < events.len()) else {
                return Ok(());
            };
            let sample = &sampled.sample;
            let pid = thread_id(sample.pid);
            let tid = thread_id(sample.tid);
            let ip = sample.ip.unwrap_or(0);
            let place = processes.place(pid as u32, ip);
            // perf's rows are functions, told apart by where they start; an address
            // without a symbol is a row of its own, shown as its offset in the mapped
            // file (the address itself outside any), 0x and 16 digits.
            let (symbol, identity) = match place.symbol {
                Some(symbol) => (symbol, place.function_start),
                None => {
                    let address = place.file_offset.unwrap_or(ip);
                    (format!("{address:#018x}"), Some(address))
                }
            };
            let row = Row {
                command: processes.comm(pid, tid).to_owned(),
                dso: place.dso,
                level: level(sample.misc),
                symbol,
                identity,
            };
            let total = totals[event].entry(row).or_default();
            *total = total.saturating_add(sampled.period);
            counts[event].samples += 1;
            counts[event].period = counts[event].period.saturating_add(sampled.period);
            Ok(())
        },
    )?;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    // perf report's lost-record warnings and header line.
    let lost = crate::lost::Lost::of(&reader)?;
    lost.warn();
    writeln!(
        out,
        "#\n# Total Lost Samples: {}\n#",
        lost.total_lost_samples()
    )?;
    let mut printed = false;
    // As perf report --stdio: a section per event, events without samples (such as
    // the dummy event perf records side-band data with) left out.
    for ((name, rows), counts) in events.iter().zip(totals).zip(&counts) {
        if counts.samples == 0 {
            continue;
        }
        if printed {
            writeln!(out)?;
        }
        printed = true;
        let mut ranked: Vec<_> = rows.into_iter().collect();
        ranked.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        writeln!(out, "# Samples: {} of event '{name}'", counts.samples)?;
        writeln!(
            out,
            "# Overhead  Command          Shared Object        Symbol"
        )?;
        for (row, period) in ranked.into_iter().take(arguments.top) {
            let share = 100.0 * period as f64 / counts.period.max(1) as f64;
            let Row {
                command,
                dso,
                level,
                symbol,
                ..
            } = row;
            writeln!(
                out,
                "  {share:6.2}%  {command:<16} {dso:<20} [{level}] {symbol}"
            )?;
        }
    }
    if !printed {
        eprintln!("rvperf: {} has no samples", arguments.input.display());
    }
    Ok(())
}

/// One line of the report.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Row {
    command: String,
    dso: String,
    level: char,
    symbol: String,
    /// The function's start, or the address without a symbol.
    identity: Option<u64>,
}

#[derive(Debug, Clone, Copy, Default)]
struct EventTotals {
    samples: u64,
    period: u64,
}

/// perf's privilege level of a sample (`thread__find_map`): `k` kernel, `.` user, `H`
/// anything else (hypervisor, or a guest's modes when not reporting guests).
fn level(misc: u16) -> char {
    match u32::from(misc) & abi::PERF_RECORD_MISC_CPUMODE_MASK {
        abi::PERF_RECORD_MISC_KERNEL => 'k',
        abi::PERF_RECORD_MISC_USER => '.',
        _ => 'H',
    }
}

#[cfg(test)]
mod tests {
    use super::level;

    #[test]
    fn levels_are_perfs() {
        // PERF_RECORD_MISC_KERNEL, PERF_RECORD_MISC_USER.
        assert_eq!(level(1), 'k');
        assert_eq!(level(2), '.');
        // PERF_RECORD_MISC_HYPERVISOR, and the exact-sample bit beside user mode.
        assert_eq!(level(3), 'H');
        assert_eq!(level(2 | 1 << 14), '.');
    }
}
