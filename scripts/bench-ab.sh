#!/usr/bin/env bash
# Before/after of a turnoutd change in one campaign (`make bench-ab
# BEFORE=<git rev>`; docs/bench.md, "Before and after"):
#
#   1. builds BEFORE's turnoutd (release) in a throwaway git worktree with a
#      target directory of its own, target/bench-ab/target (kept between
#      runs so the next one rebuilds only the workspace's crates;
#      `rm -rf target/bench-ab` frees it), keeps the binary as
#      target/bench-ab/turnoutd-<commit> (a later run against the same
#      commit builds nothing) and removes the worktree; the campaign runs it
#      as target/bench-ab/turnoutd-before;
#   2. builds this checkout's turnoutd and turnout-gen (the tester: the same
#      build for both switches);
#   3. runs campaigns/ab.toml (turnoutd and turnoutd-before interleaved,
#      memif v2v, vhost-user v2v and AF_XDP p2p at 64 B) into $AB_DB;
#   4. prints after/before per cell with its spread (`turnout bench ab`).
#
#   scripts/bench-ab.sh <git rev>     # env: PY (venv bin), AB_DB, AB_CAMPAIGN
#
# BEFORE's turnoutd must take the config this checkout's adapter writes for
# those cells (patch logic, af_xdp, memif and vhost_user ports); a build that
# does not fails its sessions with its log's tail in the results.
set -euo pipefail
BEFORE=${1:?usage: scripts/bench-ab.sh <git rev> (make bench-ab BEFORE=<git rev>)}
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
REPO=$PWD
PY=${PY:-$REPO/.venv/bin}
DB=${AB_DB:-results/ab.db}
CAMPAIGN=${AB_CAMPAIGN:-campaigns/ab.toml}
AB=$REPO/target/bench-ab
REV=$(git rev-parse --verify --quiet "$BEFORE^{commit}") \
    || { echo "bench-ab: $BEFORE is not a commit of this repository" >&2; exit 2; }
mkdir -p "$AB" results
t0=$SECONDS
CACHED=$AB/turnoutd-$REV
if [ -x "$CACHED" ]; then
    echo "bench-ab: turnoutd of $BEFORE ($REV) built before: $CACHED"
else
    WT=$(mktemp -d "$AB/src.XXXXXX")
    cleanup() {
        git worktree remove --force "$WT" >/dev/null 2>&1 || rm -rf "$WT"
        git worktree prune
    }
    trap cleanup EXIT
    git worktree add --detach --quiet "$WT" "$REV"
    echo "bench-ab: building turnoutd of $BEFORE ($(git log -1 --format='%h %s' "$REV" | cut -c1-72))"
    (cd "$WT" && CARGO_TARGET_DIR=$AB/target cargo build --release --quiet -p turnoutd)
    install -p -m 0755 "$AB/target/release/turnoutd" "$CACHED.tmp"
    mv "$CACHED.tmp" "$CACHED"
    cleanup
    trap - EXIT
fi
install -p -m 0755 "$CACHED" "$AB/turnoutd-before"
echo "bench-ab: building this checkout's turnoutd and turnout-gen"
# into this checkout's target/release, where the campaign looks for both
env -u CARGO_TARGET_DIR cargo build --release --quiet -p turnoutd -p turnout-gen
echo "bench-ab: before: $("$AB/turnoutd-before" --version)"
echo "bench-ab: after:  $("$REPO/target/release/turnoutd" --version)"
echo "bench-ab: builds took $((SECONDS - t0)) s"
status=0
"$PY/turnout" bench run "$CAMPAIGN" --db "$DB" --no-progress || status=$?
"$PY/turnout" bench ab --db "$DB" || status=$?   # the run just made
echo "bench-ab: $((SECONDS - t0)) s in all; results in $DB (turnout report --db $DB)"
exit $status
