//! ObjectSymbolizer against real gcc/g++ output (x86-64 and riscv64),
//! checked against binutils' addr2line and llvm-dwarfdump.

mod common;

use std::path::Path;
use std::process::Command;

use common::{
    binutils_frames, compile, covering_row, line_of, llvm_line_rows, readelf_load_segments, run,
    INLINE_C, KLASS_CPP,
};
use symbolize::{Frame, ObjectSymbolizer};

fn open(path: &Path) -> ObjectSymbolizer {
    let bytes = std::fs::read(path).expect("read compiled program");
    ObjectSymbolizer::new(&path.display().to_string(), bytes).expect("parse compiled program")
}

/// Every byte address of the named functions.
fn addresses_of(object: &ObjectSymbolizer, nm: &str, elf: &Path, functions: &[&str]) -> Vec<u64> {
    let mut addresses = Vec::new();
    for function in functions {
        let start = symbol_address(nm, elf, function);
        let symbol = object.function(start).expect("function at its own start");
        assert_eq!(symbol.linkage_name, *function);
        assert_eq!(symbol.address, start);
        addresses.extend(start..start + symbol.size);
    }
    addresses
}

/// The address of symbol `name` in `nm`'s listing of `elf`.
fn symbol_address(nm: &str, elf: &Path, name: &str) -> u64 {
    run(Command::new(nm).arg(elf))
        .lines()
        .find_map(|line| {
            let mut fields = line.split_whitespace();
            let address = fields.next()?;
            let _kind = fields.next()?;
            (fields.next()? == name).then(|| u64::from_str_radix(address, 16).ok())?
        })
        .unwrap_or_else(|| panic!("{name} not in the symbol table"))
}

/// Our frames equal binutils' at every address: function names, files,
/// lines, and the innermost discriminator.
fn assert_matches_binutils(
    object: &ObjectSymbolizer,
    addr2line: &str,
    elf: &Path,
    addresses: &[u64],
    demangled: bool,
    expect_discriminators: bool,
) {
    let reference = binutils_frames(addr2line, elf, addresses, demangled);
    let mut inline_stacks = 0;
    let mut discriminators = 0;
    for (address, expected) in addresses.iter().zip(reference) {
        let frames = object.frames(*address).expect("frames");
        let name = |frame: &Frame| {
            if demangled {
                frame.function.clone()
            } else {
                frame.linkage_name.clone()
            }
        };
        let found: Vec<_> = frames
            .iter()
            .map(|frame| (name(frame), frame.file.clone(), frame.line))
            .collect();
        let wanted: Vec<_> = expected
            .iter()
            .map(|frame| (frame.function.clone(), frame.file.clone(), frame.line))
            .collect();
        assert_eq!(found, wanted, "at {address:#x}");
        // Only the innermost: binutils prints the row's discriminator on
        // every frame of the stack, where the outer frames' is their call
        // site's (which gcc 12 never records: no DW_AT_GNU_discriminator).
        assert_eq!(
            frames[0].discriminator, expected[0].discriminator,
            "innermost discriminator at {address:#x}"
        );
        discriminators += usize::from(frames[0].discriminator != 0);
        inline_stacks += usize::from(frames.len() > 1);
    }
    assert!(inline_stacks > 0, "no address had inlined frames");
    assert!(
        discriminators > 0 || !expect_discriminators,
        "no address had a discriminator"
    );
}

struct Compiled {
    _dir: tempfile::TempDir,
    elf: std::path::PathBuf,
}

fn compile_inline_c(compiler: &str, flags: &[&str]) -> Compiled {
    let dir = tempfile::tempdir().expect("tempdir");
    let elf = compile(dir.path(), compiler, "inline.c", INLINE_C, "inline", flags);
    Compiled { _dir: dir, elf }
}

