//! The LLVM text writer's output, parsed back by a reader written from the format's
//! description, is the profile that was written.

mod common;

use std::iter::Peekable;
use std::str::Lines;

use profiles::{write_llvm_text, FunctionProfile, LineLocation, SampleProfile};
use proptest::prelude::*;

fn parse_location(text: &str) -> LineLocation {
    match text.split_once('.') {
        Some((line, discriminator)) => {
            LineLocation::new(line.parse().unwrap(), discriminator.parse().unwrap())
        }
        None => LineLocation::new(text.parse().unwrap(), 0),
    }
}

fn indentation(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

/// Reads the body lines and inlined callees `indent` spaces deep into `function`.
fn parse_body(lines: &mut Peekable<Lines<'_>>, function: &mut FunctionProfile, indent: usize) {
    while let Some(line) = lines.peek() {
        let depth = indentation(line);
        if depth < indent {
            return;
        }
        assert_eq!(depth, indent, "line {line:?} is indented too deep");
        let line = lines.next().unwrap().trim_start();
        let (location, rest) = line.split_once(": ").expect("offset: ...");
        let location = parse_location(location);
        if rest.starts_with(|c: char| c.is_ascii_digit()) {
            let mut fields = rest.split(' ');
            let sample = function.body.entry(location).or_default();
            assert_eq!(sample.count, 0, "location {location:?} written twice");
            sample.count = fields.next().unwrap().parse().unwrap();
            for target in fields {
                let (name, count) = target.rsplit_once(':').unwrap();
                let previous = sample
                    .call_targets
                    .insert(name.to_owned(), count.parse().unwrap());
                assert!(previous.is_none());
            }
        } else {
            let (name, total) = rest.rsplit_once(':').unwrap();
            let mut callee = FunctionProfile::new(name);
            callee.total_samples = total.parse().unwrap();
            parse_body(lines, &mut callee, indent + 1);
            let previous = function
                .callsites
                .entry(location)
                .or_default()
                .insert(name.to_owned(), callee);
            assert!(previous.is_none());
        }
    }
}

/// Parses LLVM's text sample profile; also checks that functions come hottest first.
fn parse_llvm_text(text: &str) -> SampleProfile {
    let mut profile = SampleProfile::default();
    let mut lines = text.lines().peekable();
    let mut previous_total = u64::MAX;
    while let Some(header) = lines.next() {
        assert_eq!(indentation(header), 0, "function line {header:?}");
        let mut fields = header.rsplitn(3, ':');
        let head: u64 = fields.next().unwrap().parse().unwrap();
        let total: u64 = fields.next().unwrap().parse().unwrap();
        let name = fields.next().unwrap();
        assert!(
            total <= previous_total,
            "{name} is hotter than the function before it"
        );
        previous_total = total;
        let mut function = FunctionProfile::new(name);
        function.total_samples = total;
        function.head_samples = head;
        parse_body(&mut lines, &mut function, 1);
        assert!(profile
            .functions
            .insert(name.to_owned(), function)
            .is_none());
    }
    profile
}

fn text(profile: &SampleProfile) -> String {
    let mut out = Vec::new();
    write_llvm_text(profile, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

proptest! {
    #[test]
    fn text_parses_back_to_the_profile(profile in common::sample_profile()) {
        let written = text(&profile);
        prop_assert_eq!(parse_llvm_text(&written), common::written_functions(&profile));
    }
}

#[test]
fn functions_without_samples_are_left_out() {
    let mut profile = SampleProfile::default();
    profile.function("unsampled");
    let entered = profile.function("entered");
    entered.head_samples = 2;
    assert_eq!(text(&profile), "entered:0:2\n");
}
