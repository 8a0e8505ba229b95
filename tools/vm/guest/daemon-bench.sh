#!/bin/sh
# The README's guest figures for `rvperf daemon` (a benchmark, not a test: nothing here
# passes or fails). Run on a quiet host, with the test kernel's leak detector off (it
# charges every kernel allocation, and the daemon's map reads allocate):
#
#   RVPERF_VM_KERNEL_ARGS=kmemleak=off RVPERF_VM_ICOUNT=0 \
#       tools/vm/run --smp 2 --out OUT -- sh /rvperf/tools/vm/guest/daemon-bench.sh
#
# Each workload (WORKLOADS, default both) under each profiler in turn, cycles at 999 Hz
# on both harts:
#   steady: two long-running programs, the hot program on hart 1 and `ticker` on
#           hart 0: few distinct stacks, as on a server in steady state;
#   churn:  the hot program on hart 1 and a short-lived process (`burst`) started
#           about every 60 ms: most samples of the short-lived processes are in the
#           kernel (exec, page faults, exit), at stacks seen once, so the kernel's maps
#           aggregate little and every stack is read from them.
# Printed: each recorder's CPU time and peak RSS over SHORT_SECONDS and SECONDS_EACH,
# parted into a fixed cost and a running cost per SECONDS_EACH; perf record's and
# rvperf record's over INTERVALS × INTERVAL seconds; then the daemon's
# CPU time and RSS after each of INTERVALS intervals, its whole run's against perf
# record's as long, with its sampling program's runs
# so far and their mean time (the kernel's `bpf_stats_enabled` account), and whether
# the kernel JIT-compiled it. Outputs go to /tmp (the guest's
# memory), not the 9p share, whose writes would be charged to the profiler; for the
# same reason rvperf, its eBPF object and the workloads' programs are run from copies
# in /tmp, as perf runs from the initramfs: read from the 9p share, the first touch of
# each page of rvperf's 29 MB binary and each symbol table the daemon reads is a 9p
# request (46% of a start-up's CPU time went to such page faults).
#
# SELF_PROFILE=1: instead, where the daemon's own time goes. Under each workload the
# daemon runs INTERVALS intervals, and from its third interval `perf record -e
# cpu-clock -g` samples it (a software clock: the harts' one cycle counter is the
# daemon's); printed are its hottest symbols, alone and with their callees. The
# guest's rvperf has no frame pointers, so only kernel callers are known; for user
# callers, give RVPERF_BINARY, an rvperf built with `-C force-frame-pointers=yes`
# (DWARF unwinding, `--call-graph dwarf`, does not finish in the guest).
#
# RVPERF_BINARY and RVPERF_PROBES (the eBPF object) replace the guest's own, to compare
# two builds in one boot, the same host load for both. DAEMON_ARGUMENTS are added to
# every `rvperf daemon` (`--kallsyms /proc/kallsyms`: kernel names read from kallsyms,
# as before the running kernel named them).
SECONDS_EACH=${SECONDS_EACH:-30}
# A short run of each profiler beside the SECONDS_EACH one, to part the fixed cost of a
# run from its running cost (fixed_and_running).
SHORT_SECONDS=${SHORT_SECONDS:-2}
# The daemon's own default interval (`rvperf daemon --interval`): the running figure is
# what a user's daemon costs.
INTERVAL=${INTERVAL:-10}
INTERVALS=${INTERVALS:-12}
BIN=/tmp/bench-bin
rm -rf "$BIN"
mkdir -p "$BIN"
cp "${RVPERF_BINARY:-/opt/rvperf/bin/rvperf}" "$BIN/rvperf" || exit 1
cp "${RVPERF_PROBES:-/opt/rvperf/bin/rvperf-probes.bpf.o}" "$BIN/rvperf-probes.bpf.o" || exit 1
export RVPERF_PROBES="$BIN/rvperf-probes.bpf.o"
for file in hot ticker burst; do
    cp "/opt/rvperf/bin/$file" "$BIN/" || exit 1
done
PATH=$BIN:$PATH

WORKLOADS=${WORKLOADS:-steady churn}

