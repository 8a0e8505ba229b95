# shellcheck shell=bash
# The rvperf VM harness: everything `tools/vm/{test,run,shell}` share.
#
# Build products live in a cache outside the checkout ($RVPERF_VM_CACHE,
# default ~/.cache/rvperf-vm). Each product sits in a directory named after a
# hash of everything that goes into it (sources, config, toolchain versions,
# this file's build recipe), so a changed input builds anew and an unchanged
# one is reused; a product is complete once its `.done` stamp exists, written
# last, so an interrupted build never looks finished and is redone.
#
# Every function here prints its progress to stderr as `vm: ...` and fails
# the whole script (set -e) on error.

set -euo pipefail
# Products are returned through $(...); a failure inside one must stop the run.
shopt -s inherit_errexit

VM_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(cd "$VM_DIR/../.." && pwd)
CACHE_DIR=${RVPERF_VM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rvperf-vm}
JOBS=${RVPERF_VM_JOBS:-$(nproc)}
LLVM_BIN=/usr/lib/llvm-19/bin
# Debian's rustc-web (1.96) is what Rust-for-Linux and -Zbuild-std use; a
# rustup toolchain earlier on PATH must not shadow it.
DEBIAN_RUSTC=/usr/bin/rustc
DEBIAN_CARGO=/usr/bin/cargo

# The QEMU machine: Sscofpmf for sampling, Smctr/Ssctr for CTR, and the
# indirect CSR access CTR entries are read through. smstateen stays off:
# with it on, OpenSBI does not open CTR to S-mode.
# RVPERF_VM_CPU replaces it (the tier boots a CPU without CTR once).
QEMU_CPU="rv64,sscofpmf=true,smctr=true,ssctr=true,smcsrind=true,sscsrind=true"
QEMU_MEMORY=${RVPERF_VM_MEMORY:-2G}

log() { echo "vm: $*" >&2; }
die() {
    echo "vm: error: $*" >&2
    exit 1
}

mkdir -p "$CACHE_DIR"

# hash_inputs FILE|STRING... -> one sha256 over the named files' contents and
# the literal strings (prefixed so a file and a string never collide).
hash_inputs() {
    local item
    for item in "$@"; do
        if [ -f "$item" ]; then
            printf 'file %s\n' "$(basename "$item")"
            cat "$item"
        else
            printf 'text %s\n' "$item"
        fi
    done | sha256sum | cut -c1-16
}

# The text of one function of this file, so a product's key changes when its
# recipe does, and not when an unrelated recipe does.
recipe() { declare -f "$1"; }

# cached NAME KEY BUILDER: runs BUILDER DIR once for this key; prints the
# finished product directory.
cached() {
    local name=$1 key=$2 builder=$3
    local dir="$CACHE_DIR/$name-$key"
    if [ -f "$dir/.done" ]; then
        echo "$dir"
        return
    fi
    # One builder per product at a time; a second harness run waits here and
    # then finds the product done.
    local lock_fd
    exec {lock_fd}>"$CACHE_DIR/$name.lock"
    flock "$lock_fd"
    if [ ! -f "$dir/.done" ]; then
        # Built in place (a kernel object tree records its absolute path), so
        # `.done`, written last, is what marks a product complete.
        rm -rf "$dir"
        mkdir -p "$dir"
        log "building $name ($key)"
        local start=$SECONDS
        "$builder" "$dir"
        touch "$dir/.done"
        log "built $name in $((SECONDS - start)) s"
        # Older keys of the same product are superseded; keep the cache from
        # growing without bound.
        find "$CACHE_DIR" -maxdepth 1 -name "$name-*" ! -name "$name-$key" \
            ! -name "*.lock" -exec rm -rf {} + 2>/dev/null || true
    fi
    exec {lock_fd}>&-
    echo "$dir"
}

# ---------------------------------------------------------------------------
# Host packages

VM_HOST_PACKAGES=(
    # QEMU 10 (bookworm's 7.2 boots no current kernel and has no CTR).
    qemu-system-riscv
    # The kernel: clang/lld for Rust-for-Linux, the usual kbuild tools.
    clang-19 lld-19 llvm-19 libclang-19-dev make bc flex bison libelf-dev
    libssl-dev cpio kmod dwarves xz-utils curl
    # Rust-for-Linux and the riscv64 userland build (-Zbuild-std).
    rustc-web cargo-web rust-web-src
    # riscv64 C programs and the 6.12 compile-only module tree.
    gcc-riscv64-linux-gnu libc6-dev-riscv64-cross binutils-riscv64-linux-gnu
    # Host-side reading of the guest's perf.data.
    linux-perf
)

