//! perf's `-j`/`--branch-filter` names mapped to `PERF_SAMPLE_BRANCH_*` bits.

use perf_event_open_sys::bindings as b;

/// What `perf record -b` asks for: every taken branch.
pub const DASH_B_BRANCH_FILTER: u64 = b::PERF_SAMPLE_BRANCH_ANY as u64;

/// A `-j` list perf itself would reject.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BranchFilterError {
    /// The list was empty or had an empty item (e.g. `any,,u`).
    #[error("empty branch filter name at byte {offset} of {text:?}")]
    EmptyName { text: String, offset: usize },
    /// A name perf does not know.
    #[error("unknown branch filter {name:?} at byte {offset} of {text:?}")]
    UnknownName {
        text: String,
        name: String,
        offset: usize,
    },
}

// perf spells CALL_STACK as "stack"; "call_stack" is accepted too because it is
// the kernel's name and the one users guess.
const BRANCH_FILTER_NAMES: &[(&str, u32)] = &[
    ("any", b::PERF_SAMPLE_BRANCH_ANY),
    ("any_call", b::PERF_SAMPLE_BRANCH_ANY_CALL),
    ("any_ret", b::PERF_SAMPLE_BRANCH_ANY_RETURN),
    ("ind_call", b::PERF_SAMPLE_BRANCH_IND_CALL),
    ("ind_jmp", b::PERF_SAMPLE_BRANCH_IND_JUMP),
    ("call", b::PERF_SAMPLE_BRANCH_CALL),
    ("cond", b::PERF_SAMPLE_BRANCH_COND),
    ("u", b::PERF_SAMPLE_BRANCH_USER),
    ("k", b::PERF_SAMPLE_BRANCH_KERNEL),
    ("hv", b::PERF_SAMPLE_BRANCH_HV),
    ("save_type", b::PERF_SAMPLE_BRANCH_TYPE_SAVE),
    ("no_cycles", b::PERF_SAMPLE_BRANCH_NO_CYCLES),
    ("no_flags", b::PERF_SAMPLE_BRANCH_NO_FLAGS),
    ("abort_tx", b::PERF_SAMPLE_BRANCH_ABORT_TX),
    ("in_tx", b::PERF_SAMPLE_BRANCH_IN_TX),
    ("no_tx", b::PERF_SAMPLE_BRANCH_NO_TX),
    ("call_stack", b::PERF_SAMPLE_BRANCH_CALL_STACK),
    ("stack", b::PERF_SAMPLE_BRANCH_CALL_STACK),
    ("hw_index", b::PERF_SAMPLE_BRANCH_HW_INDEX),
    ("priv", b::PERF_SAMPLE_BRANCH_PRIV_SAVE),
];

/// Parses a comma-separated `-j` list (e.g. `any_call,u`) into
/// `branch_sample_type` bits.
pub fn parse_branch_filters(text: &str) -> Result<u64, BranchFilterError> {
    let mut bits = 0u64;
    let mut offset = 0usize;
    for item in text.split(',') {
        let name = item.trim();
        if name.is_empty() {
            return Err(BranchFilterError::EmptyName {
                text: text.to_owned(),
                offset,
            });
        }
        let Some(&(_, bit)) = BRANCH_FILTER_NAMES.iter().find(|(known, _)| *known == name) else {
            return Err(BranchFilterError::UnknownName {
                text: text.to_owned(),
                name: name.to_owned(),
                offset,
            });
        };
        bits |= u64::from(bit);
        offset += item.len() + 1;
    }
    Ok(bits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_documented_name_maps_to_its_kernel_bit() {
        let expected: &[(&str, u32)] = &[
            ("any", b::PERF_SAMPLE_BRANCH_ANY),
            ("any_call", b::PERF_SAMPLE_BRANCH_ANY_CALL),
            ("any_ret", b::PERF_SAMPLE_BRANCH_ANY_RETURN),
            ("ind_call", b::PERF_SAMPLE_BRANCH_IND_CALL),
            ("ind_jmp", b::PERF_SAMPLE_BRANCH_IND_JUMP),
            ("call", b::PERF_SAMPLE_BRANCH_CALL),
            ("cond", b::PERF_SAMPLE_BRANCH_COND),
            ("u", b::PERF_SAMPLE_BRANCH_USER),
            ("k", b::PERF_SAMPLE_BRANCH_KERNEL),
            ("hv", b::PERF_SAMPLE_BRANCH_HV),
            ("save_type", b::PERF_SAMPLE_BRANCH_TYPE_SAVE),
            ("no_cycles", b::PERF_SAMPLE_BRANCH_NO_CYCLES),
            ("no_flags", b::PERF_SAMPLE_BRANCH_NO_FLAGS),
            ("abort_tx", b::PERF_SAMPLE_BRANCH_ABORT_TX),
            ("in_tx", b::PERF_SAMPLE_BRANCH_IN_TX),
            ("no_tx", b::PERF_SAMPLE_BRANCH_NO_TX),
            ("call_stack", b::PERF_SAMPLE_BRANCH_CALL_STACK),
            ("hw_index", b::PERF_SAMPLE_BRANCH_HW_INDEX),
            ("priv", b::PERF_SAMPLE_BRANCH_PRIV_SAVE),
        ];
        for &(name, bit) in expected {
            assert_eq!(parse_branch_filters(name), Ok(u64::from(bit)), "{name}");
        }
    }

    #[test]
    fn lists_are_or_ed_and_dash_b_is_any() {
        assert_eq!(
            parse_branch_filters("any_call, u,k"),
            Ok(u64::from(
                b::PERF_SAMPLE_BRANCH_ANY_CALL
                    | b::PERF_SAMPLE_BRANCH_USER
                    | b::PERF_SAMPLE_BRANCH_KERNEL
            ))
        );
        assert_eq!(parse_branch_filters("any"), Ok(DASH_B_BRANCH_FILTER));
    }

    #[test]
    fn unknown_and_empty_names_are_reported_with_offsets() {
        assert_eq!(
            parse_branch_filters("any,bogus"),
            Err(BranchFilterError::UnknownName {
                text: "any,bogus".into(),
                name: "bogus".into(),
                offset: 4
            })
        );
        assert!(matches!(
            parse_branch_filters("any,,u"),
            Err(BranchFilterError::EmptyName { offset: 4, .. })
        ));
        assert!(matches!(
            parse_branch_filters(""),
            Err(BranchFilterError::EmptyName { offset: 0, .. })
        ));
    }
}
