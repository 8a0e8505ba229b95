//! Reading the architectural state QEMU logs before every instruction.
//!
//! With one instruction per translation block and `-d nochain,cpu,fpu`,
//! `qemu-riscv64` prints the hart's registers before it enters each block, so once
//! per retired instruction (`target/riscv/cpu.c`, `riscv_cpu_dump_state`):
//!
//! ```text
//!  pc       000000000001066c
//!  x0/zero  0000000000000000 x1/ra    0000000000000000 x2/sp    00007f4d5cb7d830 x3/gp    0000000000000000
//!  ... (x4 to x31, four per line)
//!  fcsr     0000000000000000
//!  f0/ft0   0000000000000000 f1/ft1   0000000000000000 f2/ft2   0000000000000000 f3/ft3   0000000000000000
//!  ... (f4 to f31)
//! ```
//!
//! The state before instruction N+1 is the state after instruction N, so a tandem
//! encoder reads each instruction's effects off two consecutive records. User-mode QEMU
//! prints no other CSR than `fcsr`; names the reader does not know (a system-mode
//! dump's CSRs) are skipped, so the same reader takes either.

use std::io::{self, BufRead};

use crate::qemu::QemuError;

/// The registers QEMU printed before one instruction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuState {
    /// The address of the instruction about to execute.
    pub pc: u64,
    /// `x0`..`x31`.
    pub integer: [u64; 32],
    /// `f0`..`f31`, when the log has them (`-d fpu`).
    pub float: Option<[u64; 32]>,
    /// `fcsr`, when the log has it (`-d fpu`).
    pub fcsr: Option<u64>,
}

/// What one record has read so far.
#[derive(Debug, Default)]
struct PartialState {
    pc: Option<u64>,
    integer: [u64; 32],
    integer_seen: u32,
    float: [u64; 32],
    float_seen: u32,
    fcsr: Option<u64>,
    /// The line the record started on.
    first_line: u64,
}

impl PartialState {
    fn finish(&self) -> Result<CpuState, QemuError> {
        let pc = self.pc.ok_or(QemuError::LogParse {
            line: self.first_line,
            reason: "a register dump without a pc line",
            text: String::new(),
        })?;
        if self.integer_seen != u32::MAX {
            return Err(QemuError::LogParse {
                line: self.first_line,
                reason: "the register dump lacks some of x0..x31",
                text: format!("pc {pc:#x}"),
            });
        }
        let float = match self.float_seen {
            0 => None,
            u32::MAX => Some(self.float),
            _ => {
                return Err(QemuError::LogParse {
                    line: self.first_line,
                    reason: "the register dump lacks some of f0..f31",
                    text: format!("pc {pc:#x}"),
                })
            }
        };
        Ok(CpuState {
            pc,
            integer: self.integer,
            float,
            fcsr: self.fcsr,
        })
    }
}

/// Streaming reader of a `-d nochain,cpu[,fpu]` log: one [`CpuState`] per record, in
/// order. Errors carry the 1-based line number; after one the iterator ends.
#[derive(Debug)]
pub struct CpuLogReader<R: BufRead> {
    reader: R,
    line: Vec<u8>,
    line_number: u64,
    current: Option<PartialState>,
    finished: bool,
}

impl<R: BufRead> CpuLogReader<R> {
    pub fn new(reader: R) -> Self {
        CpuLogReader {
            reader,
            line: Vec::with_capacity(128),
            line_number: 0,
            current: None,
            finished: false,
        }
    }

    /// Lines read so far.
    pub fn line_number(&self) -> u64 {
        self.line_number
    }

    fn parse_line(&mut self) -> Result<Option<CpuState>, QemuError> {
        let line_number = self.line_number;
        let mut completed = None;
        let mut tokens = self
            .line
            .split(|&byte| byte == b' ' || byte == b'\t' || byte == b'\n' || byte == b'\r')
            .filter(|token| !token.is_empty());
        while let Some(name) = tokens.next() {
            let Some(value) = tokens.next() else {
                return Err(parse_error(
                    line_number,
                    "a register name without a value",
                    &self.line,
                ));
            };
            let register = RegisterName::parse(name);
            if register == RegisterName::Unknown {
                continue;
            }
            let Some(value) = parse_hex(value) else {
                return Err(parse_error(
                    line_number,
                    "a register value that is not hexadecimal",
                    &self.line,
                ));
            };
            if register == RegisterName::Pc {
                if let Some(previous) = self.current.take() {
                    completed = Some(previous.finish()?);
                }
                self.current = Some(PartialState {
                    pc: Some(value),
                    first_line: line_number,
                    ..PartialState::default()
                });
                continue;
            }
            let Some(state) = self.current.as_mut() else {
                return Err(parse_error(
                    line_number,
                    "registers before the first pc line",
                    &self.line,
                ));
            };
            match register {
                RegisterName::Integer(index) => {
                    state.integer[usize::from(index)] = value;
                    state.integer_seen |= 1 << index;
                }
                RegisterName::Float(index) => {
                    state.float[usize::from(index)] = value;
                    state.float_seen |= 1 << index;
                }
                RegisterName::FloatControl => state.fcsr = Some(value),
                RegisterName::Pc | RegisterName::Unknown => {}
            }
        }
        Ok(completed)
    }
}