install_host_packages() {
    local missing=() pkg status
    for pkg in "${VM_HOST_PACKAGES[@]}"; do
        status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
        [ "$status" = "install ok installed" ] || missing+=("$pkg")
    done
    local qemu_version
    qemu_version=$(qemu-system-riscv64 --version 2>/dev/null | sed -n 's/.*version \([0-9]*\)\..*/\1/p' || true)
    if [ "${#missing[@]}" -eq 0 ] && [ "${qemu_version:-0}" -ge 10 ]; then
        return
    fi
    [ "$(id -u)" -eq 0 ] || die "missing host packages (${missing[*]}); run as root to install them"
    log "installing host packages: ${missing[*]}"
    if [ ! -f /etc/apt/sources.list.d/rvperf-backports.sources ]; then
        cat >/etc/apt/sources.list.d/rvperf-backports.sources <<'EOF'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    fi
    local apt_log attempt delay=10
    apt_log=$(mktemp)
    # Retried with backoff: a registry index can be briefly inconsistent.
    for attempt in 1 2 3 4 5; do
        if { apt-get update -q &&
            DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
                -t bookworm-backports qemu-system-riscv qemu-user &&
            DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
                "${VM_HOST_PACKAGES[@]}"; } >"$apt_log" 2>&1 && ! grep -q '^E: ' "$apt_log"; then
            rm -f "$apt_log"
            return
        fi
        [ "$attempt" -lt 5 ] || break
        log "apt-get failed (attempt $attempt), retrying in $delay s: $(grep -m1 '^E: ' "$apt_log" | cut -c1-160 || true)"
        sleep "$delay"
        delay=$((delay * 2))
    done
    tail -n 30 "$apt_log" >&2
    rm -f "$apt_log"
    die "apt-get failed"
}

# bindgen-cli from crates.io: Debian's bindgen is older than the kernel's
# minimum.
BINDGEN_VERSION=0.73.2
build_bindgen() {
    local out=$1
    CARGO_TARGET_DIR="$out/target" cargo install --quiet --locked \
        "bindgen-cli@$BINDGEN_VERSION" --root "$out" >&2
    rm -rf "$out/target"
}
bindgen_path() {
    local dir
    dir=$(cached bindgen "$(hash_inputs "$BINDGEN_VERSION" "$(recipe build_bindgen)")" build_bindgen)
    echo "$dir/bin/bindgen"
}

# ---------------------------------------------------------------------------
# Kernel sources, pinned in sources.lock and checked by SHA-256.

# lock_field NAME FIELD
lock_field() {
    awk -v n="$1" -v f="$2" '$1 == n { print $f }' "$VM_DIR/sources.lock"
}

# lock_entry NAME: the whole pinned line, for cache keys (a product's key
# changes with its own pin, not with every line of the lock file).
lock_entry() {
    awk -v n="$1" '$1 == n' "$VM_DIR/sources.lock"
}

# download URL DEST: fetches URL to DEST, retrying transient failures with
# backoff (a registry mid-sync answers with errors for minutes). Returns 2
# when the file is gone (404/410: a pool file removed after a point release),
# 1 when every attempt failed otherwise.
download() {
    local url=$1 dest=$2 attempt code delay=5
    for attempt in 1 2 3 4 5 6; do
        code=$(curl -sSL --connect-timeout 20 -o "$dest" -w '%{http_code}' "$url" 2>/dev/null) || code=000
        case "$code" in
        200) return 0 ;;
        404 | 410)
            rm -f "$dest"
            return 2
            ;;
        esac
        rm -f "$dest"
        [ "$attempt" -lt 6 ] || break
        log "download of $(basename "$url") failed (HTTP $code), attempt $attempt; retrying in $delay s"
        sleep "$delay"
        delay=$((delay * 2))
    done
    return 1
}

# fetch_pinned URL SHA256 -> path of the verified file in the download cache.
# Returns 2 when the pinned file is gone from the registry.
fetch_pinned() {
    local url=$1 sha=$2 file status=0
    mkdir -p "$CACHE_DIR/downloads"
    file="$CACHE_DIR/downloads/$(basename "$url")"
    if [ -f "$file" ] && echo "$sha  $file" | sha256sum -c --quiet >/dev/null 2>&1; then
        echo "$file"
        return 0
    fi
    log "downloading $url"
    download "$url" "$file.part" || status=$?
    [ "$status" -ne 2 ] || return 2
    [ "$status" -eq 0 ] || die "download failed after retries: $url"
    echo "$sha  $file.part" | sha256sum -c --quiet >/dev/null 2>&1 ||
        die "$(basename "$url"): SHA-256 differs from tools/vm/sources.lock"
    mv "$file.part" "$file"
    echo "$file"
}

# fetch_source NAME -> path of the verified .deb in the download cache.
fetch_source() {
    local name=$1 url sha status=0
    url=$(lock_field "$name" 2)
    sha=$(lock_field "$name" 3)
    [ -n "$url" ] || die "no entry for $name in tools/vm/sources.lock"
    fetch_pinned "$url" "$sha" || status=$?
    [ "$status" -ne 2 ] || die "$url is gone from the registry; pin a current $name in tools/vm/sources.lock"
    [ "$status" -eq 0 ] || exit "$status"
}

