#!/usr/bin/env bash
# Builds the shipped rule components and starts `botgate serve` on the embedded store
# in data/: the management API on 127.0.0.1:8280, and the rule engine hot-reloading
# data/rulesets/ (copy a new <name>.wasm there and watch the log). Origins on this
# machine (loopback) are allowed, as a production gateway's are not.
set -euo pipefail
cd "$(dirname "$0")/.."
rustup target add wasm32-wasip2 >/dev/null 2>&1 || rustup target add wasm32-wasip2
cargo build --release --target wasm32-wasip2 --manifest-path rulesets/Cargo.toml
mkdir -p data/rulesets
for name in classifier crs bitrix cpanel dokuwiki drupal joomla nextcloud prestashop wordpress xenforo; do
    cp "rulesets/target/wasm32-wasip2/release/$name.wasm" "data/rulesets/$name.wasm"
done
# The demo's origin may be on this machine: loopback is allowed explicitly.
exec cargo run --release -p botgate-host --bin botgate -- serve \
    --origin-allow-network 127.0.0.0/8,::1/128 "$@"
