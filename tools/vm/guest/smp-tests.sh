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
# --stats`, dmesg: /out/smp-short-*) and run again, up to twice; a retry must get its
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
                # Up to twice: on 2026-11-28 a retry stopped early as well (211, then
                # 63 samples, on a loaded host), once in 24 runs of the four recorders.
                retries=0
                while [ "$retries" -lt 2 ]; do
                    retries=$((retries + 1))
                    n=$(record perf perf record -q -e cycles -c 100000 -o /tmp/smp.data -- "$WORKLOAD" 1)
                    counts="$counts(short; retried: ${n:-0})"
                    [ "$n" != failed ] && [ "${n:-0}" -ge "$MINIMUM" ] && break
                done
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
# CPU hotplug (issue 13, item 5): CTR's depth is programmed by a hotplug callback as
# each CPU comes online and read back. Loaded while hart 1 is offline, then hart 1
# brought up: its records must be as deep as the module's depth (32; a hart left at
# its reset depth holds 16), at first onlining and after another offline/online.
# full_share FILE: "FULL TOTAL" for the records on CPU 1 (rvperf script -F cpu,brstack).
full_share() {
    awk -v depth="$(cat /sys/bus/event_source/devices/rvperf_ctr/caps/depth)" '
        { cpu = $1; gsub(/[^0-9]/, "", cpu) }
        cpu + 0 == 1 { total++; if (NF - 1 >= depth) full++; if (NF - 1 > most) most = NF - 1 }
        END { print full + 0, total + 0, most + 0 }' "$1"
}
hotplug_check() {
    name=$1
    rm -f /tmp/hotplug.data
    if taskset -c 0 rvperf record -j any,u -c 20000 -o /tmp/hotplug.data -- taskset -c 1 /opt/rvperf/bin/calls 50 \
        >/dev/null 2>"$OUT/hotplug.log"; then
        rvperf script -F cpu,brstack -i /tmp/hotplug.data >/tmp/hotplug.script 2>>"$OUT/hotplug.log"
        set -- $(full_share /tmp/hotplug.script)
        count=$((count + 1))
        # The workload has hart 1 to itself (rvperf runs on hart 0): CTR is cleared
        # at each switch (-j any keeps no history across switches), so when rvperf
        # shared hart 1 the records taken soon after its wake-ups were shallow, and
        # 2-60% were full depending on how fast the host ran the guest. On a hart
        # left at its reset depth none is: none holds more than 16. So: the deepest
        # record reaches the module's depth, and at least 5 do.
        if [ "$2" -gt 20 ] && [ "$3" -eq "$(cat /sys/bus/event_source/devices/rvperf_ctr/caps/depth)" ] && [ "$1" -ge 5 ]; then
            echo "ok $count - $name: $1 of $2 records on hart 1 hold the full depth ($3 entries)" | tee -a "$TAP"
        else
            failed=$((failed + 1))
            echo "not ok $count - $name: records on hart 1 hold the full depth ($1 of $2, at most $3 entries)" | tee -a "$TAP"
            head -n 2 /tmp/hotplug.script | cut -c1-200 | sed 's/^/#   /' | tee -a "$TAP"
            tail -n 2 "$OUT/hotplug.log" | sed 's/^/#   /' | tee -a "$TAP"
        fi
    else
        count=$((count + 1))
        failed=$((failed + 1))
        echo "not ok $count - $name: rvperf record on hart 1" | tee -a "$TAP"
        tail -n 3 "$OUT/hotplug.log" | sed 's/^/#   /' | tee -a "$TAP"
    fi
}
rmmod rvperf_ctr 2>/dev/null
echo 0 >/sys/devices/system/cpu/cpu1/online
modprobe rvperf_ctr
echo 1 >/sys/devices/system/cpu/cpu1/online
hotplug_check "rvperf_ctr loaded while hart 1 was offline, then hart 1 onlined"
echo 0 >/sys/devices/system/cpu/cpu1/online
echo 1 >/sys/devices/system/cpu/cpu1/online
hotplug_check "hart 1 offlined and onlined again with rvperf_ctr loaded"

# Frequency mode and system-wide CTR on two harts: a call-stack recording with the
# task migrating between harts (its entries saved at ->del on one hart, written back
# at ->add on the other), whose chains the host checks (tools/vm/test:
# smp/ctr-deep-smp.data), and system-wide frequency mode getting records.
count=$((count + 1))
if rvperf record -j call_stack,u -F 4000 -o "$OUT/ctr-deep-smp.data" -- /opt/rvperf/bin/deep 20 4000000 \
    >/dev/null 2>"$OUT/deep.log" &&
    [ "$(rvperf script -F ip -i "$OUT/ctr-deep-smp.data" 2>/dev/null | grep -c .)" -gt 100 ]; then
    echo "ok $count - -j call_stack,u -F 4000 on 2 harts (chains checked on the host): $(tail -n 1 "$OUT/deep.log")" | tee -a "$TAP"
else
    failed=$((failed + 1))
    echo "not ok $count - -j call_stack,u -F 4000 on 2 harts records" | tee -a "$TAP"
    tail -n 3 "$OUT/deep.log" | sed 's/^/#   /' | tee -a "$TAP"
fi
count=$((count + 1))
if rvperf record -a -j any,u -F 1000 -o /tmp/wide-freq.data -- /opt/rvperf/bin/calls 50 \
    >/dev/null 2>"$OUT/wide-freq.log" &&
    [ "$(rvperf script -F ip -i /tmp/wide-freq.data 2>/dev/null | grep -c .)" -gt 0 ]; then
    echo "ok $count - rvperf record -a -F 1000 -j any,u on 2 harts: $(tail -n 1 "$OUT/wide-freq.log")" | tee -a "$TAP"
else
    failed=$((failed + 1))
    echo "not ok $count - rvperf record -a -F 1000 -j any,u on 2 harts" | tee -a "$TAP"
    tail -n 3 "$OUT/wide-freq.log" | sed 's/^/#   /' | tee -a "$TAP"
fi

# Cache events as CTR triggers. They are checked in this boot because it runs
# without -icount: under -icount, QEMU 10 aborts ("Raised interrupt while not in
# I/O function") when a TLB-miss counter overflows. (rvperf_ctr is loaded above.)
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
