#!/bin/sh
# SMP checks, run by tools/vm/test in a separate boot with two harts: each
# sampling recording, by perf and by rvperf, per task and system-wide, must
# get samples in every run.
#
# Linux perf's per-task recording (`perf record -- CMD`) was seen to stop getting
# samples early on two harts now and then (106 and 86 samples instead of ~3,000, in
# about 3 of 100 runs, 2026-11-21/22); its cause was not found. It was then reported
# as TAP TODO, a check that could not fail. It is now a real check like the others.
# On 2026-11-23 (Linux 7.3.4, QEMU 10.0.2) it recurred once in 63 runs (113 samples;
# the others 3,016-4,543). A run is short below MINIMUM samples: early stops gave
# 86-113, full runs of the four recorders 1,609-5,147. Because perf's early stop is
# known, a short perf per-task run is kept with its evidence (the file, `perf report
# --stats`, dmesg: /out/smp-short-*) and run once more; the retry must get its
# samples, so a recorder that is broken fails the tier, while the rare early stop
# shows in the TAP line with its counts.
OUT=/out
TAP=$OUT/guest-smp-tests.tap
WORKLOAD=/opt/rvperf/bin/hot
RUNS=${RUNS:-6}
# A full run of `hot 1` at -c 100000 gets 1,600-5,100 samples on two harts.
MINIMUM=500
: >"$TAP"
count=0
failed=0
short=0
echo "# guest: $(uname -r), $(nproc) harts, $RUNS runs per recorder" | tee -a "$TAP"
[ "$(nproc)" -ge 2 ] || { echo "not ok 1 - the guest has two harts" | tee -a "$TAP"; exit 1; }

record() {
    # record NAME COMMAND...: the number of samples in /tmp/smp.data afterwards,
    # or "failed" when the recorder (which exits with its workload's status)
    # failed: a crashed workload is never counted as a run.
    name=$1
    shift
    rm -f /tmp/smp.data
    if ! "$@" >/dev/null 2>>"$OUT/smp-record.log"; then
        echo failed
        return
    fi
    case "$name" in
    perf*) perf script -G -F ip -i /tmp/smp.data 2>/dev/null | grep -c . ;;
    rvperf*) rvperf script -F ip -i /tmp/smp.data 2>/dev/null | grep -c . ;;
    esac
}

for recorder in "perf per task" "perf system-wide" "rvperf per task" "rvperf system-wide"; do
    empty=0
    crashed=0
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
        if [ "$n" = failed ]; then
            crashed=$((crashed + 1))
        elif [ "${n:-0}" -lt "$MINIMUM" ]; then
            # The evidence: the file, perf's own statistics of it (throttling,
            # lost records) and what the kernel said.
            short=$((short + 1))
            cp /tmp/smp.data "$OUT/smp-short-$short-$(echo "$recorder" | tr ' ' -).data" 2>/dev/null
            perf report --stats -i /tmp/smp.data >>"$OUT/smp-short-stats.log" 2>&1
            dmesg | tail -n 20 >>"$OUT/smp-short-dmesg.log"
            if [ "$recorder" = "perf per task" ]; then
                n=$(record perf perf record -q -e cycles -c 100000 -o /tmp/smp.data -- "$WORKLOAD" 1)
                counts="$counts(short; retried: ${n:-0})"
            fi
            [ "$n" != failed ] && [ "${n:-0}" -ge "$MINIMUM" ] || empty=$((empty + 1))
        fi
    done
    count=$((count + 1))
    if [ "$crashed" -ne 0 ]; then
        failed=$((failed + 1))
        echo "not ok $count - $recorder on 2 harts: $crashed of $RUNS runs failed:$counts" | tee -a "$TAP"
        tail -n 5 "$OUT/smp-record.log" | sed 's/^/#   /' | tee -a "$TAP"
    elif [ "$empty" -eq 0 ]; then
        echo "ok $count - $recorder on 2 harts: samples in every run:$counts" | tee -a "$TAP"
    else
        failed=$((failed + 1))
        echo "not ok $count - $recorder on 2 harts: $empty of $RUNS runs got fewer than $MINIMUM samples:$counts" | tee -a "$TAP"
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

# As in the single-hart boot: nothing the kernel said is a warning or an oops.
count=$((count + 1))
dmesg >"$OUT/dmesg.log"
if grep -qE 'BUG:|Oops|WARNING:|Call Trace|Unhandled' "$OUT/dmesg.log"; then
    failed=$((failed + 1))
    echo "not ok $count - no kernel warning or oops on 2 harts" | tee -a "$TAP"
    grep -E -A3 'BUG:|Oops|WARNING:|Unhandled' "$OUT/dmesg.log" | head -n 12 | sed 's/^/#   /' | tee -a "$TAP"
else
    echo "ok $count - no kernel warning or oops on 2 harts" | tee -a "$TAP"
fi

echo "1..$count" | tee -a "$TAP"
[ "$failed" -eq 0 ]
