#!/usr/bin/env bash
# Flame graph and AutoFDO benchmark: from the same perf.data,
#   rvperf flamegraph   versus  perf script | inferno-collapse-perf | inferno-flamegraph
#   rvperf autofdo      versus  perf script -F ip,brstack + llvm-profgen-19
# wall time (best of 5) and peak RSS (the largest process of a pipeline), as ratios
# measured in one run. Prints markdown for the README. Not a test: absolute figures
# depend on the machine; compare within one run.
#
# Inputs: a callchain recording made here (`perf record -g` of `rvperf decode`, built
# with frame pointers, on the bundled N-Trace fixture: a real Rust program with deep
# stacks), and the riscv64 CTR recording of the guest tier (target/vm-results) or
# tests/fixtures/autofdo (or RVPERF_AUTOFDO_RECORDING).
#
# usage: tools/bench/profiles.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-20}
tools/install-deps.sh >/dev/null
. tools/ensure-rust.sh
target=${CARGO_TARGET_DIR:-target}
cargo build --release --locked --quiet -p rvperf
rvperf=$(realpath "$target/release/rvperf")
work=$target/bench-profiles
mkdir -p "$work"
. tools/bench/inputs.sh
inferno=$(bench_inferno)
collapse=$inferno/inferno-collapse-perf
draw=$inferno/inferno-flamegraph

data=$(bench_callchain_recording "$work" "$seconds")
samples=$(perf script -i "$data" -F tid 2>/dev/null | wc -l)

read -r ours_wall ours_rss < <(measure "$rvperf flamegraph -i $data -o $work/rvperf.svg")
read -r theirs_wall theirs_rss < <(measure "perf script -i $data 2>/dev/null | $collapse | $draw >$work/inferno.svg")
echo "| from one perf.data ($samples samples with callchains) | wall (best of 5) | peak RSS |"
echo "| --- | ---: | ---: |"
echo "| \`rvperf flamegraph\` | ${ours_wall} s | $((ours_rss / 1024)) MiB |"
echo "| \`perf script \| inferno-collapse-perf \| inferno-flamegraph\` | ${theirs_wall} s | $((theirs_rss / 1024)) MiB |"
echo "| ratio | **$(awk "BEGIN{printf \"%.1f\", $theirs_wall / ($ours_wall > 0 ? $ours_wall : 0.001)}")x faster** | $(awk "BEGIN{printf \"%.2f\", $ours_rss / $theirs_rss}") of the pipeline's |"

recording=$(bench_autofdo_recording "$work")
branch_samples=$(perf script -i "$recording/perf.data" -F ip 2>/dev/null | wc -l)
read -r ours_wall ours_rss < <(measure "$rvperf autofdo -i $recording/perf.data --binary $recording/autofdo -o $work/rvperf.prof")
read -r theirs_wall theirs_rss < <(measure "perf script -F ip,brstack -i $recording/perf.data 2>/dev/null | grep / >$work/script.txt && llvm-profgen-19 --binary=$recording/autofdo --perfscript=$work/script.txt --format=text --output=$work/profgen.prof")
echo
echo "| from one perf.data ($branch_samples samples with CTR branch stacks) | wall (best of 5) | peak RSS |"
echo "| --- | ---: | ---: |"
echo "| \`rvperf autofdo\` | ${ours_wall} s | $((ours_rss / 1024)) MiB |"
echo "| \`perf script -F ip,brstack\` + \`llvm-profgen-19\` | ${theirs_wall} s | $((theirs_rss / 1024)) MiB |"
echo "| ratio | **$(awk "BEGIN{printf \"%.1f\", $theirs_wall / ($ours_wall > 0 ? $ours_wall : 0.001)}")x faster** | $(awk "BEGIN{printf \"%.2f\", $ours_rss / $theirs_rss}") of the pipeline's |"
