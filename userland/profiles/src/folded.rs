//! Folded stacks (`frame;frame;frame count` lines, Brendan Gregg's format that
//! inferno and flamegraph.pl read): aggregation and the differential pairing of two
//! profiles.

use std::fmt::Write as _;

use rustc_hash::FxHashMap;

/// Appends `frame` to a folded line, its semicolons and line breaks (which would split
/// it) replaced by `:`, as inferno's collapsers do.
pub fn push_frame(line: &mut String, frame: &str) {
    if frame.contains([';', '\n', '\r']) {
        line.extend(frame.chars().map(|c| {
            if matches!(c, ';' | '\n' | '\r') {
                ':'
            } else {
                c
            }
        }));
    } else {
        line.push_str(frame);
    }
}

/// Stacks (root first) with their summed weights.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FoldedStacks {
    stacks: FxHashMap<String, u64>,
    /// Reused buffer for joining frames without a fresh String per sample.
    scratch: String,
}

impl FoldedStacks {
    pub fn new() -> Self {
        Self::default()
    }

    /// Empty, with room for `stacks` distinct stacks.
    pub fn with_capacity(stacks: usize) -> Self {
        FoldedStacks {
            stacks: FxHashMap::with_capacity_and_hasher(stacks, Default::default()),
            scratch: String::new(),
        }
    }

    /// Adds `weight` to the stack `frames` (root first). Semicolons and line breaks in
    /// names would split the frame, so they are replaced, as inferno's collapsers do.
    pub fn add<'f>(&mut self, frames: impl IntoIterator<Item = &'f str>, weight: u64) {
        let mut line = std::mem::take(&mut self.scratch);
        line.clear();
        for (index, frame) in frames.into_iter().enumerate() {
            if index > 0 {
                line.push(';');
            }
            push_frame(&mut line, frame);
        }
        self.add_line(&line, weight);
        self.scratch = line;
    }

    /// Adds `weight` to a stack already folded: its frames each appended by
    /// [`push_frame`] and separated by `;`. For a caller that folds parts of stacks
    /// once (a location's frames) and joins them for many stacks.
    pub fn add_line(&mut self, line: &str, weight: u64) {
        // Weights are periods read from files: they saturate rather than wrap.
        if let Some(total) = self.stacks.get_mut(line) {
            *total = total.saturating_add(weight);
        } else {
            self.stacks.insert(line.to_owned(), weight);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.stacks.is_empty()
    }

    /// Number of distinct stacks.
    pub fn len(&self) -> usize {
        self.stacks.len()
    }

    pub fn total_weight(&self) -> u64 {
        self.stacks
            .values()
            .fold(0u64, |total, &weight| total.saturating_add(weight))
    }

    /// The stacks sorted by name (the order inferno's collapsers print), with weights.
    pub fn sorted(&self) -> Vec<(&str, u64)> {
        let mut lines: Vec<_> = self
            .stacks
            .iter()
            .map(|(stack, &weight)| (stack.as_str(), weight))
            .collect();
        lines.sort_unstable();
        lines
    }

    /// Writes the folded text ([`to_text`](Self::to_text)) to `out` line by line,
    /// without the whole text in memory: a long run's merged stacks are tens of
    /// megabytes of it.
    pub fn write_text(&self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        for (stack, weight) in self.sorted() {
            out.write_all(stack.as_bytes())?;
            writeln!(out, " {weight}")?;
        }
        Ok(())
    }

    /// The folded text, one `stack weight` line per stack, sorted.
    pub fn to_text(&self) -> String {
        let lines = self.sorted();
        // A weight is at most 20 digits: one allocation for the whole text.
        let length = lines.iter().map(|(stack, _)| stack.len() + 22).sum();
        let mut text = String::with_capacity(length);
        for (stack, weight) in lines {
            text.push_str(stack);
            let _ = writeln!(text, " {weight}");
        }
        text
    }

    /// Differential folded text (`stack before after` lines, the input of
    /// `inferno-flamegraph` for differential graphs and of difffolded.pl's output):
    /// every stack of either profile, weights scaled so both totals are equal, which
    /// shows a change of share rather than of recording length.
    pub fn differential_text(before: &FoldedStacks, after: &FoldedStacks) -> String {
        let (total_before, total_after) = (before.total_weight(), after.total_weight());
        let scale = if total_before == 0 {
            1.0
        } else {
            total_after as f64 / total_before as f64
        };
        let mut stacks: Vec<&str> = before
            .stacks
            .keys()
            .chain(after.stacks.keys())
            .map(String::as_str)
            .collect();
        stacks.sort_unstable();
        stacks.dedup();
        let mut text = String::new();
        for stack in stacks {
            let old = before.stacks.get(stack).copied().unwrap_or(0);
            let new = after.stacks.get(stack).copied().unwrap_or(0);
            let _ = writeln!(
                text,
                "{stack} {} {new}",
                (old as f64 * scale).round() as u64
            );
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stacks_aggregate_and_print_sorted() {
        let mut folded = FoldedStacks::new();
        folded.add(["prog", "main", "hot"], 3);
        folded.add(["prog", "main"], 1);
        folded.add(["prog", "main", "hot"], 2);
        folded.add(["prog", "a;b"], 1);
        assert_eq!(
            folded.to_text(),
            "prog;a:b 1\nprog;main 1\nprog;main;hot 5\n"
        );
        let mut written = Vec::new();
        folded.write_text(&mut written).unwrap();
        assert_eq!(String::from_utf8(written).unwrap(), folded.to_text());
        assert_eq!(folded.total_weight(), 7);
    }

    #[test]
    fn differential_scales_before_to_the_after_total() {
        let mut before = FoldedStacks::new();
        before.add(["m", "a"], 10);
        before.add(["m", "b"], 10);
        let mut after = FoldedStacks::new();
        after.add(["m", "a"], 30);
        after.add(["m", "c"], 10);
        assert_eq!(
            FoldedStacks::differential_text(&before, &after),
            "m;a 20 30\nm;b 20 0\nm;c 0 10\n"
        );
    }
}
