//! The Symbolizer end to end: mappings as perf records them, files found on
//! disk by path, symfs, build id and debuglink, the kernel, and problems.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::rc::Rc;

use common::{compile, readelf_load_segments, run, INLINE_C};
use symbolize::{ObjectSymbolizer, Problem, Symbolizer, SymbolizerOptions};

const PID: u32 = 4242;
/// Where the test pretends the PIE was loaded.
const BASE: u64 = 0x5555_5555_4000;

struct Program {
    dir: tempfile::TempDir,
    elf: PathBuf,
    object: ObjectSymbolizer,
}

impl Program {
    fn build() -> Program {
        let dir = tempfile::tempdir().expect("tempdir");
        let elf = compile(
            dir.path(),
            "cc",
            "inline.c",
            INLINE_C,
            "inline",
            &["-O2", "-g"],
        );
        let object = open(&elf);
        Program { dir, elf, object }
    }

    fn build_id(&self) -> Vec<u8> {
        self.object
            .build_id()
            .expect("gcc links in a build id")
            .to_vec()
    }

    /// Link-time address of `function`.
    fn address_of(&self, function: &str) -> u64 {
        let symbols = run(Command::new("nm").arg(&self.elf));
        symbols
            .lines()
            .find_map(|line| {
                let fields: Vec<&str> = line.split_whitespace().collect();
                (fields.get(2) == Some(&function))
                    .then(|| u64::from_str_radix(fields[0], 16).ok())?
            })
            .unwrap_or_else(|| panic!("{function} not found"))
    }

    /// A few addresses inside `compute`, where square_sum is inlined.
    fn compute_addresses(&self) -> Vec<u64> {
        let start = self.address_of("compute");
        let size = self.object.function(start).expect("compute").size;
        (start..start + size).collect()
    }
}

fn open(path: &Path) -> ObjectSymbolizer {
    ObjectSymbolizer::new(&path.display().to_string(), std::fs::read(path).unwrap())
        .expect("parse compiled program")
}

/// Options that look only where the test put files.
fn options() -> SymbolizerOptions {
    SymbolizerOptions {
        build_id_dirs: Vec::new(),
        debug_dirs: Vec::new(),
        ..SymbolizerOptions::default()
    }
}

/// MMAP2 records for the executable segments of `elf` loaded at `BASE`, as
/// the kernel reports them: page-aligned start and file offset.
fn map_executable(
    symbolizer: &mut Symbolizer,
    pid: u32,
    elf: &Path,
    recorded: &str,
    build_id: Option<&[u8]>,
) {
    let mut mapped = 0;
    for segment in readelf_load_segments(elf) {
        let (offset, vaddr, file_size) = (segment.offset, segment.vaddr, segment.file_size);
        if !segment.executable {
            continue;
        }
        let page_offset = vaddr & 0xfff;
        symbolizer.add_mapping(
            pid,
            BASE + vaddr - page_offset,
            file_size + page_offset,
            offset - page_offset,
            recorded,
            build_id,
        );
        mapped += 1;
    }
    assert_eq!(mapped, 1, "one executable segment");
}

#[test]
fn samples_resolve_as_the_file_does_and_repeat_from_the_cache() {
    let program = Program::build();
    let recorded = program.elf.display().to_string();
    let mut symbolizer = Symbolizer::new(options());
    map_executable(&mut symbolizer, PID, &program.elf, &recorded, None);
    for vaddr in program.compute_addresses() {
        let first = symbolizer.symbolize(PID, BASE + vaddr);
        assert_eq!(&*first.dso, "inline");
        assert_eq!(first.dso_path.as_deref(), Some(program.elf.as_path()));
        assert_eq!(first.vaddr, Some(vaddr));
        assert_eq!(*first.frames, *program.object.frames(vaddr).unwrap());
        assert!(first.frames.last().unwrap().line.is_some());
        let again = symbolizer.symbolize(PID, BASE + vaddr);
        assert!(
            Rc::ptr_eq(&first.frames, &again.frames),
            "second lookup is cached"
        );
    }
    assert_eq!(symbolizer.problems(), Vec::new());
}

