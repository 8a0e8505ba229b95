#!/usr/bin/env bash
# Profiles from a trace benchmark: from the same N-Trace of the interpreter
# (tests/programs/interp.c, 250 iterations: 33 million instructions, HTM),
#   rvperf flamegraph --trace   versus  rvperf inject --itrace + perf script |
#                                       inferno-collapse-perf | inferno-flamegraph
#   rvperf autofdo --trace      versus  rvperf inject --itrace + perf script -F
#                                       ip,brstack + llvm-profgen-19
# wall time (best of 5) and peak RSS (the largest process of a pipeline), as ratios
# measured in one run; then rvperf's peak RSS on a trace 4x as long (memory must not
# grow with the trace). The pipeline's inject samples every 1,009 instructions with
# 64-entry branch stacks (perf inject --itrace=il64 with a short period: the densest
# sampling that pipeline is used with); rvperf's profiles are exact. Prints markdown
# for the README. Not a test: absolute figures depend on the machine.
#
# usage: tools/bench/trace-profiles.sh [ITERATIONS]
set -euo pipefail
cd "$(dirname "$0")/../.."
iterations=${1:-250}
tools/install-deps.sh >/dev/null
. tools/ensure-rust.sh
target=${CARGO_TARGET_DIR:-target}
cargo build --release --locked --quiet -p rvperf
rvperf=$(realpath "$target/release/rvperf")
work=$target/bench-trace-profiles
mkdir -p "$work"
. tools/bench/inputs.sh
inferno=$(bench_inferno)
collapse=$inferno/inferno-collapse-perf
draw=$inferno/inferno-flamegraph

trace=$(bench_interp_trace "$work" "$iterations" htm)
program=$(realpath "$work/interp")
instructions=$("$rvperf" decode --elf "$program" --trace "$trace" --output summary | awk '/^instructions:/ {print $2}')
injected=$work/injected.data
inject="$rvperf inject --itrace=1009 --branches 64 --trace $trace --elf $program -o $injected"

read -r flame_ours flame_ours_rss < <(measure "$rvperf flamegraph --trace $trace --elf $program -o $work/rvperf.svg")
read -r flame_theirs flame_theirs_rss < <(measure "$inject && perf script -i $injected 2>/dev/null | $collapse | $draw >$work/inferno.svg")
read -r afdo_ours afdo_ours_rss < <(measure "$rvperf autofdo --trace $trace --binary $program -o $work/rvperf.afdo")
# The same decoded on two threads (the above on one, the default).
read -r flame_serial flame_serial_rss < <(measure "$rvperf flamegraph --jobs 2 --trace $trace --elf $program -o $work/rvperf-serial.svg")
read -r afdo_serial afdo_serial_rss < <(measure "$rvperf autofdo --jobs 2 --trace $trace --binary $program -o $work/rvperf-serial.afdo")
read -r afdo_theirs afdo_theirs_rss < <(measure "$inject && perf script -F ip,brstack -i $injected >$work/script.txt 2>/dev/null && llvm-profgen-19 --binary=$program --perfscript=$work/script.txt --format=text --output=$work/profgen.afdo")

# The same trace four times over (each copy ends with its last message and starts with
# a synchronisation, so the whole is one valid stream four times as long).
long=$work/interp-4x.nt
cat "$trace" "$trace" "$trace" "$trace" >"$long"
read -r _ flame_long_rss < <(measure "$rvperf flamegraph --trace $long --elf $program -o $work/rvperf-4x.svg")
read -r _ afdo_long_rss < <(measure "$rvperf autofdo --trace $long --binary $program -o $work/rvperf-4x.afdo")

ratio() { awk "BEGIN{printf \"%.1fx\", $1 / $2}"; }
echo "| from one N-Trace ($instructions instructions, $(($(stat -c %s "$trace") / 1000)) kB) | wall (best of 5) | peak RSS | peak RSS, trace 4x as long |"
echo "| --- | ---: | ---: | ---: |"
echo "| \`rvperf flamegraph --trace\` (exact) | ${flame_ours} s | $((flame_ours_rss / 1024)) MiB | $((flame_long_rss / 1024)) MiB |"
echo "| \`rvperf flamegraph --trace --jobs 2\` | ${flame_serial} s ($(ratio "$flame_theirs" "$flame_serial")) | $((flame_serial_rss / 1024)) MiB | |"
echo "| \`rvperf inject --itrace\` + \`perf script \| inferno-collapse-perf \| inferno-flamegraph\` | ${flame_theirs} s ($(ratio "$flame_theirs" "$flame_ours")) | $((flame_theirs_rss / 1024)) MiB | |"
echo "| \`rvperf autofdo --trace\` (exact) | ${afdo_ours} s | $((afdo_ours_rss / 1024)) MiB | $((afdo_long_rss / 1024)) MiB |"
echo "| \`rvperf autofdo --trace --jobs 2\` | ${afdo_serial} s ($(ratio "$afdo_theirs" "$afdo_serial")) | $((afdo_serial_rss / 1024)) MiB | |"
echo "| \`rvperf inject --itrace\` + \`perf script -F ip,brstack\` + \`llvm-profgen-19\` | ${afdo_theirs} s ($(ratio "$afdo_theirs" "$afdo_ours")) | $((afdo_theirs_rss / 1024)) MiB | |"
