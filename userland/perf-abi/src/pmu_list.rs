//! What this machine can record, read from sysfs (what `rvperf list` prints): perf's
//! generic hardware and software events that resolve here, then every PMU under
//! `bus/event_source/devices` with its format terms and named events; for the
//! rvperf_ctr PMU (kmod-shim) also its CTR capabilities and the SBI PMU's counter
//! inventory, which the kernel's own driver does not expose.
//!
//! Reading is best effort, like perf's: a directory or file that is missing or
//! unreadable is left out of the listing rather than failing it, since sysfs
//! differs between kernels and a partial list is still useful.

use std::collections::BTreeMap;
use std::path::Path;

use crate::ctr::CTR_PMU_NAME;
use crate::event::parse_event;

/// Everything [`list_pmus`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PmuListing {
    /// perf's generic events that resolve on this machine: hardware first, then
    /// software, each in perf's order.
    pub generic: Vec<GenericEvent>,
    /// The PMUs of `bus/event_source/devices`, sorted by name.
    pub pmus: Vec<Pmu>,
}

/// One of perf's generic event names (`cycles`, `cpu-clock`, ...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenericEvent {
    pub name: &'static str,
    pub kind: GenericEventKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GenericEventKind {
    /// `PERF_TYPE_HARDWARE`.
    Hardware,
    /// `PERF_TYPE_SOFTWARE`.
    Software,
}

/// One directory of `bus/event_source/devices`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pmu {
    pub name: String,
    /// The `type` file: what goes into `perf_event_attr.type`; `None` when the file
    /// is missing or does not hold a number.
    pub pmu_type: Option<u32>,
    /// The files of `format/` (term name = bit ranges of config, config1, config2),
    /// sorted by name.
    pub formats: Vec<SysfsValue>,
    /// The files of `events/` (event name = its terms), sorted by name, without the
    /// `.scale` and `.unit` companions.
    pub events: Vec<SysfsValue>,
    /// What rvperf_ctr adds to its PMU directory; `None` for every other PMU.
    pub ctr: Option<CtrDetails>,
}

/// One sysfs file: its name and its content without surrounding whitespace.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct SysfsValue {
    pub name: String,
    pub value: String,
}

/// rvperf_ctr's own sysfs files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CtrDetails {
    /// The files of `caps/` (CTR depth, filters, ...), sorted by name.
    pub capabilities: Vec<SysfsValue>,
    /// The SBI PMU's counters from `counters/`, by index.
    pub counters: Vec<SbiCounter>,
}

/// One counter of the SBI PMU, as rvperf_ctr read it from the firmware at load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SbiCounter {
    /// A hardware counter: a CSR the kernel reads. `csr` and `width` are `None` when
    /// their file is missing or not a number.
    Hardware {
        index: u32,
        csr: Option<u16>,
        width: Option<u32>,
    },
    /// A counter the SBI firmware keeps (read through an SBI call).
    Firmware { index: u32 },
    /// A type this rvperf does not know, kept as the kernel wrote it.
    Other { index: u32, kind: String },
}

impl SbiCounter {
    pub fn index(&self) -> u32 {
        match self {
            SbiCounter::Hardware { index, .. }
            | SbiCounter::Firmware { index }
            | SbiCounter::Other { index, .. } => *index,
        }
    }
}

/// perf's generic hardware events, in perf's order.
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

/// perf's generic software events, in perf's order.
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

