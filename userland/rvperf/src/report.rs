//! `rvperf report`: the functions samples fall in, with percentages.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use perf_session::report::{report, Row, WeighedRow};
use perf_session::Session;

use crate::perf_file::{finish_reading, open, show_progress, warn_lost, SymbolArgs};

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Input file.
    #[arg(short = 'i', long = "input", default_value = "perf.data")]
    input: PathBuf,
    #[command(flatten)]
    symbols: SymbolArgs,
    /// How many entries to print.
    #[arg(long, default_value_t = 30)]
    top: usize,
}

pub fn run(arguments: &ReportArgs) -> Result<()> {
    let reader = open(&arguments.input)?;
    let mut session = Session::new(&reader, arguments.symbols.options());
    // perf report keeps the names of exited threads.
    session.processes().keep_exited_threads();
    show_progress(&mut session, &arguments.input);
    let reports = report(&mut session)?;
    finish_reading(&session, &arguments.input);
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    // perf report's lost-record warnings and header line.
    let lost = session.lost();
    warn_lost(&lost);
    writeln!(
        out,
        "#\n# Total Lost Samples: {}\n#",
        lost.total_lost_samples()
    )?;
    let mut printed = false;
    // As perf report --stdio: a section per event, events without samples (such as
    // the dummy event perf records side-band data with) left out.
    for event in &reports {
        if event.samples == 0 {
            continue;
        }
        if printed {
            writeln!(out)?;
        }
        printed = true;
        writeln!(
            out,
            "# Samples: {} of event '{}'",
            event.samples, event.name
        )?;
        writeln!(
            out,
            "# Overhead  Command          Shared Object        Symbol"
        )?;
        for WeighedRow { row, period } in event.rows.iter().take(arguments.top) {
            let share = event.share(*period);
            let Row {
                command,
                dso,
                level,
                symbol,
                ..
            } = row;
            let level = level.as_char();
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
