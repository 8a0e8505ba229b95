//! Running the AutoFDO consumers and reading what they print: shared by the riscv64
//! and x86_64 AutoFDO tests.

use std::path::Path;
use std::process::{Command, Output};

/// Runs `command`, which must succeed; `hint` says how to install it when missing.
pub fn run_tool(command: &mut Command, hint: &str) -> Output {
    let output = command
        .output()
        .unwrap_or_else(|error| panic!("cannot run {command:?}: {error} ({hint})"));
    assert!(
        output.status.success(),
        "{command:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// `perf script -F ip,brstack` of `data`, only the lines with branch entries: the text
/// llvm-profgen reads.
pub fn perf_script_branch_stacks(data: &Path, hint: &str) -> String {
    let script = run_tool(
        Command::new("perf")
            .env("PAGER", "cat")
            .args(["script", "-F", "ip,brstack", "-i"])
            .arg(data),
        hint,
    );
    String::from_utf8_lossy(&script.stdout)
        .lines()
        .filter(|line| line.contains('/'))
        .map(|line| format!("{line}\n"))
        .collect()
}

/// The `function_entry_count` of `define ... @name(` in LLVM IR text.
pub fn function_entry_count(ir: &str, name: &str) -> Option<u64> {
    let define = ir
        .lines()
        .find(|line| line.starts_with("define ") && line.contains(&format!("@{name}(")))?;
    let reference = define.split("!prof ").nth(1)?.split([' ', ',']).next()?;
    let metadata = ir
        .lines()
        .find(|line| line.starts_with(&format!("{reference} = ")))?;
    metadata
        .split("function_entry_count\", i64 ")
        .nth(1)?
        .trim_end_matches('}')
        .parse()
        .ok()
}
