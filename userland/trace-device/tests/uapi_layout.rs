//! `abi.rs` against the driver's own header, `kmod-shim/include/uapi/rvtrace.h`: a C
//! program built with it prints every define, every struct's size and every field's
//! offset, and each must equal this crate's. A define of the header this test does not
//! know fails it, so a new one cannot go unchecked. (The module's Rust types are
//! generated from the same header at build time, and its static_asserts pin the
//! sizes on the C side.) Needs a C compiler (`$CC`, else `cc`) with the Linux UAPI
//! headers; a missing one fails the test rather than skipping it.

use std::collections::BTreeMap;
use std::mem::offset_of;
use std::path::Path;
use std::process::Command;

use trace_device::abi::{
    self, feature, mode, privilege, request, status_flag, Config, Info, Status, Wait,
};

fn header() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../kmod-shim/include/uapi/rvtrace.h")
}

/// Every `#define NAME` of the header but the include guard and the assert helper.
fn header_defines() -> Vec<String> {
    std::fs::read_to_string(header())
        .unwrap()
        .lines()
        .filter_map(|line| line.trim_start().strip_prefix("#define "))
        .map(|rest| {
            rest.split(|c: char| c.is_whitespace() || c == '(')
                .next()
                .unwrap()
                .to_string()
        })
        .filter(|name| name != "_UAPI_RVTRACE_H" && name != "__RVTRACE_ASSERT")
        .collect()
}

fn expected() -> BTreeMap<String, u64> {
    let mut values: BTreeMap<String, u64> = [
        ("RVTRACE_ABI_VERSION", u64::from(abi::ABI_VERSION)),
        ("RVTRACE_MODE_BTM", u64::from(mode::BTM)),
        ("RVTRACE_MODE_HTM", u64::from(mode::HTM)),
        ("RVTRACE_PRIVILEGE_USER", u64::from(privilege::USER)),
        (
            "RVTRACE_PRIVILEGE_SUPERVISOR",
            u64::from(privilege::SUPERVISOR),
        ),
        ("RVTRACE_PRIVILEGE_MACHINE", u64::from(privilege::MACHINE)),
        (
            "RVTRACE_FEATURE_IMPLICIT_RETURN",
            u64::from(feature::IMPLICIT_RETURN),
        ),
        (
            "RVTRACE_FEATURE_REPEATED_HISTORY",
            u64::from(feature::REPEATED_HISTORY),
        ),
        ("RVTRACE_FEATURE_ALL_JUMPS", u64::from(feature::ALL_JUMPS)),
        (
            "RVTRACE_FEATURE_SEQUENTIAL_JUMPS",
            u64::from(feature::SEQUENTIAL_JUMPS),
        ),
        (
            "RVTRACE_FEATURE_MSB_EXTENSION",
            u64::from(feature::MSB_EXTENSION),
        ),
        ("RVTRACE_FEATURE_TIMESTAMPS", u64::from(feature::TIMESTAMPS)),
        ("RVTRACE_FEATURE_CONTEXT", u64::from(feature::CONTEXT)),
        (
            "RVTRACE_FEATURE_STOP_ON_WRAP",
            u64::from(feature::STOP_ON_WRAP),
        ),
        (
            "RVTRACE_FEATURE_CONTEXT_TASK",
            u64::from(feature::CONTEXT_TASK),
        ),
        ("RVTRACE_FEATURES_ALL", u64::from(feature::ALL)),
        (
            "RVTRACE_CONTEXT_TID_BITS",
            u64::from(perf_abi::ntrace::task_context::TID_BITS),
        ),
        (
            "RVTRACE_CONTEXT_EXEC_BITS",
            u64::from(perf_abi::ntrace::task_context::EXEC_BITS),
        ),
        (
            "RVTRACE_CONTEXT_UNKNOWN",
            perf_abi::ntrace::task_context::UNKNOWN,
        ),
        ("RVTRACE_SYNC_NONE", u64::from(abi::SYNC_NONE)),
        (
            "RVTRACE_INFO_WRAP_COUNT",
            u64::from(abi::info_flag::WRAP_COUNT),
        ),
        (
            "RVTRACE_INFO_CONTEXT_REGISTER",
            u64::from(abi::info_flag::CONTEXT_REGISTER),
        ),
        (
            "RVTRACE_STATUS_CONFIGURED",
            u64::from(status_flag::CONFIGURED),
        ),
        ("RVTRACE_STATUS_RUNNING", u64::from(status_flag::RUNNING)),
        ("RVTRACE_STATUS_WRAPPED", u64::from(status_flag::WRAPPED)),
        (
            "RVTRACE_STATUS_STOPPED_ON_WRAP",
            u64::from(status_flag::STOPPED_ON_WRAP),
        ),
        ("RVTRACE_IOC_MAGIC", u64::from(abi::IOC_MAGIC)),
        ("RVTRACE_NR_GET_INFO", u64::from(abi::number::GET_INFO)),
        ("RVTRACE_NR_CONFIGURE", u64::from(abi::number::CONFIGURE)),
        ("RVTRACE_NR_START", u64::from(abi::number::START)),
        ("RVTRACE_NR_STOP", u64::from(abi::number::STOP)),
        ("RVTRACE_NR_GET_STATUS", u64::from(abi::number::GET_STATUS)),
        ("RVTRACE_NR_WAIT", u64::from(abi::number::WAIT)),
        ("RVTRACE_IOC_GET_INFO", request::GET_INFO),
        ("RVTRACE_IOC_CONFIGURE", request::CONFIGURE),
        ("RVTRACE_IOC_START", request::START),
        ("RVTRACE_IOC_STOP", request::STOP),
        ("RVTRACE_IOC_GET_STATUS", request::GET_STATUS),
        ("RVTRACE_IOC_WAIT", request::WAIT),
    ]
    .into_iter()
    .map(|(name, value)| (name.to_string(), value))
    .collect();
    let mut layout = |name: &str, value: usize| values.insert(name.to_string(), value as u64);
    layout("sizeof(struct rvtrace_config)", size_of::<Config>());
    layout("sizeof(struct rvtrace_info)", size_of::<Info>());
    layout("sizeof(struct rvtrace_status)", size_of::<Status>());
    layout("sizeof(struct rvtrace_wait)", size_of::<Wait>());
    macro_rules! fields {
        ($c:literal, $rust:ty, [$($field:ident),*]) => {
            $(layout(concat!("offsetof(struct ", $c, ", ", stringify!($field), ")"), offset_of!($rust, $field));)*
        };
    }
    fields!(
        "rvtrace_config",
        Config,
        [
            size,
            mode,
            features,
            privileges,
            sync_max,
            timestamp_prescale,
            harts,
            buffer_bytes,
            reserved
        ]
    );
    fields!(
        "rvtrace_info",
        Info,
        [
            size,
            abi_version,
            encoders,
            return_stack_depth,
            harts,
            sink_size,
            encoder_impl,
            funnel_impl,
            sink_impl,
            flags,
            reserved
        ]
    );
    fields!(
        "rvtrace_status",
        Status,
        [
            size,
            flags,
            buffer_offset,
            buffer_bytes,
            write_offset,
            bytes_written,
            wraps,
            overflow_harts,
            src_bits,
            reserved0,
            reserved
        ]
    );
    fields!(
        "rvtrace_wait",
        Wait,
        [size, timeout_ms, until_bytes, status]
    );
    values
}