# unpack_kernel_source DEB DIR: the tarball inside linux-source-X.Y.
unpack_kernel_source() {
    local deb=$1 dir=$2
    mkdir -p "$dir"
    dpkg-deb --fsys-tarfile "$deb" | tar -xO --wildcards './usr/src/linux-source-*.tar.xz' |
        xz -dc -T0 | tar -x -C "$dir" --strip-components=1
}

# ---------------------------------------------------------------------------
# The 7.3 kernel: tinyconfig + kernel.config, clang, Rust.

kernel_make() {
    local src=$1 build=$2
    shift 2
    make -C "$src" O="$build" ARCH=riscv LLVM="$LLVM_BIN/" \
        RUSTC="$DEBIAN_RUSTC" BINDGEN="$BINDGEN" -j"$JOBS" -s "$@"
}

build_kernel() {
    local out=$1 deb
    deb=$(fetch_source linux-source-7.3)
    log "unpacking $(basename "$deb")"
    unpack_kernel_source "$deb" "$out/src"
    kernel_make "$out/src" "$out/build" tinyconfig >&2
    "$out/src/scripts/kconfig/merge_config.sh" -m -O "$out/build" \
        "$out/build/.config" "$VM_DIR/kernel.config" >/dev/null
    kernel_make "$out/src" "$out/build" olddefconfig >&2
    check_kernel_config "$out/build/.config" "$VM_DIR/kernel.config"
    log "compiling Linux $(make -s -C "$out/src" kernelversion) (riscv64, clang, Rust)"
    kernel_make "$out/src" "$out/build" Image modules >&2
    kernel_make "$out/src" "$out/build" INSTALL_MOD_PATH="$out/modules" \
        INSTALL_MOD_STRIP=1 modules_install >&2
    cp "$out/build/arch/riscv/boot/Image" "$out/Image"
    make -s -C "$out/build" kernelrelease >"$out/release"
    # Only what out-of-tree module builds need is kept of the object tree.
    find "$out/build" -name '*.o' ! -path '*/scripts/*' ! -path '*/rust/*' -delete
}

# Every option the fragment asks for must have survived olddefconfig: a
# dependency that silently turned one off is an error, not a surprise later.
check_kernel_config() {
    local config=$1 fragment=$2 line option want have lost=()
    while IFS= read -r line; do
        case "$line" in '' | '#'*) continue ;; esac
        option=${line%%=*}
        want=${line#*=}
        have=$(grep -E "^$option=|^# $option is not set" "$config" | head -n1 || true)
        case "$have" in "# $option is not set") have=n ;; *) have=${have#*=} ;; esac
        [ -n "$have" ] || have=n
        [ "$have" = "$want" ] || lost+=("$option=$want (got $have)")
    done <"$fragment"
    [ "${#lost[@]}" -eq 0 ] || die "kernel config options lost to olddefconfig: ${lost[*]}"
}

toolchain_versions() {
    "$LLVM_BIN/clang" --version | head -n1
    "$DEBIAN_RUSTC" --version
    echo "bindgen $BINDGEN_VERSION"
}

kernel_dir() {
    BINDGEN=$(bindgen_path)
    local key
    key=$(hash_inputs "$(lock_entry linux-source-7.3)" "$VM_DIR/kernel.config" \
        "$(toolchain_versions)" "$(recipe build_kernel)" "$(recipe kernel_make)")
    cached kernel-7.3 "$key" build_kernel
}

# A 6.12 tree (gcc, no Rust) prepared for compile-only module checks.
build_kernel_6_12() {
    local out=$1 deb
    deb=$(fetch_source linux-source-6.12)
    unpack_kernel_source "$deb" "$out/src"
    local kmake=(make -C "$out/src" O="$out/build" ARCH=riscv
        CROSS_COMPILE=riscv64-linux-gnu- -j"$JOBS" -s)
    "${kmake[@]}" tinyconfig >&2
    grep -v -E '^CONFIG_(RUST|SAMPLE)' "$VM_DIR/kernel.config" >"$out/fragment"
    "$out/src/scripts/kconfig/merge_config.sh" -m -O "$out/build" \
        "$out/build/.config" "$out/fragment" >/dev/null
    "${kmake[@]}" olddefconfig modules_prepare >&2
    rm -rf "$out/src/Documentation"
}

kernel_6_12_dir() {
    local key
    key=$(hash_inputs "$(lock_entry linux-source-6.12)" "$VM_DIR/kernel.config" \
        "$(riscv64-linux-gnu-gcc --version | head -n1)" "$(recipe build_kernel_6_12)")
    cached kernel-6.12 "$key" build_kernel_6_12
}

