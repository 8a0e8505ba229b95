#!/bin/sh
# The guest test tier, run inside the riscv64 guest by tools/vm/test
# (`tools/vm/run -- sh /rvperf/tools/vm/guest/tests.sh`).
#
# Writes TAP to /out/guest-tests.tap and the recordings the host checks
# afterwards (tools/vm/test reads them with the host's rvperf and perf) to
# /out; exits non-zero if any check fails.

OUT=/out
TAP=$OUT/guest-tests.tap
WORKLOAD=/opt/rvperf/bin/hot
: >"$TAP"
count=0
failed=0

ok() {
    count=$((count + 1))
    echo "ok $count - $1" | tee -a "$TAP"
}
not_ok() {
    count=$((count + 1))
    failed=$((failed + 1))
    echo "not ok $count - $1" | tee -a "$TAP"
    shift
    for line in "$@"; do echo "#   $line" | tee -a "$TAP"; done
}
# check NAME COMMAND...: one TAP line from a command's status; its output is
# kept in /out/logs/NAME.log and its tail shown on failure.
check() {
    name=$1
    shift
    log="$OUT/logs/$(echo "$name" | tr -c 'A-Za-z0-9_.\n-' '_').log"
    if "$@" >"$log" 2>&1; then
        ok "$name"
    else
        not_ok "$name" "command: $*" "$(tail -n 5 "$log")"
    fi
}
mkdir -p "$OUT/logs"

# percent_of SYMBOL REPORT: the share perf/rvperf report gives SYMBOL.
percent_of() {
    awk -v symbol="$1" '$1 ~ /%$/ { for (i = 2; i <= NF; i++) if ($i == symbol) { sub("%", "", $1); print $1; exit } }' "$2"
}
# at_least VALUE MINIMUM: numeric comparison of decimals.
at_least() {
    [ -n "$1" ] && awk -v v="$1" -v m="$2" 'BEGIN { exit !(v + 0 >= m + 0) }'
}

echo "# guest: $(uname -r) $(uname -m), $(nproc) hart(s)" | tee -a "$TAP"

# --- the SBI PMU driver, with sampling -------------------------------------
dmesg >"$OUT/dmesg-boot.log"
if grep -q 'riscv-pmu-sbi: SBI PMU extension is available' "$OUT/dmesg-boot.log" &&
    grep -qE 'riscv-pmu-sbi: [0-9]+ firmware and [0-9]+ hardware counters' "$OUT/dmesg-boot.log"; then
    ok "SBI PMU driver probed: $(grep -oE '[0-9]+ firmware and [0-9]+ hardware counters' "$OUT/dmesg-boot.log")"
else
    not_ok "SBI PMU driver probed" "$(grep -i pmu "$OUT/dmesg-boot.log" | head -n 3)"
fi
if grep -qi 'sampling.*not supported\|sscof.*not available' "$OUT/dmesg-boot.log"; then
    not_ok "SBI PMU supports sampling (Sscofpmf)" "$(grep -i 'sscof\|sampling' "$OUT/dmesg-boot.log")"
else
    ok "SBI PMU supports sampling (Sscofpmf)"
fi

# --- perf stat ---------------------------------------------------------------
perf stat -x, -e cycles,instructions -o "$OUT/perf-stat.csv" -- "$WORKLOAD" 1 >/dev/null 2>"$OUT/logs/perf-stat.log"
cycles=$(awk -F, '$3 == "cycles" { print $1 }' "$OUT/perf-stat.csv")
instructions=$(awk -F, '$3 == "instructions" { print $1 }' "$OUT/perf-stat.csv")
if at_least "$cycles" 1000000 && at_least "$instructions" 1000000; then
    ok "perf stat counts cycles ($cycles) and instructions ($instructions)"
else
    not_ok "perf stat counts cycles and instructions" "$(cat "$OUT/perf-stat.csv" "$OUT/logs/perf-stat.log")"
fi

# --- perf record with hardware sampling and callchains -----------------------
# perf 6.12 cannot write its output on the 9p share (it exits 255 without a
# message), so it records on tmpfs and the file is copied out.
check "perf record -e cycles -c 100000 -g" \
    perf record -q -e cycles -c 100000 -g -o /tmp/perf-cycles.data -- "$WORKLOAD" 3
cp /tmp/perf-cycles.data "$OUT/perf-cycles.data"
perf report --stdio --no-children --sort symbol -g none -i "$OUT/perf-cycles.data" \
    >"$OUT/perf-cycles.report" 2>"$OUT/logs/perf-report.log"
share=$(percent_of hot_function "$OUT/perf-cycles.report")
if at_least "$share" 80; then
    ok "perf record: hot_function has $share% of the cycles samples"
else
    not_ok "perf record: hot_function has at least 80% of the cycles samples (has '${share}')" \
        "$(head -n 20 "$OUT/perf-cycles.report")"
