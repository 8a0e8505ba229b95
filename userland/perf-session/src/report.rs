//! perf report's rows: per event, the functions samples fall in, with their summed
//! periods. The caller prints them (and chooses how many).

use std::collections::HashMap;

use perf_abi::sys::bindings as abi;

use crate::processes::thread_id;
use crate::session::{Session, SessionError};

/// One line of the report.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Row {
    pub command: String,
    pub dso: String,
    pub level: PrivilegeLevel,
    /// The function, or for an address without a symbol its offset in the mapped file
    /// (the address itself outside any), 0x and 16 digits, as perf shows it.
    pub symbol: String,
    /// The function's start, or the address without a symbol: functions of one name
    /// are rows of their own.
    pub identity: Option<u64>,
}

/// perf's privilege level of a sample (`thread__find_map`). Declared in the order of
/// the characters perf shows, which is the order rows of equal weight are sorted in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PrivilegeLevel {
    /// `.`
    User,
    /// `H`: anything else (hypervisor, or a guest's modes when not reporting guests).
    Other,
    /// `k`
    Kernel,
}

impl PrivilegeLevel {
    /// The level of a record's `misc` field.
    pub fn of(misc: u16) -> Self {
        match u32::from(misc) & abi::PERF_RECORD_MISC_CPUMODE_MASK {
            abi::PERF_RECORD_MISC_KERNEL => Self::Kernel,
            abi::PERF_RECORD_MISC_USER => Self::User,
            _ => Self::Other,
        }
    }

    /// The character perf report shows between brackets.
    pub fn as_char(self) -> char {
        match self {
            Self::Kernel => 'k',
            Self::User => '.',
            Self::Other => 'H',
        }
    }
}

/// The rows of one event.
#[derive(Debug, Clone, Default)]
pub struct EventReport {
    pub name: String,
    /// Samples of the event.
    pub samples: u64,
    /// Their summed periods (saturating: periods are read from the file).
    pub period: u64,
    /// Rows with their summed periods, heaviest first (ties in row order).
    pub rows: Vec<WeighedRow>,
}

/// A row and its summed period.
#[derive(Debug, Clone)]
pub struct WeighedRow {
    pub row: Row,
    pub period: u64,
}

impl EventReport {
    /// The share of the event's period `period` is, in percent.
    pub fn share(&self, period: u64) -> f64 {
        100.0 * period as f64 / self.period.max(1) as f64
    }
}

/// Reads the session to its end: one report per event of the file, in the file's
/// order (events without samples included, with none).
pub fn report(session: &mut Session<'_>) -> Result<Vec<EventReport>, SessionError> {
    let events = session.reader().event_names();
    let mut totals: Vec<HashMap<Row, u64>> = vec![HashMap::new(); events.len()];
    let mut reports: Vec<EventReport> = events
        .into_iter()
        .map(|name| EventReport {
            name,
            ..EventReport::default()
        })
        .collect();
    while let Some(sampled) = session.next_sample()? {
        let Some(event) = sampled.attr_index.filter(|&index| index < reports.len()) else {
            continue;
        };
        let sample = &sampled.sample;
        let pid = thread_id(sample.pid);
        let tid = thread_id(sample.tid);
        let ip = sample.ip.unwrap_or(0);
        let processes = session.processes();
        let place = processes.place(pid as u32, ip);
        let (symbol, identity) = match place.symbol {
            Some(symbol) => (symbol, place.function_start),
            None => {
                let address = place.file_offset.unwrap_or(ip);
                (format!("{address:#018x}"), Some(address))
            }
        };
        let row = Row {
            command: processes.comm(pid, tid).to_owned(),
            dso: place.dso,
            level: PrivilegeLevel::of(sample.misc),
            symbol,
            identity,
        };
        let total = totals[event].entry(row).or_default();
        *total = total.saturating_add(sampled.period);
        let report = &mut reports[event];
        report.samples = report.samples.saturating_add(1);
        report.period = report.period.saturating_add(sampled.period);
    }
    for (report, rows) in reports.iter_mut().zip(totals) {
        let mut ranked: Vec<WeighedRow> = rows
            .into_iter()
            .map(|(row, period)| WeighedRow { row, period })
            .collect();
        ranked.sort_by(|a, b| b.period.cmp(&a.period).then_with(|| a.row.cmp(&b.row)));
        report.rows = ranked;
    }
    Ok(reports)
}

#[cfg(test)]
mod tests {
    use super::PrivilegeLevel;

    #[test]
    fn levels_are_perfs() {
        let level = |misc| PrivilegeLevel::of(misc).as_char();
        // PERF_RECORD_MISC_KERNEL, PERF_RECORD_MISC_USER.
        assert_eq!(level(1), 'k');
        assert_eq!(level(2), '.');
        // PERF_RECORD_MISC_HYPERVISOR, and the exact-sample bit beside user mode.
        assert_eq!(level(3), 'H');
        assert_eq!(level(2 | 1 << 14), '.');
        // Rows of equal weight sort by the character.
        assert!(PrivilegeLevel::User < PrivilegeLevel::Other);
        assert!(PrivilegeLevel::Other < PrivilegeLevel::Kernel);
    }
}
