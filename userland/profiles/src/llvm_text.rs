//! LLVM's text sample profile (`SPF_Text`), what `clang -fprofile-sample-use` and
//! `llvm-profdata` read:
//!
//! ```text
//! hot_loop:201000:1000
//!  1: 1000
//!  3.1: 100000 cold_path:99 other:3
//!  5: scale:99000
//!   1: 99000
//! ```
//!
//! A function line is `name:total:head`; each body line is indented one space more than
//! its function and reads `offset[.discriminator]: count` followed by the calls made
//! there, `callee:count`, hottest first. An inlined callee is a line
//! `offset[.discriminator]: callee:total` at the body's indentation, followed by the
//! callee's own body one space deeper (inlined instances carry no head count).
//! Functions are written hottest first, body lines and call sites in location order:
//! the layout `llvm-profdata merge --text` produces, so the two can be compared.

use std::fmt;
use std::io::{self, Write};

use crate::{FunctionProfile, LineLocation, ProfileWriteError, SampleProfile};

/// Writes `profile` in LLVM's text format. A name the format cannot carry fails with
/// an `InvalidInput` error wrapping the [`ProfileWriteError`], before anything is
/// written.
pub fn write_llvm_text(profile: &SampleProfile, out: &mut impl Write) -> io::Result<()> {
    let functions = profile.by_hotness();
    for function in &functions {
        check_names(function)
            .map_err(|error| io::Error::new(io::ErrorKind::InvalidInput, error))?;
    }
    for function in functions {
        writeln!(
            out,
            "{}:{}:{}",
            function.name, function.total_samples, function.head_samples
        )?;
        write_body(function, 1, out)?;
    }
    Ok(())
}

/// Writes the body lines and inlined callees of `function`, `depth` spaces deep.
fn write_body(function: &FunctionProfile, depth: usize, out: &mut impl Write) -> io::Result<()> {
    for (location, sample) in &function.body {
        write!(
            out,
            "{:depth$}{}: {}",
            "",
            TextLocation(*location),
            sample.count
        )?;
        for (target, count) in sample.call_targets_by_count() {
            write!(out, " {target}:{count}")?;
        }
        writeln!(out)?;
    }
    for (location, callees) in &function.callsites {
        for callee in callees.values() {
            writeln!(
                out,
                "{:depth$}{}: {}:{}",
                "",
                TextLocation(*location),
                callee.name,
                callee.total_samples
            )?;
            write_body(callee, depth + 1, out)?;
        }
    }
    Ok(())
}

/// `offset` or `offset.discriminator`, as LLVM's `LineLocation::print` spells it.
struct TextLocation(LineLocation);

impl fmt::Display for TextLocation {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{}", self.0.line_offset)?;
        if self.0.discriminator != 0 {
            write!(formatter, ".{}", self.0.discriminator)?;
        }
        Ok(())
    }
}

fn check_names(function: &FunctionProfile) -> Result<(), ProfileWriteError> {
    let mut names = std::collections::BTreeSet::new();
    function.collect_names(&mut names);
    names.into_iter().try_for_each(check_text_name)
}

/// LLVM's text reader splits lines at spaces and decides between a body line and an
/// inlined call site by whether the text after `offset: ` starts with a digit, so a name
/// with whitespace or a leading digit would be read back as something else.
fn check_text_name(name: &str) -> Result<(), ProfileWriteError> {
    if name.is_empty() {
        return Err(ProfileWriteError::EmptyName);
    }
    if name.contains('\0') {
        return Err(ProfileWriteError::NameContainsNul {
            name: name.to_owned(),
        });
    }
    if name.chars().any(char::is_whitespace) || name.starts_with(|c: char| c.is_ascii_digit()) {
        return Err(ProfileWriteError::NameNotTextSafe {
            name: name.to_owned(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(profile: &SampleProfile) -> String {
        let mut out = Vec::new();
        write_llvm_text(profile, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn nested_layout_and_order() {
        let mut profile = SampleProfile::default();
        let cold = profile.function("cold");
        cold.head_samples = 3;
        cold.add_body(LineLocation::new(1, 0), 3);
        let hot = profile.function("hot");
        hot.head_samples = 10;
        hot.add_body(LineLocation::new(1, 0), 10);
        hot.add_body(LineLocation::new(2, 1), 500);
        hot.add_call(LineLocation::new(2, 1), "b", 4);
        hot.add_call(LineLocation::new(2, 1), "a", 4);
        hot.add_call(LineLocation::new(2, 1), "z", 9);
        let inlined = hot.inlined(LineLocation::new(4, 0), "helper");
        inlined.add_body(LineLocation::new(0, 0), 70);
        hot.recompute_totals();

        assert_eq!(
            text(&profile),
            "hot:580:10\n 1: 10\n 2.1: 500 z:9 a:4 b:4\n 4: helper:70\n  0: 70\ncold:3:3\n 1: 3\n"
        );
    }

    #[test]
    fn names_the_format_cannot_carry_are_refused_before_writing() {
        for (name, expected) in [
            ("", ProfileWriteError::EmptyName),
            (
                "a b",
                ProfileWriteError::NameNotTextSafe { name: "a b".into() },
            ),
            (
                "1f",
                ProfileWriteError::NameNotTextSafe { name: "1f".into() },
            ),
            (
                "a\0",
                ProfileWriteError::NameContainsNul { name: "a\0".into() },
            ),
        ] {
            let mut profile = SampleProfile::default();
            profile
                .function("fine")
                .add_body(LineLocation::new(1, 0), 5);
            profile
                .function("fine")
                .add_call(LineLocation::new(1, 0), name, 1);
            let mut out = Vec::new();
            let error = write_llvm_text(&profile, &mut out).unwrap_err();
            assert_eq!(error.kind(), io::ErrorKind::InvalidInput);
            let inner = error.into_inner().unwrap();
            assert_eq!(inner.downcast_ref::<ProfileWriteError>(), Some(&expected));
            assert!(out.is_empty());
        }
    }
}