#[test]
fn children_inherit_mappings_until_exec() {
    let program = Program::build();
    let recorded = program.elf.display().to_string();
    let mut symbolizer = Symbolizer::new(options());
    map_executable(&mut symbolizer, PID, &program.elf, &recorded, None);
    let address = BASE + program.address_of("compute");
    symbolizer.fork(PID, PID + 1);
    let child = symbolizer.symbolize(PID + 1, address);
    assert_eq!(
        child.frames.last().unwrap().function.as_deref(),
        Some("compute")
    );
    symbolizer.exec(PID + 1);
    for _ in 0..3 {
        let after_exec = symbolizer.symbolize(PID + 1, address);
        assert_eq!(&*after_exec.dso, "[unknown]");
        assert!(after_exec.frames.is_empty());
    }
    // The parent keeps its mappings.
    assert!(!symbolizer.symbolize(PID, address).frames.is_empty());
    assert_eq!(
        symbolizer.problems(),
        vec![Problem::OutsideMappings { samples: 3 }]
    );
}

/// Records whose numbers pass the end of the 64-bit space are ignored and
/// counted, never wrapped: the addresses they would have covered are outside
/// every mapping.
#[test]
fn mappings_past_the_end_of_the_offsets_are_ignored_with_a_reason() {
    let mut symbolizer = Symbolizer::new(options());
    symbolizer.add_mapping(PID, 0x1000, 0x2000, u64::MAX - 0x1000, "/bin/x", None);
    // Its end passes the top of the address space: it ends there.
    symbolizer.add_mapping(PID, u64::MAX - 0x1000, 0x2000, 0, "//anon", None);
    symbolizer.add_mapping(PID, 0x2000, 0x1000, 0, "//anon", None);
    assert!(symbolizer.locate(PID, 0x1800).is_none());
    assert!(symbolizer.locate(PID, 0x2800).is_some());
    assert!(
        symbolizer.locate(PID, u64::MAX - 1).is_none(),
        "kernel half"
    );
    assert_eq!(&*symbolizer.symbolize(PID, 0x1800).dso, "[unknown]");
    assert_eq!(
        symbolizer.problems(),
        vec![
            Problem::OutsideMappings { samples: 1 },
            Problem::InvalidMappings { mappings: 1 }
        ]
    );
}

#[test]
fn build_id_mismatch_is_reported_once_with_a_count() {
    let program = Program::build();
    let recorded = program.elf.display().to_string();
    let expected = vec![0xde, 0xad, 0xbe, 0xef, 0x01, 0x02, 0x03, 0x04];
    let address = BASE + program.address_of("compute");

    // Expected from the perf.data header.
    let mut symbolizer = Symbolizer::new(options());
    symbolizer.add_build_ids([(recorded.clone(), expected.clone())]);
    map_executable(&mut symbolizer, PID, &program.elf, &recorded, None);
    for _ in 0..5 {
        let result = symbolizer.symbolize(PID, address);
        assert_eq!(&*result.dso, "inline");
        assert!(result.frames.is_empty(), "a mismatching file is not used");
    }
    let mismatch = Problem::BuildIdMismatch {
        file: program.elf.clone(),
        expected: expected.clone(),
        found: program.build_id(),
        samples: 5,
    };
    assert_eq!(symbolizer.problems(), vec![mismatch.clone()]);
    assert!(
        mismatch.to_string().contains("deadbeef01020304"),
        "{mismatch}"
    );

    // Expected from the MMAP2 record.
    let mut symbolizer = Symbolizer::new(options());
    map_executable(
        &mut symbolizer,
        PID,
        &program.elf,
        &recorded,
        Some(&expected),
    );
    for _ in 0..5 {
        symbolizer.symbolize(PID, address);
    }
    assert_eq!(symbolizer.problems(), vec![mismatch]);

    // The right build id is no problem.
    let mut symbolizer = Symbolizer::new(options());
    let build_id = program.build_id();
    map_executable(
        &mut symbolizer,
        PID,
        &program.elf,
        &recorded,
        Some(&build_id),
    );
    assert!(!symbolizer.symbolize(PID, address).frames.is_empty());
    assert_eq!(symbolizer.problems(), Vec::new());
}