# ---------------------------------------------------------------------------
# The guest's riscv64 userland: busybox and Linux perf with the shared
# libraries they need, from Debian trixie's riscv64 packages, fetched with a
# private apt configuration that leaves the host's dpkg alone.

RISCV_PACKAGES=(busybox-static linux-perf)
# Data the guest never reads (documentation, locales, the Perl and Python
# standard libraries perf's scripting would load), pruned from the image.
RISCV_PRUNE=(usr/share usr/lib/python3 usr/lib/python3.13
    usr/lib/riscv64-linux-gnu/perl usr/lib/riscv64-linux-gnu/perl-base
    usr/lib/riscv64-linux-gnu/perl5 usr/lib/riscv64-linux-gnu/gconv)

riscv_apt() {
    local root=$1
    shift
    APT_CONFIG="$root/apt.conf" "$@"
}

setup_riscv_apt() {
    local root=$1
    mkdir -p "$root/lists/partial" "$root/archives/partial" "$root/etc/preferences.d"
    : >"$root/status"
    cat >"$root/sources.list" <<'EOF2'
deb [arch=riscv64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main
EOF2
    cat >"$root/apt.conf" <<EOF2
APT::Architecture "riscv64";
APT::Architectures { "riscv64"; };
APT::Sandbox::User "root";
Dir::State::Lists "$root/lists";
Dir::State::status "$root/status";
Dir::Cache "$root";
Dir::Cache::archives "$root/archives";
Dir::Etc::SourceList "$root/sources.list";
Dir::Etc::SourceParts "/nonexistent";
Dir::Etc::Preferences "/nonexistent";
Dir::Etc::PreferencesParts "$root/etc/preferences.d";
EOF2
}

# riscv_index_update APT_ROOT: the trixie riscv64 index, retried with backoff
# (a mirror mid-sync answers "File has unexpected size" for minutes). If it
# stays inconsistent, the Packages file the mirror serves is read as it is,
# said so on stderr: the pool files are then checked against its SHA-256
# sums, which the signed Release does not vouch for.
riscv_index_update() {
    local apt_root=$1 attempt delay=15 attempts=${RVPERF_VM_INDEX_ATTEMPTS:-5}
    setup_riscv_apt "$apt_root"
    for attempt in $(seq "$attempts"); do
        riscv_apt "$apt_root" apt-get -q update >"$apt_root/update.log" 2>&1 &&
            ! grep -q '^E: ' "$apt_root/update.log" && return 0
        [ "$attempt" -lt "$attempts" ] || break
        log "apt-get update (riscv64) failed, attempt $attempt; retrying in $delay s: $(grep -m1 '^[EW]: ' "$apt_root/update.log" | cut -c1-160 || true)"
        sleep "$delay"
        delay=$((delay * 2))
    done
    local packages="$apt_root/lists/deb.debian.org_debian_dists_trixie_main_binary-riscv64_Packages"
    if grep -q 'Mirror sync in progress' "$apt_root/update.log" &&
        download http://deb.debian.org/debian/dists/trixie/main/binary-riscv64/Packages.xz "$packages.xz" &&
        xz -dc "$packages.xz" >"$packages"; then
        rm -f "$packages.xz"
        log "the trixie riscv64 index stays inconsistent (mirror sync); using the Packages file it serves, unauthenticated"
        return 0
    fi
    die "apt-get update (riscv64) failed: $(tail -n 3 "$apt_root/update.log")"
}

# riscv_resolve_uris APT_ROOT: "URL SHA256 PACKAGE" for RISCV_PACKAGES and
# their dependency closure, from the index.
riscv_resolve_uris() {
    local apt_root=$1 packages=()
    mapfile -t packages < <(riscv_apt "$apt_root" apt-cache depends --recurse --no-recommends \
        --no-suggests --no-conflicts --no-breaks --no-replaces --no-enhances \
        "${RISCV_PACKAGES[@]}" | grep -v -E '^[ <]' | sort -u)
    [ "${#packages[@]}" -gt 0 ] || die "cannot resolve ${RISCV_PACKAGES[*]} for riscv64"
    riscv_apt "$apt_root" apt-get -q download --print-uris "${packages[@]}" |
        awk '{ gsub("\047", "", $1); sub("^SHA256:", "", $4); n = $2; sub("_.*", "", n); print $1, $4, n }'
}

# The riscv64 userland's files, pinned in sources.lock as `riscv64:PACKAGE URL
# SHA256` lines (tools/vm/pin-userland writes them). Pool files never change,
# so they are fetched directly, without the index; only when a pinned file is
# gone (removed after a point release) are those packages resolved through the
# index, said so on stderr. Prints the .deb paths.
riscv_userland_debs() {
    local name url sha status deb gone=()
    while read -r name url sha; do
        status=0
        deb=$(fetch_pinned "$url" "$sha") || status=$?
        case "$status" in
        0) echo "$deb" ;;
        2) gone+=("${name#riscv64:}") ;;
        *) exit "$status" ;;
        esac
    done < <(awk '$1 ~ /^riscv64:/' "$VM_DIR/sources.lock")
    [ "${#gone[@]}" -eq 0 ] && [ -n "$(lock_field riscv64:busybox-static 1)" ] && return 0
    local apt_root="$CACHE_DIR/apt-riscv64"
    if [ "${#gone[@]}" -gt 0 ]; then
        log "pinned riscv64 files are gone from the registry (${gone[*]}); falling back to the trixie index — run tools/vm/pin-userland to pin current ones"
    else
        log "no riscv64 userland pinned in sources.lock; resolving through the trixie index"
    fi
    riscv_index_update "$apt_root"
    mkdir -p "$CACHE_DIR/downloads"
    while read -r url sha name; do
        if [ "${#gone[@]}" -gt 0 ] && ! printf '%s\n' "${gone[@]}" | grep -qx "$name"; then
            continue
        fi
        status=0
        fetch_pinned "$url" "$sha" || status=$?
        [ "$status" -eq 0 ] || die "cannot fetch riscv64 package $name ($url)"
    done < <(riscv_resolve_uris "$apt_root")
}

