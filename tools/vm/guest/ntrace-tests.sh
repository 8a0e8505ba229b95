#!/bin/sh
# N-Trace hardware checks, run by tools/vm/test in boots of their own with the emulated
# trace block (RVPERF_VM_NTRACE=1; docs/trace-device.md): rvtrace-ctl's check of the
# register interface, then traces of real programs under several encoder
# configurations, left in /out/ntrace with a manifest for the host, which decodes them
# and compares each with the program's exact run under qemu-riscv64
# (tests/tests/ntrace_guest.rs).
#
#   ntrace-tests.sh          one hart: the register checks and the single-hart traces
#   ntrace-tests.sh smp      two harts: two programs at once through the funnel
OUT=/out/ntrace
TAP=/out/guest-ntrace-tests.tap
BIN=/opt/rvperf/bin
# Where `rvperf trace record` writes, in the guest's memory: its writes share the
# thread that drains the sink, and a write to /out (9p, served by QEMU's main loop on
# the busy host) can stall long enough for a two-hart trace of the kernel to wrap the
# 16 MiB sink (seen: 2.6 MB lost in one of eight recordings to /out, none in fourteen
# to /tmp). Each recording is moved to $OUT when it is over.
RECORDINGS=/tmp/ntrace
mkdir -p "$OUT" "$RECORDINGS"
: >"$TAP"
count=0
failed=0
ok() { count=$((count + 1)); echo "ok $count - $*" | tee -a "$TAP"; }
not_ok() { count=$((count + 1)); failed=$((failed + 1)); echo "not ok $count - $*" | tee -a "$TAP"; }

# capture NAME CTL-OPTIONS -- PROGRAM ARGS...: one trace, listed in the manifest with
# the program and its arguments (the first program's, for several).
capture() {
    name=$1
    shift
    options=""
    while [ "$1" != "--" ]; do options="$options $1"; shift; done
    shift
    # shellcheck disable=SC2086 # options are words
    if "$BIN/rvtrace-ctl" record $options -o "$OUT/$name.nt" -- "$@" >"$OUT/$name.stdout" 2>"$OUT/$name.stderr"; then
        echo "$name $*" >>"$OUT/manifest"
        ok "$name: traced $* ($(wc -c <"$OUT/$name.nt") bytes of trace)"
    else
        not_ok "$name: rvtrace-ctl record$options -- $* failed: $(tail -n 3 "$OUT/$name.stderr")"
    fi
}

# quiet_pipe_run STDOUT-FILE COMMAND...: runs COMMAND with its standard output a pipe,
# as under rvtrace-ctl and in the host's ground-truth run (glibc's stdio buffers a file
# otherwise: another execution), that nothing reads until COMMAND is over (a reader
# would run on the traced hart): a FIFO held open read-write, read through a second
# descriptor afterwards. Returns COMMAND's status.
quiet_pipe_run() {
    stdout_file=$1
    shift
    fifo=/tmp/quiet-pipe.$$
    rm -f "$fifo"
    mkfifo "$fifo"
    exec 3<>"$fifo"
    "$@" >"$fifo"
    run_status=$?
    exec 4<"$fifo" 3>&-
    cat <&4 >"$stdout_file"
    exec 4<&-
    rm -f "$fifo"
    return "$run_status"
}

# keep NAME: moves `rvperf trace record`'s output for NAME ($RECORDINGS/NAME.nt and
# its .info, or the NAME.perf.data file or directory) to $OUT.
keep() {
    mv "$RECORDINGS/$1".* "$OUT/"
}

# warnings_of STDERR-FILE: the recorder's warnings (a sink that overtook it), for the
# ok lines.
warnings_of() {
    grep -o 'warning: .*' "$1" | tr '\n' ' '
}

# rvperf_capture NAME FORMAT RVPERF-OPTIONS -- PROGRAM ARGS...: one trace through the
# rvtrace driver by `rvperf trace record`: FORMAT raw (NAME.nt and NAME.nt.info, listed
# in the manifest like rvtrace-ctl's) or perf-data (NAME.perf.data, listed in
# perf-data-manifest).
rvperf_capture() {
    name=$1
    format=$2
    shift 2
    options=""
    while [ "$1" != "--" ]; do options="$options $1"; shift; done
    shift
    case "$format" in
    raw) output=$RECORDINGS/$name.nt manifest=$OUT/manifest ;;
    *) output=$RECORDINGS/$name.perf.data manifest=$OUT/perf-data-manifest ;;
    esac
    # shellcheck disable=SC2086 # options are words
    if quiet_pipe_run "$OUT/$name.stdout" rvperf trace record --format "$format" $options -o "$output" -- "$@" 2>"$OUT/$name.stderr" &&
        keep "$name"; then
        echo "$name $*" >>"$manifest"
        ok "$name: rvperf trace record --format $format$options -- $*: $(grep -v warning "$OUT/$name.stderr" | tail -n 1) $(warnings_of "$OUT/$name.stderr")"
    else
        not_ok "$name: rvperf trace record --format $format$options -- $* failed: $(tail -n 3 "$OUT/$name.stderr")"
    fi
}

