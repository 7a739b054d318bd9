#!/usr/bin/env bash
# The binaries, and the one example a test runs: the lying memif /
# vhost-user peer of python/tests/turnoutd/test_hostile.py, with the ports
# crate's test-utils feature. The other examples (callgrind instruments,
# loops) are `make build`'s. The cargo profile is $TURNOUT_PROFILE, default
# release (the benches'; its binaries never carry test-utils). `make test`
# builds its own, test-release, which its Rust tests' build then reuses
# (docs/testing.md). Called by scripts/setup.sh and scripts/test.py.
set -euo pipefail
cd "$(dirname "$0")/.."
profile=${TURNOUT_PROFILE:-release}
echo "setup: building the Rust workspace ($profile)"
if [ "$profile" = release ]; then
  cargo build --release --workspace --bins -q
  cargo build --release -p ports --example hostile_peer --features test-utils -q
else
  # One command, with the example and the feature in it: then every crate
  # gets the features the tests' build gives it (ports' test-utils, its
  # dev-dependencies'), and `cargo test` finds each one compiled; these
  # binaries carry the test-only code.
  cargo build --profile "$profile" --workspace --bins --example hostile_peer \
    --features ports/test-utils -q
fi