fn parse_error(line: u64, reason: &'static str, text: &[u8]) -> QemuError {
    QemuError::LogParse {
        line,
        reason,
        text: String::from_utf8_lossy(&text[..text.len().min(200)])
            .trim_end()
            .to_owned(),
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RegisterName {
    Pc,
    Integer(u8),
    Float(u8),
    FloatControl,
    Unknown,
}

impl RegisterName {
    /// `pc`, `x5/t0`, `f10/fa0`, `fcsr`; anything else is unknown.
    fn parse(token: &[u8]) -> RegisterName {
        match token {
            b"pc" => return RegisterName::Pc,
            b"fcsr" => return RegisterName::FloatControl,
            _ => {}
        }
        let Some(slash) = token.iter().position(|&byte| byte == b'/') else {
            return RegisterName::Unknown;
        };
        let (kind, digits) = match token.split_first() {
            Some((b'x', rest)) => (b'x', &rest[..slash - 1]),
            Some((b'f', rest)) => (b'f', &rest[..slash - 1]),
            _ => return RegisterName::Unknown,
        };
        let Some(index) = std::str::from_utf8(digits)
            .ok()
            .and_then(|text| text.parse::<u8>().ok())
            .filter(|&index| index < 32)
        else {
            return RegisterName::Unknown;
        };
        if kind == b'x' {
            RegisterName::Integer(index)
        } else {
            RegisterName::Float(index)
        }
    }
}

fn parse_hex(token: &[u8]) -> Option<u64> {
    if token.is_empty() || token.len() > 16 {
        return None;
    }
    let mut value = 0u64;
    for &byte in token {
        let digit = (byte as char).to_digit(16)?;
        value = (value << 4) | u64::from(digit);
    }
    Some(value)
}

impl<R: BufRead> Iterator for CpuLogReader<R> {
    type Item = Result<CpuState, QemuError>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.finished {
            self.line.clear();
            match self.reader.read_until(b'\n', &mut self.line) {
                Ok(0) => {
                    self.finished = true;
                    let last = self.current.take()?;
                    return Some(last.finish());
                }
                Ok(_) => {}
                Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
                Err(source) => {
                    self.finished = true;
                    return Some(Err(QemuError::LogRead {
                        line: self.line_number + 1,
                        source,
                    }));
                }
            }
            self.line_number += 1;
            match self.parse_line() {
                Ok(Some(state)) => return Some(Ok(state)),
                Ok(None) => {}
                Err(error) => {
                    self.finished = true;
                    return Some(Err(error));
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    fn record(pc: u64, a0: u64, with_float: bool) -> String {
        let mut text = format!(" pc       {pc:016x}\n");
        for row in 0..8 {
            for column in 0..4 {
                let index = row * 4 + column;
                let value = if index == 10 { a0 } else { index as u64 };
                text.push_str(&format!(" x{index}/r{index:<4} {value:016x}"));
            }
            text.push('\n');
        }
        if with_float {
            text.push_str(" fcsr     0000000000000001\n");
            for row in 0..8 {
                for column in 0..4 {
                    let index = row * 4 + column;
                    text.push_str(&format!(" f{index}/f{index:<4} {:016x}", 100 + index));
                }
                text.push('\n');
            }
        }
        text
    }

    #[test]
    fn reads_each_record_with_and_without_float_registers() {
        let text = record(0x1066c, 5, true) + &record(0x1068e, 6, true);
        let states: Vec<CpuState> = CpuLogReader::new(Cursor::new(text))
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(states.len(), 2);
        assert_eq!(states[0].pc, 0x1066c);
        assert_eq!(states[1].integer[10], 6);
        assert_eq!(states[1].integer[31], 31);
        assert_eq!(states[0].fcsr, Some(1));
        assert_eq!(states[0].float.unwrap()[31], 131);
        let text = record(0x10000, 1, false);
        let states: Vec<CpuState> = CpuLogReader::new(Cursor::new(text))
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(states[0].float, None);
    }

    #[test]
    fn a_record_cut_short_is_an_error_with_its_line() {
        let text = record(0x1066c, 5, false);
        let cut: String = text
            .lines()
            .take(4)
            .map(|line| format!("{line}\n"))
            .collect();
        let result: Result<Vec<CpuState>, _> = CpuLogReader::new(Cursor::new(cut)).collect();
        let error = result.unwrap_err().to_string();
        assert!(
            error.contains("line 1") && error.contains("x0..x31"),
            "{error}"
        );
    }

    #[test]
    fn a_bad_value_is_an_error() {
        let text = record(0x1066c, 5, false).replace("000000000001066c", "00000000000106zz");
        let result: Result<Vec<CpuState>, _> = CpuLogReader::new(Cursor::new(text)).collect();
        assert!(result.unwrap_err().to_string().contains("not hexadecimal"));
    }
}
