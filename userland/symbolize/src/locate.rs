//! Where to look for a recorded file, its separate debug file and its dwz
//! supplementary file. Only paths: reading them is the caller's job.

use std::path::{Path, PathBuf};

use crate::error::hex;
use crate::{DebugLink, SupplementaryLink, SymbolizerOptions};

/// The name of the vDSO's mappings (in `/proc/PID/maps` and MMAP2): code of no file.
pub const VDSO_NAME: &str = "[vdso]";

/// Where perf's build-id cache `directory` (`~/.debug`) keeps the vDSO with
/// `build_id`: `[vdso]/<build id>/vdso`, which `.build-id/xx/<rest>`
/// ([`build_id_link`]) links to as `../../[vdso]/<build id>`.
pub fn cached_vdso(directory: &Path, build_id: &[u8]) -> PathBuf {
    directory.join(VDSO_NAME).join(hex(build_id)).join("vdso")
}

/// The link of the build-id cache `directory` for `build_id`:
/// `.build-id/xx/<rest>` (`None` for an id too short to split).
pub fn build_id_link(directory: &Path, build_id: &[u8]) -> Option<PathBuf> {
    Some(directory.join(".build-id").join(build_id_path(build_id)?))
}

/// `xx/rest` of a build id, the layout of every `.build-id` directory.
fn build_id_path(build_id: &[u8]) -> Option<PathBuf> {
    let text = hex(build_id);
    (text.len() > 2).then(|| Path::new(&text[..2]).join(&text[2..]))
}

/// `path` re-rooted under `root`.
fn under(root: &Path, path: &Path) -> PathBuf {
    root.join(path.strip_prefix("/").unwrap_or(path))
}

/// The debug directories to search, those under the symfs root first.
fn debug_dirs(options: &SymbolizerOptions) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(symfs) = &options.symfs {
        dirs.extend(options.debug_dirs.iter().map(|dir| under(symfs, dir)));
    }
    dirs.extend(options.debug_dirs.iter().cloned());
    dirs
}

/// Candidates for the file recorded as `recorded`, best first: perf's
/// build-id cache, then the symfs root, then the recorded path itself
/// (only without a symfs root: there the host's file is another machine's).
pub fn binary_candidates(
    options: &SymbolizerOptions,
    recorded: &Path,
    build_id: Option<&[u8]>,
) -> Vec<PathBuf> {
    let mut candidates = Vec::new();
    if let Some(relative) = build_id.and_then(build_id_path) {
        for dir in &options.build_id_dirs {
            let cached = dir.join(".build-id").join(&relative);
            // perf keeps the vDSO's image as `vdso` (it is no file of its own).
            candidates.push(cached.join(if recorded == Path::new(VDSO_NAME) {
                "vdso"
            } else {
                "elf"
            }));
            // Older perf stored the file itself under its build id.
            candidates.push(cached);
        }
    }
    if recorded.is_absolute() {
        match &options.symfs {
            Some(symfs) => candidates.push(under(symfs, recorded)),
            None => candidates.push(recorded.to_owned()),
        }
    }
    candidates
}

/// Candidates for the vmlinux of the kernel with `build_id` (release `release`, when
/// the recording says), best first, as perf's `vmlinux_path` and its build-id lookup
/// find one: perf's build-id cache; each debug directory's `.build-id/xx/rest.debug`
/// (a distribution's debug package: Debian's `linux-image-*-dbg`); then by release,
/// `/usr/lib/debug/boot/vmlinux-R`, `/boot/vmlinux-R`, `/lib/modules/R/build/vmlinux`
/// (under the symfs root, else as they are). The caller checks each one's build id.
pub fn kernel_image_candidates(
    options: &SymbolizerOptions,
    build_id: &[u8],
    release: Option<&str>,
) -> Vec<PathBuf> {
    let mut candidates = Vec::new();
    if let Some(relative) = build_id_path(build_id) {
        for dir in &options.build_id_dirs {
            let cached = dir.join(".build-id").join(&relative);
            candidates.push(cached.join("elf"));
            candidates.push(cached);
        }
        for dir in debug_dirs(options) {
            let mut debug = dir.join(".build-id").join(&relative).into_os_string();
            debug.push(".debug");
            candidates.push(PathBuf::from(debug));
        }
    }
    if let Some(release) = release.filter(|release| !release.is_empty() && !release.contains('/')) {
        for path in [
            format!("/usr/lib/debug/boot/vmlinux-{release}"),
            format!("/boot/vmlinux-{release}"),
            format!("/lib/modules/{release}/build/vmlinux"),
        ] {
            candidates.push(match &options.symfs {
                Some(symfs) => under(symfs, Path::new(&path)),
                None => PathBuf::from(path),
            });
        }
    }
    candidates
}

