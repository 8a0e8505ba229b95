//! The N-Trace reference encoder (NexRv, the C reference code of the RISC-V N-Trace task
//! group) as a second, independent encoder: built from its source with gcc by
//! `tools/nexrv/nexrv.sh`, fed a program's exact retired-PC stream. Nothing of it is
//! linked into rvperf; it only writes trace files.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use super::{program, repository, scratch};

pub const GCC_HINT: &str =
    "the reference encoder is built with the host's gcc: run tools/install-deps.sh (as root)";

/// The NexRv binary, built once per test process (rebuilt only when its source changed).
pub fn binary() -> &'static Path {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(|| {
        let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("nexrv");
        let output = Command::new("bash")
            .arg(repository().join("tools/nexrv/nexrv.sh"))
            .arg("build")
            .arg(&out)
            .stdin(Stdio::null())
            .output()
            .expect("cannot run bash tools/nexrv/nexrv.sh");
        assert!(
            output.status.success(),
            "building the reference encoder failed ({}): {}\n{GCC_HINT}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        let binary = out.join("NexRv");
        assert!(binary.is_file(), "{} was not built", binary.display());
        binary
    })
}

/// Runs NexRv, which reports failures on stdout (and not always in its exit status).
fn run(arguments: &[&std::ffi::OsStr]) {
    let output = Command::new(binary())
        .args(arguments)
        .stdin(Stdio::null())
        .output()
        .expect("run NexRv");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && !stdout.contains("ERROR"),
        "NexRv {arguments:?} failed ({}):\n{stdout}",
        output.status
    );
}

/// A program's retired-PC stream in the reference encoder's input form (each PC with its
/// instruction class, from the program's objdump listing, as `NexRv -conv` makes it).
pub struct PcSequence {
    path: PathBuf,
}

impl PcSequence {
    pub fn new(name: &str, pcs: &[u64]) -> Self {
        // One directory per sequence: tests of one process run in parallel, and two may
        // encode the same program.
        static SEQUENCES: AtomicUsize = AtomicUsize::new(0);
        let sequence = SEQUENCES.fetch_add(1, Ordering::Relaxed);
        let directory = scratch().join(format!("nexrv-{name}-{}-{sequence}", std::process::id()));
        std::fs::create_dir_all(&directory).expect("create scratch directory");
        let pc_file = directory.join("pcs.txt");
        let text: String = pcs.iter().map(|pc| format!("{pc:#x}\n")).collect();
        std::fs::write(&pc_file, text).expect("write PC list");
        let objdump = program(name).with_extension("objdump");
        let info = directory.join("pcinfo.txt");
        let path = directory.join("pcseq.txt");
        run(&[
            "-conv".as_ref(),
            "-objd".as_ref(),
            objdump.as_os_str(),
            "-pcinfo".as_ref(),
            info.as_os_str(),
        ]);
        run(&[
            "-conv".as_ref(),
            "-pcinfo".as_ref(),
            info.as_os_str(),
            "-pconly".as_ref(),
            pc_file.as_os_str(),
            "-pcseq".as_ref(),
            path.as_os_str(),
        ]);
        Self { path }
    }

    /// The trace `NexRv -enco` makes with `options` (e.g. `["-nobhm"]`, `["-cs", "32"]`).
    pub fn encode(&self, options: &[&str]) -> Vec<u8> {
        let trace = self.path.with_file_name(format!("{}.nt", options.join("")));
        let mut arguments: Vec<&std::ffi::OsStr> = vec![
            "-enco".as_ref(),
            self.path.as_os_str(),
            "-nex".as_ref(),
            trace.as_os_str(),
        ];
        arguments.extend(options.iter().map(std::ffi::OsStr::new));
        arguments.push("-none".as_ref());
        run(&arguments);
        let bytes = std::fs::read(&trace).expect("read the reference encoder's trace");
        let _ = std::fs::remove_file(&trace);
        bytes
    }
}

impl Drop for PcSequence {
    fn drop(&mut self) {
        if let Some(directory) = self.path.parent() {
            let _ = std::fs::remove_dir_all(directory);
        }
    }
}
