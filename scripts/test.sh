#!/usr/bin/env bash
# Runs all of botgate's checks and tests on a fresh clone of a fresh machine:
# installs the toolchain pieces it needs, builds the guest components, checks format
# and lints in every workspace, then runs the guests' native tests and the host's tests.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each step names itself and the seconds spent so far, to show where a cold run goes.
step() { printf '\n== [%ds] %s\n' "$SECONDS" "$*"; }

step "system packages the tests start for real: redis-server, redis-sentinel, haproxy, dnsmasq, chromium, pebble; curl and jq for the failover script; openssl for the cluster runbook; systemd (systemd-analyze) and iproute2 for the rendered system files"
sudo_if_needed=(); [[ $(id -u) -eq 0 ]] || sudo_if_needed=(sudo)
apt_install() {
    "${sudo_if_needed[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo_if_needed[@]}" apt-get install -y -qq --no-install-recommends "$@"
}
missing=()
command -v redis-server >/dev/null || missing+=(redis-server)
command -v redis-sentinel >/dev/null || missing+=(redis-sentinel)
command -v haproxy >/dev/null || missing+=(haproxy)
command -v dnsmasq >/dev/null || [[ -x /usr/sbin/dnsmasq ]] || missing+=(dnsmasq-base)
command -v chromium >/dev/null || missing+=(chromium)
command -v pebble >/dev/null || missing+=(pebble)
command -v curl >/dev/null || missing+=(curl)
command -v jq >/dev/null || missing+=(jq)
command -v openssl >/dev/null || missing+=(openssl)
command -v systemd-analyze >/dev/null || missing+=(systemd)
command -v ip >/dev/null || missing+=(iproute2)
if ((${#missing[@]})); then apt_install "${missing[@]}"; fi
# Debian starts a system redis-server on 6379; the tests start their own on free ports.

step "schemathesis (PyPI) for the API fuzz run, into target/schemathesis"
SCHEMATHESIS_VERSION=4.32.5
if ! target/schemathesis/bin/st --version 2>/dev/null | grep -q "$SCHEMATHESIS_VERSION"; then
    python3 -m venv target/schemathesis || { apt_install python3-venv && python3 -m venv target/schemathesis; }
    target/schemathesis/bin/pip install -q "schemathesis==$SCHEMATHESIS_VERSION"
fi

step "Playwright for Python (PyPI), driving Debian's chromium in the dashboard's browser tests, into target/playwright"
PLAYWRIGHT_VERSION=1.65.2
if ! target/playwright/bin/pip show playwright 2>/dev/null | grep -qx "Version: $PLAYWRIGHT_VERSION"; then
    python3 -m venv target/playwright || { apt_install python3-venv && python3 -m venv target/playwright; }
    target/playwright/bin/pip install -q "playwright==$PLAYWRIGHT_VERSION"
fi

step "toolchain: wasm32-wasip2 target, rustfmt, clippy"
rustup target add wasm32-wasip2
rustup component add rustfmt clippy

step "guest components (wasm32-wasip2)"
scripts/build-guests.sh

step "format"
cargo fmt --all --check
cargo fmt --all --check --manifest-path rulesets/Cargo.toml
cargo fmt --all --check --manifest-path tests/guests/Cargo.toml
cargo fmt --all --check --manifest-path benches/load/reference/Cargo.toml

step "lints of the test guests (wasm32) and of the load benchmark's reference proxies"
# The other workspaces are linted while their tests build, below.
cargo clippy --workspace --release --target wasm32-wasip2 --manifest-path tests/guests/Cargo.toml \
    --target-dir rulesets/target -- -D warnings
# The load benchmark's reference proxies (a crate of their own); checked, not built.
cargo clippy --all-targets --manifest-path benches/load/reference/Cargo.toml \
    --target-dir target/reference -- -D warnings

# Lints while building: clippy's driver compiles each workspace crate (cargo's
# RUSTC_WORKSPACE_WRAPPER, as `cargo clippy` uses it) and lints it in the same pass, so
# the tests are built once instead of checked once more by `cargo clippy` (every
# dependency's metadata built a second time). CLIPPY_ARGS is `-D warnings` as
# `cargo clippy -- -D warnings` hands it to the driver.
clippy_driver=$(rustup which clippy-driver)
linted() { RUSTC_WORKSPACE_WRAPPER="$clippy_driver" CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__" "$@"; }

results=$(mktemp)
trap 'rm -f "$results"' EXIT

step "guest logic, natively: lints and tests"
linted cargo test --workspace --all-targets --no-run --manifest-path rulesets/Cargo.toml
# Their libraries as built for use too (test builds alone would not lint code that only
# tests use); the dependencies are the test build's.
linted cargo build --workspace --lib --manifest-path rulesets/Cargo.toml
# Doc tests only where there are some (the SDK's): rustdoc over each guest crate costs.
linted cargo test --workspace --manifest-path rulesets/Cargo.toml --lib --bins --tests 2>&1 | tee -a "$results"
linted cargo test --doc --manifest-path rulesets/Cargo.toml -p botgate-ruleset-sdk 2>&1 | tee -a "$results"

step "host: lints, and the engine and integration tests"
linted cargo test --workspace --all-targets --no-run
# The guests were built above; doc tests are not run (these crates have none). The
# benchmarks' crate stays in (0 tests): leaving it out of one of the two commands would
# change the features they build with, and so rebuild.
BOTGATE_SKIP_GUEST_BUILD=1 linted cargo test --workspace --lib --bins --tests 2>&1 | tee -a "$results"

# One closing line over every test binary of both runs.
awk '/^test result:/ { passed += $4; failed += $6 } END { printf "\ntests: %d passed, %d failed\n", passed, failed }' "$results"
printf 'took %ds\n' "$SECONDS"
