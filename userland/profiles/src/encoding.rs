//! The primitive encodings of the binary profile formats: LLVM's ULEB128 and GCC's gcov
//! words, counters and strings.

use crate::ProfileWriteError;

/// Appends `value` as unsigned LEB128: seven bits a byte, low bits first, the high bit
/// set on every byte but the last (LLVM's `encodeULEB128` without padding).
pub(crate) fn push_uleb128(out: &mut Vec<u8>, mut value: u64) {
    loop {
        let low = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(low);
            return;
        }
        out.push(low | 0x80);
    }
}

/// Appends a 32-bit gcov word. GCC 12's auto-profile reader compares the magic without
/// byte swapping, so the file must be in the byte order of the machine running the
/// compiler: little-endian, like every host that runs a RISC-V cross or native GCC.
pub(crate) fn push_gcov_word(out: &mut Vec<u8>, word: u32) {
    out.extend_from_slice(&word.to_le_bytes());
}

/// Appends a gcov counter: GCC reads two words, low word first, as a signed 64-bit
/// `gcov_type`, so counts past `i64::MAX` would turn negative.
pub(crate) fn push_gcov_counter(
    out: &mut Vec<u8>,
    count: u64,
    function: &str,
) -> Result<(), ProfileWriteError> {
    if count > i64::MAX as u64 {
        return Err(ProfileWriteError::CountTooLarge {
            function: function.to_owned(),
            count,
        });
    }
    push_gcov_word(out, count as u32);
    push_gcov_word(out, (count >> 32) as u32);
    Ok(())
}

/// Appends a gcov string as GCC 12 reads it (`gcov_read_string` in gcov-io.cc): a word
/// holding the length in bytes including the terminating NUL, then exactly that many
/// bytes, unpadded. Before GCC 12 (`AUTO_PROFILE_VERSION` 1) the length counted words
/// and the string was NUL-padded to a word boundary; GCC 12 changed both together.
pub(crate) fn push_gcov_string(out: &mut Vec<u8>, string: &str) -> Result<(), ProfileWriteError> {
    let length = u32::try_from(string.len() + 1).map_err(|_| ProfileWriteError::NameTooLong {
        length: string.len(),
    })?;
    push_gcov_word(out, length);
    out.extend_from_slice(string.as_bytes());
    out.push(0);
    Ok(())
}

/// A count as a 32-bit gcov word.
pub(crate) fn gcov_count(what: &'static str, count: usize) -> Result<u32, ProfileWriteError> {
    u32::try_from(count).map_err(|_| ProfileWriteError::TooManyEntries { what, count })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uleb128(value: u64) -> Vec<u8> {
        let mut out = Vec::new();
        push_uleb128(&mut out, value);
        out
    }

    #[test]
    fn uleb128_known_values() {
        assert_eq!(uleb128(0), [0x00]);
        assert_eq!(uleb128(1), [0x01]);
        assert_eq!(uleb128(127), [0x7f]);
        assert_eq!(uleb128(128), [0x80, 0x01]);
        assert_eq!(uleb128(300), [0xac, 0x02]);
        // The DWARF specification's example.
        assert_eq!(uleb128(624_485), [0xe5, 0x8e, 0x26]);
        // LLVM's version number and the 1000 of a typical head count.
        assert_eq!(uleb128(103), [0x67]);
        assert_eq!(uleb128(1000), [0xe8, 0x07]);
        assert_eq!(
            uleb128(u64::MAX),
            [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]
        );
    }

    #[test]
    fn uleb128_round_trips_every_bit_width() {
        for shift in 0..64 {
            for value in [1u64 << shift, (1u64 << shift) - 1, (1u64 << shift) | 1] {
                let bytes = uleb128(value);
                let mut decoded = 0u64;
                for (index, byte) in bytes.iter().enumerate() {
                    decoded |= u64::from(byte & 0x7f) << (7 * index);
                    assert_eq!(byte & 0x80 != 0, index + 1 < bytes.len());
                }
                assert_eq!(decoded, value);
                assert_eq!(
                    bytes.len(),
                    (64 - value.leading_zeros() as usize).div_ceil(7).max(1)
                );
            }
        }
    }

    #[test]
    fn gcov_string_is_byte_length_with_nul_and_no_padding() {
        let mut out = Vec::new();
        push_gcov_string(&mut out, "main").unwrap();
        assert_eq!(out, [5, 0, 0, 0, b'm', b'a', b'i', b'n', 0]);

        out.clear();
        push_gcov_string(&mut out, "").unwrap();
        assert_eq!(out, [1, 0, 0, 0, 0]);

        out.clear();
        push_gcov_string(&mut out, "abc").unwrap();
        assert_eq!(out, [4, 0, 0, 0, b'a', b'b', b'c', 0]);
    }

    #[test]
    fn gcov_counter_is_low_word_first_and_signed() {
        let mut out = Vec::new();
        push_gcov_counter(&mut out, 0x1_0000_0002, "f").unwrap();
        assert_eq!(out, [2, 0, 0, 0, 1, 0, 0, 0]);
        assert_eq!(
            push_gcov_counter(&mut out, 1 << 63, "f"),
            Err(ProfileWriteError::CountTooLarge {
                function: "f".into(),
                count: 1 << 63
            })
        );
    }
}
