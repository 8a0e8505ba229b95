#!/usr/bin/env bash
# Installs what aya-probes/build.sh needs to build rvperf's eBPF programs on
# Debian bookworm (x86_64), idempotently:
#   - rustc-web, cargo-web: Debian's Rust 1.96 (/usr/bin/rustc, /usr/bin/cargo),
#     the toolchain the eBPF object is built with. Its LLVM is 22.
#   - libstd-rust-web-dev-bpf: a prebuilt `core` for bpfel-unknown-none and
#     bpfeb-unknown-none in that rustc's sysroot, so no nightly Rust and no
#     -Z build-std are needed.
#   - llvm-22-dev: libLLVM 22 (the LLVM of rustc-web: bpf-linker links the
#     LLVM bitcode rustc emits, so the two must agree) and its headers, which
#     bpf-linker is built and dynamically linked against.
#   - build-essential: cc, which links bpf-linker itself (and builds llvm-sys's
#     build script helpers).
# and then bpf-linker $BPF_LINKER_VERSION from crates.io with its llvm-22
# feature (its default feature is LLVM 23), unless that version, linked
# against libLLVM 22, is already installed. All from bookworm and
# bookworm-security; nothing is downloaded from elsewhere.
#
# Runs as root (uses sudo -E otherwise, if it exists). Building bpf-linker
# takes about 3.5 minutes with one job.
set -euo pipefail

# Pinned: the newest release when this was written, and one whose features
# include llvm-22 (0.13.0 has llvm-21, llvm-22 and llvm-23, default llvm-23).
BPF_LINKER_VERSION=0.13.0
LLVM_MAJOR=22
LLVM_PREFIX_DIR=/usr/lib/llvm-$LLVM_MAJOR
PACKAGES=(rustc-web cargo-web libstd-rust-web-dev-bpf "llvm-$LLVM_MAJOR-dev" build-essential)

export DEBIAN_FRONTEND=noninteractive

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO=(sudo -E)
    else
        echo "install-bpf-toolchain: not root and sudo not available" >&2
        exit 1
    fi
fi

is_installed() {
    local status
    status=$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null || true)
    [ "$status" = "install ok installed" ]
}

LOG=$(mktemp -t install-bpf-toolchain.XXXXXX.log)
trap 'rm -f "$LOG"' EXIT

# A registry index can be briefly inconsistent ("Mirror sync in progress?"):
# each apt command is retried with backoff, and one that printed errors
# counts as failed.
run_apt() {
    local attempt delay=10
    for attempt in 1 2 3 4 5; do
        : >"$LOG"
        if "${SUDO[@]}" "$@" >>"$LOG" 2>&1 && ! grep -q '^E: ' "$LOG"; then
            return 0
        fi
        [ "$attempt" -lt 5 ] || break
        echo "install-bpf-toolchain: $1 $2 failed (attempt $attempt), retrying in $delay s: $(grep -m1 '^E: ' "$LOG" | cut -c1-160 || true)" >&2
        sleep "$delay"
        delay=$((delay * 2))
    done
    echo "install-bpf-toolchain: command failed: $*" >&2
    tail -n 40 "$LOG" >&2
    exit 1
}

missing=()
for package in "${PACKAGES[@]}"; do
    is_installed "$package" || missing+=("$package")
done
if [ "${#missing[@]}" -gt 0 ]; then
    echo "install-bpf-toolchain: installing ${missing[*]}"
    run_apt apt-get update
    run_apt apt-get install -y --no-install-recommends "${missing[@]}"
else
    echo "install-bpf-toolchain: packages present"
fi

cargo_home=${CARGO_HOME:-$HOME/.cargo}
bpf_linker=$cargo_home/bin/bpf-linker

# The wanted bpf-linker: this version, and linked against libLLVM 22 (one
# built with another llvm-* feature links another libLLVM).
bpf_linker_ok() {
    [ -x "$bpf_linker" ] || return 1
    [ "$("$bpf_linker" --version 2>/dev/null)" = "bpf-linker $BPF_LINKER_VERSION" ] || return 1
    ldd "$bpf_linker" 2>/dev/null | grep -q "libLLVM\.so\.$LLVM_MAJOR\b"
}

if bpf_linker_ok; then
    echo "install-bpf-toolchain: bpf-linker $BPF_LINKER_VERSION (LLVM $LLVM_MAJOR) present"
    exit 0
fi

# rustup's cargo when there is one, else Debian's: either builds bpf-linker,
# which is a host program (only the eBPF object needs Debian's rustc).
cargo=$cargo_home/bin/cargo
[ -x "$cargo" ] || cargo=/usr/bin/cargo

echo "install-bpf-toolchain: building bpf-linker $BPF_LINKER_VERSION against LLVM $LLVM_MAJOR"
# LLVM_PREFIX tells bpf-linker's build script which libLLVM to link (and to
# record as its rpath): without it, it takes the llvm-config first on PATH,
# which on bookworm is LLVM 14's. Retried: crates.io can fail transiently.
for attempt in 1 2 3; do
    if LLVM_PREFIX=$LLVM_PREFIX_DIR "$cargo" install --locked --force \
        --jobs "${CARGO_BUILD_JOBS:-1}" \
        "bpf-linker@$BPF_LINKER_VERSION" \
        --no-default-features --features "llvm-$LLVM_MAJOR"; then
        break
    fi
    [ "$attempt" -lt 3 ] || { echo "install-bpf-toolchain: cargo install failed $attempt times" >&2; exit 1; }
    echo "install-bpf-toolchain: cargo install failed (attempt $attempt), retrying in $((attempt * 15)) s" >&2
    sleep $((attempt * 15))
done

bpf_linker_ok || {
    echo "install-bpf-toolchain: $bpf_linker is not bpf-linker $BPF_LINKER_VERSION linked against libLLVM $LLVM_MAJOR" >&2
    exit 1
}
echo "install-bpf-toolchain: installed $bpf_linker"
