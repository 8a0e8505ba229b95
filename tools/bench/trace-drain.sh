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
# trace rate (bytes written per second of the traced run), and the CPU time of the
# recorder and the workload together (user + system, from the guest's /proc): what the
# recorder costs is the difference between two sinks' runs of the same workload.
# Prints a markdown table for the README.
#
# usage: tools/bench/trace-drain.sh [ROUNDS]   (default 200: about 0.2 s of guest time)
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-200}
out=$(mktemp -d -t rvperf-trace-drain.XXXXXX)
trap 'rm -rf "$out"' EXIT

# One boot; the guest writes one `KIB WRITTEN LOST DRAINS MS CPU_TICKS HZ` line per sink.
guest_script='
modprobe rvtrace || exit 1
hz=$(getconf CLK_TCK 2>/dev/null || echo 100)
# The CPU time of this shell'"'"'s reaped children (cutime + cstime, in ticks).
children_ticks() { awk "{print \$16 + \$17}" /proc/$$/stat; }
# The last is the default: all of the sink (16 MiB less the discovery table).
for kib in 16 64 256 1024 4096 all; do
    size=""
    [ "$kib" = all ] || size="--buffer-bytes $((kib * 1024))"
    before=$(children_ticks)
    # The guest'"'"'s clock: /proc/uptime (10 ms steps; a run lasts hundreds of ms).
    start=$(awk "{print int(\$1 * 1000)}" /proc/uptime)
    rvperf trace record --format raw --user $size -o /tmp/t.nt \
        -- /opt/rvperf/bin/bursts '"$rounds"' 0 >/dev/null 2>/tmp/err || { cat /tmp/err; exit 1; }
    end=$(awk "{print int(\$1 * 1000)}" /proc/uptime)
    ticks=$(( $(children_ticks) - before ))
    written=$(sed -n "s/^bytes_written=//p" /tmp/t.nt.info)
    lost=$(sed -n "s/^lost_bytes=//p" /tmp/t.nt.info)
    drains=$(sed -n "s/^drains=//p" /tmp/t.nt.info)
    [ "$kib" = all ] && kib=$(( $(sed -n "s/^sink_bytes=//p" /tmp/t.nt.info) / 1024 ))
    echo "$kib $written $lost $drains $((end - start)) $ticks $hz" >>/out/drain.txt
done
'
RVPERF_VM_NTRACE=1 tools/vm/run --out "$out" -- sh -c "$guest_script" >/dev/null 2>&1 ||
    { echo "trace-drain.sh: the guest run failed; see $out" >&2; trap - EXIT; exit 1; }

echo "| sink | trace written | lost | drains | run (guest time) | trace rate | CPU (recorder + workload) |"
echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
while read -r kib written lost drains ms ticks hz; do
    awk -v kib="$kib" -v written="$written" -v lost="$lost" -v drains="$drains" \
        -v ms="$ms" -v ticks="$ticks" -v hz="$hz" 'BEGIN {
        printf "| %d KiB | %.2f MB | %.1f%% | %d | %.0f ms | %.1f MB/s | %.0f ms |\n",
            kib, written / 1e6, (written > 0 ? 100 * lost / written : 0), drains,
            ms, written / (ms / 1e3) / 1e6, 1000 * ticks / hz
    }'
done <"$out/drain.txt"
