//! `-i perf.data` of a decoding command: an N-Trace recording of `rvperf trace record`
//! turned into what `--trace`, `--elf` and the encoder options say otherwise.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use perf_abi::ntrace::feature;
use perf_data::PerfDataReader;
use perf_session::read_ntrace_recording;

use crate::trace_file::TraceFile;
use crate::trace_input::TraceArgs;

/// Idle bytes between two pieces of a trace with a gap between them: whatever message
/// the first piece's last bytes began ends there, and the decoder reports it and
/// resynchronises in the next piece.
const GAP_SEPARATOR: [u8; 8] = [0xff; 8];

pub struct LoadedRecording {
    /// The options the recording says, with the files it ran (and the caller's --elf).
    pub arguments: TraceArgs,
    pub trace: TraceFile,
    pub name: String,
}

pub fn load(path: &Path, symfs: Option<&Path>, given: &TraceArgs) -> Result<LoadedRecording> {
    let reader =
        PerfDataReader::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let recording = read_ntrace_recording(&reader).with_context(|| path.display().to_string())?;
    let info = recording.info;
    let (placed, problems) = recording.placed_files(|name| {
        let file = match symfs {
            Some(root) => root.join(name.trim_start_matches('/')),
            None => PathBuf::from(name),
        };
        let bytes = std::fs::read(&file)?;
        Ok((file, bytes))
    });
    for problem in &problems {
        eprintln!("rvperf: warning: {}: {problem}", path.display());
    }
    let mut elf: Vec<String> = placed
        .iter()
        .map(|file| match file.load_address {
            Some(address) => format!("{}@{address:#x}", file.path.display()),
            None => file.path.display().to_string(),
        })
        .collect();
    elf.extend(given.elf.iter().cloned());
    let mut bytes = Vec::new();
    for (index, piece) in recording.pieces.iter().enumerate() {
        if index > 0 {
            bytes.extend_from_slice(&GAP_SEPARATOR);
        }
        bytes.extend_from_slice(&piece.bytes);
    }
    if recording.lost_bytes > 0 {
        eprintln!(
            "rvperf: warning: {}: {} bytes of trace were lost while recording, in {} gaps",
            path.display(),
            recording.lost_bytes,
            recording.pieces.len().saturating_sub(1)
                + usize::from(
                    recording
                        .pieces
                        .first()
                        .is_some_and(|piece| piece.offset > 0)
                )
        );
    }
    let mut arguments = given.clone();
    arguments.elf = elf;
    arguments.src_bits = info.src_bits;
    arguments.timestamps = info.has(feature::TIMESTAMPS);
    arguments.addr_ext = info.has(feature::MSB_EXTENSION);
    arguments.all_jumps = info.has(feature::ALL_JUMPS);
    arguments.max_stack = if info.has(feature::IMPLICIT_RETURN) {
        u16::try_from(info.return_stack_depth).unwrap_or(u16::MAX)
    } else {
        0
    };
    Ok(LoadedRecording {
        arguments,
        trace: TraceFile::from_bytes(&bytes)?,
        name: path.display().to_string(),
    })
}