fi
perf script -F ip,sym -i "$OUT/perf-cycles.data" >"$OUT/perf-cycles.script" 2>/dev/null
if awk '/hot_function/ { hot = 1; next } hot && /main/ { found = 1; exit } NF == 0 { hot = 0 } END { exit !found }' \
    "$OUT/perf-cycles.script"; then
    ok "perf record -g: callchains lead from hot_function to main"
else
    not_ok "perf record -g: callchains lead from hot_function to main" "$(head -n 12 "$OUT/perf-cycles.script")"
fi

# --- rvperf record, the same workload -----------------------------------------
check "rvperf record -e cycles -c 100000 -g" \
    rvperf record -e cycles -c 100000 -g -o "$OUT/rvperf-cycles.data" -- "$WORKLOAD" 3
rvperf report -i "$OUT/rvperf-cycles.data" >"$OUT/rvperf-cycles.guest-report" 2>"$OUT/logs/rvperf-report.log"
share=$(percent_of hot_function "$OUT/rvperf-cycles.guest-report")
if at_least "$share" 80; then
    ok "rvperf record: hot_function has $share% of the cycles samples"
else
    not_ok "rvperf record: hot_function has at least 80% of the cycles samples (has '${share}')" \
        "$(head -n 12 "$OUT/rvperf-cycles.guest-report")" "$(cat "$OUT/logs/rvperf-report.log")"
fi
# The host reads this file with its own perf and rvperf; it needs the ELF too.
mkdir -p "$OUT/symfs/opt/rvperf/bin"
cp "$WORKLOAD" "$OUT/symfs/opt/rvperf/bin/"
cat /proc/kallsyms >"$OUT/kallsyms"

# --- KUnit ---------------------------------------------------------------------
# kunit_suite MODULE SUITE: loads a KUnit test module and checks its suite's
# results: the suite's own "ok" line and no "not ok" anywhere in it.
kunit_suite() {
    check "modprobe $1" modprobe "$1"
    results=/sys/kernel/debug/kunit/$2/results
    if [ -r "$results" ] && grep -qE "^ok [0-9]+ $2\$" "$results" && ! grep -q 'not ok' "$results"; then
        ok "KUnit suite $2 passed ($(grep -cE '^ +ok ' "$results") cases ok)"
    else
        not_ok "KUnit suite $2 passed" "$(tail -n 12 "$results" 2>&1)"
    fi
    cp "$results" "$OUT/kunit-$2.tap" 2>/dev/null
    check "rmmod $1" rmmod "$1"
}
kunit_suite kunit-example-test example

# --- Rust for Linux ------------------------------------------------------------
check "modprobe rust_minimal" modprobe rust_minimal
if dmesg | grep -q 'Rust minimal sample (init)'; then
    ok "the Rust module initialised"
else
    not_ok "the Rust module initialised" "$(dmesg | tail -n 5)"
fi
check "rmmod rust_minimal" rmmod rust_minimal

# --- kmod-shim: rvperf_ctr (CTR branch stacks through an AUX PMU) -------------
BIN=/opt/rvperf/bin
check "modprobe rvperf_ctr" modprobe rvperf_ctr
pmu=/sys/bus/event_source/devices/rvperf_ctr
if [ -r "$pmu/type" ] && [ -r "$pmu/format/event" ] && [ -r "$pmu/events/cycles" ]; then
    ok "rvperf_ctr PMU registered: type $(cat "$pmu/type"), depth $(cat "$pmu/caps/depth"), $(cat "$pmu/caps/features")"
else
    not_ok "rvperf_ctr PMU registered with format/ and events/" "$(find "$pmu" 2>&1 | head -n 5)"
fi
check "perf list shows rvperf_ctr" sh -c 'perf list 2>/dev/null | grep -q "rvperf_ctr/cycles/"'
# The SBI PMU's counter inventory, one value per file (counters/counterN_type,
# _csr, _width), as rvperf list prints it.
if [ "$(cat "$pmu/counters/counter0_type" 2>/dev/null)" = hardware ] &&
    [ "$(cat "$pmu/counters/counter0_csr" 2>/dev/null)" = 0xc00 ] &&
    [ "$(cat "$pmu/counters/counter0_width" 2>/dev/null)" = 64 ] &&
    [ "$(cat "$pmu"/counters/* | wc -l)" -eq "$(ls "$pmu/counters" | wc -l)" ] &&
    rvperf list >"$OUT/logs/rvperf-list.log" 2>&1 &&
    grep -qx '    0 hardware csr=0xc00 width=64' "$OUT/logs/rvperf-list.log"; then
    ok "rvperf list shows the SBI PMU counter inventory ($(ls "$pmu/counters" | grep -c _type) counters, one value per sysfs file)"
else
    not_ok "rvperf list shows the SBI PMU counter inventory (one value per sysfs file)" \
        "$(ls "$pmu/counters" "$pmu/caps" 2>&1 | head -n 4)" "$(grep -A2 'SBI PMU' "$OUT/logs/rvperf-list.log")"
