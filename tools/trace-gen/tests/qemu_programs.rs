//! Integration tests: build tests/programs with tools/testprogs/build.sh, run
//! them under qemu-riscv64 and check the exec log and their output.
//!
//! These need `riscv64-linux-gnu-gcc` and `qemu-riscv64`. They are not
//! skipped when the tools are missing: they fail and say to run
//! tools/install-deps.sh.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use trace_gen::qemu::{ExecLogReader, QemuUser};

const INSTALL_HINT: &str = "run tools/install-deps.sh (as root) to install the RISC-V cross \
                            toolchain (gcc-riscv64-linux-gnu) and qemu-user";

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn on_path(name: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(name).is_file()))
}

fn qemu() -> QemuUser {
    match QemuUser::detect() {
        Ok(q) => q,
        Err(e) => panic!("{e}\n{INSTALL_HINT}"),
    }
}

/// Builds the named programs (all when `names` is empty) into a directory
/// under the cargo target tmp dir and returns it. build.sh skips programs
/// that are up to date.
fn build(names: &[&str]) -> PathBuf {
    for tool in ["riscv64-linux-gnu-gcc", "riscv64-linux-gnu-objdump"] {
        assert!(on_path(tool), "{tool} not found on PATH: {INSTALL_HINT}");
    }
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("testprogs");
    let status = Command::new("bash")
        .arg(repo_root().join("tools/testprogs/build.sh"))
        .arg(&out)
        .args(names)
        .stdin(Stdio::null())
        .status()
        .expect("failed to run bash tools/testprogs/build.sh");
    assert!(
        status.success(),
        "tools/testprogs/build.sh failed: {status}"
    );
    out
}

/// All programs, built once per test process.
fn build_all() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| build(&[]))
}

/// A file removed when dropped.
struct TempFile(PathBuf);

