//! `rvperf inject`: a perf.data with its kept AUX data turned into the samples it
//! holds, as `perf inject --itrace` does for Intel PT. `rvperf record --keep-aux`
//! keeps rvperf_ctr's AUX data as PERF_RECORD_AUXTRACE, which Linux perf refuses;
//! injected, the file is the branch-stack recording the default `rvperf record -b`
//! writes, which perf, `perf report --branch-history` and llvm-profgen read.
//!
//! The command line; the rewriting is `perf_session::inject`'s. CTR needs no decoding
//! options; N-Trace (issue 15) will add `--itrace` options here.

use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::Args;
use perf_data::PerfDataReader;
use perf_session::inject as synthesize;

use crate::output::write_seekable_atomically;

#[derive(Debug, Args)]
pub struct InjectArgs {
    /// The perf.data to read (`-`: standard input, file or pipe mode).
    #[arg(short = 'i', long = "input", default_value = "perf.data")]
    input: PathBuf,
    /// The perf.data to write (file mode); written only when complete.
    #[arg(short = 'o', long = "output")]
    output: PathBuf,
}

pub fn run(arguments: &InjectArgs) -> Result<()> {
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