fi
check "rvperf record with an instructions trigger" \
    sh -c "rvperf record -e instructions -j any,u -c 20000 -o /tmp/insn.data -- calls 50 && rvperf script -F ip -i /tmp/insn.data | grep -q ."

kunit_suite rvperf_ctr_test rvperf_ctr_logic

# Recordings the host checks entry by entry against the ELFs (tools/vm/test).
mkdir -p "$OUT/symfs/opt/rvperf/bin"
cp "$BIN/calls" "$BIN/pingpong" "$BIN/autofdo" "$BIN/interp" "$OUT/symfs/opt/rvperf/bin/"
check "rvperf record -b -c 20000 (user mode) -- calls" \
    rvperf record -e cycles:u -b -c 20000 -o "$OUT/ctr-any.data" -- calls 100
# The AutoFDO workload (tests/programs/vm/autofdo.c): every taken user branch, for the
# host's profile, compiler and ground-truth checks.
check "rvperf record -j any,u -c 20000 -- autofdo 1500 (AutoFDO workload)" \
    rvperf record -j any,u -c 20000 -o "$OUT/autofdo.data" -- autofdo 1500
check "rvperf record -j any,u -c 2000 -- autofdo 1500 (dense, for tools/bench/profiles.sh)" \
    rvperf record -j any,u -c 2000 -o "$OUT/autofdo-dense.data" -- autofdo 1500
check "rvperf record -j any,u -c 20000 -- interp 100 (the trace tests' interpreter)" \
    rvperf record -j any,u -c 20000 -o "$OUT/interp.data" -- interp 100
check "rvperf record --keep-aux -b (AUX data kept as PERF_RECORD_AUXTRACE) -- calls" \
    rvperf record --keep-aux -e cycles:u -b -c 20000 -o "$OUT/ctr-keep-aux.data" -- calls 100
check "rvperf record -j any_call,u -c 20000 -- calls" \
    rvperf record -j any_call,u -c 20000 -o "$OUT/ctr-calls.data" -- calls 100
check "rvperf record -a -j any,u -- pingpong (two tasks alternating)" \
    rvperf record -a -j any,u -c 20000 -o "$OUT/ctr-pingpong.data" -- pingpong 300
check "rvperf record -j call_stack,u (RAS emulation) -- calls" \
    rvperf record -j call_stack,u -c 20000 -o "$OUT/ctr-stack.data" -- calls 50
check "rvperf script reads the CTR recording" \
    sh -c "rvperf script -F ip,brstack -i $OUT/ctr-any.data | grep -q /0x"

# Call stacks survive frequency mode and context switches (issue 13, item 1). perf
# core calls ->stop/->start on every tick in frequency mode; CTR used to be cleared
# there and at every switch, cutting each call stack. `deep 20 N` sits at recursion
# depth 20 for nearly all of its run: the host checks that nearly every record holds
# the whole chain (tools/vm/test), with -c and with -F alike.
check "rvperf record -j call_stack,u -c 200000 -- deep 20 (fixed period)" \
    rvperf record -j call_stack,u -c 200000 -o "$OUT/ctr-deep-period.data" -- deep 20 4000000
check "rvperf record -j call_stack,u -F 4000 -- deep 20 (frequency mode)" \
    rvperf record -j call_stack,u -F 4000 -o "$OUT/ctr-deep-freq.data" -- deep 20 4000000
cp "$BIN/deep" "$OUT/symfs/opt/rvperf/bin/"

# Each record's period is its own sample's (issue 13, item 2), not the next one the
# SBI PMU driver has already programmed. In frequency mode a trigger starts at period
# 1 and perf's adjustment takes effect one overflow late, so a plain perf record of
# the same trigger begins with a run of period-1 samples; the records of the CTR
# event (whose trigger is enabled at exec, like perf's event) must begin with the
# same run: one shorter if each record carried the next period. With -c every period
# is the one asked for.
leading_ones() { awk '$1 == 1 { n++; next } { exit } END { print n + 0 }'; }
perf record -q -e instructions:u -F 1000 -o /tmp/period-perf.data -- calls 50 >/dev/null 2>&1
rvperf record -e instructions:u -j any,u -F 1000 -o /tmp/period-ctr.data -- calls 50 >/dev/null 2>&1
perf script -F period -i /tmp/period-perf.data 2>/dev/null | head -n 8 >"$OUT/logs/period-perf.txt"
rvperf script -F period -i /tmp/period-ctr.data 2>/dev/null | head -n 8 >"$OUT/logs/period-ctr.txt"
perf_ones=$(leading_ones <"$OUT/logs/period-perf.txt")
ctr_ones=$(leading_ones <"$OUT/logs/period-ctr.txt")
if [ "$perf_ones" -ge 2 ] && [ "$ctr_ones" -eq "$perf_ones" ]; then
    ok "frequency mode: records begin with $ctr_ones period-1 samples, as perf record's of the same trigger ($(tr -s ' \n' ' ' <"$OUT/logs/period-ctr.txt"))"
