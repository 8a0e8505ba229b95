#!/usr/bin/env bash
# Builds rvperf's eBPF object (aya-probes/ebpf) for bpfel-unknown-none in
# release mode and prints its path.
#
#   aya-probes/build.sh [TARGET_DIR]     (default: <repo>/target/aya-probes)
#
# Needs what tools/install-bpf-toolchain.sh installs: Debian's rustc-web and
# cargo-web (whose sysroot has a prebuilt `core` for the BPF targets, so no
# nightly and no -Z build-std) and bpf-linker built against the LLVM that
# rustc uses (22), since bpf-linker links rustc's LLVM bitcode.
set -euo pipefail

probes_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_dir="$(dirname "$probes_dir")"
target_dir="${1:-$repo_dir/target/aya-probes}"
# Absolute, since cargo runs from ebpf/ below.
mkdir -p "$target_dir"
target_dir="$(cd "$target_dir" && pwd)"

# The LLVM of rustc-web and of bpf-linker (tools/install-bpf-toolchain.sh).
llvm_major=22

# Debian's toolchain, never rustup's: rustup's has no BPF core.
cargo=/usr/bin/cargo
rustc=/usr/bin/rustc
for tool in "$cargo" "$rustc"; do
    if [[ ! -x $tool ]]; then
        echo "build.sh: $tool missing; run tools/install-bpf-toolchain.sh" >&2
        exit 1
    fi
done
sysroot="$("$rustc" --print sysroot)"
if [[ ! -d $sysroot/lib/rustlib/bpfel-unknown-none ]]; then
    echo "build.sh: no core for bpfel-unknown-none in $sysroot (package libstd-rust-web-dev-bpf); run tools/install-bpf-toolchain.sh" >&2
    exit 1
fi

# cargo install puts bpf-linker in ~/.cargo/bin, which may not be on PATH.
bpf_linker="$(command -v bpf-linker || true)"
if [[ -z $bpf_linker && -x ${CARGO_HOME:-$HOME/.cargo}/bin/bpf-linker ]]; then
    bpf_linker="${CARGO_HOME:-$HOME/.cargo}/bin/bpf-linker"
fi
if [[ -z $bpf_linker ]]; then
    echo "build.sh: bpf-linker missing; run tools/install-bpf-toolchain.sh" >&2
    exit 1
fi

# cargo reads ebpf/.cargo/config.toml (target and bpf-linker flags) only when
# run from that directory. RUSTFLAGS would replace those flags: unset it.
cd "$probes_dir/ebpf"
unset RUSTFLAGS CARGO_ENCODED_RUSTFLAGS

# RUSTC_BOOTSTRAP names the only two crates allowed unstable features on this
# stable rustc: aya_ebpf and aya_probes (the crate of our bin `aya-probes`)
# both need BPF inline assembly (feature asm_experimental_arch).
# AYA_BPF_TARGET_ARCH selects aya-ebpf's kernel bindings for the guest's
# architecture rather than the host's. One job by default (CARGO_BUILD_JOBS
# overrides it): the machines this runs on have two cores.
env \
    RUSTC="$rustc" \
    RUSTC_BOOTSTRAP=aya_ebpf,aya_probes \
    AYA_BPF_TARGET_ARCH=riscv64 \
    CARGO_TARGET_BPFEL_UNKNOWN_NONE_LINKER="$bpf_linker" \
    "$cargo" build \
    --locked \
    --release \
    --target bpfel-unknown-none \
    --target-dir "$target_dir" \
    --jobs "${CARGO_BUILD_JOBS:-1}" >&2

object="$target_dir/bpfel-unknown-none/release/aya-probes"
if [[ ! -s $object ]]; then
    echo "build.sh: cargo succeeded but $object is missing" >&2
    exit 1
fi
# The DWARF that bpf-linker made the BTF from is 85% of the object and of no
# use to the loader: stripped (llvm-objcopy keeps .BTF and .BTF.ext, which are
# not debug sections), so a start-up reads and parses less.
objcopy_tool="/usr/lib/llvm-$llvm_major/bin/llvm-objcopy"
if [[ ! -x $objcopy_tool ]]; then
    echo "build.sh: $objcopy_tool missing (package llvm-$llvm_major); run tools/install-bpf-toolchain.sh" >&2
    exit 1
fi
"$objcopy_tool" --strip-debug "$object"
echo "$object"
