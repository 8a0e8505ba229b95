//! The side-band of what already ran when a recording started, as perf synthesizes it
//! from /proc (`perf_event__synthesize_mmap_events`): a COMM and the executable file
//! mappings (PERF_RECORD_MMAP2, inode form) of every process. A trace of the whole
//! system (`rvperf trace record`) holds the code of processes that were running before
//! it, the recorder's own among them; without these, that code has no file.
//! Synthesized records have time 0 (perf's convention: not ordered by time).

use std::path::Path;

use perf_abi::sys::bindings as b;
use perf_abi::{CommRecord, Mmap2FileId, Mmap2Record, SampleId};

use crate::plan::{SynthesizedFile, Writer};
use crate::RecordError;

/// One executable file mapping of a `/proc/PID/maps` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapsLine {
    pub start: u64,
    pub end: u64,
    pub prot: u32,
    pub private: bool,
    pub offset: u64,
    pub major: u32,
    pub minor: u32,
    pub inode: u64,
    pub path: String,
}

/// An executable mapping of a file (or the vDSO) in one line of `/proc/PID/maps`,
/// `None` for other lines (anonymous, not executable, malformed).
pub fn parse_maps_line(line: &str) -> Option<MapsLine> {
    let mut fields = line.splitn(6, ' ');
    let range = fields.next()?;
    let perms = fields.next()?;
    let offset = fields.next()?;
    let device = fields.next()?;
    let inode = fields.next()?;
    let path = fields.next().unwrap_or("").trim_start();
    if !(path.starts_with('/') || path == crate::vdso::VDSO_NAME)
        || perms.as_bytes().get(2) != Some(&b'x')
    {
        return None;
    }
    let (start, end) = range.split_once('-')?;
    let (major, minor) = device.split_once(':')?;
    let perm = |index: usize, flag: u32| {
        if perms.as_bytes().get(index).is_some_and(|&c| c != b'-') {
            flag
        } else {
            0
        }
    };
    Some(MapsLine {
        start: u64::from_str_radix(start, 16).ok()?,
        end: u64::from_str_radix(end, 16).ok()?,
        prot: perm(0, libc::PROT_READ as u32)
            | perm(1, libc::PROT_WRITE as u32)
            | perm(2, libc::PROT_EXEC as u32),
        private: perms.as_bytes().get(3) == Some(&b'p'),
        offset: u64::from_str_radix(offset, 16).ok()?,
        major: u32::from_str_radix(major, 16).ok()?,
        minor: u32::from_str_radix(minor, 16).ok()?,
        inode: inode.parse().ok()?,
        // A deleted file's mapping says so after its name.
        path: path.trim_end_matches(" (deleted)").to_owned(),
    })
}

/// The Linux CPU of each hart, by hart id, from /proc/cpuinfo's `processor` and `hart`
/// lines (RISC-V's); empty when it names no hart.
pub(crate) fn hart_cpus(cpuinfo: &str) -> Vec<Option<u32>> {
    let mut cpus: Vec<Option<u32>> = Vec::new();
    let mut processor = None;
    for line in cpuinfo.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim().parse::<u32>().ok();
        match key.trim() {
            "processor" => processor = value,
            "hart" => {
                let (Some(cpu), Some(hart)) = (processor, value) else {
                    continue;
                };
                let Ok(hart) = usize::try_from(hart) else {
                    continue;
                };
                if hart >= perf_abi::ntrace::MAX_HARTS {
                    continue;
                }
                if cpus.len() <= hart {
                    cpus.resize(hart + 1, None);
                }
                cpus[hart] = Some(cpu);
            }
            _ => {}
        }
    }
    cpus
}

