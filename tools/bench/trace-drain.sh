#!/usr/bin/env bash
# How fast `rvperf trace record` drains the trace sink, in the riscv64 guest with the
# emulated N-Trace hardware (one hart, `-icount shift=0`: the guest's clock counts its
# instructions, one a nanosecond, so rates are per second of guest time and do not
# depend on this machine's speed or load).
#
# The workload is `bursts ROUNDS 0` (tests/programs/vm/bursts.c: rounds of glibc qsort
# with no pause, the densest user-mode trace of the test programs), traced in user mode
# (HTM) through the rvtrace driver with the default drain interval (10 ms) into sinks of
# several sizes. For each: the trace the encoders wrote, what the recorder lost, the
# trace rate (bytes written per second of the traced run), and the recorder's own CPU
# time (its user + system time, from the guest's /proc: what draining costs the hart).
# Prints a markdown table for the README.
#
# usage: tools/bench/trace-drain.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-16}
out=$(mktemp -d -t rvperf-trace-drain.XXXXXX)
trap 'rm -rf "$out"' EXIT

# One boot; the guest writes one `KIB WRITTEN LOST DRAINS NS CPU_TICKS HZ` line per sink.
guest_script='
set -e
modprobe rvtrace
hz=$(getconf CLK_TCK 2>/dev/null || echo 100)
for kib in 16 64 256 1024 4096 16384; do
    start=$(date +%s%N)
    rvperf trace record --format raw --user --buffer-bytes $((kib * 1024)) -o /tmp/t.nt \
        -- /opt/rvperf/bin/bursts '"$rounds"' 0 >/dev/null 2>/tmp/err &
    recorder=$!
    ticks=0
    # The recorder'"'"'s CPU time, read while it runs (fields 14 and 15 of its stat).
    while kill -0 "$recorder" 2>/dev/null; do
        stat=$(cat /proc/$recorder/stat 2>/dev/null || true)
        [ -n "$stat" ] && ticks=$(echo "$stat" | awk "{print \$14 + \$15}")
        sleep 0.05
    done
    wait "$recorder"
    end=$(date +%s%N)
    written=$(sed -n "s/^bytes_written=//p" /tmp/t.nt.info)
    lost=$(sed -n "s/^lost_bytes=//p" /tmp/t.nt.info)
    drains=$(sed -n "s/^drains=//p" /tmp/t.nt.info)
    echo "$kib $written $lost $drains $((end - start)) $ticks $hz" >>/out/drain.txt
done
'
RVPERF_VM_NTRACE=1 tools/vm/run --out "$out" -- sh -c "$guest_script" >/dev/null 2>&1 ||
    { echo "trace-drain.sh: the guest run failed; see $out" >&2; trap - EXIT; exit 1; }

echo "| sink | trace written | lost | drains | run (guest time) | trace rate | recorder CPU |"
echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
while read -r kib written lost drains ns ticks hz; do
    awk -v kib="$kib" -v written="$written" -v lost="$lost" -v drains="$drains" \
        -v ns="$ns" -v ticks="$ticks" -v hz="$hz" 'BEGIN {
        printf "| %d KiB | %.2f MB | %.1f%% | %d | %.0f ms | %.1f MB/s | %.0f ms |\n",
            kib, written / 1e6, written > 0 ? 100 * lost / written : 0, drains,
            ns / 1e6, written / (ns / 1e9) / 1e6, 1000 * ticks / hz
    }'
done <"$out/drain.txt"