build_riscv_userland() {
    local out=$1 deb debs=()
    mapfile -t debs < <(riscv_userland_debs)
    [ "${#debs[@]}" -gt 0 ] || die "no riscv64 userland packages"
    mkdir -p "$out/root"
    for deb in "${debs[@]}"; do
        dpkg-deb -x "$deb" "$out/root"
        basename "$deb" >>"$out/packages"
    done
    local path
    for path in "${RISCV_PRUNE[@]}"; do rm -rf "${out:?}/root/$path"; done
    # trixie is merged-/usr: the ELF interpreter is looked up as /lib/...
    local top
    for top in bin sbin lib; do
        [ -e "$out/root/$top" ] || ln -s "usr/$top" "$out/root/$top"
    done
    [ -x "$out/root/usr/bin/busybox" ] || die "busybox missing from the riscv64 userland"
    ls "$out"/root/usr/bin/perf* >/dev/null 2>&1 || die "perf missing from the riscv64 userland"
}

riscv_userland_dir() {
    local key
    key=$(hash_inputs "${RISCV_PACKAGES[*]}" "${RISCV_PRUNE[*]}" \
        "$(awk '$1 ~ /^riscv64:/' "$VM_DIR/sources.lock")" \
        "$(recipe build_riscv_userland)" "$(recipe riscv_userland_debs)")
    cached userland-riscv64 "$key" build_riscv_userland
}

# ---------------------------------------------------------------------------
# riscv64 builds of the project: rvperf and the guest's test programs, into
# $CACHE_DIR/guest (shared with the guest at /opt/rvperf). Cargo's own
# incremental build is the cache here.

GUEST_DIR="$CACHE_DIR/guest"
RISCV_TARGET=riscv64gc-unknown-linux-gnu

# Where the guest's rvperf is linked: away from the workloads' 0x10000 and
# rvtrace-ctl's 0x40000000, so that a user-mode trace `rvperf trace record` makes (its
# own code runs on the traced harts) names one ELF at each address.
GUEST_RVPERF_TEXT=0x60000000

# The cache's cargo target directory `NAME` for this checkout. One per checkout path:
# cargo decides a unit is fresh by comparing its sources' mtimes with the last build's,
# so two checkouts sharing a target directory (a clean clone's CI run beside a working
# tree) can each take the other's newer build for its own, with other sources.
checkout_target_dir() {
    printf '%s/%s-%s' "$CACHE_DIR" "$1" "$(printf '%s' "$REPO_DIR" | sha256sum | cut -c1-16)"
}

build_rvperf_riscv64() {
    log "cross-building rvperf for riscv64"
    # Debian ships no riscv64 std for rustc-web, so std is built from
    # rust-web-src (-Zbuild-std, hence RUSTC_BOOTSTRAP); static, so the
    # binary runs on any riscv64 Linux.
    (cd "$REPO_DIR" &&
        RUSTC_BOOTSTRAP=1 RUSTC="$DEBIAN_RUSTC" \
            CARGO_TARGET_RISCV64GC_UNKNOWN_LINUX_GNU_LINKER=riscv64-linux-gnu-gcc \
            CARGO_TARGET_RISCV64GC_UNKNOWN_LINUX_GNU_RUSTFLAGS="-C target-feature=+crt-static -C link-arg=-Wl,-Ttext-segment=$GUEST_RVPERF_TEXT" \
            "$DEBIAN_CARGO" build --quiet --locked --release -p rvperf \
            -Zbuild-std=std,panic_abort --target "$RISCV_TARGET" \
            --target-dir "$(checkout_target_dir target-riscv64)") >&2 ||
        die "cross-building rvperf failed"
    mkdir -p "$GUEST_DIR/bin"
    install -m 755 "$(checkout_target_dir target-riscv64)/$RISCV_TARGET/release/rvperf" "$GUEST_DIR/bin/rvperf"
}

