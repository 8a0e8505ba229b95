#!/bin/sh
# `rvperf daemon` on the riscv64 guest (issue 18), run by tools/vm/test in a boot of its
# own with two harts and without -icount (system-wide sampling gets no samples under
# -icount, see smp-tests.sh): the eBPF probes (aya-probes/, installed beside rvperf as
# rvperf-probes.bpf.o) on the SBI PMU's cycles. Each check leaves its profiles in
# /out/daemon/NAME; the host reads them with `go tool pprof` (tools/vm/test), which the
# guest does not have.
OUT=/out
TAP=$OUT/guest-daemon-tests.tap
DIR=$OUT/daemon
BIN=/opt/rvperf/bin
: >"$TAP"
mkdir -p "$DIR"
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
echo "# guest: $(uname -r), $(nproc) harts" | tee -a "$TAP"

# start_daemon NAME ARGS...: rvperf daemon into $DIR/NAME in the background, its
# standard error in $DIR/NAME.log; returns once it is profiling (or has ended).
start_daemon() {
    name=$1
    shift
    rm -rf "${DIR:?}/$name"
    taskset -c 0 rvperf daemon --output "$DIR/$name" "$@" 2>"$DIR/$name.log" &
    daemon_pid=$!
    waited=0
    while ! grep -q 'profiling every CPU' "$DIR/$name.log" && kill -0 "$daemon_pid" 2>/dev/null &&
        [ "$waited" -lt 600 ]; do
        sleep 0.1
        waited=$((waited + 1))
    done
}
# stop_daemon: SIGTERM, then its exit status in daemon_status.
stop_daemon() {
    kill -TERM "$daemon_pid" 2>/dev/null
    wait "$daemon_pid"
    daemon_status=$?
}