#[test]
fn stripped_and_missing_files_are_problems_not_errors() {
    let program = Program::build();
    let stripped = program.dir.path().join("stripped");
    run(Command::new("strip")
        .arg("-g")
        .arg("-o")
        .arg(&stripped)
        .arg(&program.elf));
    let mut symbolizer = Symbolizer::new(options());
    map_executable(
        &mut symbolizer,
        PID,
        &stripped,
        &stripped.display().to_string(),
        None,
    );
    map_executable(
        &mut symbolizer,
        PID + 1,
        &program.elf,
        "/nonexistent/inline",
        None,
    );
    let address = BASE + program.address_of("compute");
    for _ in 0..4 {
        let result = symbolizer.symbolize(PID, address);
        assert_eq!(result.frames.len(), 1);
        assert_eq!(result.frames[0].function.as_deref(), Some("compute"));
        assert_eq!(result.frames[0].line, None);
    }
    for _ in 0..2 {
        let missing = symbolizer.symbolize(PID + 1, address);
        assert_eq!(&*missing.dso, "inline");
        assert!(missing.frames.is_empty());
    }
    assert_eq!(
        symbolizer.problems(),
        vec![
            Problem::MissingDebugInfo {
                file: stripped,
                samples: 4
            },
            Problem::FileNotFound {
                file: "/nonexistent/inline".into(),
                samples: 2
            },
        ]
    );
}

#[test]
fn files_are_found_under_symfs_and_in_the_build_id_cache() {
    let program = Program::build();
    let address = BASE + program.address_of("compute");
    let expected = program.object.frames(address - BASE).unwrap();

    let sysroot = program.dir.path().join("sysroot");
    std::fs::create_dir_all(sysroot.join("usr/bin")).unwrap();
    std::fs::copy(&program.elf, sysroot.join("usr/bin/prog")).unwrap();
    let mut symbolizer = Symbolizer::new(SymbolizerOptions {
        symfs: Some(sysroot.clone()),
        ..options()
    });
    map_executable(&mut symbolizer, PID, &program.elf, "/usr/bin/prog", None);
    let result = symbolizer.symbolize(PID, address);
    assert_eq!(&*result.dso, "prog");
    assert_eq!(
        result.dso_path.as_deref(),
        Some(sysroot.join("usr/bin/prog").as_path())
    );
    assert_eq!(*result.frames, *expected);

    let cache = program.dir.path().join("debug-cache");
    let hex: String = program
        .build_id()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    let entry = cache.join(".build-id").join(&hex[..2]).join(&hex[2..]);
    std::fs::create_dir_all(&entry).unwrap();
    std::fs::copy(&program.elf, entry.join("elf")).unwrap();
    let mut symbolizer = Symbolizer::new(SymbolizerOptions {
        build_id_dirs: vec![cache],
        ..options()
    });
    let build_id = program.build_id();
    map_executable(
        &mut symbolizer,
        PID,
        &program.elf,
        "/gone/prog",
        Some(&build_id),
    );
    let result = symbolizer.symbolize(PID, address);
    assert_eq!(
        result.dso_path.as_deref(),
        Some(entry.join("elf").as_path())
    );
    assert_eq!(*result.frames, *expected);
    assert_eq!(symbolizer.problems(), Vec::new());
}