/// The copy of a kernel's kallsyms that `perf record` keeps in its build-id
/// cache (`<dir>/[kernel.kallsyms]/<build id>/kallsyms`), if one of `dirs`
/// has it. It is the recorded kernel's, whatever runs now, and a plain file
/// reads much faster than /proc/kallsyms, which the kernel formats on every
/// read.
pub fn cached_kallsyms(dirs: &[PathBuf], build_id: &[u8]) -> Option<PathBuf> {
    if build_id.is_empty() {
        return None;
    }
    let text = hex(build_id);
    dirs.iter()
        .flat_map(|dir| {
            let by_name = dir.join("[kernel.kallsyms]").join(&text).join("kallsyms");
            let by_id = build_id_path(build_id)
                .map(|relative| dir.join(".build-id").join(relative).join("kallsyms"));
            std::iter::once(by_name).chain(by_id)
        })
        .find(|candidate| candidate.is_file())
}

/// Candidates for the separate debug file of the file recorded as
/// `recorded` and read from `path`, by build id and by `.gnu_debuglink`, in
/// the order gdb searches.
pub(crate) fn debug_candidates(
    options: &SymbolizerOptions,
    recorded: &Path,
    path: &Path,
    build_id: Option<&[u8]>,
    debug_link: Option<&DebugLink>,
) -> Vec<PathBuf> {
    let mut candidates = Vec::new();
    if let Some(relative) = build_id.and_then(build_id_path) {
        for dir in debug_dirs(options) {
            let mut file = dir.join(".build-id").join(&relative).into_os_string();
            file.push(".debug");
            candidates.push(PathBuf::from(file));
        }
        for dir in &options.build_id_dirs {
            candidates.push(dir.join(".build-id").join(&relative).join("debug"));
        }
    }
    if let Some(link) = debug_link {
        let directory = path.parent().unwrap_or(Path::new("/"));
        candidates.push(directory.join(&link.file_name));
        candidates.push(directory.join(".debug").join(&link.file_name));
        // The debug directories mirror the paths of the installed system,
        // the recorded one, not where symfs put the file.
        let recorded_directory = recorded.parent().unwrap_or(Path::new("/"));
        for dir in debug_dirs(options) {
            candidates.push(under(&dir, recorded_directory).join(&link.file_name));
        }
    }
    candidates.retain(|candidate| candidate != path);
    candidates
}