# rvperf's eBPF object (aya-probes/, what `rvperf daemon` loads), installed beside the
# guest's rvperf where the daemon looks for it. The object is built for the guest
# (aya-probes/build.sh selects riscv64's kernel bindings); its toolchain (Debian's
# rustc-web with the BPF core, bpf-linker against LLVM 22) is installed if missing.
build_probes() {
    log "building the eBPF probes (aya-probes)"
    "$REPO_DIR/tools/install-bpf-toolchain.sh" >&2 ||
        die "installing the eBPF toolchain (tools/install-bpf-toolchain.sh) failed"
    local object
    object=$("$REPO_DIR/aya-probes/build.sh" "$(checkout_target_dir target-bpf)") ||
        die "building aya-probes (aya-probes/build.sh) failed"
    mkdir -p "$GUEST_DIR/bin"
    install -m 644 "$object" "$GUEST_DIR/bin/rvperf-probes.bpf.o"
}

# The N-Trace hardware of the guest (tools/qemu-ntrace): the TCG plugin, built with
# the host's cargo into a target directory of the cache, as the riscv64 rvperf is.
# Sets NTRACE_PLUGIN.
build_ntrace_plugin() {
    log "building the qemu-ntrace plugin"
    (cd "$REPO_DIR" && cargo build --quiet --locked --release -p qemu-ntrace \
        --target-dir "$(checkout_target_dir target-host)") >&2 ||
        die "building the qemu-ntrace plugin failed"
    NTRACE_PLUGIN=$(checkout_target_dir target-host)/release/libqemu_ntrace.so
}

