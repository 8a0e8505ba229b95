#!/usr/bin/env bash
# The N-Trace reference encoder/decoder (NexRv, the C reference code of the RISC-V
# N-Trace task group, in ../shared/peers/nexrv-refcode/) as a second, independent
# encoder and as the decoder rvperf is measured against. Only builds and runs it: none
# of its code is part of rvperf.
#
# usage:
#   tools/nexrv/nexrv.sh build OUTDIR
#       compile OUTDIR/NexRv with gcc -O2 (only when a source is newer); prints its path
#   tools/nexrv/nexrv.sh encode NEXRV OBJDUMP PCS TRACE [ENCODER OPTION...]
#       encode the retired PCs in PCS (one `0x...` per line, as `rvperf-tracegen
#       --pcs-output` or QEMU's exec log give) of the program whose `objdump -d` listing
#       is OBJDUMP into TRACE. Options go to `NexRv -enco`: -nobhm (BTM), -norbm (HTM
#       without RepeatBranch), -cs N (implicit-return stack of N), -rpt 0|1|2 (repeated
#       branch / repeated history); the default is HTM without return stack or repeats.
#       Intermediate files (TRACE.pcinfo, TRACE.pcseq) are removed afterwards.
#   tools/nexrv/nexrv.sh decode NEXRV OBJDUMP TRACE PCOUT
#       the reference decoder: every retired PC of TRACE to PCOUT, one per line
#
# Environment: NEXRV_SOURCE overrides the source directory, CC the compiler.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# The peers live beside the repository in the workplace (../shared); a clone made
# elsewhere on the same machine finds them at the workplace's absolute path.
source_dir=${NEXRV_SOURCE:-$root/../shared/peers/nexrv-refcode}
if [ -z "${NEXRV_SOURCE:-}" ] && [ ! -d "$source_dir" ] && [ -d /work/shared/peers/nexrv-refcode ]; then
    source_dir=/work/shared/peers/nexrv-refcode
fi
sources=(NexRv.c NexRvDeco.c NexRvEnco.c NexRvDump.c NexRvInfo.c NexRvConv.c)

# NexRv prints its result and exits 0 on success; on failure it prints "ERROR" (and
# exits non-zero for most, not all, failures): check both.
run_nexrv() {
    local log
    log=$("$@" 2>&1) || { echo "nexrv.sh: $* failed:" >&2; echo "$log" >&2; return 1; }
    if grep -q ERROR <<<"$log"; then
        echo "nexrv.sh: $* failed:" >&2
        echo "$log" >&2
        return 1
    fi
}

command=${1:-}
shift || true
case "$command" in
build)
    [ "$#" -eq 1 ] || { echo "usage: $0 build OUTDIR" >&2; exit 2; }
    mkdir -p "$1"
    # Absolute: the compiler runs in the source directory.
    out=$(cd "$1" && pwd)
    cc=${CC:-gcc}
    if ! command -v "$cc" >/dev/null 2>&1; then
        echo "nexrv.sh: $cc not found; run tools/install-deps.sh" >&2
        exit 1
    fi
    for file in "${sources[@]}"; do
        if ! [ -f "$source_dir/$file" ]; then
            echo "nexrv.sh: $source_dir/$file missing (set NEXRV_SOURCE to the reference code)" >&2
            exit 1
        fi
    done
    binary=$out/NexRv
    stale=0
    [ -x "$binary" ] || stale=1
    for file in "${sources[@]}" NexRv.h NexRvInfo.h NexRvMsg.h; do
        if [ "$source_dir/$file" -nt "$binary" ]; then stale=1; fi
    done
    if [ "$stale" -eq 1 ]; then
        # Built to a temporary name and renamed: concurrent builds never see half a binary.
        tmp=$binary.tmp.$$
        (cd "$source_dir" && "$cc" -O2 -w "${sources[@]}" -o "$tmp")
        mv -f "$tmp" "$binary"
    fi
    echo "$binary"
    ;;
encode)
    [ "$#" -ge 4 ] || { echo "usage: $0 encode NEXRV OBJDUMP PCS TRACE [OPTION...]" >&2; exit 2; }
    nexrv=$1 objdump=$2 pcs=$3 trace=$4
    shift 4
    run_nexrv "$nexrv" -conv -objd "$objdump" -pcinfo "$trace.pcinfo"
    run_nexrv "$nexrv" -conv -pcinfo "$trace.pcinfo" -pconly "$pcs" -pcseq "$trace.pcseq"
    run_nexrv "$nexrv" -enco "$trace.pcseq" -nex "$trace" "$@" -none
    rm -f "$trace.pcinfo" "$trace.pcseq"
    ;;
decode)
    [ "$#" -eq 4 ] || { echo "usage: $0 decode NEXRV OBJDUMP TRACE PCOUT" >&2; exit 2; }
    nexrv=$1 objdump=$2 trace=$3 pcout=$4
    run_nexrv "$nexrv" -conv -objd "$objdump" -pcinfo "$trace.pcinfo"
    run_nexrv "$nexrv" -deco "$trace" -pcinfo "$trace.pcinfo" -pcout "$pcout" -none
    rm -f "$trace.pcinfo"
    ;;
*)
    echo "usage: $0 build OUTDIR | encode NEXRV OBJDUMP PCS TRACE [OPTION...] | decode NEXRV OBJDUMP TRACE PCOUT" >&2
    exit 2
    ;;
esac