else
    not_ok "frequency mode: records begin with the period-1 samples perf record's do" \
        "perf: $(tr -s ' \n' ' ' <"$OUT/logs/period-perf.txt")" "rvperf_ctr: $(tr -s ' \n' ' ' <"$OUT/logs/period-ctr.txt")"
fi
rvperf record -e instructions:u -j any,u -c 20000 -o /tmp/period-fixed.data -- calls 50 >/dev/null 2>&1
periods=$(rvperf script -F period -i /tmp/period-fixed.data 2>/dev/null | sort -u | tr -s ' \n' ' ')
if [ "$periods" = " 20000 " ] || [ "$periods" = "20000 " ]; then
    ok "fixed period: every record's period is 20000"
else
    not_ok "fixed period: every record's period is 20000" "periods: '$periods'"
fi

# Freezing (issue 13, item 3): another PMU event's overflow froze CTR (LCOFIFRZ) until
# this module's next trigger, whose record then held stale entries. With a system-wide
# perf record overflowing more often than the trigger, every record's newest entry must
# still lead to its sample's ip (checked on the host): user-only recording does not
# freeze at all; with kernel branches, every PMU interrupt's end unfreezes; and the
# software freeze (hardware without LCOFIFRZ, forced here by the module's test hook).
# (perf record -a without a command records until SIGINT.)
perf record -q -a -B -N -e instructions -c 100000 -o /tmp/foreign.data >/dev/null 2>&1 &
foreign=$!
# wait_for_events PID N: until process PID holds N perf event descriptors (its events
# are open); bounded by a count, only a hang would reach it.
wait_for_events() {
    spin=0
    while [ "$(ls -l "/proc/$1/fd" 2>/dev/null | grep -c 'perf_event')" -lt "$2" ] && [ "$spin" -lt 20000 ]; do
        spin=$((spin + 1))
    done
}
wait_for_events "$foreign" 1
check "rvperf record -j any,u -c 300000 while perf record -a overflows every 100,000 instructions" \
    rvperf record -j any,u -c 300000 -o "$OUT/ctr-foreign-user.data" -- calls 1000
check "rvperf record -j any -c 300000 (kernel too: LCOFIFRZ) while perf record -a overflows" \
    rvperf record -j any -c 300000 -o "$OUT/ctr-foreign-kernel.data" -- calls 1000
rmmod rvperf_ctr
# depth=256: in software the freeze comes only once the interrupt path has run,
# and its branches fill the newest entries (more than 32 of them).
check "modprobe rvperf_ctr software_freeze=1 depth=256" modprobe rvperf_ctr software_freeze=1 depth=256
check "rvperf record -j any -c 300000 (software freeze) while perf record -a overflows" \
    rvperf record -j any -c 300000 -o "$OUT/ctr-software-freeze.data" -- calls 1000
if dmesg | grep -q 'rvperf_ctr: .*freeze software'; then
    ok "software_freeze=1: the module says it freezes in software"
else
    not_ok "software_freeze=1: the module says it freezes in software" "$(dmesg | grep rvperf_ctr: | tail -n 2)"
fi
rmmod rvperf_ctr
check "modprobe rvperf_ctr (again)" modprobe rvperf_ctr
kill -INT "$foreign"
wait "$foreign" 2>/dev/null

# A trigger that cannot get a counter (issue 13, item 7): pinned system-wide cycles
# events take every counter that can count cycles; the CTR event's pinned trigger then
# sits in error state and nothing would be recorded. rvperf record must say so and fail.
events=cycles:D
i=1
while [ "$i" -lt 24 ]; do events="$events,cycles:D"; i=$((i + 1)); done
# (perf stat -a without a command counts until SIGINT.)
perf stat -a -e "$events" -o /tmp/blocker.txt >/dev/null 2>&1 &
blocker=$!
wait_for_events "$blocker" 24
rm -f /tmp/nocounter.data
if rvperf record -e cycles -j any,u -c 20000 -o /tmp/nocounter.data -- calls 20 >"$OUT/logs/nocounter.log" 2>&1; then
    not_ok "a trigger without a counter: rvperf record fails" "it succeeded: $(tail -n 2 "$OUT/logs/nocounter.log")"
elif grep -q 'never got a hardware counter' "$OUT/logs/nocounter.log" && [ -z "$(ls /tmp/nocounter.* 2>/dev/null)" ]; then
    ok "a trigger without a counter: rvperf record fails, no file ($(grep -o 'the trigger event.*counter' "$OUT/logs/nocounter.log" | head -n 1))"
else
    not_ok "a trigger without a counter: rvperf record fails saying why, no file" "$(tail -n 3 "$OUT/logs/nocounter.log")" \
        "files: $(ls -l /tmp/nocounter.* 2>&1)"
