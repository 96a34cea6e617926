#!/usr/bin/env bash
# Builds every guest component (shipped rule sets and test guests) for wasm32-wasip2.
# Output: rulesets/target/wasm32-wasip2/release/<name>.wasm
set -euo pipefail
cd "$(dirname "$0")/.."
rustup target add wasm32-wasip2 >/dev/null 2>&1 || rustup target add wasm32-wasip2
cargo build --release --target wasm32-wasip2 --manifest-path rulesets/Cargo.toml
cargo build --release --target wasm32-wasip2 --manifest-path tests/guests/Cargo.toml \
    --target-dir rulesets/target