#[test]
fn separate_debug_files_are_found_by_debuglink_and_build_id() {
    let program = Program::build();
    let directory = program.dir.path();
    let address = BASE + program.address_of("compute");
    let expected = program.object.frames(address - BASE).unwrap();
    run(Command::new("objcopy").current_dir(directory).args([
        "--only-keep-debug",
        "inline",
        "inline.debug",
    ]));
    run(Command::new("objcopy").current_dir(directory).args([
        "--strip-debug",
        "--add-gnu-debuglink=inline.debug",
        "inline",
        "linked",
    ]));
    run(Command::new("objcopy").current_dir(directory).args([
        "--strip-debug",
        "inline",
        "unlinked",
    ]));

    // By .gnu_debuglink, next to the file.
    let mut symbolizer = Symbolizer::new(options());
    let linked = directory.join("linked");
    map_executable(
        &mut symbolizer,
        PID,
        &linked,
        &linked.display().to_string(),
        None,
    );
    assert_eq!(*symbolizer.symbolize(PID, address).frames, *expected);
    assert_eq!(symbolizer.problems(), Vec::new());

    // By build id, under a debug directory.
    let debug_root = directory.join("usr-lib-debug");
    let hex: String = program
        .build_id()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    let by_id = debug_root.join(".build-id").join(&hex[..2]);
    std::fs::create_dir_all(&by_id).unwrap();
    std::fs::rename(
        directory.join("inline.debug"),
        by_id.join(format!("{}.debug", &hex[2..])),
    )
    .unwrap();
    let mut symbolizer = Symbolizer::new(SymbolizerOptions {
        debug_dirs: vec![debug_root],
        ..options()
    });
    let unlinked = directory.join("unlinked");
    map_executable(
        &mut symbolizer,
        PID,
        &unlinked,
        &unlinked.display().to_string(),
        None,
    );
    assert_eq!(*symbolizer.symbolize(PID, address).frames, *expected);
    assert_eq!(symbolizer.problems(), Vec::new());
}

/// A symbolizer whose kernel symbols are `text`, written as `dir/kallsyms`.
fn with_kallsyms(dir: &Path, text: &str) -> Symbolizer {
    let kallsyms = dir.join("kallsyms");
    std::fs::write(&kallsyms, text).unwrap();
    Symbolizer::new(SymbolizerOptions {
        kallsyms: Some(kallsyms),
        ..options()
    })
}

/// Kernel symbols read on another thread give the same answers; kernel and unmapped
/// addresses looked up later (symbolize_mapped declines them) are counted by their
/// occurrences.
#[test]
fn preloaded_kallsyms_and_deferred_kernel_addresses() {
    let dir = tempfile::tempdir().unwrap();
    let mut symbolizer = with_kallsyms(
        dir.path(),
        "ffffffff80000000 T _text\n\
         ffffffff80001000 T memcpy\n\
         ffffffff80001000 T __pi_memcpy\n\
         ffffffff80001400 T do_page_fault\n",
    );
    symbolizer.preload_kernel();
    assert!(symbolizer
        .symbolize_mapped(PID, 0xffff_ffff_8000_1010)
        .is_none());
    assert!(symbolizer.symbolize_mapped(PID, 0x1234).is_none());
    let kernel = symbolizer.symbolize_unmapped(0xffff_ffff_8000_1010, 5);
    assert_eq!(&*kernel.dso, "[kernel.kallsyms]");
    assert_eq!(kernel.frames[0].function.as_deref(), Some("__pi_memcpy"));
    let unknown = symbolizer.symbolize_unmapped(0x1234, 3);
    assert_eq!(&*unknown.dso, "[unknown]");
    assert_eq!(
        symbolizer.problems(),
        vec![Problem::OutsideMappings { samples: 3 }]
    );
}

