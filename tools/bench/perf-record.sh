#!/usr/bin/env bash
# Recording-overhead and parsing benchmark: rvperf record versus Linux perf record on
# the same workload at the same frequency, each attached (-p) to a separately started
# process so that GNU time measures the recorder alone (user + system CPU, peak RSS);
# then the parser's throughput on a large perf.data. Prints markdown for the README.
# Not a test: absolute figures depend on the machine; compare within one run.
#
# usage: tools/bench/perf-record.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-300}
tools/install-deps.sh >/dev/null
. tools/ensure-rust.sh
target=${CARGO_TARGET_DIR:-target}
cargo build --release --locked --quiet -p rvperf
rvperf=$target/release/rvperf
work=$target/bench-perf
mkdir -p "$work"
cc -O1 -g -fno-omit-frame-pointer -o "$work/hot" tests/programs/host/hot.c

# attach RECORDER... : runs the workload in a reaping subshell, attaches, prints "user+sys rss_kib"
attach() {
    local pidfile=$work/pid
    rm -f "$pidfile"
    ( "$work/hot" "$rounds" >/dev/null & echo $! >"$pidfile"; wait ) &
    local runner=$!
    while [ ! -s "$pidfile" ]; do sleep 0.01; done
    /usr/bin/time -o "$work/time" -f "%U %S %M" "$@" -p "$(cat "$pidfile")" >/dev/null 2>&1
    wait "$runner"
    awk '{printf "%.2f %d\n", $1 + $2, $3}' "$work/time"
}

echo "| recorder (-F 4000, attached to a ${rounds}-round hot loop) | CPU user+sys (best of 3) | peak RSS | samples |"
echo "| --- | ---: | ---: | ---: |"
for tool in perf rvperf; do
    best=""; rss=0
    for _ in 1 2 3; do
        if [ "$tool" = perf ]; then
            read -r cpu kib < <(attach perf record -q -F 4000 -o "$work/perf.data")
        else
            read -r cpu kib < <(attach "$rvperf" record -F 4000 -o "$work/rvperf.data")
        fi
        if [ -z "$best" ] || awk "BEGIN{exit !($cpu < $best)}"; then best=$cpu; fi
        [ "$kib" -gt "$rss" ] && rss=$kib
    done
    file=$work/$tool.data
    samples=$(perf script -i "$file" -F tid 2>/dev/null | wc -l)
    echo "| $tool record | ${best} s | $((rss / 1024)) MiB | $samples |"
done

# Resident memory of the recorder must not grow with the recording.
read -r _ short < <(rounds=50 attach "$rvperf" record -F 4000 -o "$work/short.data")
read -r _ long < <(rounds=$((rounds * 2)) attach "$rvperf" record -F 4000 -o "$work/long.data")
echo
echo "rvperf record peak RSS: $((short / 1024)) MiB for a 50-round run, $((long / 1024)) MiB for $((rounds * 2)) rounds."

# Parser throughput: a dense recording (a sample every 10 us of CPU time), read back.
"$rvperf" record -c 10000 -o "$work/dense.data" -- "$work/hot" 100 >/dev/null 2>&1
records=$(perf script -i "$work/dense.data" -F tid 2>/dev/null | wc -l)
start=$(date +%s.%N); "$rvperf" script -i "$work/dense.data" -F tid,ip >/dev/null; end=$(date +%s.%N)
start_perf=$(date +%s.%N); perf script -i "$work/dense.data" -F tid,ip >/dev/null 2>&1; end_perf=$(date +%s.%N)
awk -v n="$records" -v a="$start" -v b="$end" -v c="$start_perf" -v d="$end_perf" 'BEGIN {
    printf "\nParsing %d samples: rvperf script %.3f s (%.1f M records/s), perf script %.3f s (%.1f M records/s).\n",
        n, b - a, n / (b - a) / 1e6, d - c, n / (d - c) / 1e6 }'
