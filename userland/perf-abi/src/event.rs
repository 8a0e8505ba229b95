//! perf's event syntax: symbolic software/hardware names, raw `rNNNN` and
//! dynamic PMUs `pmu/term=value,.../` resolved through sysfs.

use std::path::{Path, PathBuf};

use perf_event_open_sys::bindings as b;

/// A resolved event: what goes into `perf_event_attr.{type,config,config1,config2}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventSpec {
    /// The event as the user wrote it, for messages and perf.data headers.
    pub name: String,
    pub pmu_type: u32,
    pub config: u64,
    pub config1: u64,
    pub config2: u64,
}

/// Why an event string could not be resolved.
#[derive(Debug, thiserror::Error)]
pub enum EventError {
    #[error("empty event name")]
    Empty,
    #[error("unknown event {event:?}")]
    UnknownEvent { event: String },
    #[error("unknown PMU {pmu:?} in event {event:?} (no {path})")]
    UnknownPmu {
        event: String,
        pmu: String,
        path: PathBuf,
    },
    #[error("event {event:?}: cannot read {path}: {source}")]
    ReadSysfs {
        event: String,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("event {event:?}: {path} does not hold a PMU type number: {text:?}")]
    BadPmuType {
        event: String,
        path: PathBuf,
        text: String,
    },
    #[error("event {event:?}: PMU {pmu:?} has no term or event named {term:?}")]
    UnknownTerm {
        event: String,
        pmu: String,
        term: String,
    },
    #[error("event {event:?}: cannot parse format {path}: {text:?}")]
    BadFormat {
        event: String,
        path: PathBuf,
        text: String,
    },
    #[error("event {event:?}: term {term:?} has a bad value {value:?}")]
    BadValue {
        event: String,
        term: String,
        value: String,
    },
    #[error("event {event:?}: value {value:#x} of term {term:?} does not fit its {bits} bits")]
    ValueTooWide {
        event: String,
        term: String,
        value: u64,
        bits: u32,
    },
    #[error("event {event:?}: syntax error at byte {offset}: {reason}")]
    Syntax {
        event: String,
        offset: usize,
        reason: &'static str,
    },
}

const SOFTWARE_EVENTS: &[(&str, u32)] = &[
    ("cpu-clock", b::PERF_COUNT_SW_CPU_CLOCK),
    ("task-clock", b::PERF_COUNT_SW_TASK_CLOCK),
    ("page-faults", b::PERF_COUNT_SW_PAGE_FAULTS),
    ("faults", b::PERF_COUNT_SW_PAGE_FAULTS),
    ("context-switches", b::PERF_COUNT_SW_CONTEXT_SWITCHES),
    ("cs", b::PERF_COUNT_SW_CONTEXT_SWITCHES),
    ("cpu-migrations", b::PERF_COUNT_SW_CPU_MIGRATIONS),
    ("migrations", b::PERF_COUNT_SW_CPU_MIGRATIONS),
    ("minor-faults", b::PERF_COUNT_SW_PAGE_FAULTS_MIN),
    ("major-faults", b::PERF_COUNT_SW_PAGE_FAULTS_MAJ),
    ("alignment-faults", b::PERF_COUNT_SW_ALIGNMENT_FAULTS),
    ("emulation-faults", b::PERF_COUNT_SW_EMULATION_FAULTS),
    ("dummy", b::PERF_COUNT_SW_DUMMY),
];