fn check_inline_stack(object: &ObjectSymbolizer, addresses: &[u64]) {
    let inlined_line_range =
        line_of(INLINE_C, "int total = 0;")..line_of(INLINE_C, "return total;") + 1;
    let call_line = line_of(INLINE_C, "int result = square_sum(values, count);");
    let square_sum_line = line_of(INLINE_C, "int square_sum(const int *values, int count)");
    let compute_line = line_of(INLINE_C, "int compute(const int *values, int count)");
    let mut checked = 0;
    for address in addresses {
        let frames = object.frames(*address).expect("frames");
        let in_compute = frames
            .last()
            .is_some_and(|frame| frame.function.as_deref() == Some("compute"));
        if frames.len() != 2 || !in_compute {
            continue;
        }
        assert_eq!(frames[0].function.as_deref(), Some("square_sum"));
        assert_eq!(frames[1].function.as_deref(), Some("compute"));
        assert_eq!(frames[1].linkage_name.as_deref(), Some("compute"));
        assert!(
            frames[0]
                .line
                .is_some_and(|line| inlined_line_range.contains(&line)),
            "{frames:?}"
        );
        assert_eq!(frames[1].line, Some(call_line));
        assert_eq!(frames[0].function_start_line, Some(square_sum_line));
        assert_eq!(frames[1].function_start_line, Some(compute_line));
        assert!(frames[0]
            .file
            .as_deref()
            .is_some_and(|file| file.ends_with("inline.c")));
        checked += 1;
    }
    assert!(checked > 0, "square_sum was not inlined into compute");
}

#[test]
fn x86_64_inline_stacks_match_binutils() {
    let compiled = compile_inline_c("cc", &["-O2", "-g"]);
    let object = open(&compiled.elf);
    assert!(object.has_debug_info());
    assert!(object.build_id().is_some_and(|id| !id.is_empty()));
    let addresses = addresses_of(
        &object,
        "nm",
        &compiled.elf,
        &["compute", "count_nonzero", "bump", "main"],
    );
    assert_matches_binutils(&object, "addr2line", &compiled.elf, &addresses, false, true);
    check_inline_stack(&object, &addresses);
}

#[test]
fn riscv64_inline_stacks_match_binutils_and_skip_mapping_symbols() {
    let compiled = compile_inline_c("riscv64-linux-gnu-gcc", &["-O2", "-g"]);
    let object = open(&compiled.elf);
    let addresses = addresses_of(
        &object,
        "riscv64-linux-gnu-nm",
        &compiled.elf,
        &["compute", "count_nonzero", "bump", "main"],
    );
    assert_matches_binutils(
        &object,
        "riscv64-linux-gnu-addr2line",
        &compiled.elf,
        &addresses,
        false,
        true,
    );
    check_inline_stack(&object, &addresses);

    // The file has mapping symbols ($x, $xrv64i2p1_m2p0...) at function
    // starts and elsewhere; none may become a function name.
    let symbols = run(Command::new("riscv64-linux-gnu-readelf")
        .arg("-sW")
        .arg(&compiled.elf));
    let mapping_addresses: Vec<u64> = symbols
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let name = fields.get(7)?;
            name.starts_with("$x")
                .then(|| u64::from_str_radix(fields[1], 16).ok())?
        })
        .collect();
    assert!(
        !mapping_addresses.is_empty(),
        "riscv64 gcc emits $x symbols"
    );
    let stripped = strip_debug(&compiled.elf, "riscv64-linux-gnu-strip");
    let without_dwarf = open(&stripped);
    for address in mapping_addresses
        .iter()
        .flat_map(|address| *address..address + 8)
    {
        for object in [&object, &without_dwarf] {
            for frame in object.frames(address).expect("frames") {
                let name = frame.function.unwrap_or_default();
                assert!(!name.starts_with('$'), "{name} at {address:#x}");
            }
            if let Some(function) = object.function(address) {
                assert!(!function.linkage_name.starts_with('$'));
            }
        }
    }
}