/// Lists the events and PMUs of the sysfs tree mounted at `sysfs` (`/sys` on a
/// running system).
pub fn list_pmus(sysfs: &Path) -> PmuListing {
    let generic = [
        (GenericEventKind::Hardware, GENERIC_HARDWARE),
        (GenericEventKind::Software, GENERIC_SOFTWARE),
    ]
    .into_iter()
    .flat_map(|(kind, names)| names.iter().map(move |name| GenericEvent { name, kind }))
    .filter(|event| parse_event(event.name, sysfs).is_ok())
    .collect();
    let devices = sysfs.join("bus/event_source/devices");
    let mut names: Vec<String> = std::fs::read_dir(&devices)
        .map(|entries| {
            entries
                .flatten()
                .map(|entry| entry.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    let pmus = names
        .into_iter()
        .map(|name| {
            let dir = devices.join(&name);
            let pmu_type = std::fs::read_to_string(dir.join("type"))
                .ok()
                .and_then(|text| text.trim().parse().ok());
            let events = sysfs_entries(&dir.join("events"))
                .into_iter()
                .filter(|event| !event.name.contains('.'))
                .collect();
            let ctr = (name == CTR_PMU_NAME).then(|| CtrDetails {
                capabilities: sysfs_entries(&dir.join("caps")),
                counters: counter_inventory(&sysfs_entries(&dir.join("counters"))),
            });
            Pmu {
                pmu_type,
                formats: sysfs_entries(&dir.join("format")),
                events,
                ctr,
                name,
            }
        })
        .collect();
    PmuListing { generic, pmus }
}

/// The readable files of a sysfs directory, sorted by name; none when the directory
/// is missing.
fn sysfs_entries(dir: &Path) -> Vec<SysfsValue> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<_> = entries
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            let value = std::fs::read_to_string(entry.path()).ok()?;
            Some(SysfsValue {
                name,
                value: value.trim().to_owned(),
            })
        })
        .collect();
    found.sort();
    found
}

/// The SBI PMU's counter inventory from rvperf_ctr's `counters/` directory, one value
/// per file: `counterN_type` (`hardware` or `firmware`) and, for hardware counters,
/// `counterN_csr` (`%#lx`) and `counterN_width` (decimal). Counters without a type
/// file are left out.
fn counter_inventory(files: &[SysfsValue]) -> Vec<SbiCounter> {
    #[derive(Default)]
    struct CounterFiles<'a> {
        kind: &'a str,
        csr: &'a str,
        width: &'a str,
    }
    let mut counters: BTreeMap<u32, CounterFiles> = BTreeMap::new();
    for file in files {
        let Some((index, field)) = file
            .name
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
            "type" => counter.kind = &file.value,
            "csr" => counter.csr = &file.value,
            "width" => counter.width = &file.value,
            _ => {}
        }
    }
    counters
        .into_iter()
        .filter(|(_, counter)| !counter.kind.is_empty())
        .map(|(index, counter)| match counter.kind {
            "hardware" => SbiCounter::Hardware {
                index,
                csr: parse_c_integer(counter.csr),
                width: counter.width.parse().ok(),
            },
            "firmware" => SbiCounter::Firmware { index },
            other => SbiCounter::Other {
                index,
                kind: other.to_owned(),
            },
        })
        .collect()
}

