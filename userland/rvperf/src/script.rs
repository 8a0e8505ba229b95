//! `rvperf script`: print the samples of a perf.data file, perf script style.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::Args;

use crate::perf_input::{file_size, for_each_sample, open, Processes, SymbolOptions};

#[derive(Debug, Args)]
pub struct ScriptArgs {
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
    /// Fields to print, comma-separated: comm, pid, tid, cpu, time, period, event, ip, sym, dso, brstack.
    #[arg(
        short = 'F',
        long = "fields",
        default_value = "comm,tid,cpu,time,period,event,ip,sym,dso"
    )]
    fields: String,
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
    let reader = open(&arguments.input)?;
    let names = reader.event_names();
    let mut processes = Processes::for_recording(
        &reader,
        SymbolOptions {
            symfs: arguments.symfs.clone(),
            kallsyms: arguments.kallsyms.clone(),
            ..SymbolOptions::default()
        },
    );
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut line = String::new();
    for_each_sample(
        &reader,
        file_size(&arguments.input),
        &mut processes,
        |processes, attr, sample| {
            line.clear();
            let pid = sample.pid.unwrap_or(-1) as u32;
            let tid = sample.tid.unwrap_or(-1) as u32;
            let ip = sample.ip.unwrap_or(0);
            let place = if fields
                .iter()
                .any(|field| matches!(field, Field::Sym | Field::Dso))
            {
                Some(processes.place(pid, ip))
            } else {
                None
            };
            for field in &fields {
                match field {
                    Field::Comm => line.push_str(&format!("{:>16} ", processes.comm(tid))),
                    Field::Pid => line.push_str(&format!("{pid:>7} ")),
                    Field::Tid => line.push_str(&format!("{tid:>7} ")),
                    Field::Cpu => line.push_str(&format!("[{:03}] ", sample.cpu.unwrap_or(0))),
                    Field::Time => {
                        let time = sample.time.unwrap_or(0);
                        line.push_str(&format!(
                            "{}.{:06}: ",
                            time / 1_000_000_000,
                            time % 1_000_000_000 / 1000
                        ));
                    }
                    Field::Period => line.push_str(&format!("{:>10} ", sample.period.unwrap_or(1))),
                    Field::Event => {
                        let name = attr
                            .and_then(|index| names.get(index))
                            .map_or("?", String::as_str);
                        line.push_str(&format!("{name}: "));
                    }
                    // perf right-aligns the address in 16 columns after a space.
                    Field::Ip => line.push_str(&format!(" {ip:>16x}")),
                    Field::Sym => {
                        let symbol = place
                            .as_ref()
                            .and_then(|place| place.symbol.as_deref())
                            .unwrap_or("[unknown]");
                        line.push_str(&format!(" {symbol}"));
                    }
                    Field::Dso => {
                        let dso = place
                            .as_ref()
                            .map_or("[unknown]", |place| place.dso.as_str());
                        line.push_str(&format!(" ({dso})"));
                    }
                    Field::Brstack => {
                        if let Some(stack) = &sample.branch_stack {
                            line.push_str(&perf_data::format_brstack(&stack.entries));
                        }
                    }
                }
            }
            line.push('\n');
            out.write_all(line.as_bytes())?;
            Ok(())
        },
    )?;
    out.flush()?;
    Ok(())
}
