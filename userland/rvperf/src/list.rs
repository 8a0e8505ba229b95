//! `rvperf list`: prints what this machine can record, as `perf_abi::list_pmus`
//! reads it from sysfs: perf's generic events, then every PMU with its format terms
//! and named events, and for the rvperf_ctr PMU its CTR capabilities and the SBI
//! PMU's counter inventory.

use std::io::Write;
use std::path::Path;

use anyhow::Result;
use clap::Args;
use perf_abi::{list_pmus, GenericEventKind, PmuListing, SbiCounter};

#[derive(Debug, Args)]
pub struct ListArgs {}

pub fn run(_arguments: &ListArgs) -> Result<()> {
    let listing = list_pmus(Path::new("/sys"));
    let stdout = std::io::stdout();
    print_listing(&listing, &mut stdout.lock())
}

fn print_listing(listing: &PmuListing, out: &mut impl Write) -> Result<()> {
    for event in &listing.generic {
        let title = match event.kind {
            GenericEventKind::Hardware => "Hardware event",
            GenericEventKind::Software => "Software event",
        };
        writeln!(out, "  {:<40} [{title}]", event.name)?;
    }
    for pmu in &listing.pmus {
        let pmu_type = pmu
            .pmu_type
            .map(|pmu_type| pmu_type.to_string())
            .unwrap_or_default();
        let formats: Vec<String> = pmu
            .formats
            .iter()
            .map(|format| format!("{}={}", format.name, format.value))
            .collect();
        writeln!(
            out,
            "\n{} (type {pmu_type}){}",
            pmu.name,
            if formats.is_empty() {
                String::new()
            } else {
                format!(": {}", formats.join(", "))
            }
        )?;
        for event in &pmu.events {
            writeln!(
                out,
                "  {:<40} [{}]",
                format!("{}/{}/", pmu.name, event.name),
                event.value
            )?;
        }
        let Some(ctr) = &pmu.ctr else {
            continue;
        };
        for capability in &ctr.capabilities {
            writeln!(out, "  CTR {}: {}", capability.name, capability.value)?;
        }
        if !ctr.counters.is_empty() {
            writeln!(out, "  SBI PMU counters:")?;
            for counter in &ctr.counters {
                writeln!(out, "    {}", counter_line(counter))?;
            }
        }
    }
    Ok(())
}

/// `0 hardware csr=0xc00 width=64`, `5 firmware`: the CSR as the kernel's `%#lx`
/// writes it, a missing value as nothing.
fn counter_line(counter: &SbiCounter) -> String {
    match counter {
        SbiCounter::Hardware { index, csr, width } => {
            let csr = match csr {
                Some(0) => "0".to_owned(),
                Some(csr) => format!("{csr:#x}"),
                None => String::new(),
            };
            let width = width.map(|width| width.to_string()).unwrap_or_default();
            format!("{index} hardware csr={csr} width={width}")
        }
        SbiCounter::Firmware { index } => format!("{index} firmware"),
        SbiCounter::Other { index, kind } => format!("{index} {kind}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use perf_abi::{CtrDetails, GenericEvent, Pmu, SysfsValue};

    fn value(name: &str, value: &str) -> SysfsValue {
        SysfsValue {
            name: name.to_owned(),
            value: value.to_owned(),
        }
    }

    #[test]
    fn listing_as_perf_list_prints_it() {
        let listing = PmuListing {
            generic: vec![
                GenericEvent {
                    name: "cycles",
                    kind: GenericEventKind::Hardware,
                },
                GenericEvent {
                    name: "cpu-clock",
                    kind: GenericEventKind::Software,
                },
            ],
            pmus: vec![
                Pmu {
                    name: "cpu".to_owned(),
                    pmu_type: Some(4),
                    formats: vec![value("event", "config:0-7"), value("umask", "config:8-15")],
                    events: vec![value("cycles", "event=0x3c")],
                    ctr: None,
                },
                Pmu {
                    name: "rvperf_ctr".to_owned(),
                    pmu_type: None,
                    formats: Vec::new(),
                    events: Vec::new(),
                    ctr: Some(CtrDetails {
                        capabilities: vec![value("depth", "256")],
                        counters: vec![
                            SbiCounter::Hardware {
                                index: 0,
                                csr: Some(0xc00),
                                width: Some(64),
                            },
                            SbiCounter::Hardware {
                                index: 1,
                                csr: None,
                                width: None,
                            },
                            SbiCounter::Firmware { index: 5 },
                        ],
                    }),
                },
            ],
        };
        let mut out = Vec::new();
        print_listing(&listing, &mut out).unwrap();
        let expected = concat!(
            "  cycles                                   [Hardware event]\n",
            "  cpu-clock                                [Software event]\n",
            "\n",
            "cpu (type 4): event=config:0-7, umask=config:8-15\n",
            "  cpu/cycles/                              [event=0x3c]\n",
            "\n",
            "rvperf_ctr (type )\n",
            "  CTR depth: 256\n",
            "  SBI PMU counters:\n",
            "    0 hardware csr=0xc00 width=64\n",
            "    1 hardware csr= width=\n",
            "    5 firmware\n",
        );
        assert_eq!(String::from_utf8(out).unwrap(), expected);
    }
}