#[test]
fn cpp_names_are_demangled_and_start_at_the_definition() {
    let dir = tempfile::tempdir().expect("tempdir");
    let elf = compile(
        dir.path(),
        "c++",
        "klass.cpp",
        KLASS_CPP,
        "klass",
        &["-O2", "-g"],
    );
    let object = open(&elf);
    // Not main: binutils 2.40 names the extern "C" atoi inlined into a C++
    // main after its caller ("main" at stdlib.h:364), where the DWARF says
    // atoi.
    let addresses = addresses_of(&object, "nm", &elf, &["_ZN2ns5Klass6methodEi"]);
    assert_matches_binutils(&object, "addr2line", &elf, &addresses, true, false);

    let definition = line_of(KLASS_CPP, "int Klass::method(int value)");
    let scale_definition = line_of(KLASS_CPP, "int Klass::scale(int value) const");
    let mut inlined = 0;
    for address in &addresses {
        let frames = object.frames(*address).expect("frames");
        let outermost = frames.last().expect("a frame");
        if outermost.linkage_name.as_deref() != Some("_ZN2ns5Klass6methodEi") {
            continue;
        }
        assert_eq!(
            outermost.function.as_deref(),
            Some("ns::Klass::method(int)")
        );
        assert_eq!(outermost.function_start_line, Some(definition));
        if frames.len() == 2 {
            assert_eq!(
                frames[0].function.as_deref(),
                Some("ns::Klass::scale(int) const")
            );
            assert_eq!(
                frames[0].linkage_name.as_deref(),
                Some("_ZNK2ns5Klass5scaleEi")
            );
            assert_eq!(frames[0].function_start_line, Some(scale_definition));
            inlined += 1;
        }
    }
    assert!(inlined > 0, "scale was not inlined into method");
    let symbol = object.function(addresses[0]).expect("method symbol");
    assert_eq!(symbol.name, "ns::Klass::method(int)");
}

fn strip_debug(elf: &Path, strip: &str) -> std::path::PathBuf {
    let stripped = elf.with_extension("stripped");
    run(Command::new(strip)
        .arg("-g")
        .arg("-o")
        .arg(&stripped)
        .arg(elf));
    stripped
}

#[test]
fn stripped_files_give_function_names_without_lines() {
    let compiled = compile_inline_c("cc", &["-O2", "-g"]);
    let stripped = strip_debug(&compiled.elf, "strip");
    let object = open(&stripped);
    assert!(!object.has_debug_info());
    let with_dwarf = open(&compiled.elf);
    let addresses = addresses_of(&object, "nm", &stripped, &["compute", "count_nonzero"]);
    for address in addresses {
        let frames = object.frames(address).expect("frames");
        let expected = with_dwarf.frames(address).expect("frames");
        assert_eq!(frames.len(), 1);
        assert_eq!(frames[0].function, expected.last().unwrap().function);
        assert_eq!(frames[0].line, None);
        assert_eq!(frames[0].file, None);
        assert_eq!(frames[0].function_start_line, None);
    }
    // Far outside any function.
    assert!(object.frames(0xdead_0000).expect("frames").is_empty());
}

#[test]
fn discriminators_match_the_line_table() {
    for (compiler, nm) in [
        ("cc", "nm"),
        ("riscv64-linux-gnu-gcc", "riscv64-linux-gnu-nm"),
    ] {
        let compiled = compile_inline_c(compiler, &["-O2", "-g"]);
        let object = open(&compiled.elf);
        let loop_line = line_of(INLINE_C, "if (a[i]) bump(&x); else y++;");
        let rows = llvm_line_rows(&compiled.elf);
        let addresses = addresses_of(&object, nm, &compiled.elf, &["count_nonzero"]);
        let mut nonzero = 0;
        for address in addresses {
            let frames = object.frames(address).expect("frames");
            let row = covering_row(&rows, address).expect("a row covers every code address");
            assert_eq!(frames[0].line, Some(row.line), "{compiler} at {address:#x}");
            assert_eq!(
                frames[0].discriminator, row.discriminator,
                "{compiler} at {address:#x}"
            );
            if frames[0].discriminator != 0 {
                assert_eq!(frames[0].line, Some(loop_line));
                nonzero += 1;
            }
        }
        assert!(nonzero > 0, "{compiler}: no discriminator in the loop");
    }
}

#[test]
fn function_ranges_cover_every_part_of_a_function() {
    let compiled = compile_inline_c("cc", &["-O2", "-g"]);
    let object = open(&compiled.elf);
    let hot = symbol_address("nm", &compiled.elf, "checked");
    let cold = symbol_address("nm", &compiled.elf, "checked.cold");
    let hot_symbol = object.function(hot).expect("checked");
    let cold_symbol = object.function(cold).expect("checked.cold");
    let mut expected = vec![hot..hot + hot_symbol.size, cold..cold + cold_symbol.size];
    expected.sort_by_key(|range| range.start);
    for address in [hot, hot + hot_symbol.size - 1, cold] {
        let mut ranges = object.function_ranges(address).expect("function ranges");
        ranges.sort_by_key(|range| range.start);
        assert_eq!(ranges, expected, "at {address:#x}");
    }
    // A function in one piece; inlined code belongs to the function it is in.
    let compute = symbol_address("nm", &compiled.elf, "compute");
    let size = object.function(compute).expect("compute").size;
    let ranges = object
        .function_ranges(compute + 1)
        .expect("function ranges");
    assert_eq!(ranges.len(), 1, "{ranges:?}");
    assert_eq!(ranges[0], compute..compute + size);
    assert!(object
        .function_ranges(0xdead_0000)
        .expect("function ranges")
        .is_empty());
}