/// COMM and executable MMAP2 records of every process in `proc` (a process that ends
/// meanwhile is skipped); the files mapped, once each.
pub(crate) fn synthesize_processes(
    writer: &mut Writer,
    proc: &Path,
) -> Result<Vec<SynthesizedFile>, RecordError> {
    let mut files: Vec<SynthesizedFile> = Vec::new();
    let Ok(entries) = std::fs::read_dir(proc) else {
        return Ok(files);
    };
    let mut pids: Vec<u32> = entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    pids.sort_unstable();
    for pid in pids {
        let directory = proc.join(pid.to_string());
        let (Ok(comm), Ok(maps)) = (
            std::fs::read_to_string(directory.join("comm")),
            std::fs::read_to_string(directory.join("maps")),
        ) else {
            continue;
        };
        let sample_id = SampleId {
            pid: Some(pid),
            tid: Some(pid),
            time: Some(0),
            ..SampleId::default()
        };
        writer.write_comm(
            0,
            &CommRecord {
                pid,
                tid: pid,
                comm: comm.trim_end().as_bytes(),
                exec: false,
                sample_id,
            },
        )?;
        for line in maps.lines().filter_map(parse_maps_line) {
            if line.prot & libc::PROT_EXEC as u32 != 0
                && (line.path.starts_with('/') || line.path == crate::vdso::VDSO_NAME)
                && !files.iter().any(|file| file.filename == line.path)
            {
                files.push(SynthesizedFile {
                    filename: line.path.clone(),
                    pid,
                });
            }
            let flags = if line.private {
                libc::MAP_PRIVATE as u32
            } else {
                libc::MAP_SHARED as u32
            };
            writer.write_mmap2(
                0,
                u16::try_from(b::PERF_RECORD_MISC_USER).unwrap_or(2),
                &Mmap2Record {
                    pid,
                    tid: pid,
                    addr: line.start,
                    len: line.end - line.start.min(line.end),
                    pgoff: line.offset,
                    file_id: Mmap2FileId::Inode {
                        maj: line.major,
                        min: line.minor,
                        ino: line.inode,
                        ino_generation: 0,
                    },
                    prot: line.prot,
                    flags,
                    filename: line.path.as_bytes(),
                    sample_id,
                },
            )?;
        }
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn harts_are_mapped_to_their_cpus() {
        // The boot hart (here 1) is CPU 0.
        let cpuinfo = "processor\t: 0\nhart\t\t: 1\nisa\t\t: rv64imafdc\n\nprocessor\t: 1\nhart\t\t: 0\nisa\t\t: rv64imafdc\n";
        assert_eq!(hart_cpus(cpuinfo), vec![Some(1), Some(0)]);
        assert_eq!(
            hart_cpus("processor\t: 0\nvendor_id\t: GenuineIntel\n"),
            vec![]
        );
        let sparse = "processor : 0\nhart : 2\n";
        assert_eq!(hart_cpus(sparse), vec![None, None, Some(0)]);
    }

    #[test]
    fn executable_file_mappings_are_read_and_others_skipped() {
        let text = "00010000-00075000 r-xp 00000000 00:1f 1234                               /opt/rvperf/bin/qsort";
        assert_eq!(
            parse_maps_line(text),
            Some(MapsLine {
                start: 0x10000,
                end: 0x75000,
                prot: (libc::PROT_READ | libc::PROT_EXEC) as u32,
                private: true,
                offset: 0,
                major: 0,
                minor: 0x1f,
                inode: 1234,
                path: "/opt/rvperf/bin/qsort".to_owned(),
            })
        );
        let deleted = "7f00-8f00 r-xs 00001000 fd:01 9 /tmp/lib.so (deleted)";
        let line = parse_maps_line(deleted).unwrap();
        assert_eq!(
            (line.path.as_str(), line.private, line.offset, line.major),
            ("/tmp/lib.so", false, 0x1000, 0xfd)
        );
        // The vDSO is no file, and code: kept, by its name.
        let vdso = parse_maps_line(
            "7ffd0000-7ffd2000 r-xp 00000000 00:00 0                          [vdso]",
        )
        .unwrap();
        assert_eq!(
            (vdso.path.as_str(), vdso.start, vdso.end, vdso.inode),
            ("[vdso]", 0x7ffd_0000, 0x7ffd_2000, 0)
        );
        for skipped in [
            "00075000-00077000 rw-p 00065000 00:1f 1234 /opt/rvperf/bin/qsort",
            "7ffd2000-7ffd4000 r--p 00000000 00:00 0                          [vvar]",
            "55550000-55560000 r-xp 00000000 00:00 0 ",
            "garbage",
        ] {
            assert_eq!(parse_maps_line(skipped), None, "{skipped}");
        }
    }
}
