#!/usr/bin/env bash
# Build the RISC-V test programs tests/programs/*.c as static rv64gc Linux
# executables.
#
# Usage: tools/testprogs/build.sh OUTDIR [NAME...]
#
# Without NAMEs every tests/programs/*.c is built; with NAMEs (e.g. `fnptr`)
# only tests/programs/NAME.c. For each program this writes
#   OUTDIR/NAME          riscv64-linux-gnu-gcc -O2 -g -static -march=rv64gc -mabi=lp64d
#   OUTDIR/NAME.objdump  riscv64-linux-gnu-objdump -d OUTDIR/NAME
# A program is not rebuilt when OUTDIR/NAME is newer than both its source and
# this script. Afterwards it checks that the binaries use compressed (RVC)
# instructions and that switch.c's dispatch is an indirect jump through a
# jump table.
#
# Environment: RISCV_CC / RISCV_OBJDUMP override the tool names.
# Missing tools: run tools/install-deps.sh.
set -euo pipefail

if [ "$#" -lt 1 ]; then
    echo "usage: $0 OUTDIR [NAME...]" >&2
    exit 2
fi

SCRIPT="${BASH_SOURCE[0]}"
ROOT="$(cd "$(dirname "$SCRIPT")/../.." && pwd)"
SRCDIR="$ROOT/tests/programs"
OUTDIR="$1"
shift
CC="${RISCV_CC:-riscv64-linux-gnu-gcc}"
OBJDUMP="${RISCV_OBJDUMP:-riscv64-linux-gnu-objdump}"
CFLAGS=(-O2 -g -static -march=rv64gc -mabi=lp64d -Wall -Wextra)

for tool in "$CC" "$OBJDUMP"; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "build.sh: $tool not found; run tools/install-deps.sh" >&2
        exit 1
    fi
done

mkdir -p "$OUTDIR"

if [ "$#" -gt 0 ]; then
    sources=()
    for name in "$@"; do
        name="${name%.c}"
        if ! [ -f "$SRCDIR/$name.c" ]; then
            echo "build.sh: no such program: $SRCDIR/$name.c" >&2
            exit 1
        fi
        sources+=("$SRCDIR/$name.c")
    done
else
    shopt -s nullglob
    sources=("$SRCDIR"/*.c)
    if [ "${#sources[@]}" -eq 0 ]; then
        echo "build.sh: no sources in $SRCDIR" >&2
        exit 1
    fi
fi

built=0
for src in "${sources[@]}"; do
    name="$(basename "$src" .c)"
    out="$OUTDIR/$name"
    dump="$OUTDIR/$name.objdump"
    if [ -f "$out" ] && [ "$out" -nt "$src" ] && [ "$out" -nt "$SCRIPT" ]; then
        :
    else
        # Build to a temporary name and rename, so a concurrent or
        # interrupted build never leaves a truncated binary behind.
        tmp="$out.tmp.$$"
        # A program may ask for extra flags with a line "rvperf-build-flags: ...".
        read -r -a extra <<<"$(sed -n 's/.*rvperf-build-flags: *//p' "$src" | head -n1)"
        "$CC" "${CFLAGS[@]}" "${extra[@]}" "$src" -o "$tmp"
        mv -f "$tmp" "$out"
        built=$((built + 1))
    fi
    if ! [ -f "$dump" ] || ! [ "$dump" -nt "$out" ]; then
        tmp="$dump.tmp.$$"
        "$OBJDUMP" -d "$out" >"$tmp"
        mv -f "$tmp" "$dump"
    fi
done

# Checks on the generated code.
fail=0
for src in "${sources[@]}"; do
    name="$(basename "$src" .c)"
    # Compressed instructions show up in objdump with a 4-hex-digit encoding.
    if ! grep -qE '^ +[0-9a-f]+:[[:space:]]+[0-9a-f]{4}[[:space:]]+[a-z]' "$OUTDIR/$name.objdump"; then
        echo "build.sh: $name: no compressed instructions found" >&2
        fail=1
    fi
done
if [[ " ${sources[*]} " == *"/switch.c "* ]]; then
    # Inside step(): a 32-bit table load (lw) followed by `jr` (not `ret`).
    if ! awk '/^[0-9a-f]+ <step>:/ { f = 1; next }
              f && /^$/ { exit }
              f && /\tlw\t/ { lw = 1 }
              f && lw && /\tjr\t/ && !/\tjr\tra/ { found = 1 }
              END { exit !found }' "$OUTDIR/switch.objdump"; then
        echo "build.sh: switch: no jump-table indirect jump (lw + jr) in step()" >&2
        fail=1
    fi
fi
if [ "$fail" -ne 0 ]; then
    exit 1
fi

echo "build.sh: ${#sources[@]} programs in $OUTDIR ($built rebuilt)"
