//! `rvperf inject`: a perf.data with its kept AUX data turned into the samples it
//! holds, as `perf inject --itrace` does for Intel PT. `rvperf record --keep-aux`
//! keeps rvperf_ctr's AUX data as PERF_RECORD_AUXTRACE, which Linux perf refuses;
//! injected, the file is the branch-stack recording the default `rvperf record -b`
//! writes, which perf, `perf report --branch-history` and llvm-profgen read.
//!
//! With `--itrace`, as `perf inject --itrace=il64` does for Intel PT, a trace (N-Trace,
//! `--trace` and the ELFs that ran) becomes a perf.data of branch-stack samples, one
//! every PERIOD instructions, that the same tools read.
//!
//! The command line; the rewriting is `perf_session::inject`'s, the synthesis
//! `perf_session::trace_inject`'s.

use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;
use code_image::Xlen;
use perf_data::{Metadata, PerfDataReader};
use perf_session::inject as synthesize;
use perf_session::{ElfMapping, TraceInjectOptions, TraceInjector};
use profiles::SamplerOptions;
use trace_elements::ElementSource;

use crate::output::write_seekable_atomically;
use crate::trace_file::TraceFile;
use crate::trace_input::{decode_trace, CodeCache, TraceArgs, TraceInput};

/// `--itrace` without a period: perf's default instruction period for `--itrace=i`
/// is 100,000 instructions; this is the nearest prime, so that samples do not lock
/// onto a loop's period.
pub const DEFAULT_PERIOD: &str = "100003";

#[derive(Debug, Args)]
pub struct InjectArgs {
    /// The perf.data to read (`-`: standard input, file or pipe mode).
    /// With --itrace: an `rvperf trace record` perf.data (its trace, encoder options
    /// and files) instead of --trace and --elf.
    #[arg(short = 'i', long = "input", default_value = "perf.data")]
    input: PathBuf,
    /// The perf.data to write (file mode); written only when complete.
    #[arg(short = 'o', long = "output")]
    output: PathBuf,
    /// Synthesize branch-stack samples from a trace (`--trace`, `--elf`), one every
    /// PERIOD retired instructions of a hart.
    #[arg(
        long,
        value_name = "PERIOD",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = DEFAULT_PERIOD,
        value_parser = clap::value_parser!(u64).range(1..),
    )]
    itrace: Option<u64>,
    /// Entries of each sample's branch stack (with --itrace).
    #[arg(long, value_name = "N", default_value_t = 32, requires = "itrace",
          value_parser = clap::value_parser!(u16).range(16..=64))]
    branches: u16,
    /// The process id the synthesized samples and mappings are given (with --itrace).
    #[arg(long, value_name = "N", default_value_t = 1, requires = "itrace",
          value_parser = clap::value_parser!(u32).range(1..))]
    pid: u32,
    /// The process's command name (with --itrace; default: the first ELF's file name).
    #[arg(long, value_name = "NAME", requires = "itrace")]
    comm: Option<String>,
    /// With -i of an `rvperf trace record` perf.data: the directory the recorded file
    /// names are under (the traced machine's root).
    #[arg(long, value_name = "DIR", requires = "itrace")]
    symfs: Option<PathBuf>,
    #[command(flatten)]
    trace: TraceArgs,
}