workload_start() {
    taskset -c 1 "$BIN/hot" 100000 >/dev/null &
    hot_pid=$!
    case "$workload" in
    steady) taskset -c 0 "$BIN/ticker" >/dev/null & ;;
    churn) (while :; do "$BIN/burst"; sleep 0.05; done) & ;;
    esac
    other_pid=$!
}
workload_stop() {
    kill "$hot_pid" "$other_pid" 2>/dev/null
    wait "$hot_pid" "$other_pid" 2>/dev/null
}
# usage NAME COMMAND...: its user and system time and peak RSS (busybox time -v); the
# two times' sum left in $cpu.
usage() {
    name=$1
    shift
    time -v "$@" >/dev/null 2>/tmp/usage.log
    usage_line "$name" /tmp/usage.log
}
# usage_line NAME LOG: the line of `usage` from a `time -v` log; the CPU time in $cpu.
usage_line() {
    awk -v name="$1" -F': ' '
        /User time/ { user = $2 } /System time/ { kernel = $2 } /Maximum resident/ { rss = $2 }
        END { printf "%s: user %s s, system %s s, peak RSS %.1f MB\n", name, user, kernel, rss / 1024 }' "$2"
    cpu=$(awk -F': ' '/User time/ { user = $2 } /System time/ { kernel = $2 } END { print user + kernel }' "$2")
}
# fixed_and_running NAME SHORT_CPU LONG_CPU: a profiler's CPU time over a run of T
# seconds taken as fixed + rate * T, from a SHORT_SECONDS run and a SECONDS_EACH run:
# the fixed part (start-up and end: reading kallsyms, loading programs, perf's
# build-id pass) and the running part per SECONDS_EACH, which a long run is made of.
fixed_and_running() {
    awk -v name="$1" -v short="$2" -v long="$3" -v t_short="$SHORT_SECONDS" -v t_long="$SECONDS_EACH" 'BEGIN {
        rate = (long - short) / (t_long - t_short)
        printf "%s: fixed %.2f s, running %.2f s per %d s\n", name, short - rate * t_short, rate * t_long, t_long }'
}

# daemon_start: the workload, and the daemon over INTERVALS intervals in the background
# (daemon_pid), its lines in /tmp/bench-daemon.log.
daemon_start() {
    rm -rf /tmp/bench-daemon
    workload_start
    # Under `time -o`, for its CPU time over the whole run (start-up and the last
    # interval's writing included, as perf record's figures include its end); the
    # daemon is time's child.
    # shellcheck disable=SC2086 # DAEMON_ARGUMENTS: words
    time -v -o /tmp/bench-daemon-usage.log \
        rvperf daemon --output /tmp/bench-daemon -F 999 --interval "$INTERVAL" --intervals "$INTERVALS" $DAEMON_ARGUMENTS \
        2>/tmp/bench-daemon.log &
    time_pid=$!
    daemon_pid=''
    while [ -z "$daemon_pid" ] && kill -0 "$time_pid" 2>/dev/null; do
        for stat in /proc/[0-9]*/stat; do
            # Fields 1 and 4 of /proc/PID/stat: the pid and its parent's (the name,
            # field 2, has no spaces here). Read by the shell itself, so the search
            # starts no process beside the workload.
            read -r pid _ _ parent _ 2>/dev/null <"$stat" || continue
            if [ "$parent" = "$time_pid" ]; then
                daemon_pid=$pid
            fi
        done
    done
}

self_profile() {
    daemon_start
    sleep $((INTERVAL * 2))
    perf record -q -e cpu-clock -F 999 -g -p "$daemon_pid" -o /tmp/bench-self.data 2>/dev/null &
    perf_pid=$!
    wait "$time_pid"
    kill -INT "$perf_pid" 2>/dev/null
    wait "$perf_pid"
    workload_stop
    tail -n 3 /tmp/bench-daemon.log
    echo "### the daemon's hottest symbols"
    perf report -i /tmp/bench-self.data --stdio --no-children -n --sort dso,sym -g none 2>/dev/null |
        grep -v '^#' | grep -v '^$' | head -n 40
    echo "### with their callees"
    perf report -i /tmp/bench-self.data --stdio --children -n --sort sym -g none 2>/dev/null |
        grep -v '^#' | grep -v '^$' | head -n 80
}

if [ "${SELF_PROFILE:-0}" = 1 ]; then
    for workload in $WORKLOADS; do
        echo "## workload: $workload (self-profile)"
        self_profile
    done
    exit 0
fi

