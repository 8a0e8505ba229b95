#!/usr/bin/env bash
# Install the host packages needed to build and trace the RISC-V test programs
# (tests/programs/*.c) on Debian bookworm:
#   - riscv64 cross toolchain: gcc-riscv64-linux-gnu, libc6-dev-riscv64-cross,
#     binutils-riscv64-linux-gnu (riscv64-linux-gnu-gcc / -objdump)
#   - QEMU user-mode emulator: qemu-user (/usr/bin/qemu-riscv64)
#   - Linux perf (linux-perf), which the perf.data interoperability tests run
#   - GNU time, for the benchmarks' peak-memory figures
#   - clang-19, llvm-19 (llvm-profdata-19, llvm-profgen-19), lld-19: the consumers the
#     AutoFDO tests feed rvperf's profiles to
#
# Idempotent and fast when everything is present: each package is checked with
# dpkg-query first; `apt-get update` runs only when something is missing.
# Runs as root (no sudo needed); uses sudo only if not root and sudo exists.
# Prints one line per package group.
set -euo pipefail

export DEBIAN_FRONTEND=noninteractive

GROUP_NAMES=("riscv64 cross toolchain" "qemu user-mode emulator" "linux perf" "gnu time" "llvm 19 (AutoFDO consumers: clang, llvm-profdata, llvm-profgen)")
GROUP_PKGS=("gcc-riscv64-linux-gnu libc6-dev-riscv64-cross binutils-riscv64-linux-gnu" "qemu-user" "linux-perf" "time" "clang-19 llvm-19 lld-19")

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO=(sudo -E)
    else
        echo "install-deps: not root and sudo not available" >&2
        exit 1
    fi
fi

is_installed() {
    local status
    status=$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null || true)
    [ "$status" = "install ok installed" ]
}

LOG=$(mktemp -t install-deps.XXXXXX.log)
trap 'rm -f "$LOG"' EXIT

run_apt() {
    if ! "${SUDO[@]}" "$@" >>"$LOG" 2>&1; then
        echo "install-deps: command failed: $*" >&2
        tail -n 40 "$LOG" >&2
        exit 1
    fi
}

updated=0
for i in "${!GROUP_NAMES[@]}"; do
    missing=()
    for pkg in ${GROUP_PKGS[$i]}; do
        is_installed "$pkg" || missing+=("$pkg")
    done
    if [ "${#missing[@]}" -eq 0 ]; then
        echo "install-deps: ${GROUP_NAMES[$i]}: already installed"
        continue
    fi
    if [ "$updated" -eq 0 ]; then
        run_apt apt-get update -qq
        updated=1
    fi
    run_apt apt-get install -y -qq --no-install-recommends "${missing[@]}"
    echo "install-deps: ${GROUP_NAMES[$i]}: installed ${missing[*]}"
done

# Sanity check that the tools the build/trace scripts use are on PATH.
for tool in riscv64-linux-gnu-gcc riscv64-linux-gnu-objdump qemu-riscv64 perf /usr/bin/time; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "install-deps: $tool not found on PATH after installation" >&2
        exit 1
    fi
done
