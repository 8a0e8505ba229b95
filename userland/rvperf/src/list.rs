//! `rvperf list`: what this machine can record. perf's generic hardware and software
//! events, then every PMU in sysfs with its named events and format terms; for the
//! rvperf_ctr PMU (kmod-shim) also its CTR capabilities and the SBI PMU's counter
//! inventory, which the kernel's own driver does not expose.

use std::io::Write;
use std::path::Path;

use anyhow::Result;
use clap::Args;
use perf_abi::ctr::CTR_PMU_NAME;
use perf_abi::parse_event;

#[derive(Debug, Args)]
pub struct ListArgs {}

const GENERIC_HARDWARE: &[&str] = &[
    "cycles",
    "instructions",
    "cache-references",
    "cache-misses",
    "branches",
    "branch-misses",
    "bus-cycles",
    "stalled-cycles-frontend",
    "stalled-cycles-backend",
    "ref-cycles",
];

const GENERIC_SOFTWARE: &[&str] = &[
    "cpu-clock",
    "task-clock",
    "page-faults",
    "context-switches",
    "cpu-migrations",
    "minor-faults",
    "major-faults",
    "alignment-faults",
    "emulation-faults",
];

/// The files of a sysfs directory as (name, trimmed content), sorted by name.
fn sysfs_entries(dir: &Path) -> Vec<(String, String)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<_> = entries
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            let value = std::fs::read_to_string(entry.path()).ok()?;
            Some((name, value.trim().to_owned()))
        })
        .collect();
    found.sort();
    found
}

pub fn run(_arguments: &ListArgs) -> Result<()> {
    let sysfs = Path::new("/sys");
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    for (title, names) in [
        ("Hardware event", GENERIC_HARDWARE),
        ("Software event", GENERIC_SOFTWARE),
    ] {
        for name in names {
            if parse_event(name, sysfs).is_ok() {
                writeln!(out, "  {name:<40} [{title}]")?;
            }
        }
    }
    let devices = sysfs.join("bus/event_source/devices");
    let mut pmus: Vec<_> = std::fs::read_dir(&devices)
        .map(|entries| {
            entries
                .flatten()
                .map(|entry| entry.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    pmus.sort();
    for pmu in &pmus {
        let dir = devices.join(pmu);
        let pmu_type = std::fs::read_to_string(dir.join("type")).unwrap_or_default();
        let formats: Vec<String> = sysfs_entries(&dir.join("format"))
            .into_iter()
            .map(|(name, value)| format!("{name}={value}"))
            .collect();
        writeln!(
            out,
            "\n{pmu} (type {}){}",
            pmu_type.trim(),
            if formats.is_empty() {
                String::new()
            } else {
                format!(": {}", formats.join(", "))
            }
        )?;
        for (name, value) in sysfs_entries(&dir.join("events")) {
            if name.contains('.') {
                continue; // .scale / .unit companions
            }
            writeln!(out, "  {:<40} [{value}]", format!("{pmu}/{name}/"))?;
        }
        if pmu == CTR_PMU_NAME {
            for (name, value) in sysfs_entries(&dir.join("caps")) {
                if name == "counters" {
                    writeln!(out, "  SBI PMU counters:")?;
                    for line in value.lines() {
                        writeln!(out, "    {line}")?;
                    }
                } else {
                    writeln!(out, "  CTR {name}: {value}")?;
                }
            }
        }
    }
    Ok(())
}
