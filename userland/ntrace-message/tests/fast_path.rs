//! The word-at-a-time fast paths and the byte-wise parser agree on real traces: every
//! message, every error, and the idle and skipped byte counts, for the recorded traces of the
//! repository's fixtures and this crate's test data, as recorded, with bytes corrupted, and
//! cut short, under the options they were made with and others.

use std::fs;
use std::path::{Path, PathBuf};

use ntrace_message::{
    AddressWidth, Message, MessageDecoder, MessageError, MessageOptions, ShortMessage,
};

/// What a whole decode produced.
#[derive(Debug, PartialEq)]
struct Decoded {
    results: Vec<Result<Message, MessageError>>,
    idle_bytes: u64,
    skipped_bytes: u64,
}

fn decode(mut decoder: MessageDecoder<'_>) -> Decoded {
    let results = decoder.by_ref().collect();
    Decoded {
        results,
        idle_bytes: decoder.idle_bytes(),
        skipped_bytes: decoder.skipped_bytes(),
    }
}

fn assert_paths_agree(stream: &[u8], options: MessageOptions, what: &str) {
    let fast = decode(MessageDecoder::new(stream, options));
    let slow = decode(MessageDecoder::new(stream, options).byte_path_only());
    if fast != slow {
        let first = fast
            .results
            .iter()
            .zip(&slow.results)
            .position(|(fast, slow)| fast != slow);
        panic!(
            "{what} with {options:?}: fast and byte paths differ (first at result {first:?}: \
             {:?} vs {:?}; idle {} vs {}, skipped {} vs {}; {} vs {} results)",
            first.and_then(|k| fast.results.get(k)),
            first.and_then(|k| slow.results.get(k)),
            fast.idle_bytes,
            slow.idle_bytes,
            fast.skipped_bytes,
            slow.skipped_bytes,
            fast.results.len(),
            slow.results.len(),
        );
    }
}

/// The recorded N-Trace streams: the repository's decode fixtures (made by rvperf's encoder
/// model from qemu runs) and this crate's golden inputs.
fn traces() -> Vec<PathBuf> {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let fixtures = crate_dir.join("../../tests/fixtures");
    let mut traces = vec![
        fixtures.join("ntrace/interp/trace.nt"),
        fixtures.join("ntrace/tiny-btm/trace.nt"),
        fixtures.join("ntrace/tiny-htm/trace.nt"),
        fixtures.join("autofdo/trace.nt"),
    ];
    let data = fs::read_dir(crate_dir.join("tests/data")).expect("tests/data is readable");
    let mut binaries: Vec<PathBuf> = data
        .map(|entry| entry.expect("tests/data entry").path())
        .filter(|path| path.extension().is_some_and(|extension| extension == "bin"))
        .collect();
    binaries.sort();
    traces.extend(binaries);
    traces
}

/// The options the fixtures were made with (default; SRC 4 with timestamps and the MSB
/// extension) and ones they were not, which turn valid traces into a mix of errors.
fn option_sets() -> [MessageOptions; 4] {
    let default = MessageOptions::default();
    [
        default,
        default
            .with_src_bits(4)
            .with_timestamps(true)
            .with_address_msb_extension(true),
        default
            .with_src_bits(12)
            .with_address_msb_extension(true)
            .with_address_width(AddressWidth::Bits32),
        default.with_address_msb_extension(true),
    ]
}

fn read(path: &Path) -> Vec<u8> {
    fs::read(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

#[test]
fn fast_and_byte_paths_agree_on_recorded_traces() {
    for path in traces() {
        let stream = read(&path);
        for options in option_sets() {
            assert_paths_agree(&stream, options, &path.display().to_string());
        }
    }
}

#[test]
fn fast_and_byte_paths_agree_on_corrupted_traces() {
    // Deterministic xorshift, so a failure can be reproduced.
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for path in traces() {
        let mut stream = read(&path);
        if stream.is_empty() {
            continue;
        }
        // About one byte in fifty replaced: every MSEO value turns up where it should not.
        for _ in 0..stream.len() / 50 + 1 {
            let at = (next() % stream.len() as u64) as usize;
            if let Some(byte) = stream.get_mut(at) {
                *byte = next() as u8;
            }
        }
        for options in option_sets() {
            assert_paths_agree(&stream, options, &format!("{} corrupted", path.display()));
        }
    }
}

#[test]
fn fast_and_byte_paths_agree_on_traces_cut_short() {
    for path in traces() {
        let stream = read(&path);
        // Every cut of the first 512 bytes, so each message ends at, before and after the
        // input's end, and the 8- and 16-byte loads of the fast paths run out of input.
        let window = stream.get(..stream.len().min(512)).unwrap_or_default();
        for cut in 0..=window.len() {
            let prefix = window.get(..cut).unwrap_or_default();
            for options in option_sets() {
                assert_paths_agree(prefix, options, &format!("{} cut at {cut}", path.display()));
            }
        }
    }
}

/// `peek_short` names exactly the next message's bytes when that message is short,
/// readable and starts right there: the message `next_message` then reads starts at the same offset,
/// has the same length and those bytes, and `skip_short` lands where `next_message` does.
#[test]
fn peek_short_names_the_next_message() {
    let mut peeked = 0;
    for path in traces() {
        let stream = read(&path);
        for options in option_sets() {
            let mut decoder = MessageDecoder::new(&stream, options);
            loop {
                let offset = decoder.position();
                let short = decoder.peek_short();
                let mut skipped = decoder.clone();
                match decoder.next() {
                    None => {
                        assert_eq!(short, None, "{}: peeked past the end", path.display());
                        break;
                    }
                    Some(result) => {
                        let Some(short) = short else { continue };
                        peeked += 1;
                        // Peeking does not parse: under options the trace was not made
                        // with, the bytes may be no message at all. Callers only match
                        // the bytes of messages that parsed.
                        let Ok(message) = result else { continue };
                        assert_eq!(message.offset, offset, "{}", path.display());
                        assert_eq!(message.length as usize, short.len(), "{}", path.display());
                        let mut bytes = [0u8; 8];
                        bytes[..short.len()]
                            .copy_from_slice(&stream[offset as usize..][..short.len()]);
                        assert_eq!(short.bytes(), u64::from_le_bytes(bytes));
                        assert_eq!(ShortMessage::of(&message, &stream), Some(short));
                        skipped.skip_short(short);
                        assert_eq!(skipped.position(), decoder.position());
                    }
                }
            }
        }
    }
    assert!(peeked > 1000, "only {peeked} short messages peeked");
}
