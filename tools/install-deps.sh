#!/usr/bin/env bash
# Install the host packages needed to build and trace the RISC-V test programs
# (tests/programs/*.c) on Debian bookworm:
#   - riscv64 cross toolchain: gcc-riscv64-linux-gnu, libc6-dev-riscv64-cross,
#     binutils-riscv64-linux-gnu (riscv64-linux-gnu-gcc / -objdump)
#   - the host compiler and binutils (build-essential: cc, make, objcopy, readelf,
#     nm, addr2line), which tests use to build host programs and inspect ELFs
#   - QEMU user-mode emulator: qemu-user (/usr/bin/qemu-riscv64, qemu-x86_64), 10.0
#     from bookworm-backports, as the VM tier's system emulator. Bookworm's 7.2 runs
#     the tracing tools (trace_gen::qemu::QemuUser picks the one-instruction flag by
#     version), but it gives programs another auxiliary vector than Linux, their start-up
#     allocates otherwise and glibc's malloc trims its heap at other points: the runs
#     that are the ground truth of traces made in the riscv64 guest
#     (tests/tests/ntrace_guest.rs) must be QEMU 10's, which agree with the guest.
#   - Linux perf (linux-perf), which the perf.data interoperability tests run
#   - GNU time, for the benchmarks' peak-memory figures
#   - clang-19, llvm-19 (llvm-profdata-19, llvm-profgen-19), lld-19: the consumers the
#     AutoFDO tests feed rvperf's profiles to
#   - Go 1.23 (golang-1.23-go, bookworm-backports; bookworm's own 1.19 is older than the
#     pprof the collectors use): `go tool pprof` reads the profiles `rvperf export
#     --pprof` writes (tests/tests/pprof_export.rs). It lives in /usr/lib/go-1.23/bin,
#     off PATH; the tests look there.
#   - glibc's detached debug symbols (libc6-dbg, in /usr/lib/debug/.build-id): ld.so
#     and libc keep only their exported symbols, so without them a profile names a
#     short-lived process's start-up (the dynamic loader's relocation, libc's early
#     initialisation) only by its file; tests/tests/daemon.rs checks those are named,
#     as a user with debug symbols installed would see them.
#
# Idempotent and fast when everything is present: each package is checked with
# dpkg-query first; `apt-get update` runs only when something is missing.
# Runs as root (no sudo needed); uses sudo only if not root and sudo exists.
# Prints one line per package group.
set -euo pipefail

export DEBIAN_FRONTEND=noninteractive

GROUP_NAMES=("host compiler and binutils" "riscv64 cross toolchain" "qemu user-mode emulator" "linux perf" "gnu time" "llvm 19 (AutoFDO consumers: clang, llvm-profdata, llvm-profgen)" "strace (the attrs rvperf record opens, for tests/tests/perf_record.rs)" "go 1.23 (go tool pprof reads exported profiles)" "glibc debug symbols (ld.so and libc functions named in host profiles)")
GROUP_PKGS=("build-essential" "gcc-riscv64-linux-gnu libc6-dev-riscv64-cross binutils-riscv64-linux-gnu" "qemu-user" "linux-perf" "time" "clang-19 llvm-19 lld-19" "strace" "golang-1.23-go" "libc6-dbg")

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

# A registry index can be briefly inconsistent ("File has unexpected size ...
# Mirror sync in progress?"): each apt command is retried with backoff, and an
# update that printed errors counts as failed.
run_apt() {
    local attempt delay=10
    for attempt in 1 2 3 4 5; do
        : >"$LOG"
        if "${SUDO[@]}" "$@" >>"$LOG" 2>&1 && ! grep -q '^E: ' "$LOG"; then
            return 0
        fi
        [ "$attempt" -lt 5 ] || break
        echo "install-deps: $1 $2 failed (attempt $attempt), retrying in $delay s: $(grep -m1 '^E: ' "$LOG" | cut -c1-160 || true)" >&2
        sleep "$delay"
        delay=$((delay * 2))
    done
    echo "install-deps: command failed: $*" >&2
    tail -n 40 "$LOG" >&2
    exit 1
}

# The major version of the installed qemu-riscv64 (0 when there is none).
qemu_user_major() {
    local version
    version=$(qemu-riscv64 --version 2>/dev/null | sed -n 's/.*version \([0-9]*\)\..*/\1/p' | head -n 1 || true)
    echo "${version:-0}"
}

# bookworm-backports, the suite of QEMU 10 (tools/vm/lib.sh adds the same file).
BACKPORTS_SOURCES=/etc/apt/sources.list.d/rvperf-backports.sources
add_backports() {
    [ -f "$BACKPORTS_SOURCES" ] && return
    printf '%s\n' "Types: deb" "URIs: http://deb.debian.org/debian" "Suites: bookworm-backports" \
        "Components: main" "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg" |
        "${SUDO[@]}" tee "$BACKPORTS_SOURCES" >/dev/null
}

updated=0
for i in "${!GROUP_NAMES[@]}"; do
    missing=()
    for pkg in ${GROUP_PKGS[$i]}; do
        is_installed "$pkg" || missing+=("$pkg")
    done
    if [ "${GROUP_PKGS[$i]}" = qemu-user ] && [ "$(qemu_user_major)" -lt 10 ]; then
        add_backports
        run_apt apt-get update -qq
        updated=1
        run_apt apt-get install -y -qq --no-install-recommends -t bookworm-backports qemu-user
        echo "install-deps: ${GROUP_NAMES[$i]}: installed qemu-user $(qemu_user_major) from bookworm-backports"
        continue
    fi
    if [ "${#missing[@]}" -eq 0 ]; then
        echo "install-deps: ${GROUP_NAMES[$i]}: already installed"
        continue
    fi
    if [ "${GROUP_PKGS[$i]}" = golang-1.23-go ]; then
        add_backports
        run_apt apt-get update -qq
        updated=1
        run_apt apt-get install -y -qq --no-install-recommends -t bookworm-backports golang-1.23-go
        echo "install-deps: ${GROUP_NAMES[$i]}: installed golang-1.23-go from bookworm-backports"
        continue
    fi
    if [ "$updated" -eq 0 ]; then
        run_apt apt-get update -qq
        updated=1
    fi
    run_apt apt-get install -y -qq --no-install-recommends "${missing[@]}"
    echo "install-deps: ${GROUP_NAMES[$i]}: installed ${missing[*]}"
done

if [ "$(qemu_user_major)" -lt 10 ]; then
    echo "install-deps: qemu-riscv64 is $(qemu_user_major).x after installation, not 10" >&2
    exit 1
fi

# Sanity check that the tools the build/trace scripts use are on PATH.
for tool in cc make readelf riscv64-linux-gnu-gcc riscv64-linux-gnu-objdump qemu-riscv64 qemu-x86_64 perf /usr/bin/time clang-19 strace /usr/lib/go-1.23/bin/go; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "install-deps: $tool not found on PATH after installation" >&2
        exit 1
    fi
done