/// A number as printf's `%#x` writes it: `0x` + hex, or `0` alone.
fn parse_c_integer<T: TryFrom<u64>>(text: &str) -> Option<T> {
    let value = match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok()?,
        None => text.parse::<u64>().ok()?,
    };
    T::try_from(value).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(pairs: &[(&str, &str)]) -> Vec<SysfsValue> {
        pairs
            .iter()
            .map(|(name, value)| SysfsValue {
                name: name.to_string(),
                value: value.to_string(),
            })
            .collect()
    }

    #[test]
    fn counter_inventory_from_one_value_per_file() {
        let files = files(&[
            ("counter0_csr", "0xc00"),
            ("counter0_type", "hardware"),
            ("counter0_width", "64"),
            ("counter10_type", "firmware"),
            ("counter2_csr", "0xc02"),
            ("counter2_type", "hardware"),
            ("counter2_width", "48"),
            ("counter3_csr", "0xc03"),
            ("counter4_type", "future"),
            ("unrelated", "x"),
        ]);
        assert_eq!(
            counter_inventory(&files),
            [
                SbiCounter::Hardware {
                    index: 0,
                    csr: Some(0xc00),
                    width: Some(64)
                },
                SbiCounter::Hardware {
                    index: 2,
                    csr: Some(0xc02),
                    width: Some(48)
                },
                SbiCounter::Other {
                    index: 4,
                    kind: "future".to_owned()
                },
                SbiCounter::Firmware { index: 10 },
            ]
        );
    }

    #[test]
    fn csr_numbers_as_the_kernel_prints_them() {
        assert_eq!(parse_c_integer::<u16>("0xc1f"), Some(0xc1f));
        assert_eq!(parse_c_integer::<u16>("0"), Some(0));
        assert_eq!(parse_c_integer::<u16>("0x10000"), None);
        assert_eq!(parse_c_integer::<u16>(""), None);
    }

    /// A fake sysfs tree (the kernel interface `list_pmus` reads, built in a
    /// temporary directory): an ordinary PMU and rvperf_ctr's PMU with its caps and
    /// counters.
    fn fake_sysfs() -> tempfile::TempDir {
        let root = tempfile::tempdir().expect("temp dir");
        let devices = root.path().join("bus/event_source/devices");
        let write = |path: &str, text: &str| {
            let path = devices.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        };
        write("cpu/type", "4\n");
        write("cpu/format/event", "config:0-7\n");
        write("cpu/format/umask", "config:8-15\n");
        write("cpu/events/cycles", "event=0x3c\n");
        write("cpu/events/cycles.scale", "1\n");
        write("software/type", "1\n");
        write(&format!("{CTR_PMU_NAME}/type"), "12\n");
        write(&format!("{CTR_PMU_NAME}/caps/depth"), "256\n");
        write(
            &format!("{CTR_PMU_NAME}/counters/counter0_type"),
            "hardware\n",
        );
        write(&format!("{CTR_PMU_NAME}/counters/counter0_csr"), "0xc00\n");
        write(&format!("{CTR_PMU_NAME}/counters/counter0_width"), "64\n");
        write(
            &format!("{CTR_PMU_NAME}/counters/counter5_type"),
            "firmware\n",
        );
        root
    }

    #[test]
    fn listing_of_a_fake_sysfs() {
        let sysfs = fake_sysfs();
        let listing = list_pmus(sysfs.path());
        let generic: Vec<_> = listing.generic.iter().map(|event| event.name).collect();
        assert_eq!(
            generic,
            [GENERIC_HARDWARE, GENERIC_SOFTWARE].concat(),
            "generic events need no sysfs"
        );
        assert_eq!(listing.generic[0].kind, GenericEventKind::Hardware);
        assert_eq!(
            listing.generic[GENERIC_HARDWARE.len()].kind,
            GenericEventKind::Software
        );
        let mut pmus: Vec<Pmu> = [
            Pmu {
                name: "cpu".to_owned(),
                pmu_type: Some(4),
                formats: files(&[("event", "config:0-7"), ("umask", "config:8-15")]),
                events: files(&[("cycles", "event=0x3c")]),
                ctr: None,
            },
            Pmu {
                name: CTR_PMU_NAME.to_owned(),
                pmu_type: Some(12),
                formats: Vec::new(),
                events: Vec::new(),
                ctr: Some(CtrDetails {
                    capabilities: files(&[("depth", "256")]),
                    counters: vec![
                        SbiCounter::Hardware {
                            index: 0,
                            csr: Some(0xc00),
                            width: Some(64),
                        },
                        SbiCounter::Firmware { index: 5 },
                    ],
                }),
            },
            Pmu {
                name: "software".to_owned(),
                pmu_type: Some(1),
                formats: Vec::new(),
                events: Vec::new(),
                ctr: None,
            },
        ]
        .into();
        pmus.sort_by(|left, right| left.name.cmp(&right.name));
        assert_eq!(listing.pmus, pmus);
    }

    #[test]
    fn no_sysfs_lists_only_generic_events() {
        let listing = list_pmus(Path::new("/nonexistent"));
        assert!(listing.pmus.is_empty());
        assert_eq!(
            listing.generic.len(),
            GENERIC_HARDWARE.len() + GENERIC_SOFTWARE.len()
        );
    }
}