# rvperf_products NAME BINARY: what rvperf makes of NAME.perf.data in the guest, in
# $OUT/products for the host to compare with its own and with the program's exact run:
# the flame graph's folded stacks, the AutoFDO profile of BINARY (LLVM text, GCC, and
# every instruction's count), and perf script's samples of the trace (--itrace).
rvperf_products() {
    name=$1
    binary=$2
    recording=$OUT/$name.perf.data
    products=$OUT/products
    mkdir -p "$products"
    if rvperf flamegraph -i "$recording" --folded -o "$products/$name.folded" 2>"$products/$name.stderr" &&
        rvperf autofdo -i "$recording" --binary "$binary" -o "$products/$name.afdo.txt" \
            --instruction-counts "$products/$name.counts" 2>>"$products/$name.stderr" &&
        rvperf autofdo -i "$recording" --binary "$binary" --format gcc -o "$products/$name.gcov" \
            2>>"$products/$name.stderr" &&
        rvperf script -i "$recording" --itrace=997 -F ip,brstack >"$products/$name.script" \
            2>>"$products/$name.stderr"; then
        ok "$name: rvperf flamegraph, autofdo and script -i in the guest ($(wc -l <"$products/$name.folded") stacks, $(wc -l <"$products/$name.script") samples)"
    else
        not_ok "$name: rvperf flamegraph, autofdo or script -i in the guest failed: $(tail -n 3 "$products/$name.stderr")"
    fi
}

: >"$OUT/manifest"
: >"$OUT/perf-data-manifest"
if [ "${1:-}" = smp ]; then
    [ "$(nproc)" -ge 2 ] || { not_ok "the guest has two harts"; exit 1; }
    "$BIN/rvtrace-ctl" discover >"$OUT/discover-smp.txt" 2>&1 || not_ok "rvtrace-ctl discover"
    # Both workloads at once, one per hart, through the funnel (SRC: the hart).
    capture smp-qsort --harts 2 --src-bits 1 --pin --privilege user -- \
        "$BIN/qsort" 1 :: "$BIN/qsort" 2
    # rvperf trace record -a through the driver: two programs at the same addresses
    # (static, non-PIE) take turns on CPU 1 while a third keeps CPU 0 busy; the host
    # splits the trace by process and decodes each against its own program.
    if modprobe rvtrace; then
        taskset -c 0 "$BIN/hot" 100000 >/dev/null &
        spinner=$!
        name=rvperf-alternating
        if quiet_pipe_run "$OUT/$name.stdout" rvperf trace record -a --user -o "$RECORDINGS/$name.perf.data" -- \
            sh -c "taskset -c 1 $BIN/qsort 2 & taskset -c 1 $BIN/autofdo 200 & wait" 2>"$OUT/$name.stderr" &&
            keep "$name"; then
            ok "$name: rvperf trace record -a of qsort and autofdo on one CPU, hot on the other: $(grep -o '\[ rvperf trace record.*' "$OUT/$name.stderr") $(warnings_of "$OUT/$name.stderr")"
        else
            not_ok "$name: rvperf trace record -a failed: $(tail -n 3 "$OUT/$name.stderr")"
        fi
        # The same with the kernel traced (user and supervisor mode: not OpenSBI's
        # machine mode, whose code the host does not have) and task contexts
        # (--context): the driver writes the thread each hart switches to, and each
        # exec's new program, where the encoder reports it (Ownership messages); a copy
        # of the kernel's code for decoding.
        name=rvperf-contexts
        if quiet_pipe_run "$OUT/$name.stdout" rvperf trace record -a --user --kernel --context --sync-max 8 --kcore \
            -o "$RECORDINGS/$name.perf.data" -- \
            sh -c "taskset -c 1 $BIN/qsort 1 & taskset -c 1 $BIN/autofdo 100 & wait" 2>"$OUT/$name.stderr" &&
            keep "$name"; then
            ok "$name: rvperf trace record -a --context of qsort and autofdo on one CPU, the kernel too: $(grep -o '\[ rvperf trace record.*' "$OUT/$name.stderr") $(warnings_of "$OUT/$name.stderr")"
        else
            not_ok "$name: rvperf trace record -a --context failed: $(tail -n 3 "$OUT/$name.stderr")"
        fi
        kill "$spinner"
        wait "$spinner" 2>/dev/null
        rmmod rvtrace || not_ok "rmmod rvtrace after rvperf trace record -a"
    else
        not_ok "modprobe rvtrace for rvperf trace record -a"
    fi
