//! Compares the decoder with GNU objdump (binutils 2.40, `-M no-aliases`) on the checked-in
//! disassemblies in `tests/data` (see `tests/data/README.md` for how they were made).
//!
//! With `no-aliases` objdump prints the real instruction names (`c.jr ra`, not `ret`), so
//! mnemonics and operands can be compared exactly. Control flow is checked independently of
//! this crate's `Display`, from objdump's own operands: the register fields of jumps and the
//! absolute targets objdump computes for branches and direct jumps.

use riscv_insn::{
    decode, integer_register_name, ControlFlow, DecodeOptions, Instruction, InstructionLength, Xlen,
};

struct ObjdumpLine<'a> {
    line_number: usize,
    address: u64,
    encoding: &'a str,
    mnemonic: &'a str,
    operands: &'a str,
}

/// Lines look like `   1043c:\t33818413          \taddi\ts0,gp,824 # 77ef8 <lock>`.
fn parse_line(line_number: usize, line: &str) -> Option<ObjdumpLine<'_>> {
    let mut columns = line.split('\t');
    let address = columns.next()?.trim().strip_suffix(':')?;
    let address = u64::from_str_radix(address, 16).ok()?;
    let encoding = columns.next()?.trim();
    let mnemonic = columns.next()?.trim();
    let operands = columns.next().unwrap_or("");
    let operands = operands.split('#').next().unwrap_or("").trim();
    Some(ObjdumpLine {
        line_number,
        address,
        encoding,
        mnemonic,
        operands,
    })
}

fn register_number(name: &str) -> u8 {
    (0..32u8)
        .find(|&register| integer_register_name(register) == name)
        .unwrap_or_else(|| panic!("not an integer register name: {name:?}"))
}

/// `-8(a5)` -> (-8, 15)
fn offset_and_base(operand: &str) -> (i32, u8) {
    let (offset, base) = operand.split_once('(').expect("offset(base) operand");
    (
        offset.parse().expect("decimal offset"),
        register_number(base.trim_end_matches(')')),
    )
}

/// `334 <forward>` -> 0x334
fn target_address(operand: &str) -> u64 {
    let hex = operand.split_whitespace().next().expect("target address");
    u64::from_str_radix(hex, 16).expect("hex target address")
}

/// What objdump's text says the control flow must be; `None` where its text alone cannot tell
/// (never the case for the mnemonics objdump prints without aliases).
fn expected_control_flow(line: &ObjdumpLine<'_>, xlen: Xlen) -> ExpectedFlow {
    let operands: Vec<&str> = line.operands.split(',').collect();
    let offset_to = |target: u64| xlen.truncate(target.wrapping_sub(line.address));
    match line.mnemonic {
        "beq" | "bne" | "blt" | "bge" | "bltu" | "bgeu" | "c.beqz" | "c.bnez" => {
            ExpectedFlow::Branch {
                relative_target: offset_to(target_address(operands[operands.len() - 1])),
            }
        }
        "jal" => ExpectedFlow::Jump {
            rd: register_number(operands[0]),
            relative_target: offset_to(target_address(operands[1])),
        },
        "c.j" => ExpectedFlow::Jump {
            rd: 0,
            relative_target: offset_to(target_address(operands[0])),
        },
        "c.jal" => ExpectedFlow::Jump {
            rd: 1,
            relative_target: offset_to(target_address(operands[0])),
        },
        "jalr" => {
            let (offset, rs1) = offset_and_base(operands[1]);
            ExpectedFlow::Exact(ControlFlow::JumpRegister {
                rd: register_number(operands[0]),
                rs1,
                offset,
            })
        }
        "c.jr" => ExpectedFlow::Exact(ControlFlow::JumpRegister {
            rd: 0,
            rs1: register_number(operands[0]),
            offset: 0,
        }),
        "c.jalr" => ExpectedFlow::Exact(ControlFlow::JumpRegister {
            rd: 1,
            rs1: register_number(operands[0]),
            offset: 0,
        }),
        "ecall" | "ebreak" | "c.ebreak" => ExpectedFlow::Exact(ControlFlow::EnvironmentTrap),
        "mret" | "sret" | "uret" | "dret" | "mnret" => ExpectedFlow::Exact(ControlFlow::TrapReturn),
        _ => ExpectedFlow::Exact(ControlFlow::Sequential),
    }
}

enum ExpectedFlow {
    Exact(ControlFlow),
    /// Offsets are compared through the target objdump computed, truncated like `xlen`.
    Branch {
        relative_target: u64,
    },
    Jump {
        rd: u8,
        relative_target: u64,
    },
}

fn check_control_flow(
    line: &ObjdumpLine<'_>,
    instruction: &Instruction,
    xlen: Xlen,
) -> Result<(), String> {
    let pc_relative = |offset: i32| xlen.truncate(offset as i64 as u64);
    let consistent = match (expected_control_flow(line, xlen), instruction.control_flow) {
        (ExpectedFlow::Exact(expected), actual) => expected == actual,
        (ExpectedFlow::Branch { relative_target }, ControlFlow::Branch { offset }) => {
            pc_relative(offset) == relative_target
        }
        (
            ExpectedFlow::Jump {
                rd,
                relative_target,
            },
            ControlFlow::Jump {
                rd: actual_rd,
                offset,
            },
        ) => rd == actual_rd && pc_relative(offset) == relative_target,
        _ => false,
    };
    if !consistent {
        return Err(format!(
            "control flow {:?} disagrees with objdump",
            instruction.control_flow
        ));
    }
    // The targets the trace decoder will use must be objdump's absolute addresses.
    if let Some(target) = instruction.direct_target(line.address, xlen) {
        let printed = line.operands.rsplit(',').next().unwrap_or_default();
        if target != target_address(printed) {
            return Err(format!(
                "direct target {target:#x} differs from objdump's {printed}"
            ));
        }
    }
    Ok(())
}