# The guest's workloads: C programs with frame pointers and symbols, so
# callchains and symbolisation work in the guest and on the host.
build_guest_programs() {
    mkdir -p "$GUEST_DIR/bin"
    local source name
    for source in "$REPO_DIR"/tests/programs/host/*.c; do
        name=$(basename "$source" .c)
        riscv64-linux-gnu-gcc -O2 -g -fno-omit-frame-pointer -fno-inline-functions \
            -o "$GUEST_DIR/bin/$name" "$source" || die "cannot build $source for riscv64"
    done
    # The CTR workloads are static: every user-mode branch then lies in one ELF,
    # which the host checks entry by entry.
    for source in "$REPO_DIR"/tests/programs/vm/*.c; do
        name=$(basename "$source" .c)
        riscv64-linux-gnu-gcc -O1 -g -static -fno-omit-frame-pointer -fno-inline \
            -o "$GUEST_DIR/bin/$name" "$source" || die "cannot build $source for riscv64"
    done
    # The interpreter of the trace tests, built as the CTR workloads are: its CTR
    # recording's AutoFDO profile is compared with the exact one of its N-Trace.
    riscv64-linux-gnu-gcc -O1 -g -static -fno-omit-frame-pointer -fno-inline \
        -o "$GUEST_DIR/bin/interp" "$REPO_DIR/tests/programs/interp.c" ||
        die "cannot build tests/programs/interp.c for riscv64"
    # The N-Trace tests' workloads: programs of tests/programs, built as the host's
    # trace tests build them (the same binaries), whose exact runs under qemu-riscv64 are
    # the ground truth of their traces.
    "$REPO_DIR/tools/testprogs/build.sh" "$GUEST_DIR/bin" qsort recursion fnptr switch syscalls >&2 ||
        die "cannot build the N-Trace workloads (tools/testprogs/build.sh)"
    # The trace block's user-space driver, linked away from the workloads' 0x10000:
    # a user-mode trace holds both, and each address must name one ELF.
    riscv64-linux-gnu-gcc -O1 -g -static -Wall -Wextra -Werror -Wl,-Ttext-segment=0x40000000 \
        -o "$GUEST_DIR/bin/rvtrace-ctl" "$REPO_DIR/tools/qemu-ntrace/guest/rvtrace-ctl.c" ||
        die "cannot build tools/qemu-ntrace/guest/rvtrace-ctl.c for riscv64"
    # The rvtrace driver's checks, with the driver's own uapi header.
    riscv64-linux-gnu-gcc -O1 -g -static -Wall -Wextra -Werror -I"$REPO_DIR/kmod-shim/include/uapi" \
        -o "$GUEST_DIR/bin/rvtrace-driver-tests" "$VM_DIR/guest/rvtrace-driver-tests.c" ||
        die "cannot build tools/vm/guest/rvtrace-driver-tests.c for riscv64"
}

# Out-of-tree modules of the project (kmod-shim/*/ with a Kbuild) built
# against a kernel tree, in a copy of kmod-shim/ so that the checkout stays
# free of build products. Prints the copy's path.
build_kmod_shim() {
    local tree=$1 work=$2
    shift 2
    rm -rf "$work" "$(dirname "$work")/userland"
    mkdir -p "$(dirname "$work")/userland"
    cp -r "$REPO_DIR/kmod-shim" "$work"
    # The Rust module compiles the register map userland does (userland/trace-control,
    # by relative #[path]): the copy keeps the checkout's layout.
    cp -r "$REPO_DIR/userland/trace-control" "$(dirname "$work")/userland/"
    local dir
    for dir in "$work"/*/; do
        [ -f "$dir/Kbuild" ] || continue
        log "building module $(basename "$dir") against $(basename "$(dirname "$tree")")"
        make -C "$tree" M="${dir%/}" -j"$JOBS" -s "$@" modules >&2 ||
            die "kmod-shim/$(basename "$dir") failed to build against $tree"
    done
}

build_guest_modules() {
    local kernel=$1 work="$CACHE_DIR/modules-build/kmod-shim"
    build_kmod_shim "$kernel/build" "$work" ARCH=riscv LLVM="$LLVM_BIN/" \
        RUSTC="$DEBIAN_RUSTC" BINDGEN="$(bindgen_path)"
    mkdir -p "$GUEST_DIR/modules"
    rm -f "$GUEST_DIR"/modules/*.ko
    find "$work" -name '*.ko' -exec cp {} "$GUEST_DIR/modules/" \;
}

# ---------------------------------------------------------------------------
# The initramfs: the riscv64 userland, the kernel's modules and init.

build_initramfs() {
    local out=$1 root="$1/root"
    cp -a "$USERLAND/root" "$root"
    mkdir -p "$root/usr/lib/modules" "$root/proc" "$root/sys" "$root/dev" \
        "$root/tmp" "$root/run" "$root/root" "$root/etc"
    cp -a "$KERNEL/modules/lib/modules/." "$root/usr/lib/modules/"
    install -m 755 "$VM_DIR/guest/init" "$root/init"
    ln -sf busybox "$root/usr/bin/sh"
    echo "root:x:0:0:root:/root:/bin/sh" >"$root/etc/passwd"
    echo "root:x:0:" >"$root/etc/group"
    # Sorted, owned by root, no compression (the kernel unpacks it faster
    # than it could decompress it under emulation).
    (cd "$root" && find . -mindepth 1 | LC_ALL=C sort |
        cpio -o -H newc -R 0:0 --quiet) >"$out/initramfs.cpio"
    rm -rf "$root"
}

# initramfs_path: from $KERNEL and $USERLAND.
initramfs_path() {
    local key dir
    key=$(hash_inputs "$(basename "$KERNEL")" "$(basename "$USERLAND")" \
        "$VM_DIR/guest/init" "$(recipe build_initramfs)")
    dir=$(cached initramfs "$key" build_initramfs)
    echo "$dir/initramfs.cpio"
}

# prepare_guest: everything a boot needs, built or taken from the cache.
# Sets KERNEL, USERLAND and INITRAMFS.
prepare_guest() {
    # One harness run at a time on a machine: the guest's programs, modules and
    # rvperf ($GUEST_DIR) and the module build tree are shared, and a second run
    # rebuilding them under a booted guest breaks both. The lock is held until
    # this process exits.
    exec {HARNESS_LOCK_FD}>"$CACHE_DIR/harness.lock"
    if ! flock -n "$HARNESS_LOCK_FD"; then
        log "waiting for another harness run on this machine to finish"
        flock "$HARNESS_LOCK_FD"
    fi
    install_host_packages
    KERNEL=$(kernel_dir)
    USERLAND=$(riscv_userland_dir)
    INITRAMFS=$(initramfs_path)
    build_rvperf_riscv64
    build_probes
    build_ntrace_plugin
    build_guest_programs
    build_guest_modules "$KERNEL"
}

# ---------------------------------------------------------------------------
# Booting

# boot_guest MODE SMP OUT_DIR CONTROL_DIR CONSOLE_LOG: runs QEMU until the
# guest powers off; returns QEMU's (or timeout's) status.
boot_guest() {
    local mode=$1 smp=$2 out=$3 control=$4 console=$5
    local qemu=(qemu-system-riscv64 -machine virt -cpu "${RVPERF_VM_CPU:-$QEMU_CPU}" -smp "$smp"
        -m "$QEMU_MEMORY" -bios default -kernel "$KERNEL/Image" -initrd "$INITRAMFS"
        -append "console=ttyS0 earlycon=sbi quiet panic=-1 rdinit=/init${RVPERF_VM_KERNEL_ARGS:+ $RVPERF_VM_KERNEL_ARGS}"
        -no-reboot -nic none)
    # Instruction counting: the PMU's cycles and instructions then count retired
    # instructions exactly (QEMU otherwise derives both from host ticks), so a
    # sampling period means what it says and a small one does not turn into an
    # interrupt storm. RVPERF_VM_ICOUNT=0 turns it off.
    if [ "${RVPERF_VM_ICOUNT:-1}" != 0 ]; then
        qemu+=(-icount shift=0)
    fi
    # The emulated N-Trace hardware (docs/trace-device.md): a shared-memory file that is
    # the ivshmem device's BAR 2 for the guest and the plugin's trace block.
    local trace_block=
    if [ "${RVPERF_VM_NTRACE:-0}" != 0 ]; then
        trace_block=$(mktemp /dev/shm/rvperf-ntrace.XXXXXX)
        truncate -s "${RVPERF_VM_NTRACE_SIZE:-16M}" "$trace_block"
        qemu+=(-object "memory-backend-file,id=rvtrace,share=on,mem-path=$trace_block,size=${RVPERF_VM_NTRACE_SIZE:-16M}"
            -device ivshmem-plain,memdev=rvtrace
            -plugin "$NTRACE_PLUGIN,path=$trace_block")
    fi
    # Extra QEMU arguments for experiments.
    if [ -n "${RVPERF_VM_QEMU_ARGS:-}" ]; then
        local extra
        read -r -a extra <<<"$RVPERF_VM_QEMU_ARGS"
        qemu+=("${extra[@]}")
    fi
    local tag path flags fsdev
    for tag in control:"$control":rw rvperf:"$REPO_DIR":ro guestbin:"$GUEST_DIR":ro out:"$out":rw; do
        IFS=: read -r tag path flags <<<"$tag"
        fsdev="local,id=fs_$tag,path=$path,security_model=none"
        if [ "$flags" = ro ]; then
            fsdev+=",readonly=on"
        fi
        qemu+=(-fsdev "$fsdev" -device "virtio-9p-pci,fsdev=fs_$tag,mount_tag=$tag")
    done
    if [ "$mode" = shell ]; then
        local shell_status=0
        "${qemu[@]}" -nographic || shell_status=$?
        [ -z "$trace_block" ] || rm -f "$trace_block"
        return "$shell_status"
    fi
    local timeout_s=${RVPERF_VM_TIMEOUT:-1800}
    # The serial console ends lines with CR LF; the command's output is printed
    # without the CRs.
    timeout -k 10 "$timeout_s" "${qemu[@]}" -display none -monitor none -serial stdio </dev/null |
        tee "$console" |
        awk '{ sub(/\r$/, "") } /^rvperf-vm: command ended/ { on = 0 } on { print; fflush() } /^rvperf-vm: command begins/ { on = 1 }'
    local status=${PIPESTATUS[0]}
    [ -z "$trace_block" ] || rm -f "$trace_block"
    [ "$status" -ne 124 ] || log "the guest did not finish within $timeout_s s (RVPERF_VM_TIMEOUT)"
    return "$status"
}

# run_in_guest SMP OUT_DIR CMD...: runs CMD in the guest as root, prints its
# output, returns its exit status.
run_in_guest() {
    local smp=$1 out=$2
    shift 2
    mkdir -p "$out"
    local control
    control=$(mktemp -d -t rvperf-vm.XXXXXX)
    echo run >"$control/mode"
    {
        printf 'cd /root\nexec'
        local arg
        for arg in "$@"; do
            printf " '%s'" "${arg//\'/\'\\\'\'}"
        done
        printf '\n'
    } >"$control/command"
    local status=0
    boot_guest run "$smp" "$out" "$control" "$control/console.log" || status=$?
    if [ ! -f "$control/status" ]; then
        log "the guest stopped before the command finished (QEMU status $status); console:"
        tail -n 40 "$control/console.log" >&2
        mkdir -p "$out" && cp "$control/console.log" "$out/console.log"
        rm -rf "$control"
        return 125
    fi
    status=$(cat "$control/status")
    cp "$control/console.log" "$out/console.log" 2>/dev/null || true
    rm -rf "$control"
    return "$status"
}

# The project's C modules must also compile against 6.12 (compile-only:
# modpost cannot resolve symbols without that kernel's Module.symvers, so its
# warnings are not errors here). Rust modules need the 7.3 tree.
check_modules_6_12() {
    local tree
    tree=$(kernel_6_12_dir)
    local build_log="$CACHE_DIR/modules-build-6.12.log"
    if ! (build_kmod_shim "$tree/build" "$CACHE_DIR/modules-build-6.12/kmod-shim" \
        ARCH=riscv CROSS_COMPILE=riscv64-linux-gnu- KBUILD_MODPOST_WARN=1) 2>"$build_log"; then
        grep -v 'WARNING: modpost: ' "$build_log" | tail -n 30 >&2
        die "kmod-shim does not compile against Linux 6.12"
    fi
    log "kmod-shim compiles against Linux 6.12 (compile-only; modpost's unresolved symbols ignored)"
}
