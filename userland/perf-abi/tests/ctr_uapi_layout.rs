//! The rvperf_ctr record layout, checked against the kernel module's own header:
//! a C program built with `kmod-shim/include/uapi/rvperf_ctr.h` prints `offsetof` of
//! every field of `struct rvperf_ctr_record`, the sizes and the value of every
//! `RVPERF_CTR_RECORD_*` flag, and they must equal the constants perf-abi's parser
//! uses. (The header's `static_assert`s pin the same
//! numbers on the C side, so neither side can change alone.) Needs a C compiler
//! (`$CC`, else `cc`) with the Linux UAPI headers, as build-essential has them; a
//! missing compiler fails the test rather than skipping it.

use std::path::Path;
use std::process::Command;

use perf_abi::ctr::{record_offset, CTR_ENTRY_SIZE, CTR_RECORD_FLAGS, CTR_RECORD_HEADER_SIZE};

fn c_layout() -> Vec<(String, usize)> {
    let uapi = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../kmod-shim/include/uapi");
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("layout.c");
    let mut program = String::from(
        "#include <stddef.h>\n#include <stdio.h>\n#include \"rvperf_ctr.h\"\nint main(void)\n{\n",
    );
    for (field, _) in record_offset::ALL {
        program.push_str(&format!(
            "\tprintf(\"{field} %zu\\n\", offsetof(struct rvperf_ctr_record, {field}));\n"
        ));
    }
    program.push_str("\tprintf(\"sizeof(struct rvperf_ctr_record) %zu\\n\", sizeof(struct rvperf_ctr_record));\n");
    program.push_str("\tprintf(\"sizeof(struct perf_branch_entry) %zu\\n\", sizeof(struct perf_branch_entry));\n");
    for (flag, _) in CTR_RECORD_FLAGS {
        // A flag the header lacks fails the build, naming it.
        program.push_str(&format!(
            "\tprintf(\"RVPERF_CTR_RECORD_{flag} %u\\n\", (unsigned int)(RVPERF_CTR_RECORD_{flag}));\n"
        ));
    }
    program.push_str("\treturn 0;\n}\n");
    std::fs::write(&source, program).unwrap();
    let binary = dir.path().join("layout");
    let compiler = std::env::var("CC").unwrap_or_else(|_| "cc".to_owned());
    let output = Command::new(&compiler)
        .arg("-std=c11")
        .arg("-I")
        .arg(&uapi)
        .arg("-o")
        .arg(&binary)
        .arg(&source)
        .output()
        .unwrap_or_else(|error| panic!("cannot run the C compiler {compiler}: {error}"));
    assert!(
        output.status.success(),
        "{compiler} cannot build a program with rvperf_ctr.h:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let output = Command::new(&binary).output().unwrap();
    assert!(output.status.success());
    String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| {
            let (name, value) = line.rsplit_once(' ').unwrap();
            (name.to_owned(), value.parse().unwrap())
        })
        .collect()
}

#[test]
fn record_layout_matches_the_uapi_header() {
    let mut expected: Vec<(String, usize)> = record_offset::ALL
        .iter()
        .map(|(field, offset)| (field.to_string(), *offset))
        .collect();
    expected.push((
        "sizeof(struct rvperf_ctr_record)".to_owned(),
        CTR_RECORD_HEADER_SIZE,
    ));
    expected.push((
        "sizeof(struct perf_branch_entry)".to_owned(),
        CTR_ENTRY_SIZE,
    ));
    for (flag, value) in CTR_RECORD_FLAGS {
        expected.push((format!("RVPERF_CTR_RECORD_{flag}"), usize::from(*value)));
    }
    assert_eq!(c_layout(), expected);
}
