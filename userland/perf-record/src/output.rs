//! The perf.data a recording writes: a temporary file beside the output that grows as
//! the recording goes (flushed after each round, as perf's does), moved into place
//! when the recording is complete and removed when it fails, so that a failed
//! recording leaves no file behind.

use std::cell::RefCell;
use std::fs::File;
use std::io::{self, BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use crate::RecordError;

/// The buffered temporary file, shared by the perf.data writer and the recording loop,
/// which flushes it after each round.
#[derive(Debug, Clone)]
pub(crate) struct OutputFile(Rc<RefCell<BufWriter<File>>>);

impl OutputFile {
    /// Writes what is buffered to the file.
    pub(crate) fn flush_round(&self) -> Result<(), RecordError> {
        self.0
            .borrow_mut()
            .flush()
            .map_err(|source| RecordError::WriteOutput { source })
    }
}

impl Write for OutputFile {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.0.borrow_mut().write(bytes)
    }

    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.0.borrow_mut().write_all(bytes)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.borrow_mut().flush()
    }
}

impl Seek for OutputFile {
    fn seek(&mut self, position: SeekFrom) -> io::Result<u64> {
        self.0.borrow_mut().seek(position)
    }
}

/// The temporary file of `output` (`output` with the extension `tmp`): removed when
/// dropped before [`TemporaryOutput::commit`].
#[derive(Debug)]
pub(crate) struct TemporaryOutput {
    temporary: PathBuf,
    output: PathBuf,
    state: OutputState,
}

/// Whether the temporary file has been moved into place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OutputState {
    Writing,
    Committed,
}

/// Buffered writes of this size reach the file at once (perf.data grows by rounds).
const BUFFER_SIZE: usize = 1 << 20;

impl TemporaryOutput {
    /// Creates the temporary file of `output`.
    pub(crate) fn create(output: &Path) -> Result<(TemporaryOutput, OutputFile), RecordError> {
        let temporary = temporary_path(output);
        let file = File::create(&temporary).map_err(|source| RecordError::CreateOutput {
            path: temporary.clone(),
            source,
        })?;
        let output = TemporaryOutput {
            temporary,
            output: output.to_owned(),
            state: OutputState::Writing,
        };
        let file = OutputFile(Rc::new(RefCell::new(BufWriter::with_capacity(
            BUFFER_SIZE,
            file,
        ))));
        Ok((output, file))
    }

    /// Moves the complete temporary file (written and flushed) to the output.
    pub(crate) fn commit(mut self) -> Result<(), RecordError> {
        place_output(&self.temporary, &self.output).map_err(|source| RecordError::PlaceOutput {
            temporary: self.temporary.clone(),
            output: self.output.clone(),
            source,
        })?;
        self.state = OutputState::Committed;
        Ok(())
    }
}

impl Drop for TemporaryOutput {
    fn drop(&mut self) {
        if self.state == OutputState::Writing {
            let _ = std::fs::remove_file(&self.temporary);
        }
    }
}

/// Where a recording is written until it is complete and moved to `output`.
fn temporary_path(output: &Path) -> PathBuf {
    output.with_extension("tmp")
}

/// Whether `path` exists and is not a regular file (a device, FIFO or socket).
fn is_special(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|metadata| !metadata.is_file())
}

/// Moves a finished temporary file to `output`: renamed over a regular file (or to a
/// new name), copied into anything else (`/dev/null`, a FIFO), which a rename would
/// replace.
fn place_output(temporary: &Path, output: &Path) -> io::Result<()> {
    if !is_special(output) {
        return std::fs::rename(temporary, output);
    }
    let mut source = File::open(temporary)?;
    let mut destination = std::fs::OpenOptions::new().write(true).open(output)?;
    io::copy(&mut source, &mut destination)?;
    std::fs::remove_file(temporary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_committed_output_replaces_the_file_and_leaves_no_temporary() {
        let directory = tempfile::tempdir().unwrap();
        let output = directory.path().join("perf.data");
        std::fs::write(&output, b"old").unwrap();
        let (temporary, mut file) = TemporaryOutput::create(&output).unwrap();
        file.write_all(b"new").unwrap();
        file.flush_round().unwrap();
        drop(file);
        temporary.commit().unwrap();
        assert_eq!(std::fs::read(&output).unwrap(), b"new");
        assert!(!directory.path().join("perf.tmp").exists());
    }

    #[test]
    fn an_output_dropped_before_its_commit_is_removed() {
        let directory = tempfile::tempdir().unwrap();
        let output = directory.path().join("perf.data");
        let (temporary, mut file) = TemporaryOutput::create(&output).unwrap();
        file.write_all(b"partial").unwrap();
        file.flush_round().unwrap();
        assert!(directory.path().join("perf.tmp").exists());
        drop(temporary);
        assert!(!directory.path().join("perf.tmp").exists());
        assert!(!output.exists());
    }

    #[test]
    fn a_device_output_gets_the_bytes_and_stays_a_device() {
        use std::os::unix::fs::FileTypeExt;
        let directory = tempfile::tempdir().unwrap();
        // The temporary file of /dev/null would be /dev/null.tmp: use a path whose
        // temporary is writable, and a device as the output through a symlink.
        let output = directory.path().join("null.data");
        std::os::unix::fs::symlink("/dev/null", &output).unwrap();
        let (temporary, mut file) = TemporaryOutput::create(&output).unwrap();
        file.write_all(b"discarded").unwrap();
        file.flush_round().unwrap();
        drop(file);
        temporary.commit().unwrap();
        let metadata = std::fs::metadata(&output).unwrap();
        assert!(metadata.file_type().is_char_device());
        assert!(!directory.path().join("null.tmp").exists());
    }
}