fi
kill -INT "$blocker"
wait "$blocker" 2>/dev/null
# Throttling: at most 4 interrupts per tick (1,000 a second at HZ=250), with a trigger
# that would overflow far more often: rvperf record must say it was throttled and
# write PERF_RECORD_THROTTLE, which perf counts.
max_rate=$(cat /proc/sys/kernel/perf_event_max_sample_rate)
echo 25 >/proc/sys/kernel/perf_cpu_time_max_percent
echo 1000 >/proc/sys/kernel/perf_event_max_sample_rate
rvperf record -e instructions -j any,u -c 2000 -o "$OUT/ctr-throttled.data" -- calls 50 \
    >/dev/null 2>"$OUT/logs/throttled.log"
echo "$max_rate" >/proc/sys/kernel/perf_event_max_sample_rate
echo 0 >/proc/sys/kernel/perf_cpu_time_max_percent
throttles=$(perf report --stats -i "$OUT/ctr-throttled.data" 2>/dev/null | awk '$1 == "THROTTLE" { print $3 }')
if grep -qE 'trigger was throttled [0-9]+ times' "$OUT/logs/throttled.log" && [ "${throttles:-0}" -gt 0 ]; then
    ok "throttling is reported: $(grep -oE 'throttled [0-9]+ times' "$OUT/logs/throttled.log"); perf report --stats: $throttles THROTTLE events"
else
    not_ok "throttling is reported (rvperf record's warning, PERF_RECORD_THROTTLE)" "$(tail -n 2 "$OUT/logs/throttled.log")" \
        "THROTTLE events: '${throttles}'"
fi

# CPU-wide isolation (issue 13, item 8): two processes alternating on this hart after
# a few user branches each (pingpong's WORK=2), recorded system-wide: a CPU-wide event
# has no ->del/->add at task switches, so CTR is cleared by the sched_switch probe; the
# host checks that no record mixes the two processes' functions.
check "rvperf record -a -j any,u -c 2000 -- pingpong 20000 2 (switches every few branches)" \
    rvperf record -a -j any,u -c 2000 -o "$OUT/ctr-switches.data" -- pingpong 20000 2

# PID namespaces (issue 13, item 10): records carry the PIDs of the recorder's
# namespace, as perf core's side-band records do, so samples find their process.
if unshare --pid --fork --mount-proc rvperf record -j any,u -c 20000 -o /tmp/pidns.data -- calls 50 \
    >"$OUT/logs/pidns.log" 2>&1; then
    rvperf script -F comm,pid -i /tmp/pidns.data >"$OUT/logs/pidns.script" 2>&1
    total=$(grep -c . "$OUT/logs/pidns.script")
    own=$(awk '$1 == "calls" && $2 < 100 { n++ } END { print n + 0 }' "$OUT/logs/pidns.script")
    if [ "$total" -gt 0 ] && [ "$own" -eq "$total" ]; then
        ok "in a PID namespace, all $total samples belong to calls with its namespace PID ($(awk '{ print $2 }' "$OUT/logs/pidns.script" | sort -u | tr '\n' ' '))"
    else
        not_ok "in a PID namespace, all samples belong to calls with its namespace PID" "$own of $total" \
            "$(sort -u "$OUT/logs/pidns.script" | head -n 3)"
    fi
else
    not_ok "rvperf record in a PID namespace (unshare --pid --fork --mount-proc)" "$(tail -n 3 "$OUT/logs/pidns.log")"
fi

# SIGINT stops a CTR recording at once, as it stops perf record: per task (the
# workload, far from done, is sent SIGTERM and rvperf then ends by the signal that
# ended it, as perf does), attached with -p (the process goes on; rvperf ends by
# SIGINT) and system-wide (rvperf ends by SIGINT). Each recording keeps what the
# rings held. Waits are bounded by counts; `timeout` only catches a hang.
# ctr_busy: spins until rvperf_ctr is in use (the recorder's events are open), then
# a fixed number of shell iterations so that the workload gets to run.
ctr_busy() {
    tries=0
    while [ "$(awk '$1 == "rvperf_ctr" { print $3 }' /proc/modules)" = 0 ] && [ "$tries" -lt 200000 ]; do
        tries=$((tries + 1))
    done
    spin=0
    while [ "$spin" -lt 20000 ]; do spin=$((spin + 1)); done
}
# sigint_check NAME EXPECTED-STATUS DATA: after `kill -INT $recorder`.
sigint_check() {
    kill -INT "$recorder"
    wait "$recorder"
    status=$?
    samples=$(rvperf script -F ip -i "$3" 2>/dev/null | grep -c .)
    log=$OUT/logs/ctr-sigint.log
    if [ "$status" -eq "$2" ] && grep -q 'samples' "$log" && [ "$samples" -gt 0 ]; then
        ok "SIGINT stops $1: exit status $status, $samples samples kept ($(grep samples "$log" | tail -n 1 | cut -c1-80))"
    else
        not_ok "SIGINT stops $1 (status $2 expected, samples kept)" "status $status, samples $samples" "$(tail -n 3 "$log")"
    fi
}
rm -f /tmp/sigint.data
timeout -s KILL 600 rvperf record -j any,u -c 20000 -o /tmp/sigint.data -- calls 1000000 \
    >/dev/null 2>"$OUT/logs/ctr-sigint.log" &