# The kernel's own account of the sampling program (bpf_stats_enabled): its runs and
# their time, from the daemon's program descriptors (prog_type 7 is BPF_PROG_TYPE_PERF_EVENT).
# This is what each sample costs the task it interrupts, charged to that task.
echo 1 >/proc/sys/kernel/bpf_stats_enabled
sampler_cost() {
    cat /proc/"$1"/fdinfo/* 2>/dev/null | awk '
        /^prog_type:/ { sampler = ($2 == 7) }
        sampler && /^prog_jited:/ { jited = $2 ? "JIT-compiled" : "interpreted" }
        sampler && /^run_time_ns:/ { nanoseconds += $2 }
        sampler && /^run_cnt:/ { runs += $2 }
        END { if (runs > 0) printf "  sampling program (%s): %d runs, %.1f us each\n", jited, runs, nanoseconds / runs / 1000 }'
}

echo "# $(uname -r), $(nproc) harts, ${SECONDS_EACH} s each, cycles at 999 Hz, kernel: $(cat /proc/cmdline)"
# What every profiler that names kernel functions pays once (the kernel formats each
# line on reading): the daemon reads it at its first interval.
usage "reading /proc/kallsyms ($(wc -l </proc/kallsyms) lines)" cat /proc/kallsyms
for workload in $WORKLOADS; do
    echo "## workload: $workload"
    for seconds in "$SHORT_SECONDS" "$SECONDS_EACH"; do
        workload_start
        usage "perf record -a -g ($seconds s)" perf record -q -a -g -e cycles -F 999 -o /tmp/bench-perf.data -- sleep "$seconds"
        workload_stop
        perf_cpu="$perf_cpu $cpu"
        workload_start
        usage "rvperf record -a -g ($seconds s)" rvperf record -a -g -e cycles -F 999 -o /tmp/bench-rvperf.data -- sleep "$seconds"
        workload_stop
        rvperf_cpu="$rvperf_cpu $cpu"
        rm -rf /tmp/bench-daemon
        workload_start
        # shellcheck disable=SC2086
        usage "rvperf daemon (one interval of $seconds s)" rvperf daemon --output /tmp/bench-daemon -F 999 $DAEMON_ARGUMENTS \
            --interval "$seconds" --intervals 1
        workload_stop
        daemon_cpu="$daemon_cpu $cpu"
    done
    # shellcheck disable=SC2086 # the two figures, as two arguments
    fixed_and_running "perf record -a -g" $perf_cpu
    # shellcheck disable=SC2086
    fixed_and_running "rvperf record -a -g" $rvperf_cpu
    # shellcheck disable=SC2086
    fixed_and_running "rvperf daemon" $daemon_cpu
    perf_cpu='' rvperf_cpu='' daemon_cpu=''

    # perf record and rvperf record for as long as the daemon's run below (INTERVALS
    # of INTERVAL seconds): a long run's ratio, measured rather than fitted (a fit of
    # perf's running cost from the two runs above is within its noise).
    long_seconds=$((INTERVAL * INTERVALS))
    workload_start
    usage "perf record -a -g ($long_seconds s)" perf record -q -a -g -e cycles -F 999 -o /tmp/bench-perf.data -- sleep "$long_seconds"
    workload_stop
    perf_long=$cpu
    workload_start
    usage "rvperf record -a -g ($long_seconds s)" rvperf record -a -g -e cycles -F 999 -o /tmp/bench-rvperf.data -- sleep "$long_seconds"
    workload_stop
    rvperf_long=$cpu

    # The daemon over a longer run: CPU time and RSS after each interval.
    daemon_start
    ticks=$(getconf CLK_TCK 2>/dev/null || echo 100)
    while kill -0 "$daemon_pid" 2>/dev/null; do
        sleep "$INTERVAL"
        [ -r "/proc/$daemon_pid/stat" ] || break
        awk -v ticks="$ticks" -v rss="$(awk '/VmRSS/ { print $2 }' "/proc/$daemon_pid/status")" \
            '{ printf "daemon after %s: CPU %.2f s, RSS %.1f MB\n", "'"$(date +%T)"'", ($14 + $15) / ticks, rss / 1024 }' \
            "/proc/$daemon_pid/stat"
        sampler_cost "$daemon_pid"
    done
    wait "$time_pid"
    workload_stop
    cat /tmp/bench-daemon.log
    usage_line "rvperf daemon ($INTERVALS intervals of $INTERVAL s)" /tmp/bench-daemon-usage.log
    awk -v daemon="$cpu" -v perf="$perf_long" -v rvperf="$rvperf_long" -v seconds="$long_seconds" 'BEGIN {
        printf "over %d s: the daemon %.2f s, perf record %.2f s (%.2f of it), rvperf record %.2f s\n",
            seconds, daemon, perf, daemon / perf, rvperf }'
done
