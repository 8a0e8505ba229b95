//! The vDSO, kept as perf keeps it. Every process maps the kernel's vDSO (`[vdso]`),
//! code that is no file: a trace or a sample in it needs a copy of its image. Every
//! process of one ABI maps the same image, so the recorder copies its own, and keeps it
//! in perf's build-id cache (`DIR/[vdso]/<build id>/vdso`, reached from
//! `DIR/.build-id/xx/<rest>`), where readers find recorded files by build id; the
//! recording names it in HEADER_BUILD_ID.

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

pub(crate) use symbolize::VDSO_NAME;

/// A copy of the vDSO's image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Vdso {
    pub(crate) bytes: Vec<u8>,
    pub(crate) build_id: Vec<u8>,
}

impl Vdso {
    /// This process's vDSO, read through `proc_self` (`/proc/self`); `None` when it
    /// maps none or its image has no build id (it could not be found by one).
    pub(crate) fn of_process(proc_self: &Path) -> Option<Vdso> {
        let maps = std::fs::read_to_string(proc_self.join("maps")).ok()?;
        let range = maps
            .lines()
            .find(|line| line.split_ascii_whitespace().last() == Some(VDSO_NAME))?
            .split_ascii_whitespace()
            .next()?;
        let (start, end) = range.split_once('-')?;
        let start = u64::from_str_radix(start, 16).ok()?;
        let end = u64::from_str_radix(end, 16).ok()?;
        let mut bytes = vec![0; usize::try_from(end.checked_sub(start)?).ok()?];
        std::fs::File::open(proc_self.join("mem"))
            .ok()?
            .read_exact_at(&mut bytes, start)
            .ok()?;
        let build_id = symbolize::ObjectSymbolizer::new(VDSO_NAME, bytes.clone())
            .ok()?
            .build_id()?
            .to_vec();
        Some(Vdso { bytes, build_id })
    }

    /// Keeps the image in the build-id cache `directory` (perf's `~/.debug`) as perf
    /// does; the file's path. An image already there is left as it is.
    pub(crate) fn cache(&self, directory: &Path) -> std::io::Result<PathBuf> {
        let file = symbolize::cached_vdso(directory, &self.build_id);
        if !file.is_file() {
            if let Some(own) = file.parent() {
                std::fs::create_dir_all(own)?;
            }
            let mut temporary = file.clone().into_os_string();
            temporary.push(".tmp");
            std::fs::write(&temporary, &self.bytes)?;
            std::fs::rename(&temporary, &file)?;
        }
        let Some(link) = symbolize::build_id_link(directory, &self.build_id) else {
            return Ok(file);
        };
        if std::fs::symlink_metadata(&link).is_err() {
            if let Some(links) = link.parent() {
                std::fs::create_dir_all(links)?;
            }
            // Relative, as perf links: `.build-id/xx/rest` to `../../[vdso]/<id>`.
            let own = file.parent().and_then(Path::file_name).unwrap_or_default();
            std::os::unix::fs::symlink(Path::new("../..").join(VDSO_NAME).join(own), &link)?;
        }
        Ok(file)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The host's own vDSO (x86_64 Linux maps one in every process), cached as perf
    /// caches it and found again through the build-id link.
    #[test]
    fn this_processs_vdso_is_cached_under_its_build_id() {
        let Some(vdso) = Vdso::of_process(Path::new("/proc/self")) else {
            panic!("this process maps no [vdso] with a build id");
        };
        assert_eq!(&vdso.bytes[..4], b"\x7fELF");
        let directory = tempfile::tempdir().unwrap();
        let file = vdso.cache(directory.path()).unwrap();
        assert_eq!(std::fs::read(&file).unwrap(), vdso.bytes);
        let hex: String = vdso.build_id.iter().map(|b| format!("{b:02x}")).collect();
        let through_link = directory
            .path()
            .join(".build-id")
            .join(&hex[..2])
            .join(&hex[2..])
            .join("vdso");
        assert_eq!(std::fs::read(through_link).unwrap(), vdso.bytes);
        // Where readers look for it (rvperf decode -i, the symbolizer).
        let options = symbolize::SymbolizerOptions {
            build_id_dirs: vec![directory.path().to_owned()],
            ..symbolize::SymbolizerOptions::default()
        };
        let candidates =
            symbolize::binary_candidates(&options, Path::new(VDSO_NAME), Some(&vdso.build_id));
        assert_eq!(std::fs::read(&candidates[0]).unwrap(), vdso.bytes);
        // Cached again: nothing changes, nothing fails.
        assert_eq!(vdso.cache(directory.path()).unwrap(), file);
    }
}
