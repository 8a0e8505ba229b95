//! `rvperf script`: print the samples of a perf.data file, perf script style. An N-Trace
//! recording (`rvperf trace record`) is decoded into the samples perf's `--itrace=i`
//! makes of Intel PT: one every PERIOD instructions, with its branch stack.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::Args;

use perf_session::{thread_id, Processes, Session, SessionSample};

use crate::inject::{synthesize_trace_samples, warn_unplaced, TraceSamples};
use crate::perf_file::{finish_reading, open, show_progress, SymbolArgs};

#[derive(Debug, Args)]
pub struct ScriptArgs {
    /// Input file.
    #[arg(short = 'i', long = "input", default_value = "perf.data")]
    input: PathBuf,
    #[command(flatten)]
    symbols: SymbolArgs,
    /// Fields to print, comma-separated: comm, pid, tid, cpu, time, period, event, ip, sym, dso, brstack.
    #[arg(
        short = 'F',
        long = "fields",
        default_value = "comm,tid,cpu,time,period,event,ip,sym,dso"
    )]
    fields: String,
    /// For an `rvperf trace record` perf.data: one instruction sample every PERIOD
    /// retired instructions of a hart (perf's `--itrace=iPERIOD`).
    #[arg(
        long,
        value_name = "PERIOD",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = crate::inject::DEFAULT_PERIOD,
        value_parser = clap::value_parser!(u64).range(1..),
    )]
    itrace: Option<u64>,
    #[command(flatten)]
    threads: crate::trace_recording::ThreadFilter,
    /// Entries of each synthesized sample's branch stack.
    #[arg(long, value_name = "N", default_value_t = 32,
          value_parser = clap::value_parser!(u16).range(16..=64))]
    branches: u16,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Field {
    Comm,
    Pid,
    Tid,
    Cpu,
    Time,
    Period,
    Event,
    Ip,
    Sym,
    Dso,
    Brstack,
}

fn parse_fields(text: &str) -> Result<Vec<Field>> {
    text.split(',')
        .map(|name| {
            Ok(match name.trim() {
                "comm" => Field::Comm,
                "pid" => Field::Pid,
                "tid" => Field::Tid,
                "cpu" => Field::Cpu,
                "time" => Field::Time,
                "period" => Field::Period,
                "event" => Field::Event,
                "ip" => Field::Ip,
                "sym" => Field::Sym,
                "dso" => Field::Dso,
                "brstack" => Field::Brstack,
                other => bail!("unknown field {other:?} (known: comm, pid, tid, cpu, time, period, event, ip, sym, dso, brstack)"),
            })
        })
        .collect()
}

pub fn run(arguments: &ScriptArgs) -> Result<()> {
    let fields = parse_fields(&arguments.fields)?;
    if crate::trace_recording::is_recording(&arguments.input)? {
        let period = arguments
            .itrace
            .unwrap_or_else(|| crate::inject::DEFAULT_PERIOD.parse().unwrap_or(100_003));
        let processes = crate::inject::traces_to_sample(
            &arguments.input,
            arguments.symbols.symfs.as_deref(),
            &crate::trace_input::TraceArgs::default(),
            &arguments.threads,
            1,
        )?;
        let samples = TraceSamples {
            period,
            branches: arguments.branches,
        };
        let (synthesized, injected) = synthesize_trace_samples(
            std::io::Cursor::new(Vec::new()),
            &samples,
            &processes,
            &arguments.input,
        )?;
        warn_unplaced(&injected);
        let reader = perf_data::PerfDataReader::from_vec(
            synthesized.into_inner(),
            &arguments.input.display().to_string(),
        )?;
        return print_samples(&reader, &fields, arguments);
    }
    if arguments.itrace.is_some() {
        bail!(
            "--itrace is for N-Trace recordings (rvperf trace record); {} is not one",
            arguments.input.display()
        );
    }
    let reader = open(&arguments.input)?;
    print_samples(&reader, &fields, arguments)
}

