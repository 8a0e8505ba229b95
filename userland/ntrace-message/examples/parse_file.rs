//! Parses a whole N-Trace byte stream and prints the message count, for timing the message
//! decoder on real traces (`perf stat` around it) and for checking that two builds decode a
//! file identically (`--digest` hashes the debug form of every message and error).
//!
//! `--repeat N` also times N more decodes and prints the fastest per message.
//!
//! ```text
//! cargo run --release -p ntrace-message --example parse_file -- FILE [--src-bits N] [--addr-ext] [--rv32] [--digest] [--repeat N]
//! ```

use std::hash::{DefaultHasher, Hasher};
use std::hint::black_box;
use std::time::{Duration, Instant};
use std::{env, fmt, fs, process};

use ntrace_message::{AddressWidth, MessageDecoder, MessageOptions};

/// Feeds formatted text into a hasher without building the string.
struct HashWriter(DefaultHasher);

impl fmt::Write for HashWriter {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        self.0.write(text.as_bytes());
        Ok(())
    }
}

fn main() {
    let mut path = None;
    let mut options = MessageOptions::default();
    let mut digest = false;
    let mut repeat = 0u32;
    let mut arguments = env::args().skip(1);
    while let Some(argument) = arguments.next() {
        match argument.as_str() {
            "--digest" => digest = true,
            "--repeat" => {
                let count = arguments.next().and_then(|value| value.parse().ok());
                let Some(count) = count else {
                    eprintln!("--repeat needs a number");
                    process::exit(2);
                };
                repeat = count;
            }
            "--addr-ext" => options = options.with_address_msb_extension(true),
            "--rv32" => options = options.with_address_width(AddressWidth::Bits32),
            "--src-bits" => {
                let bits = arguments.next().and_then(|value| value.parse().ok());
                let Some(bits) = bits else {
                    eprintln!("--src-bits needs a number");
                    process::exit(2);
                };
                options = options.with_src_bits(bits);
            }
            _ => path = Some(argument),
        }
    }
    let Some(path) = path else {
        eprintln!(
            "usage: parse_file FILE [--src-bits N] [--addr-ext] [--rv32] [--digest] [--repeat N]"
        );
        process::exit(2);
    };
    let data = match fs::read(&path) {
        Ok(data) => data,
        Err(error) => {
            eprintln!("{path}: {error}");
            process::exit(1);
        }
    };

    let mut decoder = MessageDecoder::new(&data, options);
    let mut messages = 0u64;
    let mut errors = 0u64;
    let mut hasher = HashWriter(DefaultHasher::new());
    loop {
        let next = decoder.next_message();
        match &next {
            Ok(None) => break,
            Ok(Some(_)) => messages += 1,
            Err(_) => errors += 1,
        }
        if digest {
            // Infallible: the writer never fails.
            let _ = fmt::Write::write_fmt(&mut hasher, format_args!("{next:?}\n"));
        } else {
            black_box(&next);
        }
    }
    print!(
        "{messages} messages, {errors} errors, {} idle bytes, {} skipped bytes, {} bytes",
        decoder.idle_bytes(),
        decoder.skipped_bytes(),
        data.len()
    );
    if digest {
        print!(", digest {:016x}", hasher.0.finish());
    }
    println!();
    if repeat > 0 {
        report_best_time(&data, options, repeat, messages);
    }
}

/// Decodes the whole input `repeat` times and prints the fastest run, per message: wall
/// time on a shared machine is noisy, and the minimum is the least disturbed run.
fn report_best_time(data: &[u8], options: MessageOptions, repeat: u32, messages: u64) {
    let mut best = Duration::MAX;
    for _ in 0..repeat {
        let started = Instant::now();
        let mut decoder = MessageDecoder::new(black_box(data), options);
        loop {
            let next = decoder.next_message();
            if let Ok(None) = next {
                break;
            }
            black_box(&next);
        }
        best = best.min(started.elapsed());
    }
    let per_message = best.as_secs_f64() * 1e9 / messages.max(1) as f64;
    println!(
        "best of {repeat}: {:.2} ms, {per_message:.2} ns/message",
        best.as_secs_f64() * 1e3
    );
}