pub fn run(arguments: &InjectArgs) -> Result<()> {
    if let Some(period) = arguments.itrace {
        return inject_trace(arguments, period);
    }
    if arguments.trace.trace.is_some() || !arguments.trace.elf.is_empty() {
        bail!("--trace and --elf go with --itrace");
    }
    if crate::trace_recording::is_recording(&arguments.input)? {
        bail!(
            "{} is an N-Trace recording: --itrace[=PERIOD] turns its trace into samples",
            arguments.input.display()
        );
    }
    let stdin = arguments.input == Path::new("-");
    let mut bytes = Vec::new();
    let reader = if stdin {
        std::io::stdin()
            .lock()
            .read_to_end(&mut bytes)
            .context("cannot read perf.data from standard input")?;
        PerfDataReader::from_bytes(&bytes, "<stdin>")?
    } else {
        crate::perf_file::open(&arguments.input)?
    };
    let input = if stdin {
        "<stdin>".to_owned()
    } else {
        arguments.input.display().to_string()
    };
    let output = &arguments.output;
    if !synthesize::has_aux_data(&reader)? {
        eprintln!("rvperf inject: no AUXTRACE data: nothing to inject, {input} copied as it is");
        return write_seekable_atomically(output, |file| {
            if stdin {
                file.write_all(&bytes)
            } else {
                std::fs::File::open(&arguments.input)
                    .and_then(|mut input| std::io::copy(&mut input, file).map(drop))
            }
            .with_context(|| format!("cannot copy {input} to {}", output.display()))
        });
    }
    let mut injected = synthesize::Injected::default();
    write_seekable_atomically(output, |file| {
        let (out, summary) =
            synthesize::inject(&reader, BufWriter::new(file)).map_err(|error| match error {
                // Names the file and the offset.
                synthesize::InjectError::Read(_) => anyhow::Error::new(error),
                // The input's attr, which the output cannot hold.
                synthesize::InjectError::Write(perf_data::WriteError::AttrTooNew { .. }) => {
                    anyhow::Error::new(error).context(input.clone())
                }
                synthesize::InjectError::Write(_) => {
                    anyhow::Error::new(error).context(format!("cannot write {}", output.display()))
                }
                error => anyhow::Error::new(error).context(input.clone()),
            })?;
        out.into_inner()
            .map_err(std::io::IntoInnerError::into_error)
            .with_context(|| format!("cannot write {}", output.display()))?;
        injected = summary;
        Ok(())
    })?;
    eprintln!(
        "[ rvperf inject: {} samples from {} AUXTRACE chunks, written to {} ]",
        injected.samples,
        injected.chunks,
        output.display()
    );
    if injected.throttles > 0 {
        eprintln!(
            "{}",
            crate::record::throttle_warning("rvperf inject", injected.throttles)
        );
    }
    Ok(())
}

/// `--itrace`: decodes the trace and writes its samples.
fn inject_trace(arguments: &InjectArgs, period: u64) -> Result<()> {
    let (processes, trace_path) = match &arguments.trace.trace {
        Some(path) => {
            let process = TraceToSample {
                pid: arguments.pid,
                tid: arguments.pid,
                comm: arguments.comm.clone(),
                input: arguments.trace.clone(),
                trace: TraceInput::Messages(TraceFile::open(path)?),
            };
            (vec![process], path.clone())
        }
        None if crate::trace_recording::is_recording(&arguments.input)? => (
            traces_to_sample(
                &arguments.input,
                arguments.symfs.as_deref(),
                &arguments.trace,
                &crate::trace_recording::ThreadFilter::default(),
                arguments.pid,
            )?,
            arguments.input.clone(),
        ),
        None => bail!(
            "--itrace needs --trace FILE (and --elf for the code that ran), or -i of an rvperf trace record perf.data"
        ),
    };
    let output = &arguments.output;
    let samples = TraceSamples {
        period,
        branches: arguments.branches,
    };
    let mut injected = None;
    write_seekable_atomically(output, |file| {
        let cannot_write = || format!("cannot write {}", output.display());
        let (out, summary) =
            synthesize_trace_samples(BufWriter::new(file), &samples, &processes, &trace_path)
                .with_context(cannot_write)?;
        out.into_inner()
            .map_err(std::io::IntoInnerError::into_error)
            .with_context(cannot_write)?;
        injected = Some(summary);
        Ok(())
    })?;
    let Some(injected) = injected else {
        bail!("{}: nothing was written", output.display());
    };
    eprintln!(
        "[ rvperf inject: {} samples of {}-entry branch stacks, one per {period} of {} \
         instructions, from {}, written to {} ]",
        injected.samples,
        arguments.branches,
        injected.instructions,
        trace_path.display(),
        output.display()
    );
    warn_unplaced(&injected);
    Ok(())
}

/// A trace to synthesize samples of, and the process they are given.
pub struct TraceToSample {
    pub pid: u32,
    pub tid: u32,
    /// The command name (default: the first ELF's file name).
    pub comm: Option<String>,
    /// The trace's encoder options and code.
    pub input: TraceArgs,
    pub trace: TraceInput,
}