recorder=$!
ctr_busy
workload=$(pgrep -f 'calls 1000000' | head -n 1)
sigint_check "a per-task CTR recording; its workload is ended (SIGTERM)" 143 /tmp/sigint.data
if [ -n "$workload" ] && ! kill -0 "$workload" 2>/dev/null; then
    ok "SIGINT: the workload (pid $workload) was running and is gone with the recorder"
else
    not_ok "SIGINT: the workload was running and is gone with the recorder" "pid '${workload}'"
fi
calls 1000000 >/dev/null &
target=$!
rm -f /tmp/sigint.data
timeout -s KILL 600 rvperf record -p "$target" -j any,u -c 20000 -o /tmp/sigint.data \
    >/dev/null 2>"$OUT/logs/ctr-sigint.log" &
recorder=$!
ctr_busy
sigint_check "a CTR recording attached with -p" 130 /tmp/sigint.data
if kill -0 "$target" 2>/dev/null; then
    ok "SIGINT of rvperf record -p leaves the process running"
else
    not_ok "SIGINT of rvperf record -p leaves the process running"
fi
kill "$target"
wait "$target" 2>/dev/null
calls 1000000 >/dev/null &
target=$!
rm -f /tmp/sigint.data
timeout -s KILL 600 rvperf record -a -j any,u -c 20000 -o /tmp/sigint.data \
    >/dev/null 2>"$OUT/logs/ctr-sigint.log" &
recorder=$!
ctr_busy
sigint_check "a system-wide CTR recording" 130 /tmp/sigint.data
kill "$target"
wait "$target" 2>/dev/null

# A full AUX area: records are lost with an accounted TRUNCATED, nothing hangs.
rvperf record --aux-pages 1 -j any,u -c 20000 -o /tmp/ctr-small.data -- calls 100 \
    >/dev/null 2>"$OUT/logs/ctr-aux-full.log"
if grep -qE 'AUX area full [0-9]+ times' "$OUT/logs/ctr-aux-full.log"; then
    ok "a full AUX area is accounted: $(grep -oE '[0-9]+ samples.*times' "$OUT/logs/ctr-aux-full.log")"
else
    not_ok "a full AUX area is accounted (TRUNCATED)" "$(cat "$OUT/logs/ctr-aux-full.log")"
fi

# Privileges as for any PMU: at perf_event_paranoid=2 an unprivileged user may
# record its own user-mode branches and nothing of the kernel.
echo 2 >/proc/sys/kernel/perf_event_paranoid
mkdir -p /tmp/user && chown 1000:1000 /tmp/user
check "unprivileged user: -j any,u is allowed" \
    run_as 1000 rvperf record -j any,u -c 20000 -o /tmp/user/u.data -- calls 50
cp /tmp/user/u.data "$OUT/ctr-unprivileged.data" 2>/dev/null
# Kernel addresses are refused by perf's own rule, checked on the raw syscall
# (rvperf sets exclude_kernel for an unprivileged user, so it never asks): the
# same open with exclude_kernel=1 succeeds, with exclude_kernel=0 it is EACCES.
run_as 1000 perf_open rvperf_ctr exclude_kernel=1 >"$OUT/logs/perf-open-user.log" 2>&1
run_as 1000 perf_open rvperf_ctr exclude_kernel=0 >"$OUT/logs/perf-open-kernel.log" 2>&1
if grep -qx 'perf_event_open: ok' "$OUT/logs/perf-open-user.log" &&
    grep -qx 'perf_event_open: errno 13 (Permission denied)' "$OUT/logs/perf-open-kernel.log"; then
    ok "unprivileged perf_event_open of rvperf_ctr with exclude_kernel=0: EACCES (exclude_kernel=1: opens)"
else
    not_ok "unprivileged perf_event_open of rvperf_ctr with exclude_kernel=0: EACCES (exclude_kernel=1: opens)" \
        "exclude_kernel=1: $(cat "$OUT/logs/perf-open-user.log")" "exclude_kernel=0: $(cat "$OUT/logs/perf-open-kernel.log")"
fi
# The caller's right to profile the target is checked before the trigger is created
# (issue 13, item 9): an unprivileged user targeting another user's task (init) gets
# EACCES and no trigger counter is created for it (the module's count in debugfs);
# the same user's own task gets its trigger.
created=/sys/kernel/debug/rvperf_ctr/triggers_created
before=$(cat "$created" 2>/dev/null)
run_as 1000 perf_open rvperf_ctr pid=1 >"$OUT/logs/perf-open-other.log" 2>&1
after_other=$(cat "$created" 2>/dev/null)
run_as 1000 perf_open rvperf_ctr >"$OUT/logs/perf-open-own.log" 2>&1
after_own=$(cat "$created" 2>/dev/null)
if [ -n "$before" ] && grep -qx 'perf_event_open: errno 13 (Permission denied)' "$OUT/logs/perf-open-other.log" &&
    [ "$after_other" = "$before" ] && grep -qx 'perf_event_open: ok' "$OUT/logs/perf-open-own.log" &&
    [ "$after_own" -eq $((before + 1)) ]; then
    ok "another user's task: EACCES before any trigger is created (triggers $before -> $after_other; own task -> $after_own)"