impl TempFile {
    /// `CARGO_TARGET_TMPDIR/<name>.<pid>.<ext>`
    fn new(name: &str, ext: &str) -> TempFile {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
        std::fs::create_dir_all(dir).expect("create CARGO_TARGET_TMPDIR");
        TempFile(dir.join(format!("{name}.{}.{ext}", std::process::id())))
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// e_entry of a 64-bit little-endian RISC-V ELF file, read from the header.
fn elf_entry(path: &Path) -> u64 {
    let bytes = std::fs::read(path).expect("read ELF");
    assert!(bytes.len() >= 0x40, "ELF header truncated");
    assert_eq!(&bytes[..4], b"\x7fELF", "not an ELF file");
    assert_eq!(bytes[4], 2, "not ELFCLASS64");
    assert_eq!(bytes[5], 1, "not little-endian");
    assert_eq!(
        u16::from_le_bytes([bytes[0x12], bytes[0x13]]),
        243,
        "not EM_RISCV"
    );
    let mut entry = [0u8; 8];
    entry.copy_from_slice(&bytes[0x18..0x20]);
    u64::from_le_bytes(entry)
}

/// Instruction addresses (with mnemonic) and symbol addresses from an
/// `objdump -d` listing.
struct Objdump {
    insns: HashMap<u64, String>,
    symbols: HashMap<String, u64>,
}

fn read_objdump(path: &Path) -> Objdump {
    let text = std::fs::read_to_string(path).expect("read objdump");
    let mut insns = HashMap::new();
    let mut symbols = HashMap::new();
    for line in text.lines() {
        // "000000000001066c <_start>:" (symbol lines start in column 0)
        if !line.starts_with(' ') {
            if let Some((addr, rest)) = line.split_once(" <") {
                if let (Ok(addr), Some(name)) =
                    (u64::from_str_radix(addr, 16), rest.strip_suffix(">:"))
                {
                    symbols.insert(name.to_owned(), addr);
                }
            }
            continue;
        }
        // "   10588:\t8082                \tret"
        let Some((addr, rest)) = line.trim_start().split_once(":\t") else {
            continue;
        };
        let Ok(addr) = u64::from_str_radix(addr, 16) else {
            continue;
        };
        let mnemonic = rest.split('\t').nth(1).unwrap_or("").trim().to_owned();
        insns.insert(addr, mnemonic);
    }
    Objdump { insns, symbols }
}

fn expected_stdout(name: &str) -> Vec<u8> {
    let path = repo_root().join(format!("tests/programs/expected/{name}.stdout"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

#[test]
fn detect_finds_qemu_and_picks_the_one_insn_flag() {
    let q = qemu();
    let (major, minor, _) = q.version();
    assert!(major >= 6, "unexpectedly old QEMU {:?}", q.version());
    let expected = if (major, minor) >= (8, 1) {
        "-one-insn-per-tb"
    } else {
        "-singlestep"
    };
    assert_eq!(q.one_insn_flag(), expected);
}

#[test]
fn fnptr_exec_log_has_one_pc_per_instruction() {
    let q = qemu();
    let dir = build(&["fnptr"]);
    let program = dir.join("fnptr");
    let log = TempFile::new("fnptr-exec", "log");

    let out = q.run_logged(&program, &[], &log.0).expect("run qemu");
    assert_eq!(
        out.status_code,
        0,
        "fnptr failed; stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&expected_stdout("fnptr"))
    );

    let pcs: Vec<u64> = ExecLogReader::open(&log.0)
        .expect("open exec log")
        .collect::<Result<_, _>>()
        .expect("parse exec log");
    assert!(pcs.len() > 1000, "only {} PCs in the exec log", pcs.len());
    // ~1.0 M retired instructions; far more would mean the log is not
    // one line per instruction or the program changed a lot.
    assert!(pcs.len() < 5_000_000, "{} PCs in the exec log", pcs.len());

    let entry = elf_entry(&program);
    assert_eq!(
        pcs[0], entry,
        "first PC {:#x} is not e_entry {:#x}",
        pcs[0], entry
    );

    let dump = read_objdump(&dir.join("fnptr.objdump"));
    assert_eq!(
        dump.symbols.get("_start"),
        Some(&entry),
        "e_entry is not _start"
    );

    // Every logged PC is an instruction of the (static) binary.
    let unknown: Vec<u64> = pcs
        .iter()
        .copied()
        .filter(|pc| !dump.insns.contains_key(pc))
        .collect();
    assert!(
        unknown.is_empty(),
        "{} PCs are not instruction addresses, e.g. {:#x?}",
        unknown.len(),
        &unknown[..unknown.len().min(5)]
    );
    // The program ends with the exit_group ecall, which is logged too.
    assert_eq!(dump.insns[pcs.last().unwrap()], "ecall");

    // Every indirect-call target of the program ran.
    let executed: HashSet<u64> = pcs.iter().copied().collect();
    for func in [
        "op_add",
        "op_sub",
        "op_xor",
        "op_mul",
        "op_rot",
        "op_max",
        "op_min",
        "op_avg",
        "rect_area",
        "rect_perimeter",
        "rect_combine",
        "tri_area",
        "tri_perimeter",
        "tri_combine",
    ] {
        let addr = dump
            .symbols
            .get(func)
            .unwrap_or_else(|| panic!("no symbol {func}"));
        assert!(
            executed.contains(addr),
            "{func} at {addr:#x} never executed"
        );
    }
}

#[test]
fn all_programs_print_their_expected_output() {
    let q = qemu();
    let dir = build_all();
    let mut names: Vec<String> = std::fs::read_dir(repo_root().join("tests/programs"))
        .expect("list tests/programs")
        .filter_map(|e| {
            let path = e.ok()?.path();
            (path.extension()? == "c").then(|| path.file_stem()?.to_str().map(str::to_owned))?
        })
        .collect();
    names.sort();
    assert!(
        names.len() >= 7,
        "expected at least 7 test programs, found {names:?}"
    );
    for name in &names {
        let out = Command::new(&q.binary)
            .arg(dir.join(name))
            .env_clear()
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("run {name} under qemu: {e}"));
        assert!(
            out.status.success(),
            "{name}: {}; stderr: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&expected_stdout(name)),
            "{name}: unexpected stdout"
        );
    }
}

/// A bare-metal-style program with a known number of retired instructions:
/// 1 (li) + 2 * 1000 (loop) + 1 (jal) + 2 (sub) + 6 (write, `lla` is
/// auipc + addi) + 3 (exit) = 2013. No compressed instructions, so every
/// instruction is 4 bytes.
const COUNTED_ASM: &str = r#"
    .option norvc
    .globl _start
_start:
    li   t0, 1000
1:  addi t0, t0, -1
    bnez t0, 1b
    jal  ra, sub
    li   a0, 1
    lla  a1, msg
    li   a2, 3
    li   a7, 64
    ecall
    li   a0, 3
    li   a7, 93
    ecall
sub:
    addi t1, zero, 5
    ret
    .section .rodata
msg: .ascii "ok\n"
"#;

#[test]
fn exec_log_has_exactly_one_line_per_retired_instruction() {
    let q = qemu();
    assert!(
        on_path("riscv64-linux-gnu-gcc"),
        "riscv64-linux-gnu-gcc not found on PATH: {INSTALL_HINT}"
    );
    let src = TempFile::new("counted", "S");
    std::fs::write(&src.0, COUNTED_ASM).expect("write asm");
    let bin = TempFile::new("counted", "elf");
    let status = Command::new("riscv64-linux-gnu-gcc")
        .args(["-nostdlib", "-static", "-march=rv64gc", "-mabi=lp64d", "-o"])
        .arg(&bin.0)
        .arg(&src.0)
        .status()
        .expect("run riscv64-linux-gnu-gcc");
    assert!(status.success(), "assembling the counted program failed");

    let log = TempFile::new("counted-exec", "log");
    let out = q.run_logged(&bin.0, &[], &log.0).expect("run qemu");
    assert_eq!(
        out.status_code,
        3,
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.stdout, b"ok\n");

    let pcs: Vec<u64> = ExecLogReader::open(&log.0)
        .expect("open exec log")
        .collect::<Result<_, _>>()
        .expect("parse exec log");
    assert_eq!(pcs.len(), 2013, "retired-instruction count");
    let entry = elf_entry(&bin.0);
    assert_eq!(pcs[0], entry);
    // The loop body at entry+4, entry+8, a thousand times.
    assert!(pcs[1..2001].chunks(2).all(|p| p == [entry + 4, entry + 8]));
    // jal, sub (2), write sequence, exit sequence. The final exit ecall
    // (entry+48) is logged although it never returns.
    let tail: Vec<u64> = [12, 52, 56, 16, 20, 24, 28, 32, 36, 40, 44, 48]
        .iter()
        .map(|off| entry + off)
        .collect();
    assert_eq!(pcs[2001..], tail[..]);
}
