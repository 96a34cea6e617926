#!/usr/bin/env bash
# Builds the release `botgate` with profile-guided optimisation (PGO), the binary to
# deploy: an instrumented build serves a training load (`TRAIN=1 benches/load/run.sh`:
# page views over HTTP/1.1, HTTPS and HTTP/2, protection on and off, a CMS rule set in
# scope, challenged bots), and LLVM lays the release build out by the profile it wrote.
# About 13% less CPU per request than the plain release build, measured side by side
# (benches/README.md, "The data plane under load"). Takes two release builds (about 25 minutes on
# two cores, the first time) and the packages the load benchmark installs.
#
#   scripts/build-release.sh      # prints the binary's path: target/pgo-use/release/botgate
set -euo pipefail
cd "$(dirname "$0")/.."

rustup component add llvm-tools >/dev/null
profdata=$(find "$(rustc --print sysroot)" -name llvm-profdata -type f | head -1)
[[ -x $profdata ]] || { echo "llvm-profdata not found in the toolchain (rustup component llvm-tools)" >&2; exit 1; }
profiles=$PWD/target/pgo-profiles

echo "== instrumented build" >&2
RUSTFLAGS="-Cprofile-generate=$profiles" \
    cargo build -q --release --target-dir target/pgo-gen -p botgate-host --bin botgate
# Build scripts are instrumented too and write here while they run: only the training's
# profiles count.
rm -rf "$profiles"

echo "== training load" >&2
LLVM_PROFILE_FILE="$profiles/botgate-%p-%m.profraw" BOTGATE=target/pgo-gen/release/botgate TRAIN=1 \
    benches/load/run.sh
"$profdata" merge -o "$profiles/botgate.profdata" "$profiles"/*.profraw

echo "== optimised build" >&2
RUSTFLAGS="-Cprofile-use=$profiles/botgate.profdata -Cllvm-args=-pgo-warn-missing-function=false" \
    cargo build -q --release --target-dir target/pgo-use -p botgate-host --bin botgate
echo target/pgo-use/release/botgate