else
    not_ok "another user's task: EACCES before any trigger is created" \
        "other: $(cat "$OUT/logs/perf-open-other.log") own: $(cat "$OUT/logs/perf-open-own.log")" \
        "triggers_created: before '$before', after other '$after_other', after own '$after_own'"
fi
# EACCES, from perf's own rules at perf_event_paranoid=2.
if run_as 1000 rvperf record -j any,k -c 20000 -o /tmp/user/k.data -- calls 50 \
    >"$OUT/logs/unprivileged-kernel.log" 2>&1; then
    not_ok "unprivileged user: kernel branches refused" "$(tail -n 2 "$OUT/logs/unprivileged-kernel.log")"
elif grep -q 'Permission denied (os error 13)' "$OUT/logs/unprivileged-kernel.log" &&
    grep -q 'perf_event_paranoid is 2' "$OUT/logs/unprivileged-kernel.log"; then
    ok "unprivileged user: kernel branches refused with EACCES"
else
    not_ok "unprivileged user: kernel branches refused with EACCES" "$(tail -n 2 "$OUT/logs/unprivileged-kernel.log")"
fi
echo -1 >/proc/sys/kernel/perf_event_paranoid

# Invalid attributes are refused with the error each must get, not a crash and not
# just any failure.
refused() {
    # refused NAME EXPECTED-TEXT COMMAND...: the command must fail, saying EXPECTED-TEXT.
    name=$1
    expected=$2
    shift 2
    if "$@" >"$OUT/logs/refused.log" 2>&1; then
        not_ok "refused: $name" "it succeeded" "$(tail -n 3 "$OUT/logs/refused.log")"
    elif grep -qF -- "$expected" "$OUT/logs/refused.log"; then
        ok "refused: $name ($expected)"
    else
        not_ok "refused: $name: expected '$expected'" "$(tail -n 3 "$OUT/logs/refused.log")"
    fi
}
refused "unknown trigger type (rvperf's own check)" "unknown rvperf_ctr trigger 3" \
    rvperf record -e rvperf_ctr/event=0,trigger=3/ -c 20000 -o /tmp/x.data -- true
refused "trigger event the SBI PMU lacks (EINVAL from the trigger's creation)" "Invalid argument (os error 22)" \
    rvperf record -e rvperf_ctr/event=0x7fffffff,trigger=0/ -c 20000 -o /tmp/x.data -- true
refused "firmware trigger, no overflow interrupt (EOPNOTSUPP)" "Operation not supported (os error 95)" \
    rvperf record -e rvperf_ctr/event=0x8000000000000002,trigger=2/ -c 20000 -o /tmp/x.data -- true
# perf's wording for EOPNOTSUPP on a sampling event.
refused "inherited event, perf record's default (EOPNOTSUPP)" "doesn't support sampling/overflow-interrupts" \
    perf record -e rvperf_ctr/cycles/ -o /tmp/x.data -- true
refused "software trigger (rvperf's own check)" "event cpu-clock cannot trigger CTR branch stacks" \
    rvperf record -e cpu-clock -b -o /tmp/x.data -- true
refused "zero period (EINVAL, it would record nothing)" "Invalid argument (os error 22)" \
    rvperf record -e rvperf_ctr/cycles/ -c 0 -o /tmp/x.data -- true
# perf_open: the raw syscall, attr fields as given (tests/programs/vm/perf_open.c).
refused "zero frequency (EINVAL)" "perf_event_open: errno 22 (Invalid argument)" \
    perf_open rvperf_ctr freq=1 sample_period=0
refused "exclude_host, only a guest's branches (EOPNOTSUPP)" "perf_event_open: errno 95 (Operation not supported)" \
    perf_open rvperf_ctr exclude_host=1

# exclude_hv (perf's :u and its paranoid fallback set it) and exclude_guest are
# accepted: S-mode CTR never records M-mode, nor a guest's VS/VU-mode.
check "perf_event_open of rvperf_ctr with exclude_hv=1 exclude_guest=1" \
    sh -c 'perf_open rvperf_ctr exclude_hv=1 exclude_guest=1 | grep -qx "perf_event_open: ok"'
check "rvperf record -e cycles:u -j any (exclude_hv=1, as perf's :u) records samples" \
    sh -c "rvperf record -e cycles:u -j any -c 20000 -o /tmp/ctr-u.data -- calls 20 && rvperf script -F ip -i /tmp/ctr-u.data | grep -q ."
