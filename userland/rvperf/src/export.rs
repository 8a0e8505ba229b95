//! `rvperf export --pprof`: any perf.data (sampled, with callchains or CTR call stacks,
//! or an `rvperf trace record` N-Trace recording, or a raw N-Trace with `--trace`) as a
//! pprof profile (`.pb.gz`, what `go tool pprof`, Pyroscope and Parca read), written to
//! a file and/or pushed to a Pyroscope-compatible collector (`--push URL`).

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use perf_session::{PprofOptions, SampleLabels, Session, SymbolOptions};
use pprof::{MappingSymbols, SampleType};
use profile_push::PushTarget;

use crate::output::write_atomically;
use crate::perf_file::{finish_reading, open, show_progress, warn_problems, SymbolArgs};
use crate::trace_input::{JobsArgs, TraceArgs};

/// Which labels each sample carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Labels {
    /// `pid` and `comm`.
    Process,
    /// `pid`, `tid` and `comm`.
    Thread,
    /// `comm` only.
    Command,
    /// None: equal stacks of every process merged.
    None,
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Write a pprof profile (profile.proto, gzip-compressed).
    #[arg(long, required = true)]
    pprof: bool,
    /// Input file.
    #[arg(short = 'i', long = "input", default_value = "perf.data")]
    input: PathBuf,
    /// Output file (default profile.pb.gz; none with --push unless given).
    #[arg(short = 'o', long = "output")]
    output: Option<PathBuf>,
    /// Send the profile to a Pyroscope-compatible collector (`http://host:4040`; its
    /// /ingest endpoint).
    #[arg(long, value_name = "URL")]
    push: Option<String>,
    /// The series name the collector files the profile under.
    #[arg(long, default_value = "rvperf.cpu", requires = "push")]
    application: String,
    /// Labels of each sample.
    #[arg(long, value_enum, default_value = "process")]
    labels: Labels,
    /// Inlined functions as lines of their own (from DWARF; slower).
    #[arg(long)]
    inline: bool,
    #[command(flatten)]
    symbols: SymbolArgs,
    #[command(flatten)]
    threads: crate::trace_recording::ThreadFilter,
    /// With --trace FILE (and --elf): a raw N-Trace exported instead of a perf.data.
    #[command(flatten)]
    trace_input: TraceArgs,
    #[command(flatten)]
    jobs: JobsArgs,
}

pub fn run(arguments: &ExportArgs) -> Result<()> {
    debug_assert!(arguments.pprof);
    let traced = arguments.trace_input.trace.is_some()
        || crate::trace_recording::is_recording(&arguments.input)?;
    let (profile, summary) = if traced {
        let folded = crate::flamegraph::trace_stacks(
            &arguments.input,
            &arguments.trace_input,
            &arguments.symbols,
            &arguments.threads,
            &arguments.jobs,
            arguments.inline,
        )?;
        let profile = perf_session::folded_pprof(
            &folded,
            SampleType {
                kind: "instructions",
                unit: "count",
            },
        )?;
        let summary = format!(
            "{} instructions in {} stacks",
            folded.total_weight(),
            folded.len()
        );
        (profile, summary)
    } else {
        if !arguments.threads.is_empty() {
            bail!(
                "--comm/--pid/--tid select threads of a trace recording; this perf.data is sampled"
            );
        }
        sampled_profile(arguments)?
    };
    let mut bytes = Vec::new();
    pprof::write_gzip(&profile, &mut bytes)?;
    let output = match (&arguments.output, &arguments.push) {
        (Some(path), _) => Some(path.clone()),
        (None, None) => Some(PathBuf::from("profile.pb.gz")),
        (None, Some(_)) => None,
    };
    if let Some(path) = &output {
        write_atomically(path, |out| Ok(out.write_all(&bytes)?))
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    if let Some(url) = &arguments.push {
        let until = recording_end(&arguments.input);
        let duration = Duration::from_nanos(u64::try_from(profile.duration_nanos).unwrap_or(0));
        let target = PushTarget {
            url: url.clone(),
            application: arguments.application.clone(),
            // Pyroscope wants a non-empty range.
            from: until.saturating_sub(duration.as_secs().max(1)),
            until,
            sample_rate: sampling_frequency(&arguments.input),
            ..PushTarget::default()
        };
        profile_push::push_pyroscope(&target, &bytes)?;
    }
    let written = match &output {
        Some(path) => format!("written to {}", path.display()),
        None => "not written to a file".to_owned(),
    };
    let pushed = match &arguments.push {
        Some(url) => format!(", pushed to {url}"),
        None => String::new(),
    };
    eprintln!(
        "rvperf: pprof profile of {summary} ({} bytes) {written}{pushed}",
        bytes.len()
    );
    Ok(())
}

fn sampled_profile(arguments: &ExportArgs) -> Result<(pprof::Profile, String)> {
    let reader = open(&arguments.input)?;
    let symbols = SymbolOptions {
        inlines: if arguments.inline {
            perf_session::InlineFrames::Shown
        } else {
            perf_session::InlineFrames::Outermost
        },
        ..arguments.symbols.options()
    };
    let mut session = Session::new(&reader, symbols);
    show_progress(&mut session, &arguments.input);
    let options = PprofOptions::new(
        match arguments.labels {
            Labels::Process => SampleLabels::Process,
            Labels::Thread => SampleLabels::Thread,
            Labels::Command => SampleLabels::Command,
            Labels::None => SampleLabels::None,
        },
        if arguments.inline {
            MappingSymbols::InlineFrames
        } else {
            MappingSymbols::Functions
        },
    );
    let export = perf_session::pprof_profile(&mut session, options)?;
    finish_reading(&session, &arguments.input);
    let processes = session.into_processes();
    warn_problems(&processes);
    std::mem::forget(processes);
    if export.samples == 0 {
        bail!("{} has no samples", arguments.input.display());
    }
    let summary = format!(
        "{} samples in {} stacks",
        export.samples,
        export.profile.sample.len()
    );
    Ok((export.profile, summary))
}

/// When the recording ended, in Unix seconds: the file's last write (perf.data has no
/// wall-clock time of its own), else now.
fn recording_end(input: &Path) -> u64 {
    std::fs::metadata(input)
        .and_then(|metadata| metadata.modified())
        .unwrap_or_else(|_| SystemTime::now())
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_secs())
}

/// The sampling frequency of a recording sampled at one (its first event's).
fn sampling_frequency(input: &Path) -> Option<u64> {
    let reader = open(input).ok()?;
    let attr = &reader.attrs().first()?.attr;
    (attr.freq() != 0).then_some(attr.sample_freq)
}