const HARDWARE_EVENTS: &[(&str, u32)] = &[
    ("cycles", b::PERF_COUNT_HW_CPU_CYCLES),
    ("cpu-cycles", b::PERF_COUNT_HW_CPU_CYCLES),
    ("instructions", b::PERF_COUNT_HW_INSTRUCTIONS),
    ("cache-references", b::PERF_COUNT_HW_CACHE_REFERENCES),
    ("cache-misses", b::PERF_COUNT_HW_CACHE_MISSES),
    ("branches", b::PERF_COUNT_HW_BRANCH_INSTRUCTIONS),
    ("branch-instructions", b::PERF_COUNT_HW_BRANCH_INSTRUCTIONS),
    ("branch-misses", b::PERF_COUNT_HW_BRANCH_MISSES),
    ("bus-cycles", b::PERF_COUNT_HW_BUS_CYCLES),
    (
        "stalled-cycles-frontend",
        b::PERF_COUNT_HW_STALLED_CYCLES_FRONTEND,
    ),
    (
        "stalled-cycles-backend",
        b::PERF_COUNT_HW_STALLED_CYCLES_BACKEND,
    ),
    ("ref-cycles", b::PERF_COUNT_HW_REF_CPU_CYCLES),
];

/// Resolves one event in perf's syntax. `sysfs` is the sysfs mount point
/// (normally `/sys`); it is only read for `pmu/.../` events.
pub fn parse_event(text: &str, sysfs: &Path) -> Result<EventSpec, EventError> {
    let name = text.trim();
    if name.is_empty() {
        return Err(EventError::Empty);
    }
    let fixed = |pmu_type: u32, config: u32| EventSpec {
        name: name.to_owned(),
        pmu_type,
        config: u64::from(config),
        config1: 0,
        config2: 0,
    };
    if let Some(&(_, config)) = SOFTWARE_EVENTS.iter().find(|(n, _)| *n == name) {
        return Ok(fixed(b::PERF_TYPE_SOFTWARE, config));
    }
    if let Some(&(_, config)) = HARDWARE_EVENTS.iter().find(|(n, _)| *n == name) {
        return Ok(fixed(b::PERF_TYPE_HARDWARE, config));
    }
    if let Some(hex) = name.strip_prefix('r') {
        if !hex.is_empty() && hex.bytes().all(|c| c.is_ascii_hexdigit()) {
            let config = u64::from_str_radix(hex, 16).map_err(|_| EventError::BadValue {
                event: name.to_owned(),
                term: "config".into(),
                value: hex.to_owned(),
            })?;
            return Ok(EventSpec {
                config,
                ..fixed(b::PERF_TYPE_RAW, 0)
            });
        }
    }
    if let Some(slash) = name.find('/') {
        return parse_pmu_event(name, slash, sysfs);
    }
    Err(EventError::UnknownEvent {
        event: name.to_owned(),
    })
}

fn parse_pmu_event(event: &str, slash: usize, sysfs: &Path) -> Result<EventSpec, EventError> {
    let syntax = |offset, reason| EventError::Syntax {
        event: event.to_owned(),
        offset,
        reason,
    };
    let pmu = &event[..slash];
    if pmu.is_empty() || pmu.contains(['.', '\\']) {
        return Err(syntax(0, "expected a PMU name before '/'"));
    }
    let rest = &event[slash + 1..];
    let Some(close) = rest.find('/') else {
        return Err(syntax(event.len(), "missing closing '/'"));
    };
    // perf modifiers after the closing slash (e.g. `/u`) change attr bits this
    // crate keeps in AttrOptions, so they are refused rather than ignored.
    if close + 1 != rest.len() {
        return Err(syntax(
            slash + 1 + close + 1,
            "modifiers after the PMU term list are not supported",
        ));
    }
    let terms = &rest[..close];
    let pmu_dir = sysfs.join("bus/event_source/devices").join(pmu);
    if !pmu_dir.is_dir() {
        return Err(EventError::UnknownPmu {
            event: event.to_owned(),
            pmu: pmu.to_owned(),
            path: pmu_dir,
        });
    }
    let type_path = pmu_dir.join("type");
    let type_text = read_sysfs(event, &type_path)?;
    let pmu_type = type_text
        .trim()
        .parse::<u32>()
        .map_err(|_| EventError::BadPmuType {
            event: event.to_owned(),
            path: type_path.clone(),
            text: type_text.clone(),
        })?;
    let mut spec = EventSpec {
        name: event.to_owned(),
        pmu_type,
        config: 0,
        config1: 0,
        config2: 0,
    };
    let mut offset = slash + 1;
    for term in terms.split(',') {
        if term.is_empty() {
            if terms.is_empty() {
                break;
            }
            return Err(syntax(offset, "empty term"));
        }
        apply_term(event, pmu, &pmu_dir, term, &mut spec, 0)?;
        offset += term.len() + 1;
    }
    Ok(spec)
}