/// Candidates for the dwz supplementary file named by the debug file at
/// `debug_path`.
pub(crate) fn supplementary_candidates(
    options: &SymbolizerOptions,
    debug_path: &Path,
    link: &SupplementaryLink,
) -> Vec<PathBuf> {
    let mut candidates = Vec::new();
    let named = Path::new(&link.path);
    if named.is_absolute() {
        if let Some(symfs) = &options.symfs {
            candidates.push(under(symfs, named));
        }
        candidates.push(named.to_owned());
    } else if let Some(directory) = debug_path.parent() {
        candidates.push(directory.join(named));
    }
    if let Some(relative) = build_id_path(&link.build_id) {
        for dir in debug_dirs(options) {
            let mut file = dir.join(".build-id").join(&relative).into_os_string();
            file.push(".debug");
            candidates.push(PathBuf::from(file));
        }
    }
    candidates
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options() -> SymbolizerOptions {
        SymbolizerOptions {
            symfs: Some(PathBuf::from("/sysroot")),
            build_id_dirs: vec![PathBuf::from("/home/u/.debug")],
            debug_dirs: vec![PathBuf::from("/usr/lib/debug")],
            ..SymbolizerOptions::default()
        }
    }

    #[test]
    fn binaries_by_build_id_then_symfs() {
        let found = binary_candidates(
            &options(),
            Path::new("/usr/bin/ls"),
            Some(&[0xab, 0xcd, 0xef]),
        );
        let expected: Vec<PathBuf> = [
            "/home/u/.debug/.build-id/ab/cdef/elf",
            "/home/u/.debug/.build-id/ab/cdef",
            "/sysroot/usr/bin/ls",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        assert_eq!(found, expected);
        // The vDSO only by its build id, as perf caches it.
        let found = binary_candidates(&options(), Path::new("[vdso]"), Some(&[0xab, 0xcd]));
        let expected: Vec<PathBuf> = [
            "/home/u/.debug/.build-id/ab/cd/vdso",
            "/home/u/.debug/.build-id/ab/cd",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        assert_eq!(found, expected);
    }

    #[test]
    fn kernel_images_by_build_id_then_release() {
        let found = kernel_image_candidates(&options(), &[0xab, 0xcd, 0xef], Some("7.3.0"));
        let expected: Vec<PathBuf> = [
            "/home/u/.debug/.build-id/ab/cdef/elf",
            "/home/u/.debug/.build-id/ab/cdef",
            "/sysroot/usr/lib/debug/.build-id/ab/cdef.debug",
            "/usr/lib/debug/.build-id/ab/cdef.debug",
            "/sysroot/usr/lib/debug/boot/vmlinux-7.3.0",
            "/sysroot/boot/vmlinux-7.3.0",
            "/sysroot/lib/modules/7.3.0/build/vmlinux",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        assert_eq!(found, expected);
        // A release that would climb out of its directory is no release.
        let found = kernel_image_candidates(&options(), &[0xab, 0xcd], Some("../../etc"));
        assert_eq!(found.len(), 4);
    }

    #[test]
    fn debug_files_by_build_id_then_debuglink() {
        let link = DebugLink {
            file_name: "ls.debug".into(),
            crc: 0,
        };
        let found = debug_candidates(
            &options(),
            Path::new("/usr/bin/ls"),
            Path::new("/sysroot/usr/bin/ls"),
            Some(&[0xab, 0xcd]),
            Some(&link),
        );
        let expected: Vec<PathBuf> = [
            "/sysroot/usr/lib/debug/.build-id/ab/cd.debug",
            "/usr/lib/debug/.build-id/ab/cd.debug",
            "/home/u/.debug/.build-id/ab/cd/debug",
            "/sysroot/usr/bin/ls.debug",
            "/sysroot/usr/bin/.debug/ls.debug",
            "/sysroot/usr/lib/debug/usr/bin/ls.debug",
            "/usr/lib/debug/usr/bin/ls.debug",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        assert_eq!(found, expected);
    }

    #[test]
    fn perf_caches_kallsyms_by_the_kernel_build_id() {
        let dir = tempfile::tempdir().unwrap();
        let build_id = [0x6e, 0xcd, 0x01, 0x02];
        assert_eq!(cached_kallsyms(&[dir.path().to_owned()], &build_id), None);
        let cached = dir.path().join("[kernel.kallsyms]").join("6ecd0102");
        std::fs::create_dir_all(&cached).unwrap();
        std::fs::write(cached.join("kallsyms"), "ffffffff81000000 T _text\n").unwrap();
        let missing = dir.path().join("missing");
        assert_eq!(
            cached_kallsyms(&[missing, dir.path().to_owned()], &build_id),
            Some(cached.join("kallsyms"))
        );
        assert_eq!(cached_kallsyms(&[dir.path().to_owned()], &[0x11; 4]), None);
        assert_eq!(cached_kallsyms(&[dir.path().to_owned()], &[]), None);
    }
}