/// Without a kallsyms file, kernel functions named one by one by the running kernel
/// (`rvperf daemon`) are what kernel addresses are looked up in: each by its extent, a
/// module's under the module's name, an address outside every one unnamed.
#[test]
fn kernel_functions_added_one_by_one_name_kernel_addresses() {
    let mut symbolizer = Symbolizer::new(SymbolizerOptions::default());
    assert!(!symbolizer.knows_kernel_function(0xffff_ffff_8000_1010));
    symbolizer.add_kernel_function(0xffff_ffff_8000_1400, 0x80, "do_page_fault", None);
    symbolizer.add_kernel_function(0xffff_ffff_8000_1000, 0x100, "handle_exception", None);
    symbolizer.add_kernel_function(0xffff_ffff_0100_0000, 0x40, "nft_helper", Some("nf_tables"));
    // Named again (another address of it): the first stays.
    symbolizer.add_kernel_function(0xffff_ffff_8000_1000, 0x100, "other_alias", None);
    assert!(symbolizer.knows_kernel_function(0xffff_ffff_8000_10ff));
    assert!(!symbolizer.knows_kernel_function(0xffff_ffff_8000_1100));
    let kernel = symbolizer.symbolize(PID, 0xffff_ffff_8000_1010);
    assert_eq!(&*kernel.dso, "[kernel.kallsyms]");
    assert_eq!(
        kernel.frames[0].function.as_deref(),
        Some("handle_exception")
    );
    assert_eq!(kernel.function_start, Some(0xffff_ffff_8000_1000));
    let later = symbolizer.symbolize(PID, 0xffff_ffff_8000_147f);
    assert_eq!(later.frames[0].function.as_deref(), Some("do_page_fault"));
    let module = symbolizer.symbolize(PID, 0xffff_ffff_0100_0010);
    assert_eq!(&*module.dso, "[nf_tables]");
    assert_eq!(module.frames[0].function.as_deref(), Some("nft_helper"));
    // Between two functions, past the first's extent: no function.
    let between = symbolizer.symbolize(PID, 0xffff_ffff_8000_1200);
    assert!(between.frames.is_empty(), "{between:?}");
    assert_eq!(&*between.dso, "[kernel.kallsyms]");
}

#[test]
fn kernel_addresses_use_kallsyms() {
    let dir = tempfile::tempdir().unwrap();
    let mut symbolizer = with_kallsyms(
        dir.path(),
        "ffffffff80000000 T _text\n\
         ffffffff80001000 t handle_exception\n\
         ffffffff80001400 T do_page_fault\n\
         ffffffff80002000 D some_data\n\
         ffffffff01000000 t nft_helper\t[nf_tables]\n",
    );
    let result = symbolizer.symbolize(PID, 0xffff_ffff_8000_1234);
    assert_eq!(&*result.dso, "[kernel.kallsyms]");
    assert_eq!(
        result.frames[0].function.as_deref(),
        Some("handle_exception")
    );
    assert_eq!(result.vaddr, Some(0xffff_ffff_8000_1234));
    let module = symbolizer.symbolize(PID, 0xffff_ffff_0100_0010);
    assert_eq!(&*module.dso, "[nf_tables]");
    assert_eq!(module.frames[0].function.as_deref(), Some("nft_helper"));
    assert_eq!(symbolizer.problems(), Vec::new());

    let mut without = Symbolizer::new(options());
    for _ in 0..2 {
        let result = without.symbolize(PID, 0xffff_ffff_8000_1234);
        assert_eq!(&*result.dso, "[kernel.kallsyms]");
        assert!(result.frames.is_empty());
    }
    assert_eq!(
        without.problems(),
        vec![Problem::NoKernelSymbols { samples: 2 }]
    );

    // Read when first needed, or on another thread from the start: the same problems.
    for preload in [false, true] {
        let mut unreadable = Symbolizer::new(SymbolizerOptions {
            kallsyms: Some(dir.path().join("no-such-kallsyms")),
            ..options()
        });
        if preload {
            unreadable.preload_kernel();
        }
        unreadable.symbolize(PID, 0xffff_ffff_8000_1234);
        let problems = unreadable.problems();
        assert!(
            matches!(
                &problems[..],
                [
                    Problem::Unreadable { samples: 1, .. },
                    Problem::NoKernelSymbols { samples: 1 }
                ]
            ),
            "{problems:?}"
        );
    }
}

