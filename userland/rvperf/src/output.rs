//! Fast line output: PCs are printed by the tens of millions, so formatting avoids
//! `fmt` machinery on the hot path and writes through one large buffer.

use std::io::{self, Seek, Write};

/// Buffers lines and writes them to `inner` about [`FLUSH_AT`] bytes at a time.
pub struct LineWriter<W: Write> {
    inner: W,
    /// Always initialised up to its length (zeros past `filled`): the hex lines are
    /// stored into it in fixed-size pieces without growing it, which safe code can
    /// only do into initialised bytes.
    buffer: Vec<u8>,
    /// Bytes of `buffer` not yet written.
    filled: usize,
}

/// Bytes buffered before a write: a pipe's capacity, and small enough to stay in the
/// cache between the formatting and the copy into the kernel.
const FLUSH_AT: usize = 1 << 16;

/// The longest hex line: `0x`, 16 digits and the newline.
const MAX_HEX_LINE: usize = 2 + 16 + 1;

impl<W: Write> LineWriter<W> {
    pub fn new(inner: W) -> Self {
        Self {
            inner,
            // Below FLUSH_AT a hex line always fits.
            buffer: vec![0; FLUSH_AT + MAX_HEX_LINE],
            filled: 0,
        }
    }

    /// Appends `0x` + lowercase hex of `value` (no leading zeros) + newline.
    #[inline]
    pub fn hex_line(&mut self, value: u64) -> io::Result<()> {
        self.maybe_flush()?;
        self.filled += store_hex_line(&mut self.buffer, self.filled, value);
        Ok(())
    }

    /// [`Self::hex_line`] for each of `values`: the `pcs` output's loop, tens of
    /// millions of lines, so the test for space is made once per run of lines that
    /// fit, and each line is stored in place in a few fixed-size stores.
    #[inline]
    pub fn hex_lines(&mut self, values: &[u64]) -> io::Result<()> {
        let mut rest = values;
        // Consecutive PCs are mostly in one 64 KiB piece of code: they share all digits
        // but the last four, which a table gives two at a time.
        let mut high = HighDigits::NONE;
        while !rest.is_empty() {
            self.maybe_flush()?;
            // At least one: below FLUSH_AT a line fits.
            let room = (self.buffer.len() - self.filled) / MAX_HEX_LINE;
            let (now, later) = rest.split_at(room.min(rest.len()));
            let mut at = self.filled;
            let buffer = self.buffer.as_mut_slice();
            for &value in now {
                at += if value >> 16 == high.high {
                    high.store_line(buffer, at, value)
                } else if value >> 16 != 0 {
                    high = HighDigits::new(value >> 16);
                    high.store_line(buffer, at, value)
                } else {
                    store_hex_line(buffer, at, value)
                };
            }
            self.filled = at;
            rest = later;
        }
        Ok(())
    }

    pub fn text(&mut self, text: &str) {
        let end = self.filled + text.len();
        if end > self.buffer.len() {
            // Text is never flushed here (no error to return): the buffer grows to hold
            // it until the caller's next `maybe_flush`.
            self.buffer.resize(end, 0);
        }
        self.buffer[self.filled..end].copy_from_slice(text.as_bytes());
        self.filled = end;
    }

    #[inline]
    pub fn maybe_flush(&mut self) -> io::Result<()> {
        if self.filled >= FLUSH_AT {
            self.flush_buffer()?;
        }
        Ok(())
    }

    #[cold]
    fn flush_buffer(&mut self) -> io::Result<()> {
        self.inner.write_all(&self.buffer[..self.filled])?;
        self.filled = 0;
        Ok(())
    }

    pub fn finish(mut self) -> io::Result<()> {
        self.flush_buffer()?;
        self.inner.flush()
    }
}

/// The start of the hex lines of the values with the same bits above the low 16: `0x`
/// and the digits of those bits, when they are not 0.
#[derive(Clone, Copy)]
struct HighDigits {
    /// `value >> 16` of the values this is for.
    high: u64,
    /// `0x` and up to 12 digits (of 48 bits), first in the lowest byte.
    text: u128,
    /// Bytes of `text`.
    length: usize,
}

impl HighDigits {
    /// For no value: `value >> 16` is never all ones.
    const NONE: Self = Self {
        high: u64::MAX,
        text: 0,
        length: 0,
    };

    /// For the values with `value >> 16 == high`, `high` not 0.
    fn new(high: u64) -> Self {
        let digits = (64 - high.leading_zeros()).div_ceil(4) as usize;
        let text = (hex_digits(high) >> (8 * (16 - digits)) << 16)
            | u128::from(u16::from_le_bytes(*b"0x"));
        Self {
            high,
            text,
            length: 2 + digits,
        }
    }

    /// As [`store_hex_line`], for a value this is for.
    #[inline]
    fn store_line(&self, buffer: &mut [u8], at: usize, value: u64) -> usize {
        let line: &mut [u8; MAX_HEX_LINE] = (&mut buffer[at..at + MAX_HEX_LINE])
            .try_into()
            .expect("a slice of MAX_HEX_LINE bytes");
        // At most 14 bytes, then the 4 low digits and the newline: 19.
        let length = self.length.min(14);
        line[..16].copy_from_slice(&self.text.to_le_bytes());
        let low = [
            DIGIT_PAIRS[usize::from((value >> 8) as u8)],
            DIGIT_PAIRS[usize::from(value as u8)],
        ];
        line[length..length + 4].copy_from_slice(&[low[0][0], low[0][1], low[1][0], low[1][1]]);
        line[length + 4] = b'\n';
        length + 5
    }
}