fn read_sysfs(event: &str, path: &Path) -> Result<String, EventError> {
    std::fs::read_to_string(path).map_err(|source| EventError::ReadSysfs {
        event: event.to_owned(),
        path: path.to_owned(),
        source,
    })
}

// Named events expand to further terms; the depth bound stops a sysfs tree
// whose alias refers to itself from recursing forever.
const MAX_ALIAS_DEPTH: u32 = 4;

fn apply_term(
    event: &str,
    pmu: &str,
    pmu_dir: &Path,
    term: &str,
    spec: &mut EventSpec,
    depth: u32,
) -> Result<(), EventError> {
    let (key, value_text) = match term.split_once('=') {
        Some((key, value)) => (key.trim(), Some(value.trim())),
        None => (term.trim(), None),
    };
    let unknown = || EventError::UnknownTerm {
        event: event.to_owned(),
        pmu: pmu.to_owned(),
        term: key.to_owned(),
    };
    if key.is_empty() || key.contains(['/', '.']) {
        return Err(unknown());
    }
    let value = match value_text {
        Some(text) => parse_number(text).ok_or_else(|| EventError::BadValue {
            event: event.to_owned(),
            term: key.to_owned(),
            value: text.to_owned(),
        })?,
        // A bare term is a flag (perf treats it as =1) unless it names an event.
        None => 1,
    };
    match key {
        "config" => spec.config = value,
        "config1" => spec.config1 = value,
        "config2" => spec.config2 = value,
        _ => {
            let format_path = pmu_dir.join("format").join(key);
            if format_path.is_file() {
                let format_text = read_sysfs(event, &format_path)?;
                let bad_format = || EventError::BadFormat {
                    event: event.to_owned(),
                    path: format_path.clone(),
                    text: format_text.clone(),
                };
                let (field, bits) = parse_format(&format_text).ok_or_else(bad_format)?;
                let target = match field {
                    FormatField::Config => &mut spec.config,
                    FormatField::Config1 => &mut spec.config1,
                    FormatField::Config2 => &mut spec.config2,
                };
                *target = scatter_value(*target, value, &bits).ok_or(EventError::ValueTooWide {
                    event: event.to_owned(),
                    term: key.to_owned(),
                    value,
                    bits: bits.len() as u32,
                })?;
                return Ok(());
            }
            let alias_path = pmu_dir.join("events").join(key);
            if value_text.is_none() && depth < MAX_ALIAS_DEPTH && alias_path.is_file() {
                let alias = read_sysfs(event, &alias_path)?;
                for alias_term in alias.trim().split(',').filter(|t| !t.trim().is_empty()) {
                    apply_term(event, pmu, pmu_dir, alias_term, spec, depth + 1)?;
                }
                return Ok(());
            }
            return Err(unknown());
        }
    }
    Ok(())
}