if perf record -e rvperf_ctr/cycles/u --no-inherit -c 20000 -o /tmp/ctr-perf-u.data -- calls 20 \
    >"$OUT/logs/perf-record-ctr-u.log" 2>&1 &&
    perf evlist -v -i /tmp/ctr-perf-u.data >"$OUT/logs/perf-evlist-ctr-u.log" 2>&1 &&
    grep -q 'exclude_hv: 1' "$OUT/logs/perf-evlist-ctr-u.log" &&
    grep -q 'exclude_guest: 1' "$OUT/logs/perf-evlist-ctr-u.log"; then
    ok "perf record -e rvperf_ctr/cycles/u --no-inherit opens (exclude_hv: 1, exclude_guest: 1)"
else
    not_ok "perf record -e rvperf_ctr/cycles/u --no-inherit opens (exclude_hv: 1, exclude_guest: 1)" \
        "$(tail -n 3 "$OUT/logs/perf-record-ctr-u.log")" "$(head -n 3 "$OUT/logs/perf-evlist-ctr-u.log")"
fi

# Load and unload 50 times; every 10th time with an event open, when unloading
# must be refused as busy (the PMU is in use) and succeed once the event is gone.
# Every rmmod's status is checked, and that the module is really gone after it.
loads=0
busy_refused=0
unload_failures=
i=0
while [ "$i" -lt 50 ]; do
    i=$((i + 1))
    if ! rmmod rvperf_ctr 2>"$OUT/logs/rmmod.log"; then
        unload_failures="$unload_failures [$i: rmmod: $(cat "$OUT/logs/rmmod.log")]"
        break
    fi
    if [ -e /sys/module/rvperf_ctr ] || grep -q '^rvperf_ctr ' /proc/modules; then
        unload_failures="$unload_failures [$i: still loaded after rmmod]"
        break
    fi
    modprobe rvperf_ctr || break
    if [ $((i % 10)) -eq 0 ]; then
        rvperf record -j any,u -c 20000 -o /tmp/busy.data -- calls 2000 >/dev/null 2>"$OUT/logs/busy-record.log" &
        recorder=$!
        # Until the recorder's events hold the module (its use count); bounded
        # by a count, not a time, and only a hang would reach it.
        tries=0
        while [ "$(awk '$1 == "rvperf_ctr" { print $3 }' /proc/modules)" = 0 ] && [ "$tries" -lt 200000 ]; do
            tries=$((tries + 1))
        done
        # busybox rmmod (O_NONBLOCK): a module in use is EWOULDBLOCK.
        if rmmod rvperf_ctr 2>"$OUT/logs/rmmod-busy.log"; then
            unload_failures="$unload_failures [$i: unloaded while an event was open]"
        elif grep -q 'Resource temporarily unavailable' "$OUT/logs/rmmod-busy.log"; then
            busy_refused=$((busy_refused + 1))
        else
            unload_failures="$unload_failures [$i: busy rmmod failed otherwise: $(cat "$OUT/logs/rmmod-busy.log")]"
        fi
        if ! wait "$recorder"; then
            unload_failures="$unload_failures [$i: the recorder failed: $(tail -n 1 "$OUT/logs/busy-record.log")]"
        fi
    fi
    loads=$((loads + 1))
done
if [ "$loads" -eq 50 ] && [ "$busy_refused" -eq 5 ] && [ -z "$unload_failures" ] &&
    grep -q '^rvperf_ctr ' /proc/modules; then
    ok "rvperf_ctr unloaded and loaded 50 times, each unload checked ($busy_refused unloads refused as busy while in use)"
else
    not_ok "rvperf_ctr unloaded and loaded 50 times" "loads $loads, refused while busy $busy_refused of 5" \
        "failures:${unload_failures:- none}"
fi
if dmesg | grep -qE 'BUG:|Oops|WARNING:|Call Trace'; then
    not_ok "no kernel warning or oops" "$(dmesg | grep -E -A3 'BUG:|Oops|WARNING:' | head -n 12)"
else
    ok "no kernel warning or oops"
fi

# --- kmemleak --------------------------------------------------------------------
if [ -w /sys/kernel/debug/kmemleak ]; then
    echo scan >/sys/kernel/debug/kmemleak
    echo scan >/sys/kernel/debug/kmemleak
    cat /sys/kernel/debug/kmemleak >"$OUT/kmemleak.log"
    leaks=$(grep -c '^unreferenced object' "$OUT/kmemleak.log")
    if [ "$leaks" -eq 0 ]; then
        ok "kmemleak reports no leaks"
    else
        not_ok "kmemleak reports no leaks ($leaks reported)" "$(head -n 12 "$OUT/kmemleak.log")"
    fi
else
    not_ok "kmemleak is available" "/sys/kernel/debug/kmemleak is missing"
fi

dmesg >"$OUT/dmesg.log"
echo "1..$count" | tee -a "$TAP"
echo "# $failed of $count guest checks failed" | tee -a "$TAP"
[ "$failed" -eq 0 ]
