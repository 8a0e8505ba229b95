//! `rvperf list`: what this machine can record. perf's generic hardware and software
//! events, then every PMU in sysfs with its named events and format terms; for the
//! rvperf_ctr PMU (kmod-shim) also its CTR capabilities and the SBI PMU's counter
//! inventory, which the kernel's own driver does not expose.

use std::collections::BTreeMap;
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

/// The SBI PMU's counter inventory from rvperf_ctr's `counters/` directory, one value
/// per file: `counterN_type` (`hardware` or `firmware`) and, for hardware counters,
/// `counterN_csr` and `counterN_width`. One line per counter, by index:
/// `0 hardware csr=0xc00 width=64`, `5 firmware`.
fn counter_inventory(files: &[(String, String)]) -> Vec<String> {
    #[derive(Default)]
    struct Counter<'a> {
        kind: &'a str,
        csr: &'a str,
        width: &'a str,
    }
    let mut counters: BTreeMap<u32, Counter> = BTreeMap::new();
    for (name, value) in files {
        let Some((index, field)) = name
            .strip_prefix("counter")
            .and_then(|rest| rest.split_once('_'))
        else {
            continue;
        };
        let Ok(index) = index.parse::<u32>() else {
            continue;
        };
        let counter = counters.entry(index).or_default();
        match field {
            "type" => counter.kind = value,
            "csr" => counter.csr = value,
            "width" => counter.width = value,
            _ => {}
        }
    }
    counters
        .into_iter()
        .filter(|(_, counter)| !counter.kind.is_empty())
        .map(|(index, counter)| {
            if counter.kind == "hardware" {
                format!(
                    "{index} hardware csr={} width={}",
                    counter.csr, counter.width
                )
            } else {
                format!("{index} {}", counter.kind)
            }
        })
        .collect()
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
                writeln!(out, "  CTR {name}: {value}")?;
            }
            let counters = counter_inventory(&sysfs_entries(&dir.join("counters")));
            if !counters.is_empty() {
                writeln!(out, "  SBI PMU counters:")?;
                for line in counters {
                    writeln!(out, "    {line}")?;
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_inventory_from_one_value_per_file() {
        let files: Vec<(String, String)> = [
            ("counter0_csr", "0xc00"),
            ("counter0_type", "hardware"),
            ("counter0_width", "64"),
            ("counter10_type", "firmware"),
            ("counter2_csr", "0xc02"),
            ("counter2_type", "hardware"),
            ("counter2_width", "48"),
            ("unrelated", "x"),
        ]
        .iter()
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .collect();
        assert_eq!(
            counter_inventory(&files),
            [
                "0 hardware csr=0xc00 width=64",
                "2 hardware csr=0xc02 width=48",
                "10 firmware"
            ]
        );
    }
}