/// The threads' traces of an N-Trace recording (`unsplit_pid` for a trace that could
/// not be split by thread).
pub fn traces_to_sample(
    path: &Path,
    symfs: Option<&Path>,
    given: &TraceArgs,
    filter: &crate::trace_recording::ThreadFilter,
    unsplit_pid: u32,
) -> Result<Vec<TraceToSample>> {
    let loaded = crate::trace_recording::load(path, symfs, given, filter)?;
    Ok(loaded
        .traces
        .into_iter()
        .map(|loaded| TraceToSample {
            pid: loaded
                .thread
                .as_ref()
                .map_or(unsplit_pid, |thread| thread.run.pid),
            tid: loaded
                .thread
                .as_ref()
                .map_or(unsplit_pid, |thread| thread.tid),
            comm: loaded.thread.map(|thread| thread.comm),
            input: loaded.arguments,
            trace: loaded.trace,
        })
        .collect())
}

/// Says how many samples could not be placed on an instruction.
pub fn warn_unplaced(injected: &perf_session::TraceInjected) {
    if injected.unplaced_samples > 0 {
        eprintln!(
            "rvperf: warning: {} samples fell on instructions the decoder could not \
             place, and were left out",
            injected.unplaced_samples
        );
    }
}

/// The samples `--itrace` synthesizes.
pub struct TraceSamples {
    /// One sample every this many retired instructions of a hart.
    pub period: u64,
    /// Entries of each sample's branch stack.
    pub branches: u16,
}

/// Decodes each process's trace and writes the branch-stack samples it holds, and the
/// process with its mappings, as one perf.data to `out`.
pub fn synthesize_trace_samples<W: Write + std::io::Seek>(
    out: W,
    samples: &TraceSamples,
    processes: &[TraceToSample],
    trace_path: &Path,
) -> Result<(W, perf_session::TraceInjected)> {
    let mut injector: Option<TraceInjector<W>> = None;
    // Given to the injector with the first process.
    let mut out = Some(out);
    let mut xlen = None;
    let mut codes = CodeCache::default();
    for process in processes {
        let code = codes.code_for(&process.input)?;
        xlen = xlen.or(code.xlen());
        let mappings = ElfMapping::of_code(&code);
        if mappings.is_empty() {
            bail!("the traced files have no executable segment");
        }
        let comm = match &process.comm {
            Some(comm) => comm.clone(),
            None => code
                .loaded_files()
                .next()
                .and_then(|file| file.path.file_name())
                .map_or_else(String::new, |name| name.to_string_lossy().into_owned()),
        };
        let injector = match &mut injector {
            Some(injector) => {
                injector.begin_thread(process.pid, process.tid, &comm, mappings)?;
                injector
            }
            None => injector.insert(TraceInjector::new(
                out.take().context("the output was given away")?,
                TraceInjectOptions::new(
                    SamplerOptions::new(samples.period, usize::from(samples.branches)),
                    process.pid,
                    comm,
                    mappings,
                ),
            )?),
        };
        // Samples are placed on instructions, which only the serial decoder lists. The
        // decode fails, before anything is committed, when nothing could be decoded.
        decode_trace(
            &process.input,
            None,
            &code,
            &process.trace,
            trace_path,
            |source| {
                while let Some(element) = source.next_element()? {
                    injector.add(&element, |start, index| {
                        source.source().instruction_address(start, index)
                    })?;
                }
                Ok(())
            },
        )?;
    }
    let Some(injector) = injector else {
        bail!("no trace to synthesize samples of");
    };
    let arch = match xlen {
        Some(Xlen::Rv32) => "riscv32",
        _ => "riscv64",
    };
    let metadata = Metadata {
        // Where and on which kernel the trace was captured is not in it.
        hostname: String::new(),
        os_release: String::new(),
        perf_version: format!("rvperf {} (--itrace)", env!("CARGO_PKG_VERSION")),
        arch: arch.to_owned(),
        cmdline: std::env::args().collect(),
        ..Metadata::default()
    };
    Ok(injector.finish(metadata)?)
}