fn c_values(names: &[String]) -> BTreeMap<String, u64> {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("layout.c");
    let mut program = String::from(
        "#include <stddef.h>\n#include <stdio.h>\n#include \"rvtrace.h\"\nint main(void)\n{\n",
    );
    for name in names {
        // A name that is neither a define nor a layout expression fails the build.
        program.push_str(&format!(
            "\tprintf(\"%s %llu\\n\", \"{name}\", (unsigned long long)({name}));\n"
        ));
    }
    program.push_str("\treturn 0;\n}\n");
    std::fs::write(&source, program).unwrap();
    let binary = dir.path().join("layout");
    let compiler = std::env::var("CC").unwrap_or_else(|_| "cc".to_owned());
    let output = Command::new(&compiler)
        .arg("-std=c11")
        .arg("-I")
        .arg(header().parent().unwrap())
        .arg("-o")
        .arg(&binary)
        .arg(&source)
        .output()
        .unwrap_or_else(|error| panic!("cannot run the C compiler {compiler}: {error}"));
    assert!(
        output.status.success(),
        "{compiler} cannot build a program with rvtrace.h:\n{}",
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

/// perf.data recordings keep the configuration's feature bits (`perf_abi::ntrace`, a
/// crate below this one): the same bits as the header's.
#[test]
fn recordings_keep_the_header_feature_bits() {
    use perf_abi::ntrace::feature as recorded;
    let pairs = [
        (recorded::IMPLICIT_RETURN, feature::IMPLICIT_RETURN),
        (recorded::REPEATED_HISTORY, feature::REPEATED_HISTORY),
        (recorded::ALL_JUMPS, feature::ALL_JUMPS),
        (recorded::SEQUENTIAL_JUMPS, feature::SEQUENTIAL_JUMPS),
        (recorded::MSB_EXTENSION, feature::MSB_EXTENSION),
        (recorded::TIMESTAMPS, feature::TIMESTAMPS),
        (recorded::CONTEXT, feature::CONTEXT),
        (recorded::STOP_ON_WRAP, feature::STOP_ON_WRAP),
    ];
    for (recorded, header) in pairs {
        assert_eq!(recorded, u64::from(header));
    }
    use perf_abi::ntrace::privilege as recorded_privilege;
    assert_eq!(recorded_privilege::USER, privilege::USER);
    assert_eq!(recorded_privilege::SUPERVISOR, privilege::SUPERVISOR);
    assert_eq!(recorded_privilege::MACHINE, privilege::MACHINE);
}

#[test]
fn the_abi_matches_the_uapi_header() {
    let expected = expected();
    for define in header_defines() {
        assert!(
            expected.contains_key(&define),
            "rvtrace.h defines {define}, which abi.rs does not have"
        );
    }
    let names: Vec<String> = expected.keys().cloned().collect();
    assert_eq!(c_values(&names), expected);
}
