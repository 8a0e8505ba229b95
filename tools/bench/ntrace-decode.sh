#!/usr/bin/env bash
# Decode-speed and memory benchmark of `rvperf decode` on the N-Trace of a real program
# (tests/programs/interp.c, a bytecode interpreter, 250 iterations: 33 million retired
# instructions). Prints a markdown table for the README. Not a test: figures depend on
# the machine; compare them within one run.
#
# usage: tools/bench/ntrace-decode.sh [ITERATIONS]
set -euo pipefail
cd "$(dirname "$0")/../.."
iterations=${1:-250}
tools/install-deps.sh
. tools/ensure-rust.sh
target=${CARGO_TARGET_DIR:-target}
cargo build --release --locked --quiet -p rvperf
rvperf=$target/release/rvperf
work=$target/bench-ntrace
mkdir -p "$work"
. tools/bench/inputs.sh
for mode in htm btm; do
    bench_interp_trace "$work" "$iterations" "$mode" >/dev/null
done
program=$work/interp

# best of N: the smallest wall time, and the largest peak RSS seen
measure() { # measure RUNS OUTPUT_MODE TRACE [JOBS] -> "seconds peak_kib"
    local runs=$1 mode=$2 trace=$3 jobs=${4:-1} best="" peak=0 line seconds kib
    for _ in $(seq "$runs"); do
        line=$( { /usr/bin/time -f "%e %M" "$rvperf" decode --elf "$program" --trace "$trace" --output "$mode" --jobs "$jobs" >/dev/null; } 2>&1 | tail -n1)
        seconds=${line% *}; kib=${line#* }
        if [ -z "$best" ] || awk "BEGIN{exit !($seconds < $best)}"; then best=$seconds; fi
        [ "$kib" -gt "$peak" ] && peak=$kib
    done
    echo "$best $peak"
}

echo "| trace | instructions | trace MB | output | jobs | best decode speed (rvperf's own timer) | wall time (best of 5) | instructions/s (wall) | peak RSS |"
echo "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |"
for mode in htm btm; do
    trace=$work/interp-$iterations-$mode.nt
    summary=$("$rvperf" decode --elf "$program" --trace "$trace" --output summary)
    instructions=$(awk '/^instructions:/ {print $2}' <<<"$summary")
    megabytes=$(awk "BEGIN{printf \"%.1f\", $(stat -c %s "$trace")/1e6}")
    for run in "summary 1" "summary 2" "pcs 2"; do
        read -r output jobs <<<"$run"
        shown_speed="-"
        if [ "$output" = summary ]; then
            best_speed=0
            for _ in 1 2 3 4 5; do
                speed=$("$rvperf" decode --elf "$program" --trace "$trace" --output summary --jobs "$jobs" | sed -n 's/^decode time: *[0-9.]* s (\([0-9.]*\) M instructions\/s, \([0-9.]*\) MB.*/\1 M instr\/s, \2 MB\/s/p')
                value=${speed%% *}
                if awk "BEGIN{exit !($value > ${best_speed%% *})}"; then best_speed=$speed; fi
            done
            shown_speed=$best_speed
        fi
        read -r seconds peak < <(measure 5 "$output" "$trace" "$jobs")
        rate=$(awk "BEGIN{printf \"%.1f M\", $instructions/$seconds/1e6}")
        echo "| interp $iterations ${mode^^} | $instructions | $megabytes | $output | $jobs | $shown_speed | ${seconds} s | $rate | $((peak / 1024)) MiB |"
    done
done

# Memory must not grow with the trace: decode the same trace 1x and 4x back to back
# (each copy ends with ProgTraceCorrelation and starts with a sync, so 4x is one valid
# stream four times as long).
trace=$work/interp-$iterations-htm.nt
cat "$trace" "$trace" "$trace" "$trace" > "$work/interp-$iterations-htm-x4.nt"
# The 4x trace also decodes long enough (about 0.1 s) for the speed of one and two jobs
# to be compared without the fixed costs of a 30 ms decode.
for jobs in 1 2; do
    read -r _ peak1 < <(measure 1 summary "$trace" "$jobs")
    read -r _ peak4 < <(measure 1 summary "$work/interp-$iterations-htm-x4.nt" "$jobs")
    best=0
    for _ in 1 2 3 4 5; do
        speed=$("$rvperf" decode --elf "$program" --trace "$work/interp-$iterations-htm-x4.nt" --output summary --jobs "$jobs" |
            sed -n 's/^decode time: *[0-9.]* s (\([0-9.]*\) M instructions\/s.*/\1/p')
        if awk "BEGIN{exit !($speed > $best)}"; then best=$speed; fi
    done
    echo
    echo "Summary mode, $jobs job(s): peak RSS 1x trace $((peak1 / 1024)) MiB, 4x trace $((peak4 / 1024)) MiB; 4x trace decoded at $best M instructions/s (best of 5)."
done
