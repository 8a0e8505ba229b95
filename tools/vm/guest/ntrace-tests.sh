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
mkdir -p "$OUT"
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

: >"$OUT/manifest"
if [ "${1:-}" = smp ]; then
    [ "$(nproc)" -ge 2 ] || { not_ok "the guest has two harts"; exit 1; }
    "$BIN/rvtrace-ctl" discover >"$OUT/discover-smp.txt" 2>&1 || not_ok "rvtrace-ctl discover"
    # Both workloads at once, one per hart, through the funnel (SRC: the hart).
    capture smp-qsort --harts 2 --src-bits 1 --pin --privilege user -- \
        "$BIN/qsort" 1 :: "$BIN/qsort" 2
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
fi
echo "1..$count" | tee -a "$TAP"
[ "$failed" -eq 0 ]