/// Undoes the few places where `no-aliases` objdump still differs from the ISA's names.
fn objdump_mnemonic<'a>(line: &ObjdumpLine<'a>) -> &'a str {
    // binutils has no separate c.nop opcode entry: it prints `c.addi zero,imm`.
    if line.mnemonic == "c.addi" && line.operands.starts_with("zero,") {
        "c.nop"
    } else {
        line.mnemonic
    }
}

fn check_line(line: &ObjdumpLine<'_>, options: DecodeOptions) -> Result<(), String> {
    let raw =
        u32::from_str_radix(line.encoding, 16).map_err(|error| format!("bad encoding: {error}"))?;
    let length = (line.encoding.len() / 2) as u8;
    let instruction = decode(raw, options).map_err(|error| format!("decode failed: {error}"))?;
    if instruction.length != length {
        return Err(format!(
            "length {} but objdump says {length}",
            instruction.length
        ));
    }
    let expected_length = match length {
        2 => InstructionLength::Bits16,
        _ => InstructionLength::Bits32,
    };
    if riscv_insn::instruction_length(raw as u16) != expected_length {
        return Err("instruction_length disagrees with objdump".into());
    }

    let text = instruction.to_string();
    let (mnemonic, operands) = text.split_once(' ').unwrap_or((&text, ""));
    let expected_mnemonic = objdump_mnemonic(line);
    if mnemonic != expected_mnemonic {
        return Err(format!(
            "mnemonic {mnemonic:?} (text {text:?}), objdump {expected_mnemonic:?}"
        ));
    }
    if instruction.mnemonic.as_str()
        != mnemonic
            .trim_end_matches(".aqrl")
            .trim_end_matches(".aq")
            .trim_end_matches(".rl")
    {
        return Err(format!(
            "Mnemonic::{:?} does not match its text {mnemonic:?}",
            instruction.mnemonic
        ));
    }

    check_control_flow(line, &instruction, options.xlen)?;

    // Operands: identical text, except that targets are relative in ours and absolute in
    // objdump's (already compared above), and c.nop's implicit `zero` register.
    let expected_operands = if expected_mnemonic == "c.nop" {
        line.operands
            .trim_start_matches("zero,")
            .trim_start_matches('0')
    } else {
        line.operands
    };
    let comparable = |operands: &str| -> String {
        match instruction.control_flow {
            ControlFlow::Branch { .. } | ControlFlow::Jump { .. } => operands
                .rsplit_once(',')
                .map_or(String::new(), |(rest, _)| rest.to_string()),
            _ => operands.to_string(),
        }
    };
    if comparable(operands) != comparable(expected_operands) {
        return Err(format!(
            "operands {operands:?}, objdump {expected_operands:?}"
        ));
    }
    Ok(())
}

/// Checks every instruction line of `file`; returns how many were checked.
fn check_file(file: &str, options: DecodeOptions) -> usize {
    let path = format!("{}/tests/data/{file}", env!("CARGO_MANIFEST_DIR"));
    let contents = std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{path}: {error}"));
    let mut checked = 0;
    let mut failures = Vec::new();
    for (index, text) in contents.lines().enumerate() {
        let Some(line) = parse_line(index + 1, text) else {
            continue;
        };
        // Data objdump could not (or was told not to) disassemble.
        if line.mnemonic.starts_with('.') {
            continue;
        }
        checked += 1;
        if let Err(message) = check_line(&line, options) {
            failures.push(format!(
                "{file}:{}: {text}\n    {message}",
                line.line_number
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {checked} instructions disagree with objdump:\n{}",
        failures.len(),
        failures
            .iter()
            .take(40)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    checked
}

#[test]
fn every_instruction_of_a_static_rv64gc_binary_sample_matches_objdump() {
    let checked = check_file("objdump-sample.txt", DecodeOptions::default());
    // Guards against the parser silently skipping everything.
    assert!(checked > 4500, "only {checked} instructions checked");
}

#[test]
fn hand_written_rv64_encodings_match_objdump() {
    let checked = check_file("encodings-rv64.txt", DecodeOptions::default());
    assert!(checked > 230, "only {checked} instructions checked");
}

#[test]
fn hand_written_rv32_encodings_match_objdump() {
    let checked = check_file("encodings-rv32.txt", DecodeOptions::new(Xlen::Rv32));
    assert!(checked > 35, "only {checked} instructions checked");
}

#[test]
fn golden_sample_covers_every_control_flow_class_objdump_can_show() {
    let path = format!(
        "{}/tests/data/objdump-sample.txt",
        env!("CARGO_MANIFEST_DIR")
    );
    let contents = std::fs::read_to_string(path).expect("sample");
    let mut seen = [false; 5];
    for text in contents.lines() {
        let Some(line) = parse_line(0, text) else {
            continue;
        };
        let Ok(raw) = u32::from_str_radix(line.encoding, 16) else {
            continue;
        };
        let Ok(instruction) = decode(raw, DecodeOptions::default()) else {
            continue;
        };
        let class = match instruction.control_flow {
            ControlFlow::Sequential => 0,
            ControlFlow::Branch { .. } => 1,
            ControlFlow::Jump { .. } => 2,
            ControlFlow::JumpRegister { .. } => 3,
            ControlFlow::EnvironmentTrap => 4,
            _ => continue,
        };
        seen[class] = true;
    }
    assert_eq!(seen, [true; 5]);
}
