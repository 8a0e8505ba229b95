#!/usr/bin/env bash
# The cost of the emulated N-Trace hardware (tools/qemu-ntrace) to the guest: the
# interpreter (tests/programs/interp.c) run in the riscv64 guest three ways, each boot's
# wall time measured on the host (best of RUNS):
#   plain     the guest without the plugin;
#   idle      with the trace block and the plugin loaded, tracing off;
#   tracing   traced in user mode, HTM, at full rate, into the 16 MiB RAM sink (circular).
# Each way boots twice, with `interp SMALL` and `interp LARGE`, and the difference (the
# cost of LARGE - SMALL iterations, boot and start-up cancelled out) is compared with
# plain's. Prints a markdown table for the README. Not a test: wall times depend on the
# machine and its load; compare within one run.
#
# usage: tools/bench/ntrace-device.sh [RUNS] [LARGE]
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=${1:-3}
large=${2:-20000}
small=10

# best_boot RUNS MODE ITERATIONS: the smallest wall time of a boot running the workload.
best_boot() {
    local runs=$1 mode=$2 iterations=$3 best="" start end seconds
    local command=(/opt/rvperf/bin/interp "$iterations")
    local flags=()
    case "$mode" in
    plain) ;;
    idle) flags=(--ntrace) ;;
    tracing)
        flags=(--ntrace)
        command=(/opt/rvperf/bin/rvtrace-ctl record --mode htm --privilege user -o /tmp/trace.nt -- "${command[@]}")
        ;;
    esac
    for _ in $(seq "$runs"); do
        start=$(date +%s.%N)
        tools/vm/run "${flags[@]}" -- "${command[@]}" >/dev/null 2>&1 ||
            { echo "ntrace-device.sh: the $mode boot failed" >&2; exit 1; }
        end=$(date +%s.%N)
        seconds=$(echo "$end - $start" | bc)
        if [ -z "$best" ] || awk "BEGIN{exit !($seconds < $best)}"; then best=$seconds; fi
    done
    echo "$best"
}

# Build everything once (the first boot would otherwise count it).
tools/vm/run --ntrace -- true >/dev/null 2>&1

echo "| guest | boot + interp $small | boot + interp $large | interp $large - interp $small | slowdown |"
echo "| --- | ---: | ---: | ---: | ---: |"
base=""
for mode in plain idle tracing; do
    short=$(best_boot "$runs" "$mode" "$small")
    long=$(best_boot "$runs" "$mode" "$large")
    work=$(echo "$long - $short" | bc)
    [ -n "$base" ] || base=$work
    ratio=$(awk -v w="$work" -v b="$base" 'BEGIN { printf "%.2fx", w / b }')
    printf '| %s | %.1f s | %.1f s | %.1f s | %s |\n' "$mode" "$short" "$long" "$work" "$ratio"
done