fn parse_number(text: &str) -> Option<u64> {
    match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FormatField {
    Config,
    Config1,
    Config2,
}

/// Parses `config:0-7,21` into the field and its bit positions, lowest value
/// bit first (the order perf fills them in).
fn parse_format(text: &str) -> Option<(FormatField, Vec<u32>)> {
    let (field, ranges) = text.trim().split_once(':')?;
    let field = match field {
        "config" => FormatField::Config,
        "config1" => FormatField::Config1,
        "config2" => FormatField::Config2,
        _ => return None,
    };
    let mut bits = Vec::new();
    for range in ranges.split(',') {
        let (low, high) = match range.split_once('-') {
            Some((low, high)) => (low.trim().parse::<u32>().ok()?, high.trim().parse().ok()?),
            None => {
                let bit = range.trim().parse::<u32>().ok()?;
                (bit, bit)
            }
        };
        if low > high || high > 63 {
            return None;
        }
        bits.extend(low..=high);
    }
    Some((field, bits))
}

fn scatter_value(mut target: u64, value: u64, bits: &[u32]) -> Option<u64> {
    if bits.len() < 64 && value >> bits.len() != 0 {
        return None;
    }
    for (value_bit, &target_bit) in bits.iter().enumerate() {
        let mask = 1u64 << target_bit;
        if (value >> value_bit) & 1 == 1 {
            target |= mask;
        } else {
            target &= !mask;
        }
    }
    Some(target)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    /// A fake sysfs tree with a made-up PMU `fakepmu` (type 42) whose format
    /// exercises every format shape: a plain range, a split range, config1.
    fn fake_sysfs() -> tempfile::TempDir {
        let root = tempfile::tempdir().expect("temp dir");
        let pmu = root.path().join("bus/event_source/devices/fakepmu");
        fs::create_dir_all(pmu.join("format")).unwrap();
        fs::create_dir_all(pmu.join("events")).unwrap();
        fs::write(pmu.join("type"), "42\n").unwrap();
        fs::write(pmu.join("format/event"), "config:0-7\n").unwrap();
        fs::write(pmu.join("format/umask"), "config:8-15,24\n").unwrap();
        fs::write(pmu.join("format/edge"), "config:18\n").unwrap();
        fs::write(pmu.join("format/ldlat"), "config1:0-63\n").unwrap();
        fs::write(pmu.join("format/filter"), "config2:4-7\n").unwrap();
        fs::write(pmu.join("format/broken"), "cfg:oops\n").unwrap();
        fs::write(pmu.join("events/fake-loads"), "event=0xcd,umask=0x1\n").unwrap();
        fs::write(pmu.join("events/loop"), "loop\n").unwrap();
        root
    }

    #[test]
    fn software_and_hardware_names() {
        let no_sysfs = Path::new("/nonexistent");
        for (name, config) in [
            ("cpu-clock", b::PERF_COUNT_SW_CPU_CLOCK),
            ("task-clock", b::PERF_COUNT_SW_TASK_CLOCK),
            ("faults", b::PERF_COUNT_SW_PAGE_FAULTS),
            ("cs", b::PERF_COUNT_SW_CONTEXT_SWITCHES),
            ("cpu-migrations", b::PERF_COUNT_SW_CPU_MIGRATIONS),
            ("minor-faults", b::PERF_COUNT_SW_PAGE_FAULTS_MIN),
            ("major-faults", b::PERF_COUNT_SW_PAGE_FAULTS_MAJ),
            ("dummy", b::PERF_COUNT_SW_DUMMY),
        ] {
            let spec = parse_event(name, no_sysfs).unwrap();
            assert_eq!(
                (spec.pmu_type, spec.config),
                (b::PERF_TYPE_SOFTWARE, u64::from(config))
            );
            assert_eq!(spec.name, name);
        }
        for (name, config) in [
            ("cycles", b::PERF_COUNT_HW_CPU_CYCLES),
            ("cpu-cycles", b::PERF_COUNT_HW_CPU_CYCLES),
            ("instructions", b::PERF_COUNT_HW_INSTRUCTIONS),
            ("branches", b::PERF_COUNT_HW_BRANCH_INSTRUCTIONS),
            ("branch-misses", b::PERF_COUNT_HW_BRANCH_MISSES),
            ("cache-references", b::PERF_COUNT_HW_CACHE_REFERENCES),
            ("cache-misses", b::PERF_COUNT_HW_CACHE_MISSES),
            ("bus-cycles", b::PERF_COUNT_HW_BUS_CYCLES),
            ("ref-cycles", b::PERF_COUNT_HW_REF_CPU_CYCLES),
        ] {
            let spec = parse_event(name, no_sysfs).unwrap();
            assert_eq!(
                (spec.pmu_type, spec.config),
                (b::PERF_TYPE_HARDWARE, u64::from(config))
            );
        }
    }

    #[test]
    fn raw_events() {
        let spec = parse_event("r1a2b", Path::new("/nonexistent")).unwrap();
        assert_eq!((spec.pmu_type, spec.config), (b::PERF_TYPE_RAW, 0x1a2b));
        assert!(matches!(
            parse_event("rxyz", Path::new("/nonexistent")),
            Err(EventError::UnknownEvent { event }) if event == "rxyz"
        ));
    }

    #[test]
    fn fake_pmu_terms_are_placed_by_their_format_files() {
        let sysfs = fake_sysfs();
        let spec = parse_event(
            "fakepmu/event=0x3c,umask=0x1ff,edge,ldlat=3,filter=5/",
            sysfs.path(),
        )
        .unwrap();
        assert_eq!(spec.pmu_type, 42);
        // umask 0x1ff: low 8 bits into 8-15, the 9th bit into bit 24.
        assert_eq!(spec.config, 0x3c | (0xff << 8) | (1 << 24) | (1 << 18));
        assert_eq!(spec.config1, 3);
        assert_eq!(spec.config2, 5 << 4);
    }

    #[test]
    fn fake_pmu_named_events_and_direct_config_terms() {
        let sysfs = fake_sysfs();
        let spec = parse_event("fakepmu/fake-loads,ldlat=30/", sysfs.path()).unwrap();
        assert_eq!(spec.config, 0xcd | (1 << 8));
        assert_eq!(spec.config1, 30);
        let spec = parse_event("fakepmu/config=0x1234,config2=7/", sysfs.path()).unwrap();
        assert_eq!((spec.config, spec.config2), (0x1234, 7));
        let spec = parse_event("fakepmu//", sysfs.path()).unwrap();
        assert_eq!(spec.config, 0);
    }

    #[test]
    fn fake_pmu_errors_name_what_is_wrong() {
        let sysfs = fake_sysfs();
        let path = sysfs.path();
        assert!(matches!(
            parse_event("nopmu/event=1/", path),
            Err(EventError::UnknownPmu { pmu, .. }) if pmu == "nopmu"
        ));
        assert!(matches!(
            parse_event("fakepmu/nosuch=1/", path),
            Err(EventError::UnknownTerm { term, .. }) if term == "nosuch"
        ));
        assert!(matches!(
            parse_event("fakepmu/event=0x100/", path),
            Err(EventError::ValueTooWide {
                bits: 8,
                value: 0x100,
                ..
            })
        ));
        assert!(matches!(
            parse_event("fakepmu/event=zz/", path),
            Err(EventError::BadValue { value, .. }) if value == "zz"
        ));
        assert!(matches!(
            parse_event("fakepmu/broken=1/", path),
            Err(EventError::BadFormat { .. })
        ));
        assert!(matches!(
            parse_event("fakepmu/loop/", path),
            Err(EventError::UnknownTerm { .. })
        ));
        assert!(matches!(
            parse_event("fakepmu/event=1", path),
            Err(EventError::Syntax { .. })
        ));
        assert!(matches!(
            parse_event("fakepmu/event=1/u", path),
            Err(EventError::Syntax { offset: 16, .. })
        ));
        assert!(matches!(parse_event("  ", path), Err(EventError::Empty)));
        let message = parse_event("not-an-event", path).unwrap_err().to_string();
        assert!(message.contains("not-an-event"), "{message}");
    }

    #[test]
    fn real_sysfs_software_pmu_resolves_when_present() {
        // The software PMU exists on every Linux with perf; skip elsewhere.
        if Path::new("/sys/bus/event_source/devices/software/type").exists() {
            let spec = parse_event("software/config=0/", Path::new("/sys")).unwrap();
            assert_eq!(spec.pmu_type, b::PERF_TYPE_SOFTWARE);
        }
    }
}
