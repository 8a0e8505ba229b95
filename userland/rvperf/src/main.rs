//! `rvperf`: the command line, a thin layer over the rvperf libraries.

mod autofdo;
mod daemon;
mod decode;
mod export;
mod flamegraph;
mod inject;
mod list;
mod output;
mod perf_file;
mod record;
mod report;
mod script;
mod tandem_compare;
mod trace;
mod trace_file;
mod trace_input;
mod trace_recording;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "rvperf",
    version,
    about = "Linux perf and hardware-trace toolkit for RISC-V"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Decode a RISC-V trace (N-Trace, the debug trace module, tandem verification)
    /// against the ELF files that ran.
    Decode(decode::DecodeArgs),
    /// Sample a command, a process or the system into a perf.data file.
    Record(record::RecordArgs),
    /// Print the samples of a perf.data file (any perf's or rvperf's).
    Script(script::ScriptArgs),
    /// The functions samples fall in, with percentages.
    Report(report::ReportArgs),
    /// A perf.data with its kept AUX data (record --keep-aux) turned into samples that
    /// Linux perf reads; with --itrace, branch-stack samples synthesized from an N-Trace.
    Inject(inject::InjectArgs),
    /// A flame graph (or folded stacks) of the samples' call stacks.
    Flamegraph(flamegraph::FlamegraphArgs),
    /// An AutoFDO profile (LLVM text or extbinary, GCC) of one binary from branch stacks.
    Autofdo(autofdo::AutofdoArgs),
    /// A recording as a pprof profile (go tool pprof, Pyroscope, Parca), written to a
    /// file or pushed to a collector.
    Export(export::ExportArgs),
    /// Always-on profiling of the whole machine (eBPF): pprof profiles and folded
    /// stacks every interval.
    Daemon(daemon::DaemonArgs),
    /// The events and PMUs this machine can record (with CTR and SBI PMU counters).
    List(list::ListArgs),
    /// Hardware trace (N-Trace) through the rvtrace driver.
    Trace(trace::TraceArgs),
    /// The first difference between two tandem-verification traces of one program
    /// (instruction, register, CSR or memory), with its place in both. Exit status 0
    /// when they agree, 1 when they diverge, 2 on error.
    TandemCompare(tandem_compare::TandemCompareArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Decode(arguments) => decode::run(&arguments),
        // Its exit status is the workload's, as perf record's is.
        Command::Record(arguments) => match record::run(&arguments) {
            Ok(outcome) => return outcome.exit(),
            Err(error) => Err(error),
        },
        Command::Trace(arguments) => match trace::run(&arguments) {
            Ok(outcome) => return outcome.exit(),
            Err(error) => Err(error),
        },
        Command::TandemCompare(arguments) => match tandem_compare::run(&arguments) {
            Ok(outcome) => return outcome.exit(),
            Err(error) => {
                // 1 says "they diverge": trouble is 2, as with cmp and diff.
                eprintln!("rvperf: error: {}", format!("{error:#}").replace('\n', " "));
                return ExitCode::from(2);
            }
        },
        Command::Script(arguments) => script::run(&arguments),
        Command::Report(arguments) => report::run(&arguments),
        Command::Inject(arguments) => inject::run(&arguments),
        Command::List(arguments) => list::run(&arguments),
        Command::Flamegraph(arguments) => flamegraph::run(&arguments),
        Command::Autofdo(arguments) => autofdo::run(&arguments),
        Command::Export(arguments) => export::run(&arguments),
        Command::Daemon(arguments) => daemon::run(&arguments),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            // A closed pipe (`rvperf decode ... | head`) is not an error worth reporting.
            if error
                .downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            {
                return ExitCode::SUCCESS;
            }
            let message = format!("{error:#}").replace('\n', " ");
            eprintln!("rvperf: error: {message}");
            ExitCode::FAILURE
        }
    }
}
