//! Flame graph SVGs from folded stacks, drawn by the `inferno` crate.

use crate::folded::FoldedStacks;

/// Options of [`write_flamegraph`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlameGraphOptions {
    pub title: String,
    /// What the widths count ("samples", "instructions", ...).
    pub count_name: String,
    /// Frames narrower than this many pixels are left out, as in flamegraph.pl.
    pub min_width: String,
}

impl Default for FlameGraphOptions {
    fn default() -> Self {
        Self {
            title: "Flame Graph".to_owned(),
            count_name: "samples".to_owned(),
            min_width: "0.1".to_owned(),
        }
    }
}

/// Errors of the SVG writer (inferno's, which carry no position: the input is ours).
#[derive(Debug, thiserror::Error)]
pub enum FlameGraphError {
    #[error("no stacks to draw")]
    Empty,
    #[error("inferno could not draw the flame graph: {0}")]
    Inferno(String),
}

fn inferno_options(options: &FlameGraphOptions) -> inferno::flamegraph::Options<'static> {
    let mut inferno_options = inferno::flamegraph::Options::default();
    inferno_options.title = options.title.clone();
    inferno_options.count_name = options.count_name.clone();
    inferno_options.min_width = options.min_width.parse().unwrap_or(0.1);
    // Deterministic colours, so the same input always gives the same SVG (golden tests).
    inferno_options.deterministic = true;
    // FoldedStacks gives its lines sorted already (to_text, differential_text).
    inferno_options.no_sort = true;
    inferno_options
}

/// Writes the SVG of `stacks` to `out`.
pub fn write_flamegraph(
    stacks: &FoldedStacks,
    options: &FlameGraphOptions,
    out: &mut impl std::io::Write,
) -> Result<(), FlameGraphError> {
    if stacks.is_empty() {
        return Err(FlameGraphError::Empty);
    }
    let text = stacks.to_text();
    let mut inferno_options = inferno_options(options);
    inferno::flamegraph::from_lines(&mut inferno_options, text.lines(), out)
        .map_err(|error| FlameGraphError::Inferno(error.to_string()))
}

/// Writes a differential SVG: frame widths from `after`, colours from the change of
/// each stack's share between `before` and `after` (red grew, blue shrank).
pub fn write_differential_flamegraph(
    before: &FoldedStacks,
    after: &FoldedStacks,
    options: &FlameGraphOptions,
    out: &mut impl std::io::Write,
) -> Result<(), FlameGraphError> {
    if before.is_empty() && after.is_empty() {
        return Err(FlameGraphError::Empty);
    }
    let text = FoldedStacks::differential_text(before, after);
    let mut inferno_options = inferno_options(options);
    inferno::flamegraph::from_lines(&mut inferno_options, text.lines(), out)
        .map_err(|error| FlameGraphError::Inferno(error.to_string()))
}
