#!/bin/sh
# SMP checks, run by tools/vm/test in a separate boot with two harts: each
# sampling recording, by perf and by rvperf, per task and system-wide, must
# get samples in every run.
#
# Known issue, cause not found yet: with two harts, Linux perf's per-task
# recording (`perf record -- CMD`) now and then stops getting samples early
# (seen: 106 and 86 samples instead of ~3000, in 2 of 6 runs; 0 of 26 in other
# runs, pinned with taskset or not). rvperf's per-task recording opens the same
# per-CPU inherited events and has not shown it (0 of 24 runs), nor have the
# system-wide recordings. That one recorder is reported as TAP TODO with its
# counts, so it is visible in every run without failing the tier; the others
# fail it.
OUT=/out
TAP=$OUT/guest-smp-tests.tap
WORKLOAD=/opt/rvperf/bin/hot
RUNS=${RUNS:-6}
: >"$TAP"
count=0
failed=0
echo "# guest: $(uname -r), $(nproc) harts, $RUNS runs per recorder" | tee -a "$TAP"
[ "$(nproc)" -ge 2 ] || { echo "not ok 1 - the guest has two harts" | tee -a "$TAP"; exit 1; }

record() {
    # record NAME COMMAND...: the number of samples in /tmp/smp.data afterwards.
    name=$1
    shift
    rm -f /tmp/smp.data
    "$@" >/dev/null 2>&1
    case "$name" in
    perf*) perf script -G -F ip -i /tmp/smp.data 2>/dev/null | grep -c . ;;
    rvperf*) rvperf script -F ip -i /tmp/smp.data 2>/dev/null | grep -c . ;;
    esac
}

for recorder in "perf per task" "perf system-wide" "rvperf per task" "rvperf system-wide"; do
    empty=0
    counts=
    i=0
    while [ "$i" -lt "$RUNS" ]; do
        i=$((i + 1))
        case "$recorder" in
        "perf per task") n=$(record perf perf record -q -e cycles -c 100000 -o /tmp/smp.data -- "$WORKLOAD" 1) ;;
        "perf system-wide") n=$(record perf perf record -q -a -e cycles -c 100000 -o /tmp/smp.data -- "$WORKLOAD" 1) ;;
        "rvperf per task") n=$(record rvperf rvperf record -e cycles -c 100000 -o /tmp/smp.data -- "$WORKLOAD" 1) ;;
        "rvperf system-wide") n=$(record rvperf rvperf record -a -e cycles -c 100000 -o /tmp/smp.data -- "$WORKLOAD" 1) ;;
        esac
        counts="$counts ${n:-0}"
        [ "${n:-0}" -gt 100 ] || empty=$((empty + 1))
    done
    count=$((count + 1))
    if [ "$empty" -eq 0 ]; then
        echo "ok $count - $recorder on 2 harts: samples in every run:$counts" | tee -a "$TAP"
    else
        if [ "$recorder" = "perf per task" ]; then
            echo "not ok $count - $recorder on 2 harts: $empty of $RUNS runs got (almost) no samples:$counts # TODO known issue, see the header of this script" | tee -a "$TAP"
        else
            failed=$((failed + 1))
            echo "not ok $count - $recorder on 2 harts: $empty of $RUNS runs got (almost) no samples:$counts" | tee -a "$TAP"
        fi
    fi
done
# Cache events as CTR triggers. They are checked in this boot because it runs
# without -icount: under -icount, QEMU 10 aborts ("Raised interrupt while not in
# I/O function") when a TLB-miss counter overflows.
modprobe rvperf_ctr
count=$((count + 1))
if rvperf record -e rvperf_ctr/event=0x10004,trigger=1/ -j any,u -c 10 \
    -o /tmp/cache.data -- /opt/rvperf/bin/calls 200 >/dev/null 2>/tmp/cache.log &&
    [ "$(rvperf script -F ip -i /tmp/cache.data 2>/dev/null | grep -c .)" -gt 0 ]; then
    echo "ok $count - rvperf_ctr with an iTLB-miss (cache event) trigger: $(tail -n 1 /tmp/cache.log)" | tee -a "$TAP"
else
    failed=$((failed + 1))
    echo "not ok $count - rvperf_ctr with an iTLB-miss (cache event) trigger: $(tail -n 1 /tmp/cache.log)" | tee -a "$TAP"
fi

echo "1..$count" | tee -a "$TAP"
[ "$failed" -eq 0 ]