/// Prints every sample of `reader`.
fn print_samples(
    reader: &perf_data::PerfDataReader<'_>,
    fields: &[Field],
    arguments: &ScriptArgs,
) -> Result<()> {
    let names = reader.event_names();
    let mut session = Session::new(reader, arguments.symbols.options());
    show_progress(&mut session, &arguments.input);
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut line = String::new();
    let printer = LinePrinter::new(fields, &names);
    while let Some(sample) = session.next_sample()? {
        line.clear();
        printer.print(&mut line, session.processes(), &sample);
        line.push('\n');
        out.write_all(line.as_bytes())?;
    }
    finish_reading(&session, &arguments.input);
    out.flush()?;
    Ok(())
}

/// Prints sample lines field by field as perf script 6.12 prints them
/// (`perf_sample__fprintf_start` and `process_event` of builtin-script.c), without
/// call chains (as `perf script -G`), so that the two outputs compare line for line.
struct LinePrinter<'a> {
    fields: &'a [Field],
    names: &'a [String],
    /// perf pads event names to the longest name of the file.
    name_width: usize,
    pid_and_tid: bool,
    place: bool,
}

impl<'a> LinePrinter<'a> {
    fn new(fields: &'a [Field], names: &'a [String]) -> Self {
        LinePrinter {
            fields,
            names,
            name_width: names.iter().map(String::len).max().unwrap_or(0),
            pid_and_tid: fields.contains(&Field::Pid) && fields.contains(&Field::Tid),
            place: fields
                .iter()
                .any(|field| matches!(field, Field::Sym | Field::Dso)),
        }
    }

    fn print(&self, line: &mut String, processes: &mut Processes, event: &SessionSample<'_>) {
        use std::fmt::Write as _;
        let sample = &event.sample;
        // perf's values for fields the sample lacks.
        let pid = thread_id(sample.pid);
        let tid = thread_id(sample.tid);
        let ip = sample.ip.unwrap_or(0);
        let place = self.place.then(|| processes.place(pid as u32, ip));
        for field in self.fields {
            // Writing to a String cannot fail.
            let _ = match field {
                Field::Comm => write!(line, "{:>16} ", processes.comm(pid, tid)),
                Field::Pid if self.pid_and_tid => write!(line, "{pid:>7}/{tid:<7} "),
                Field::Pid => write!(line, "{pid:>7} "),
                Field::Tid if self.pid_and_tid => Ok(()),
                Field::Tid => write!(line, "{tid:>7} "),
                Field::Cpu => write!(line, "[{:03}] ", sample.cpu.unwrap_or(u32::MAX) as i32),
                Field::Time => {
                    let time = sample.time.unwrap_or(u64::MAX);
                    let text = format!(
                        "{}.{:06}",
                        time / 1_000_000_000,
                        time % 1_000_000_000 / 1000
                    );
                    write!(line, "{text:>12}: ")
                }
                Field::Period => write!(line, "{:>10} ", event.period),
                Field::Event => {
                    let name = event
                        .attr_index
                        .and_then(|index| self.names.get(index))
                        .map_or("[unknown]", String::as_str);
                    write!(line, "{name:>width$}: ", width = self.name_width)
                }
                // perf right-aligns the address in 16 columns after a space.
                Field::Ip => write!(line, " {ip:>16x}"),
                Field::Sym => {
                    let symbol = place
                        .as_ref()
                        .and_then(|place| place.symbol.as_deref())
                        .unwrap_or("[unknown]");
                    write!(line, " {symbol}")
                }
                Field::Dso => {
                    let dso = place
                        .as_ref()
                        .map_or("[unknown]", |place| place.dso.as_str());
                    write!(line, " ({dso})")
                }
                Field::Brstack => {
                    // perf prints ` ENTRY ` for each entry: two spaces between entries.
                    for entry in sample.branch_stack.iter().flat_map(|stack| stack.iter()) {
                        line.push(' ');
                        line.push_str(&perf_abi::format_brstack_entry(&entry));
                        line.push(' ');
                    }
                    Ok(())
                }
            };
        }
    }
}