/// The two hex digits of each byte value.
static DIGIT_PAIRS: [[u8; 2]; 256] = {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut pairs = [[0u8; 2]; 256];
    let mut byte = 0;
    while byte < 256 {
        pairs[byte] = [DIGITS[byte >> 4], DIGITS[byte & 0xf]];
        byte += 1;
    }
    pairs
};

/// Stores the hex line of `value` at `buffer[at..]`, which must have room for
/// [`MAX_HEX_LINE`] bytes (whatever the value: the digits are stored 8 or 16 at a time);
/// returns the line's length.
#[inline]
fn store_hex_line(buffer: &mut [u8], at: usize, value: u64) -> usize {
    let line: &mut [u8; MAX_HEX_LINE] = (&mut buffer[at..at + MAX_HEX_LINE])
        .try_into()
        .expect("a slice of MAX_HEX_LINE bytes");
    line[0] = b'0';
    line[1] = b'x';
    // At least one digit: 0 prints as 0x0.
    let digits = (64 - (value | 1).leading_zeros()).div_ceil(4) as usize;
    // The digits with the leading zeros shifted out: the first digit in the lowest
    // byte, then the rest, then zeros that the newline and the next line overwrite.
    if let Ok(value) = u32::try_from(value) {
        // Most addresses: half the work.
        let significant = hex_digits_32(value) >> (8 * (8 - digits));
        line[2..10].copy_from_slice(&significant.to_le_bytes());
    } else {
        let significant = hex_digits(value) >> (8 * (16 - digits));
        line[2..18].copy_from_slice(&significant.to_le_bytes());
    }
    line[2 + digits] = b'\n';
    2 + digits + 1
}

/// The 16 lowercase hex digits of `value` as ASCII, the most significant digit in the
/// lowest byte (first in memory as little-endian bytes). Eight digits at a time in one
/// u64 (SWAR): no table and no loop.
#[inline]
fn hex_digits(value: u64) -> u128 {
    let high = hex_digits_32((value >> 32) as u32);
    let low = hex_digits_32(value as u32);
    u128::from(high) | (u128::from(low) << 64)
}

/// The 8 hex digits of `value`, the most significant in the lowest byte.
#[inline]
fn hex_digits_32(value: u32) -> u64 {
    const NIBBLES: u64 = 0x0f0f_0f0f_0f0f_0f0f;
    const ONES: u64 = 0x0101_0101_0101_0101;
    // Spread the nibbles into bytes, the least significant nibble in the lowest byte.
    let mut spread = u64::from(value);
    spread = (spread | (spread << 16)) & 0x0000_ffff_0000_ffff;
    spread = (spread | (spread << 8)) & 0x00ff_00ff_00ff_00ff;
    spread = (spread | (spread << 4)) & NIBBLES;
    // Most significant first.
    let nibbles = spread.swap_bytes();
    // 1 in each byte holding 10..=15 (adding 6 carries into bit 4; no byte overflows).
    let letters = ((nibbles + 6 * ONES) >> 4) & ONES;
    // '0' + nibble, and 'a' - '0' - 10 = 39 more for a letter.
    nibbles + u64::from(b'0') * ONES + letters * 39
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

    /// What `format!("{value:#x}\n")` gives, the reference the fast path must match.
    fn printf(values: &[u64]) -> String {
        values.iter().map(|value| format!("{value:#x}\n")).collect()
    }

    fn written(write: impl FnOnce(&mut LineWriter<&mut Vec<u8>>)) -> String {
        let mut out = Vec::new();
        let mut writer = LineWriter::new(&mut out);
        write(&mut writer);
        writer.finish().unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn formats_hex_like_printf() {
        let mut values = vec![0, 1, 9, 0xa, 0xf, 0x10, 0xabc, 0x10000, 0x1_0000_0000];
        values.extend([
            0x0f0f_0f0f,
            0xffff_ffff,
            0x8000_0000_0000_0000,
            u64::MAX - 1,
        ]);
        values.push(u64::MAX);
        // In and out of one 64 KiB piece of code, whose high digits are kept.
        values.extend([
            0xfffe, 0x1_0000, 0xffff, 0x1_fffe, 0x2_0000, 0x1_fffe, 0x1_0002,
        ]);
        // Every digit count, with a leading digit of 1 and of f.
        for shift in (0..64).step_by(4) {
            values.push(1 << shift);
            values.push((0xf << shift) | 0x5);
            values.push(u64::MAX >> shift);
        }
        let text = written(|writer| writer.hex_lines(&values).unwrap());
        assert_eq!(text, printf(&values));
        assert!(text.starts_with("0x0\n0x1\n0x9\n0xa\n0xf\n0x10\n0xabc\n"));
        assert!(text.contains("\n0xffffffffffffffff\n"));
    }

    /// Lines across many flushes, mixed with text, arrive whole and in order.
    #[test]
    fn keeps_lines_whole_across_flushes() {
        let values: Vec<u64> = (0..100_000u64)
            .map(|index| index.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (index % 64))
            .collect();
        let text = written(|writer| {
            for (index, chunk) in values.chunks(777).enumerate() {
                writer.text(&format!("# chunk {index}\n"));
                writer.text(&"-".repeat(index * 1031 % (3 * FLUSH_AT)));
                writer.text("\n");
                writer.maybe_flush().unwrap();
                writer.hex_lines(chunk).unwrap();
                writer.hex_line(chunk[0]).unwrap();
            }
        });
        let expected: String = values
            .chunks(777)
            .enumerate()
            .map(|(index, chunk)| {
                format!(
                    "# chunk {index}\n{}\n{}{}",
                    "-".repeat(index * 1031 % (3 * FLUSH_AT)),
                    printf(chunk),
                    printf(&chunk[..1])
                )
            })
            .collect();
        assert_eq!(text, expected);
    }
}
