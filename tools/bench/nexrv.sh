#!/usr/bin/env bash
# rvperf's N-Trace decoder side by side with the N-Trace reference decoder (NexRv, the C
# reference code of the RISC-V N-Trace task group, built here with gcc -O2), on traces of
# two real programs made by both encoders from the same QEMU retired-PC stream:
# tests/programs/interp.c (250 iterations, 33 M instructions) and tests/programs/qsort.c
# (30 rounds, 34 M instructions). Encoders: rvperf-tracegen (HTM and BTM, its defaults:
# 32-entry return stack, repeated history; with `--ecall-as-jump`, ecall reported the
# reference encoder's way, which the reference decoder needs) and `NexRv -enco` (its
# default HTM without return stack or repeats, `-nobhm` BTM, and HTM with
# `-cs 32 -rpt 2`).
#
# Per trace: wall time, best of N, of `rvperf decode --output pcs >/dev/null` and of
# `NexRv -deco ... -pcout /dev/null` (both print every retired PC), their ratio, and
# rvperf's summary-mode speed (its own timer, best of N) on one thread (`--jobs 1`) and
# on two (`--jobs 2`, with the share of messages the joining thread decoded itself). Both decoders' PC output is
# first checked against the ground truth once. Prints a markdown table for the README.
# Not a test: figures depend on the machine and its load; compare within one run.
#
# usage: tools/bench/nexrv.sh [RUNS]
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=${1:-5}
tools/install-deps.sh
. tools/ensure-rust.sh
target=${CARGO_TARGET_DIR:-target}
cargo build --release --locked --quiet -p rvperf -p rvperf-trace-gen
rvperf=$target/release/rvperf
tracegen=$target/release/rvperf-tracegen
work=$target/bench-nexrv
mkdir -p "$work"
nexrv=$(tools/nexrv/nexrv.sh build "$work")
tools/testprogs/build.sh "$work" interp qsort >/dev/null

# make_traces NAME ARGUMENT: ground truth and the five traces of NAME run with ARGUMENT.
make_traces() {
    local name=$1 argument=$2 base=$work/$1
    if [ ! -s "$base.pcs" ] || [ ! -s "$base-rvperf-htm.nt" ]; then
        echo "tracing $name $argument under QEMU (a minute or two)" >&2
        "$tracegen" --elf "$base" --mode htm --ecall-as-jump -o "$base-rvperf-htm.nt" --pcs-output "$base.pcs" -- "$argument" >&2
    fi
    [ -s "$base-rvperf-btm.nt" ] ||
        "$tracegen" --elf "$base" --mode btm --ecall-as-jump -o "$base-rvperf-btm.nt" -- "$argument" >&2
    [ -s "$base-nexrv-htm.nt" ] ||
        tools/nexrv/nexrv.sh encode "$nexrv" "$base.objdump" "$base.pcs" "$base-nexrv-htm.nt"
    [ -s "$base-nexrv-btm.nt" ] ||
        tools/nexrv/nexrv.sh encode "$nexrv" "$base.objdump" "$base.pcs" "$base-nexrv-btm.nt" -nobhm
    [ -s "$base-nexrv-cs32-rpt2.nt" ] ||
        tools/nexrv/nexrv.sh encode "$nexrv" "$base.objdump" "$base.pcs" "$base-nexrv-cs32-rpt2.nt" -cs 32 -rpt 2
    [ -s "$base.pcinfo" ] || "$nexrv" -conv -objd "$base.objdump" -pcinfo "$base.pcinfo" >/dev/null
}
make_traces interp 250
make_traces qsort 30

# best_wall RUNS COMMAND...: the smallest wall time in seconds, stdout discarded.
best_wall() {
    local runs=$1 best="" seconds
    shift
    for _ in $(seq "$runs"); do
        /usr/bin/time -f "%e" -o "$work/time.txt" "$@" >/dev/null 2>&1
        seconds=$(tail -n1 "$work/time.txt")
        if [ -z "$best" ] || awk "BEGIN{exit !($seconds < $best)}"; then best=$seconds; fi
    done
    echo "$best"
}

echo "| program | encoder | trace | messages | instructions per message | rvperf pcs | NexRv -deco | ratio | summary, 1 job | summary, 2 jobs | decoded serially (2 jobs) |"
echo "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
for name in interp qsort; do
    base=$work/$name
    for trace in rvperf-htm rvperf-btm nexrv-htm nexrv-btm nexrv-cs32-rpt2; do
        file=$base-$trace.nt
        # Correctness first: both decoders must give the ground truth.
        "$rvperf" decode --elf "$base" --trace "$file" --output pcs | cmp -s - "$base.pcs" ||
            { echo "nexrv.sh: rvperf decodes $file wrongly" >&2; exit 1; }
        "$nexrv" -deco "$file" -pcinfo "$base.pcinfo" -pcout "$work/reference.pcs" -none >"$work/reference.log" ||
            { cat "$work/reference.log" >&2; echo "nexrv.sh: NexRv -deco fails on $file" >&2; exit 1; }
        tr 'A-FX' 'a-fx' <"$work/reference.pcs" | cmp -s - "$base.pcs" ||
            { echo "nexrv.sh: NexRv -deco decodes $file wrongly" >&2; exit 1; }
        summary=$("$rvperf" decode --elf "$base" --trace "$file" --output summary)
        messages=$(awk '/^messages:/ {print $2}' <<<"$summary")
        instructions=$(awk '/^instructions:/ {print $2}' <<<"$summary")
        speeds=""
        for jobs in 1 2; do
            best_speed=0
            for _ in $(seq "$runs"); do
                speed=$("$rvperf" decode --elf "$base" --trace "$file" --output summary --jobs "$jobs" |
                    sed -n 's/^decode time: *[0-9.]* s (\([0-9.]*\) M instructions\/s.*/\1/p')
                if awk "BEGIN{exit !($speed > $best_speed)}"; then best_speed=$speed; fi
            done
            speeds="$speeds | $(awk "BEGIN{printf \"%.2f G/s\", $best_speed/1000}")"
        done
        serial=$("$rvperf" decode --elf "$base" --trace "$file" --output summary --jobs 2 --parallel-work |
            sed -n 's/^parallel decode:.*(\([0-9.]*%\)).*/\1/p')
        ours=$(best_wall "$runs" "$rvperf" decode --elf "$base" --trace "$file" --output pcs)
        theirs=$(best_wall "$runs" "$nexrv" -deco "$file" -pcinfo "$base.pcinfo" -pcout /dev/null -none)
        encoder=${trace%%-*}
        mode=${trace#*-}
        echo "| $name | $encoder | $mode | $messages | $(awk "BEGIN{printf \"%.1f\", $instructions/$messages}") | ${ours} s | ${theirs} s | $(awk "BEGIN{printf \"%.1fx\", $theirs/$ours}")$speeds | $serial |"
    done
done
