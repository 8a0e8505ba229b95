#!/usr/bin/env bash
# Side-by-side benchmark of two commits of rvperf: the same inputs, each command run
# by the base build and by this tree's build in alternation (so machine noise hits both
# alike), best of RUNS wall times and the peak RSS. For a redesign that must not make
# flame graphs, AutoFDO, script or decode slower. Prints a markdown table. Not a test.
#
# usage: tools/bench/compare.sh BASE_COMMIT [RUNS]
set -euo pipefail
cd "$(dirname "$0")/../.."
base_commit=${1:?usage: tools/bench/compare.sh BASE_COMMIT [RUNS]}
runs=${2:-7}
tools/install-deps.sh >/dev/null
. tools/ensure-rust.sh
target=${CARGO_TARGET_DIR:-target}
work=$target/bench-compare
mkdir -p "$work"
target=$(realpath "$target")
work=$(realpath "$work")

# The base build: a worktree of BASE_COMMIT with its own target directory.
base_source=$work/base-source
base_revision=$(git rev-parse --verify "$base_commit^{commit}")
if [ "$(git -C "$base_source" rev-parse HEAD 2>/dev/null)" != "$base_revision" ]; then
    git worktree remove --force "$base_source" 2>/dev/null || rm -rf "$base_source"
    git worktree prune
    git worktree add --detach "$base_source" "$base_revision" >/dev/null
fi
(cd "$base_source" && CARGO_TARGET_DIR=$work/base-target cargo build --release --locked --quiet -p rvperf)
cargo build --release --locked --quiet -p rvperf
base=$work/base-target/release/rvperf
new=$target/release/rvperf

. tools/bench/inputs.sh
callchains=$(bench_callchain_recording "$work" 20)
recording=$(bench_autofdo_recording "$work")
trace=$(bench_interp_trace "$work" 250 htm)
program=$work/interp

# run_both NAME COMMAND...: COMMAND with the word RVPERF standing for each build, output
# to /dev/null; prints one table row.
run_both() {
    local name=$1 best_base="" best_new="" rss_base=0 rss_new=0 build binary start end wall kib
    shift
    for _ in $(seq "$runs"); do
        for build in base new; do
            binary=$base
            [ "$build" = new ] && binary=$new
            local command=("${@/RVPERF/$binary}")
            start=$EPOCHREALTIME
            /usr/bin/time -o "$work/time" -f "%M" "${command[@]}" >/dev/null 2>"$work/stderr" ||
                { echo "$build: ${command[*]} failed:" >&2; cat "$work/stderr" >&2; exit 1; }
            end=$EPOCHREALTIME
            wall=$(awk "BEGIN{printf \"%.3f\", $end - $start}")
            read -r kib <"$work/time"
            if [ "$build" = base ]; then
                if [ -z "$best_base" ] || awk "BEGIN{exit !($wall < $best_base)}"; then best_base=$wall; fi
                [ "$kib" -gt "$rss_base" ] && rss_base=$kib
            else
                if [ -z "$best_new" ] || awk "BEGIN{exit !($wall < $best_new)}"; then best_new=$wall; fi
                [ "$kib" -gt "$rss_new" ] && rss_new=$kib
            fi
        done
    done
    echo "| $name | $best_base s | $best_new s | $(awk "BEGIN{printf \"%.2f\", $best_new / ($best_base > 0 ? $best_base : 0.001)}") | $((rss_base / 1024)) MiB | $((rss_new / 1024)) MiB |"
}

echo "| command (base $(git rev-parse --short "$base_revision"), this tree $(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo '+changes')) | base | this tree | ratio (this / base) | base RSS | this RSS |"
echo "| --- | ---: | ---: | ---: | ---: | ---: |"
run_both "flamegraph (callchains)" RVPERF flamegraph -i "$callchains" -o "$work/out.svg"
run_both "script (callchains)" RVPERF script -i "$callchains"
run_both "report (callchains)" RVPERF report -i "$callchains"
run_both "autofdo (CTR branch stacks)" RVPERF autofdo -i "$recording/perf.data" --binary "$recording/autofdo" -o "$work/out.prof"
run_both "decode summary (interp 250 HTM)" RVPERF decode --elf "$program" --trace "$trace" --output summary
run_both "decode pcs (interp 250 HTM)" RVPERF decode --elf "$program" --trace "$trace" --output pcs