#[test]
fn compressed_debug_sections_give_the_same_frames() {
    let compiled = compile_inline_c("cc", &["-O2", "-g"]);
    let compressed = compiled.elf.with_extension("zlib");
    run(Command::new("objcopy")
        .arg("--compress-debug-sections=zlib")
        .arg(&compiled.elf)
        .arg(&compressed));
    let sections = run(Command::new("readelf").arg("-SW").arg(&compressed));
    assert!(
        sections
            .lines()
            .any(|line| line.contains(".debug_info") && line.contains(" C ")),
        "objcopy did not compress .debug_info"
    );
    let plain = open(&compiled.elf);
    let object = open(&compressed);
    assert!(object.has_debug_info());
    let addresses = addresses_of(
        &object,
        "nm",
        &compressed,
        &["compute", "count_nonzero", "main"],
    );
    for address in addresses {
        assert_eq!(
            object.frames(address).expect("frames"),
            plain.frames(address).expect("frames")
        );
    }
}

#[test]
fn separate_debug_files_supply_the_dwarf() {
    let compiled = compile_inline_c("cc", &["-O2", "-g"]);
    let debug = compiled.elf.with_extension("debug");
    run(Command::new("objcopy")
        .arg("--only-keep-debug")
        .arg(&compiled.elf)
        .arg(&debug));
    let stripped = strip_debug(&compiled.elf, "strip");
    let full = open(&compiled.elf);
    let mut object = open(&stripped);
    assert!(!object.has_debug_info());
    object
        .attach_debug_file(&debug.display().to_string(), std::fs::read(&debug).unwrap())
        .expect("matching debug file");
    assert!(object.has_debug_info());
    for address in addresses_of(&object, "nm", &stripped, &["compute", "main"]) {
        assert_eq!(
            object.frames(address).expect("frames"),
            full.frames(address).expect("frames")
        );
    }

    // A debug file of another build is refused.
    let other = compile_inline_c("cc", &["-O1", "-g"]);
    let mut object = open(&stripped);
    let error = object
        .attach_debug_file("other", std::fs::read(&other.elf).unwrap())
        .expect_err("build ids differ");
    assert!(error.to_string().contains("build id"), "{error}");
    assert!(!object.has_debug_info());
}

#[test]
fn file_offsets_map_through_load_segments() {
    let compiled = compile_inline_c("cc", &["-O2", "-g"]);
    let object = open(&compiled.elf);
    let mut checked = 0;
    for segment in readelf_load_segments(&compiled.elf) {
        let (offset, vaddr, file_size) = (segment.offset, segment.vaddr, segment.file_size);
        if file_size == 0 {
            continue;
        }
        assert_eq!(object.vaddr_of_offset(offset), Some(vaddr));
        assert_eq!(
            object.vaddr_of_offset(offset + file_size - 1),
            Some(vaddr + file_size - 1)
        );
        checked += 1;
    }
    assert!(checked >= 2);
    assert_eq!(object.vaddr_of_offset(u64::MAX / 2), None);
}

#[test]
fn garbage_is_an_error_not_a_panic() {
    let error = ObjectSymbolizer::new("garbage", vec![0x7f, b'E', b'L', b'F', 2, 1, 1, 0])
        .expect_err("truncated ELF");
    assert!(error.to_string().starts_with("garbage: "), "{error}");
    assert!(ObjectSymbolizer::new("empty", Vec::new()).is_err());
}

#[test]
fn object_symbolizers_can_move_to_worker_threads() {
    fn assert_send<T: Send>() {}
    assert_send::<ObjectSymbolizer>();
}
