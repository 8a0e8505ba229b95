//! Symbol names as people read them.

use std::borrow::Cow;

/// The readable form of a linkage name: Rust (legacy and v0, without the
/// hash), Itanium C++, or the name unchanged (C, or anything that does not
/// demangle). Never panics, whatever the bytes.
pub fn demangle(name: &str) -> Cow<'_, str> {
    if name.starts_with("_R") || is_rust_legacy(name) {
        if let Ok(demangled) = rustc_demangle::try_demangle(name) {
            return Cow::Owned(format!("{demangled:#}"));
        }
    }
    if name.starts_with("_Z") {
        if let Some(demangled) = demangle_cpp(name) {
            return Cow::Owned(demangled);
        }
    }
    Cow::Borrowed(name)
}

fn demangle_cpp(name: &str) -> Option<String> {
    let symbol = cpp_demangle::Symbol::new(name.as_bytes()).ok()?;
    symbol
        .demangle(&cpp_demangle::DemangleOptions::default())
        .ok()
}

/// Rust legacy names are Itanium-shaped (`_ZN...E`); what tells them from a
/// C++ name in the same namespace form is the trailing `17h<16 hex digits>E`
/// hash segment, optionally followed by an LLVM suffix such as `.llvm.1234`.
/// Path segments may themselves contain dots (`$LT$object..read..`), so the
/// suffix is found from the hash, not from the first dot.
fn is_rust_legacy(name: &str) -> bool {
    if !name.starts_with("_ZN") {
        return false;
    }
    name.match_indices("17h").any(|(start, _)| {
        let after_hash = start + 19;
        name.get(start + 3..after_hash)
            .is_some_and(|hash| hash.bytes().all(|byte| byte.is_ascii_hexdigit()))
            && name.as_bytes().get(after_hash) == Some(&b'E')
            && matches!(name.as_bytes().get(after_hash + 1), None | Some(b'.'))
    })
}

#[cfg(test)]
mod tests {
    use super::demangle;

    #[test]
    fn cpp_names_are_demangled() {
        assert_eq!(demangle("_ZN2ns5Klass6methodEi"), "ns::Klass::method(int)");
        assert_eq!(demangle("_Z3addii"), "add(int, int)");
    }

    #[test]
    fn rust_names_are_demangled_without_hash() {
        assert_eq!(
            demangle("_ZN4core3fmt5write17h0123456789abcdefE"),
            "core::fmt::write"
        );
        assert_eq!(
            demangle("_ZN4core3fmt5write17h0123456789abcdefE.llvm.42"),
            "core::fmt::write"
        );
        assert_eq!(demangle("_RNvCs1234_7mycrate3foo"), "mycrate::foo");
        // Trait impls carry `..` inside their path segments.
        assert_eq!(
            demangle(
                "_ZN89_$LT$object..read..any..Symbol$LT$R$GT$$u20$as$u20$object..read..traits..ObjectSymbol$GT$4name17h33c477b6d7a695baE"
            ),
            "<object::read::any::Symbol<R> as object::read::traits::ObjectSymbol>::name"
        );
    }

    #[test]
    fn c_and_odd_names_are_unchanged() {
        for name in [
            "main",
            "",
            "_Z",
            "_ZZZZ",
            "_R",
            "_RNv",
            "$x",
            "$xrv64i2p1",
            "_ZN",
            "_ZNE",
            "_ZN17h0123456789abcdefE",
            "_ZN3foo17h0123456789abcdeE",
            "\u{fffd}_Z\u{0}",
        ] {
            // Whatever comes back, it must come back.
            let _ = demangle(name);
        }
        assert_eq!(demangle("main"), "main");
        assert_eq!(demangle("$x"), "$x");
        assert_eq!(demangle("_Z"), "_Z");
    }

    #[test]
    fn arbitrary_suffixes_of_mangled_prefixes_never_panic() {
        let alphabet = b"_ZNRIEvCs0123456789abcdefhStSaSsK.$";
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..20_000 {
            let mut name = String::from(if state % 2 == 0 { "_Z" } else { "_R" });
            let length = (state >> 8) % 24;
            for _ in 0..length {
                // xorshift: a fixed, reproducible sequence of names.
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                name.push(alphabet[(state % alphabet.len() as u64) as usize] as char);
            }
            let _ = demangle(&name);
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        }
    }
}
