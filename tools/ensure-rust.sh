#!/usr/bin/env bash
# Makes sure a Rust toolchain new enough for the workspace (rust-version in Cargo.toml)
# is on PATH. Machines with rustup already have one; a bare Debian bookworm machine gets
# Debian's rustc-web/cargo-web (1.96) with clippy and rustfmt, since bookworm's plain
# rustc is too old.
set -euo pipefail

required=$(sed -n 's/^rust-version = "\(.*\)"/\1/p' "$(dirname "${BASH_SOURCE[0]}")/../Cargo.toml")
if [ -x "$HOME/.cargo/bin/cargo" ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
fi

version_ok() {
    command -v cargo >/dev/null 2>&1 || return 1
    local have
    have=$(cargo --version | awk '{print $2}')
    [ "$(printf '%s\n%s\n' "$required" "$have" | sort -V | head -n1)" = "$required" ]
}

if ! version_ok; then
    echo "ensure-rust: installing Debian's cargo-web and rustc-web (need Rust >= $required)"
    export DEBIAN_FRONTEND=noninteractive
    # Retried with backoff: a registry index can be briefly inconsistent.
    for attempt in 1 2 3 4 5; do
        if apt-get update -qq && apt-get install -y -qq cargo-web rustc-web rust-web-clippy rustfmt-web >/dev/null; then
            break
        fi
        [ "$attempt" -lt 5 ] || { echo "ensure-rust: apt-get failed $attempt times" >&2; exit 1; }
        echo "ensure-rust: apt-get failed (attempt $attempt), retrying in $((attempt * 15)) s" >&2
        sleep $((attempt * 15))
    done
    version_ok || { echo "ensure-rust: no Rust >= $required available" >&2; exit 1; }
fi
