# Inputs and helpers shared by the benchmarks (sourced, not run): each bench_* input
# function makes its input once under the given work directory and prints its path.
# Expects `target` (the cargo target directory) to be set and the repository root to be
# the working directory; `measure` and `bench_inferno` expect `work` (the benchmark's
# work directory).

# measure COMMAND: best-of-5 wall seconds (millisecond resolution, from bash's
# EPOCHREALTIME) and peak RSS KiB of `sh -c COMMAND` (GNU time reports the largest RSS
# of the shell's children, i.e. of the pipeline's largest process).
measure() {
    local best="" rss=0 start end wall kib
    for _ in 1 2 3 4 5; do
        start=$EPOCHREALTIME
        /usr/bin/time -o "$work/time" -f "%M" sh -c "$1" >/dev/null 2>"$work/stderr" ||
            { cat "$work/stderr" >&2; exit 1; }
        end=$EPOCHREALTIME
        wall=$(awk "BEGIN{printf \"%.3f\", $end - $start}")
        read -r kib <"$work/time"
        if [ -z "$best" ] || awk "BEGIN{exit !($wall < $best)}"; then best=$wall; fi
        [ "$kib" -gt "$rss" ] && rss=$kib
    done
    echo "$best $rss"
}

# bench_inferno: installs inferno's command-line tools (the pipeline rvperf flamegraph
# replaces; the same crate version as the library rvperf draws with) under $work once
# and prints their directory.
bench_inferno() {
    if [ ! -x "$work/inferno/bin/inferno-flamegraph" ]; then
        cargo install --quiet --locked --root "$work/inferno" inferno --version 0.12.8 >/dev/null 2>&1
    fi
    echo "$work/inferno/bin"
}

# bench_callchain_recording WORK SECONDS: a perf.data of callchains (`perf record
# -F 4000 -g`) of `rvperf decode`, built with frame pointers so that perf's callchains
# are whole (deep Rust stacks with long mangled names), decoding the bundled N-Trace
# fixture for SECONDS seconds.
bench_callchain_recording() {
    local work=$1 seconds=$2 fixture=tests/fixtures/ntrace/interp
    local data=$work/callchains.data
    if [ ! -s "$data" ]; then
        CARGO_TARGET_DIR=$work/frame-pointers RUSTFLAGS="-C force-frame-pointers=yes" \
            cargo build --release --locked --quiet -p rvperf
        local workload
        workload=$(realpath "$work/frame-pointers/release/rvperf")
        perf record -q -F 4000 -g -o "$data" -- bash -c \
            "end=\$((SECONDS + $seconds)); while ((SECONDS < end)); do $workload decode --elf $fixture/program --trace $fixture/trace.nt --output pcs >/dev/null; done" \
            >/dev/null 2>&1
    fi
    echo "$data"
}

# bench_autofdo_recording WORK: a directory with perf.data (CTR branch stacks) and the
# recorded program `autofdo`: the guest tier's dense recording (a sample every 2,000
# instructions) when there is one, else the committed fixture (850 samples), unless
# RVPERF_AUTOFDO_RECORDING names another.
bench_autofdo_recording() {
    local work=$1 recording=${RVPERF_AUTOFDO_RECORDING:-tests/fixtures/autofdo}
    if [ -z "${RVPERF_AUTOFDO_RECORDING:-}" ] && [ -s "$target/vm-results/autofdo-dense.data" ]; then
        recording=$work/autofdo-dense
        mkdir -p "$recording"
        cp "$target/vm-results/autofdo-dense.data" "$recording/perf.data"
        cp "$target/vm-results/symfs/opt/rvperf/bin/autofdo" "$recording/autofdo"
    fi
    echo "$recording"
}

# bench_interp_trace WORK ITERATIONS MODE: the N-Trace (MODE htm or btm) of
# tests/programs/interp.c running ITERATIONS iterations, encoded by rvperf-tracegen
# from QEMU's exact retired-instruction stream; the program is WORK/interp.
bench_interp_trace() {
    local work=$1 iterations=$2 mode=$3
    local trace=$work/interp-$iterations-$mode.nt
    [ -x "$work/interp" ] || tools/testprogs/build.sh "$work" interp >/dev/null
    if [ ! -s "$trace" ]; then
        cargo build --release --locked --quiet -p rvperf-trace-gen
        echo "generating $trace (QEMU single-step log of $iterations iterations; a minute or two)" >&2
        "$target/release/rvperf-tracegen" --elf "$work/interp" --mode "$mode" -o "$trace" -- "$iterations" >&2
    fi
    echo "$trace"
}
