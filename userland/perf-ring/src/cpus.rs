//! Which CPUs to open per-CPU events on.

use std::path::{Path, PathBuf};

const ONLINE_PATH: &str = "/sys/devices/system/cpu/online";

#[derive(Debug, thiserror::Error)]
pub enum CpuListError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a CPU list: {text:?}")]
    Parse { path: PathBuf, text: String },
}

/// The online CPUs, from /sys/devices/system/cpu/online.
pub fn online_cpus() -> Result<Vec<u32>, CpuListError> {
    let path = Path::new(ONLINE_PATH);
    let text = std::fs::read_to_string(path).map_err(|source| CpuListError::Read {
        path: path.to_owned(),
        source,
    })?;
    parse_cpu_list(&text).ok_or_else(|| CpuListError::Parse {
        path: path.to_owned(),
        text,
    })
}

/// Parses the kernel's CPU list format (`0-3,5,7-8`), ascending.
pub fn parse_cpu_list(text: &str) -> Option<Vec<u32>> {
    let mut cpus = Vec::new();
    let text = text.trim();
    if text.is_empty() {
        return Some(cpus);
    }
    for item in text.split(',') {
        match item.split_once('-') {
            Some((first, last)) => {
                let (first, last) = (first.parse::<u32>().ok()?, last.parse::<u32>().ok()?);
                if first > last {
                    return None;
                }
                cpus.extend(first..=last);
            }
            None => cpus.push(item.parse().ok()?),
        }
    }
    cpus.sort_unstable();
    cpus.dedup();
    Some(cpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(
            parse_cpu_list("0-3,5,7-8\n"),
            Some(vec![0, 1, 2, 3, 5, 7, 8])
        );
        assert_eq!(parse_cpu_list("0"), Some(vec![0]));
        assert_eq!(parse_cpu_list(""), Some(vec![]));
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("a"), None);
    }

    #[test]
    fn this_host_has_an_online_cpu() {
        let cpus = online_cpus().unwrap();
        assert!(!cpus.is_empty());
        let parallelism = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert!(cpus.len() >= parallelism, "{cpus:?} vs {parallelism}");
    }
}