#[test]
fn vmlinux_is_relocated_by_the_kernel_mmap_record() {
    // The test program stands in for vmlinux: it has a `_text` symbol.
    let program = Program::build();
    let link_text = program.address_of("_text");
    let runtime_text = 0xffff_ffff_8120_0000 + (link_text & 0xfff);
    let offset = runtime_text - link_text;
    let mut symbolizer = Symbolizer::new(SymbolizerOptions {
        vmlinux: Some(program.elf.clone()),
        ..options()
    });
    symbolizer.add_mapping(
        u32::MAX,
        runtime_text,
        0x100_0000,
        runtime_text,
        "[kernel.kallsyms]_text",
        None,
    );
    for vaddr in program.compute_addresses() {
        let result = symbolizer.symbolize(PID, vaddr + offset);
        assert_eq!(&*result.dso, "[kernel.kallsyms]");
        assert_eq!(result.vaddr, Some(vaddr));
        assert_eq!(*result.frames, *program.object.frames(vaddr).unwrap());
    }
    assert_eq!(symbolizer.problems(), Vec::new());

    // A vmlinux of another build than the recorded kernel is not used.
    let mut symbolizer = Symbolizer::new(SymbolizerOptions {
        vmlinux: Some(program.elf.clone()),
        ..options()
    });
    symbolizer.add_build_ids([("[kernel.kallsyms]".to_owned(), vec![1, 2, 3, 4])]);
    let result = symbolizer.symbolize(PID, link_text + offset);
    assert!(result.frames.is_empty());
    assert_eq!(
        symbolizer.problems(),
        vec![
            Problem::BuildIdMismatch {
                file: program.elf.clone(),
                expected: vec![1, 2, 3, 4],
                found: program.build_id(),
                samples: 1
            },
            Problem::NoKernelSymbols { samples: 1 },
        ]
    );
}

#[test]
fn without_inlines_only_the_outermost_function_is_given() {
    let program = Program::build();
    let recorded = program.elf.display().to_string();
    let mut symbolizer = Symbolizer::new(SymbolizerOptions {
        inlines: false,
        ..options()
    });
    map_executable(&mut symbolizer, PID, &program.elf, &recorded, None);
    for vaddr in program.compute_addresses() {
        let result = symbolizer.symbolize(PID, BASE + vaddr);
        assert_eq!(result.frames.len(), 1);
        assert_eq!(result.frames[0].function.as_deref(), Some("compute"));
    }
}

/// Addresses of one kernel function share its frame: the name is demangled once per
/// function, not once per address (the daemon meets thousands of kernel addresses an
/// interval, mostly in functions it has named before).
#[test]
fn a_kernel_functions_addresses_share_one_frame() {
    let dir = tempfile::tempdir().unwrap();
    let mut symbolizer = with_kallsyms(
        dir.path(),
        "ffffffff80000000 T _text\n\
         ffffffff80001000 T _RNvCs1234_6kernel4init\n\
         ffffffff80001400 T do_page_fault\n",
    );
    let first = symbolizer.symbolize_unmapped(0xffff_ffff_8000_1010, 1);
    let second = symbolizer.symbolize_unmapped(0xffff_ffff_8000_1020, 1);
    assert_eq!(first.frames[0].function.as_deref(), Some("kernel::init"));
    assert_eq!(first.function_start, Some(0xffff_ffff_8000_1000));
    assert!(std::rc::Rc::ptr_eq(&first.frames, &second.frames));
    let other = symbolizer.symbolize_unmapped(0xffff_ffff_8000_1410, 1);
    assert_eq!(other.frames[0].function.as_deref(), Some("do_page_fault"));
    assert!(!std::rc::Rc::ptr_eq(&first.frames, &other.frames));
}
