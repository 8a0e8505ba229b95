#!/usr/bin/env bash
# Decode speed of every trace protocol rvperf reads, on traces of one run of a real
# program (tests/programs/interp.c, ITERATIONS iterations; default 30: 4 million retired
# instructions): N-Trace (HTM, rvperf-tracegen's defaults), the debug specification's
# trace module (branch outcomes, and PC pairs) and tandem verification (everything QEMU
# shows, and a partial trace of the integer registers and pc alone). The debug trace
# module and N-Trace traces are made from QEMU's retired-PC log, the tandem traces from
# its register log (about 1.7 KB of text per instruction, streamed).
#
# Per trace: its size, bits per instruction, rvperf's own decode speed (best of 5,
# `rvperf decode --output summary --jobs 1`: every protocol on one thread), the wall time
# and peak RSS of listing every pc (`--output pcs --jobs 1`, best of 5). Prints a
# markdown table for the README. Not a test: figures depend on the machine and its load.
#
# usage: tools/bench/trace-formats.sh [ITERATIONS]
set -euo pipefail
cd "$(dirname "$0")/../.."
iterations=${1:-30}
tools/install-deps.sh
. tools/ensure-rust.sh
target=${CARGO_TARGET_DIR:-target}
cargo build --release --locked --quiet -p rvperf -p rvperf-trace-gen
rvperf=$target/release/rvperf
tracegen=$target/release/rvperf-tracegen
work=$target/bench-trace-formats
mkdir -p "$work"
. tools/bench/inputs.sh
tools/testprogs/build.sh "$work" interp >/dev/null
program=$work/interp

# make_trace NAME TRACEGEN_OPTIONS...: the trace NAME, made once.
make_trace() {
    local name=$1
    shift
    [ -s "$work/$name" ] ||
        "$tracegen" --elf "$program" -o "$work/$name" "$@" -- "$iterations" >&2
}
make_trace ntrace.nt
make_trace debug4-branches.d4 --format debug4
make_trace debug4-pairs.d4 --format debug4 --branch-reporting pc-pairs
make_trace tandem.tv --format tandem
make_trace tandem-partial.tv --format tandem --omit float,csrs,memory

echo "| trace | instructions | bytes | bits/instruction | decode speed (summary) | listing every pc: wall | peak RSS |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
for row in "N-Trace (HTM)|ntrace.nt|" \
    "debug trace module, branch outcomes|debug4-branches.d4|" \
    "debug trace module, PC pairs|debug4-pairs.d4|--branch-reporting pc-pairs" \
    "tandem, every register and memory|tandem.tv|" \
    "tandem, integer registers and pc|tandem-partial.tv|"; do
    IFS='|' read -r label name options <<<"$row"
    trace=$work/$name
    # shellcheck disable=SC2086 # options are words
    summary=$("$rvperf" decode --elf "$program" --trace "$trace" --jobs 1 $options)
    instructions=$(awk '/^instructions:/ {print $2}' <<<"$summary")
    bytes=$(stat -c %s "$trace")
    bits=$(awk "BEGIN{printf \"%.2f\", $bytes * 8 / $instructions}")
    best=0
    for _ in 1 2 3 4 5; do
        # shellcheck disable=SC2086
        speed=$("$rvperf" decode --elf "$program" --trace "$trace" --jobs 1 $options |
            sed -n 's/^decode time: *[0-9.]* s (\([0-9.]*\) M instructions\/s.*/\1/p')
        if awk "BEGIN{exit !($speed > $best)}"; then best=$speed; fi
    done
    read -r wall rss <<<"$(measure "$rvperf decode --elf $program --trace $trace --jobs 1 --output pcs $options")"
    echo "| $label | $instructions | $bytes | $bits | $best M instructions/s | $wall s | $((rss / 1024)) MB |"
done