# 1. The hot program under the daemon and, over the same window, Linux perf's
# system-wide call-graph recording; `perf report`'s share of hot_function is written for
# the host to compare with the daemon's merged pprof (go tool pprof -top). Perf samples
# instructions, not cycles: QEMU's harts count cycles on one counter only, so a second
# cycles sampler beside the daemon's counts nothing (two `perf record -a -e cycles` do
# the same: the second gets no sample). Without -icount QEMU ticks both the cycle and
# the instruction counter from the host's clock, so the two count the same thing.
# The hot program has hart 1 to itself, the two profilers hart 0: each one's start-up
# and ending fall in the other's window, and would otherwise take from the hot
# program's share in one profile only.
taskset -c 1 "$BIN/hot" 1000 >/dev/null &
hot_pid=$!
start_daemon hot -F 999 --interval 8 --intervals 1
# (Written in /tmp: perf's file written on the 9p share is left with a data size of 0.)
taskset -c 0 perf record -q -a -g -e instructions -F 999 -o /tmp/hot-perf.data -- sleep 8 >/dev/null 2>"$DIR/hot-perf.log"
wait "$daemon_pid"
daemon_status=$?
kill "$hot_pid" 2>/dev/null
wait "$hot_pid" 2>/dev/null
# The share by sample count (perf report -n's Samples column), as the daemon counts
# samples: perf report's Overhead weighs each sample by its period, and in frequency
# mode the busy hart's periods are longer (52.2% by period against 48.9% by count in
# one run, where the daemon's profile gave 49.1%).
perf report --stdio --no-children -n -g none --sort sym -i /tmp/hot-perf.data >"$DIR/hot-perf.report" 2>>"$DIR/hot-perf.log"
cp /tmp/hot-perf.data "$DIR/"
perf_share=$(awk '$1 ~ /%$/ && $2 ~ /^[0-9]+$/ { total += $2; if ($NF == "hot_function") hot = $2 }
    END { if (total > 0 && hot > 0) printf "%.2f\n", 100 * hot / total }' "$DIR/hot-perf.report")
echo "${perf_share:-none}" >"$DIR/hot-perf.share"
if [ "$daemon_status" -eq 0 ] && [ -s "$DIR/hot/merged.pb.gz" ] && [ -n "$perf_share" ]; then
    ok "rvperf daemon profiles the hot program beside perf record -a -g (perf report -n: hot_function $perf_share% of samples; compared on the host): $(grep 'interval 1:' "$DIR/hot.log" | cut -d: -f3- | cut -c1-120)"
else
    not_ok "rvperf daemon profiles the hot program beside perf record -a -g" \
        "daemon status $daemon_status, perf report share '$perf_share'" "$(tail -n 3 "$DIR/hot.log")"
fi

# 2. 200 short-lived processes, each gone long before the interval ends: the host
# checks that their samples are named by their own functions.
start_daemon burst -F 999 --interval 600
i=0
while [ "$i" -lt 200 ]; do
    # Ten times burst's default work (745 samples in burn_loop in one run). The default
    # gave 154 in one run and 100 or fewer in another, against the host's bound of
    # 100: the rest is exec, page faults and exit, and QEMU without -icount runs a
    # fixed loop in less guest time on a faster (quieter) host.
    "$BIN/burst" 1000000
    i=$((i + 1))
done
stop_daemon
execs=$(sed -n 's/.* \([0-9][0-9]*\) execs.*/\1/p' "$DIR/burst.log" | head -n 1)
if [ "$daemon_status" -eq 0 ] && [ -s "$DIR/burst/interval-000001.folded" ] && [ "${execs:-0}" -ge 200 ]; then
    ok "200 short-lived processes under rvperf daemon (named by the host): ${execs} execs seen"
else
    not_ok "200 short-lived processes under rvperf daemon" "status $daemon_status, execs '$execs'" \
        "$(tail -n 3 "$DIR/burst.log")"
fi

# 3. A stack-count map of two entries: samples beyond it are counted as dropped on each
# interval's line, and the daemon keeps going through all three intervals.
"$BIN/hot" 1000 >/dev/null &
hot_pid=$!
(i=0; while [ "$i" -lt 100 ]; do ls -R /usr/lib >/dev/null 2>&1; i=$((i + 1)); done) &
busy_pid=$!
rm -rf "$DIR/overflow"
rvperf daemon --output "$DIR/overflow" -F 999 --interval 1 --intervals 3 --max-stacks 2 2>"$DIR/overflow.log"
daemon_status=$?
kill "$hot_pid" "$busy_pid" 2>/dev/null
wait "$hot_pid" "$busy_pid" 2>/dev/null
intervals=$(grep -c ': interval [0-9]*:' "$DIR/overflow.log")
dropped=$(sed -n 's/.* \([0-9][0-9]*\) dropped (stack map full).*/\1/p' "$DIR/overflow.log" |
    awk '{ total += $1 } END { print total + 0 }')
if [ "$daemon_status" -eq 0 ] && [ "$intervals" -eq 3 ] && [ "$dropped" -gt 0 ] &&
    [ -s "$DIR/overflow/interval-000003.pb.gz" ]; then
    ok "a 2-entry stack map overflows into counted drops ($dropped samples over 3 intervals) and the daemon goes on"
else
    not_ok "a 2-entry stack map overflows into counted drops and the daemon goes on" \
        "status $daemon_status, $intervals intervals, $dropped dropped" "$(tail -n 4 "$DIR/overflow.log")"
fi

# 4. Unprivileged (nobody: uid and gid 65534, no capabilities): one line, non-zero, no
# directory. The initramfs names only root; busybox's su needs the user in /etc/passwd.
rm -rf "$DIR/unprivileged"
grep -q '^nobody:' /etc/passwd || echo 'nobody:x:65534:65534:nobody:/nonexistent:/bin/sh' >>/etc/passwd
grep -q '^nogroup:' /etc/group || echo 'nogroup:x:65534:' >>/etc/group
su -s /bin/sh nobody -c "rvperf daemon --output $DIR/unprivileged" 2>"$DIR/unprivileged.log"
unprivileged_status=$?
if [ "$unprivileged_status" -ne 0 ] && [ "$(wc -l <"$DIR/unprivileged.log")" -eq 1 ] &&
    grep -q 'BPF is unavailable' "$DIR/unprivileged.log" && [ ! -e "$DIR/unprivileged" ]; then
    ok "an unprivileged start is refused in one line: $(cat "$DIR/unprivileged.log")"
else
    not_ok "an unprivileged start is refused in one line, leaving no directory" \
        "status $unprivileged_status" "$(head -n 3 "$DIR/unprivileged.log")"
fi

# 4b. The same unprivileged start with --fallback perf, on a machine whose administrator
# opened system-wide perf events and kernel addresses to every user (BPF stays closed to
# them): the perf ring recorder samples, says so on its first line, and names the hot
# program's function (the program is nobody's too: another user's mappings are not its
# to read). Its profiles are written in /tmp (nobody cannot write the 9p share) and
# copied out.
paranoid=$(cat /proc/sys/kernel/perf_event_paranoid)
pointers=$(cat /proc/sys/kernel/kptr_restrict)
echo -1 >/proc/sys/kernel/perf_event_paranoid
echo 0 >/proc/sys/kernel/kptr_restrict
rm -rf /tmp/fallback "$DIR/fallback"
su -s /bin/sh nobody -c "taskset -c 1 $BIN/hot 1000 >/dev/null & hot=\$!; rvperf daemon --output /tmp/fallback --fallback perf -F 999 --interval 4 --intervals 1; status=\$?; kill \$hot; exit \$status" \
    2>"$DIR/fallback.log"
fallback_status=$?
echo "$paranoid" >/proc/sys/kernel/perf_event_paranoid
echo "$pointers" >/proc/sys/kernel/kptr_restrict
cp -r /tmp/fallback "$DIR/fallback" 2>/dev/null
if [ "$fallback_status" -eq 0 ] && head -n 1 "$DIR/fallback.log" | grep -q 'perf ring recorder' &&
    [ -s "$DIR/fallback/merged.pb.gz" ]; then
    ok "unprivileged with --fallback perf: the perf ring recorder profiles (checked on the host): $(grep 'interval 1:' "$DIR/fallback.log" | cut -d: -f3- | cut -c1-80)"
else
    not_ok "unprivileged with --fallback perf: the perf ring recorder profiles" \
        "status $fallback_status" "$(head -n 3 "$DIR/fallback.log")"
fi

# 5. SIGTERM after the second interval, during the next: the last interval is written
# whole (the host checks it with go tool pprof, and that the merged profile is the sum
# of the intervals).
"$BIN/hot" 1000 >/dev/null &
hot_pid=$!
start_daemon sigterm -F 499 --interval 2
waited=0
while [ ! -e "$DIR/sigterm/interval-000002.pb.gz" ] && kill -0 "$daemon_pid" 2>/dev/null && [ "$waited" -lt 600 ]; do
    sleep 0.1
    waited=$((waited + 1))
done
sleep 1
stop_daemon
kill "$hot_pid" 2>/dev/null
wait "$hot_pid" 2>/dev/null
last=$(ls "$DIR/sigterm" | sed -n 's/^interval-\([0-9]*\)\.pb\.gz$/\1/p' | sort | tail -n 1)
if [ "$daemon_status" -eq 0 ] && [ -n "$last" ] && [ "$last" -ge 3 ] 2>/dev/null &&
    [ -s "$DIR/sigterm/interval-$last.folded" ]; then
    ok "SIGTERM during interval $(expr "$last" + 0) ends the run with it written (checked on the host)"
else
    not_ok "SIGTERM during an interval ends the run with it written" "status $daemon_status, last '$last'" \
        "$(ls "$DIR/sigterm" 2>&1 | head -n 8)" "$(tail -n 3 "$DIR/sigterm.log")"
fi

# The probes and their maps leave the kernel nothing to complain of.
dmesg >"$OUT/dmesg.log"
if grep -qE 'BUG:|Oops|WARNING:|Call Trace|Unhandled' "$OUT/dmesg.log"; then
    not_ok "no kernel warning or oops under rvperf daemon" \
        "$(grep -E -A3 'BUG:|Oops|WARNING:|Unhandled' "$OUT/dmesg.log" | head -n 8)"
else
    ok "no kernel warning or oops under rvperf daemon"
fi

echo "1..$count" | tee -a "$TAP"
[ "$failed" -eq 0 ]
