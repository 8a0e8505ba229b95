//! Reading GCC 12's `-fdump-ipa-afdo` dump: the profile counts GCC put on each basic
//! block. Shared with tests/tests/autofdo.rs (included there by path).

/// The basic block counts (`<bb N> [count: C]:`) of `function` in GCC's dump, where a
/// function's body is printed as `TYPE NAME (PARAMETERS)`, `{`, ..., `}`.
pub fn gcc_block_counts(dump: &str, function: &str) -> Vec<u64> {
    let header = format!(" {function} (");
    let lines: Vec<&str> = dump.lines().collect();
    let start = lines
        .windows(2)
        .position(|pair| pair[0].contains(&header) && pair[1] == "{")
        .unwrap_or_else(|| panic!("no body of {function} in the dump:\n{dump}"));
    lines[start..]
        .iter()
        .take_while(|line| **line != "}")
        .filter_map(|line| {
            let (_, count) = line
                .trim_start()
                .strip_prefix("<bb ")?
                .split_once("[count: ")?;
            count
                .split(|c: char| !c.is_ascii_digit())
                .next()?
                .parse()
                .ok()
        })
        .collect()
}

/// The text of the `.afdo` dump GCC wrote into `directory` (`-fdump-ipa-afdo`
/// with `-dumpdir`), if it wrote one.
pub fn read_afdo_dump(directory: &std::path::Path) -> Option<String> {
    std::fs::read_dir(directory)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .find(|path| {
            path.extension()
                .is_some_and(|extension| extension == "afdo")
        })
        .map(|path| std::fs::read_to_string(path).unwrap())
}