else
    "$BIN/rvtrace-ctl" discover >"$OUT/discover.txt" 2>&1 && ok "rvtrace-ctl discovers the trace block: $(head -n 1 "$OUT/discover.txt")" ||
        not_ok "rvtrace-ctl discover: $(cat "$OUT/discover.txt")"
    if "$BIN/rvtrace-ctl" selftest >"$OUT/selftest.tap" 2>&1; then
        ok "the register interface's rules ($(grep -c '^ok' "$OUT/selftest.tap") checks)"
    else
        not_ok "the register interface's rules: $(grep '^not ok' "$OUT/selftest.tap" | head -n 5)"
    fi
    cat "$OUT/selftest.tap" >>"$OUT/selftest.log"
    # User mode only, under the configurations the issue names.
    capture qsort-htm --mode htm --privilege user -- "$BIN/qsort" 2
    capture qsort-btm --mode btm --privilege user -- "$BIN/qsort" 2
    capture qsort-htm-noir --mode htm --no-implicit-return --privilege user -- "$BIN/qsort" 2
    capture qsort-btm-noir-ts --mode btm --no-implicit-return --timestamps --privilege user -- "$BIN/qsort" 2
    capture recursion-htm-ts --mode htm --timestamps --privilege user -- "$BIN/recursion"
    capture fnptr-btm-norepeat --mode btm --no-repeated-history --privilege user -- "$BIN/fnptr"
    capture switch-htm-alljumps --mode htm --all-jumps --sequential-jumps --privilege user -- "$BIN/switch"
    capture syscalls-htm --mode htm --privilege user -- "$BIN/syscalls"
    # Kernel and user: no filter (machine mode too: OpenSBI's code is in the trace).
    capture syscalls-all --mode htm --timestamps --kernel-text "$OUT/syscalls-all.kernel-text" -- "$BIN/syscalls"
    # MSB extension shortens addresses whose high bits are all ones: the kernel's.
    capture syscalls-all-msb --mode btm --msb-extension --kernel-text "$OUT/syscalls-all-msb.kernel-text" -- "$BIN/syscalls"
    # A sink smaller than the trace: circular (decoded from its first synchronisation
    # after the oldest byte), and stop-on-wrap (the trace stops, the overflow is reported).
    capture qsort-wrap --mode htm --privilege user --sink-bytes 65536 --sync-max 6 -- "$BIN/qsort" 2
    capture qsort-stop --mode htm --privilege user --sink-bytes 65536 --stop-on-wrap -- "$BIN/qsort" 2

    # The rvtrace driver (kmod-shim/rvtrace), after rvtrace-ctl: it claims the BAR that
    # rvtrace-ctl maps through sysfs. Its interface, security and lifetime checks...
    "$BIN/rvtrace-driver-tests" >"$OUT/driver.tap" 2>&1
    while IFS= read -r line; do
        case "$line" in
        "ok "*) ok "rvtrace: ${line#ok * - }" ;;
        "not ok "*) not_ok "rvtrace: ${line#not ok * - }" ;;
        "#"*) echo "$line" | tee -a "$TAP" ;;
        esac
    done <"$OUT/driver.tap"
    # ... its KUnit suite (the shared register map, the plan, the wrap arithmetic) ...
    if modprobe rvtrace_test && grep -qE '^ok [0-9]+ rvtrace_logic$' /sys/kernel/debug/kunit/rvtrace_logic/results &&
        ! grep -q 'not ok' /sys/kernel/debug/kunit/rvtrace_logic/results; then
        ok "KUnit suite rvtrace_logic passed ($(grep -cE '^ +ok ' /sys/kernel/debug/kunit/rvtrace_logic/results) cases ok)"
    else
        not_ok "KUnit suite rvtrace_logic passed: $(tail -n 8 /sys/kernel/debug/kunit/rvtrace_logic/results 2>&1)"
    fi
    cp /sys/kernel/debug/kunit/rvtrace_logic/results "$OUT/kunit-rvtrace_logic.tap" 2>/dev/null
    rmmod rvtrace_test 2>/dev/null
    # ... and traces recorded through it by rvperf, for the host to decode like the others.
    if modprobe rvtrace; then
        rvperf_capture rvperf-qsort-htm raw --mode htm --user -- "$BIN/qsort" 2
        rvperf_capture rvperf-qsort-btm-ts raw --mode btm --user --timestamps --no-implicit-return -- "$BIN/qsort" 2
        rvperf_capture rvperf-switch-alljumps raw --mode htm --user --all-jumps --sequential-jumps -- "$BIN/switch"
        # A 16 KiB buffer and bursts of a round each (about 100 KiB of trace in 1 ms
        # under -icount) with 30 ms sleeps between them: the sink overtakes the reader in
        # every round, and the reader, draining while the program sleeps, gets the end
        # of each round: pieces of main with a gap before each.
        rvperf_capture rvperf-bursts-overrun raw --mode htm --user --buffer-bytes 16384 --sync-max 4 \
            -- "$BIN/bursts" 4 30
        # perf.data recordings: the trace with its configuration and side-band.
        rvperf_capture rvperf-qsort-htm-perf perf-data --mode htm --user -- "$BIN/qsort" 2
        rvperf_capture rvperf-recursion-btm-perf perf-data --mode btm --user --timestamps -- "$BIN/recursion"
        rvperf_capture rvperf-bursts-overrun-perf perf-data --mode htm --user --buffer-bytes 16384 --sync-max 4 -- "$BIN/bursts" 4 30
        # The products of a recording, made in the guest.
        rvperf_capture rvperf-autofdo-perf perf-data --mode htm --user -- "$BIN/autofdo" 60
        # Without timestamps: not split by process, decoded as one address space.
        rvperf_capture rvperf-qsort-untimed-perf perf-data --mode htm --user --no-timestamps -- "$BIN/qsort" 1
        rvperf_products rvperf-autofdo-perf "$BIN/autofdo"
        # The kernel (supervisor mode) with a copy of its code as it ran (--kcore): a
        # perf.data directory, decoded on the host against that copy alone.
        name=rvperf-syscalls-kernel
        if quiet_pipe_run "$OUT/$name.stdout" rvperf trace record --kernel --kcore -o "$RECORDINGS/$name.perf.data" -- \
            "$BIN/syscalls" 2>"$OUT/$name.stderr" && keep "$name" && [ -s "$OUT/$name.perf.data/kcore_dir/kcore" ]; then
            ok "$name: rvperf trace record --kernel --kcore: $(grep -o '\[ rvperf trace record.*' "$OUT/$name.stderr"), $(wc -c <"$OUT/$name.perf.data/kcore_dir/kcore") bytes of kernel code, $(grep -o "copied before tracing started.*" "$OUT/$name.stderr")"
        else
            not_ok "$name: rvperf trace record --kernel --kcore failed: $(tail -n 3 "$OUT/$name.stderr")"
        fi
        # Through the vDSO (no file): the recorder keeps its image in perf's build-id
        # cache (~/.debug), which goes to the host with the recording.
        name=rvperf-clock-vdso
        if quiet_pipe_run "$OUT/$name.stdout" rvperf trace record --user -o "$RECORDINGS/$name.perf.data" -- \
            "$BIN/clock" 2>"$OUT/$name.stderr" && keep "$name" && [ -d "$HOME/.debug/[vdso]" ]; then
            mkdir -p "$OUT/debug-home"
            cp -a "$HOME/.debug" "$OUT/debug-home/"
            ok "$name: rvperf trace record of clock_gettime calls keeps the vDSO: $(ls "$HOME/.debug/[vdso]")"
        else
            not_ok "$name: rvperf trace record of clock kept no vDSO in $HOME/.debug: $(tail -n 3 "$OUT/$name.stderr")"
        fi
        if rvperf trace record --user -o /tmp/refused.perf.data -- /nonexistent/program 2>"$OUT/refused.stderr"; then
            not_ok "rvperf trace record of a missing program fails"
        elif [ -e /tmp/refused.perf.data ]; then
            not_ok "rvperf trace record of a missing program leaves no perf.data"
        else
            ok "rvperf trace record of a missing program fails, leaving nothing: $(tail -n 1 "$OUT/refused.stderr")"
        fi
        rmmod rvtrace || not_ok "rmmod rvtrace after rvperf trace record"
    else
        not_ok "modprobe rvtrace for rvperf trace record"
    fi
fi
echo "1..$count" | tee -a "$TAP"
[ "$failed" -eq 0 ]
