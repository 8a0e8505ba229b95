//! Fast line output: PCs are printed by the tens of millions, so formatting avoids
//! `fmt` machinery on the hot path and writes through one large buffer.

use std::io::{self, Seek, Write};

pub struct LineWriter<W: Write> {
    inner: W,
    buffer: Vec<u8>,
}

const FLUSH_AT: usize = 1 << 16;

impl<W: Write> LineWriter<W> {
    pub fn new(inner: W) -> Self {
        Self {
            inner,
            buffer: Vec::with_capacity(FLUSH_AT + 256),
        }
    }

    /// Appends `0x` + lowercase hex of `value` + newline.
    #[inline]
    pub fn hex_line(&mut self, value: u64) -> io::Result<()> {
        self.hex(value);
        self.buffer.push(b'\n');
        self.maybe_flush()
    }

    #[inline]
    pub fn hex(&mut self, value: u64) {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut digits = [0u8; 18];
        digits[0] = b'0';
        digits[1] = b'x';
        let width = (64 - value.leading_zeros()).div_ceil(4).max(1) as usize;
        for index in 0..width {
            let nibble = (value >> (4 * (width - 1 - index))) & 0xf;
            digits[2 + index] = DIGITS[nibble as usize];
        }
        self.buffer.extend_from_slice(&digits[..2 + width]);
    }

    pub fn text(&mut self, text: &str) {
        self.buffer.extend_from_slice(text.as_bytes());
    }

    #[inline]
    pub fn maybe_flush(&mut self) -> io::Result<()> {
        if self.buffer.len() >= FLUSH_AT {
            self.inner.write_all(&self.buffer)?;
            self.buffer.clear();
        }
        Ok(())
    }

    pub fn finish(mut self) -> io::Result<()> {
        self.inner.write_all(&self.buffer)?;
        self.buffer.clear();
        self.inner.flush()
    }
}

/// Writes `path` through a temporary file next to it, renamed over `path` only when
/// `write` succeeded: a failed or interrupted run leaves no partial output behind.
/// A path that is not a regular file (`/dev/null`, a FIFO) is written directly: a
/// rename would replace the node with a plain file.
pub fn write_atomically(
    path: &std::path::Path,
    write: impl FnOnce(&mut dyn Write) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    if is_special(path) {
        let file = std::fs::OpenOptions::new().write(true).open(path)?;
        let mut out = io::BufWriter::new(file);
        write(&mut out)?;
        out.flush()?;
        return Ok(());
    }
    let temporary = temporary_path(path);
    let result = (|| -> anyhow::Result<()> {
        let file = std::fs::File::create(&temporary)?;
        let mut out = io::BufWriter::new(file);
        write(&mut out)?;
        out.into_inner()
            .map_err(io::IntoInnerError::into_error)?
            .sync_all()?;
        std::fs::rename(&temporary, path)?;
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    result
}

/// As [`write_atomically`], for output that is written out of order (perf.data's
/// header comes last): `write` gets a file it may seek in, a temporary file next to
/// `path` renamed over it when complete. A path that is not a regular file
/// (`/dev/null`, a FIFO) cannot seek: it gets the complete output copied into it from
/// an unnamed temporary file, so it too sees nothing of a failed run.
pub fn write_seekable_atomically(
    path: &std::path::Path,
    write: impl FnOnce(&mut std::fs::File) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    use anyhow::Context;
    if is_special(path) {
        let temporary = std::env::temp_dir().join(
            temporary_path(path)
                .file_name()
                .unwrap_or_else(|| "output".as_ref()),
        );
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&temporary)
            .with_context(|| format!("cannot create {}", temporary.display()))?;
        // Unnamed from here on: nothing is left behind whatever happens.
        std::fs::remove_file(&temporary)?;
        write(&mut file)?;
        let mut copy = || -> io::Result<u64> {
            file.seek(io::SeekFrom::Start(0))?;
            let mut destination = std::fs::OpenOptions::new().write(true).open(path)?;
            io::copy(&mut file, &mut destination)
        };
        copy().with_context(|| format!("cannot write {}", path.display()))?;
        return Ok(());
    }
    let temporary = temporary_path(path);
    let mut file = std::fs::File::create(&temporary)
        .with_context(|| format!("cannot create {}", temporary.display()))?;
    let result = write(&mut file).and_then(|()| {
        file.sync_all()
            .and_then(|()| std::fs::rename(&temporary, path))
            .with_context(|| format!("cannot write {}", path.display()))
    });
    if result.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    result
}

/// The temporary file `path` is written to before it is renamed into place: hidden,
/// in the same directory (a rename does not cross file systems), unique per process.
fn temporary_path(path: &std::path::Path) -> std::path::PathBuf {
    let directory = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => std::path::Path::new("."),
    };
    let file_name = path.file_name().map_or_else(
        || "output".into(),
        |name| name.to_string_lossy().into_owned(),
    );
    directory.join(format!(".{file_name}.rvperf-{}.tmp", std::process::id()))
}

/// Whether `path` exists and is not a regular file (a device, FIFO or socket).
fn is_special(path: &std::path::Path) -> bool {
    std::fs::metadata(path).is_ok_and(|metadata| !metadata.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileTypeExt;

    /// `-o /dev/null` writes into the device; it must not replace the node.
    #[test]
    fn writing_to_a_device_leaves_the_device_in_place() {
        write_atomically(std::path::Path::new("/dev/null"), |out| {
            out.write_all(b"discarded")?;
            Ok(())
        })
        .unwrap();
        let metadata = std::fs::metadata("/dev/null").unwrap();
        assert!(
            metadata.file_type().is_char_device(),
            "/dev/null was replaced"
        );
    }

    #[test]
    fn formats_hex_like_printf() {
        let mut writer = LineWriter::new(Vec::new());
        for value in [0, 1, 0x10, 0xabc, u64::MAX] {
            writer.hex_line(value).unwrap();
        }
        let mut out = Vec::new();
        writer.inner.write_all(&writer.buffer).unwrap();
        out.extend_from_slice(&writer.inner);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "0x0\n0x1\n0x10\n0xabc\n0xffffffffffffffff\n"
        );
    }
}
