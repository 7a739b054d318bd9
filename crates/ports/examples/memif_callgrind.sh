#!/bin/bash
# Instructions (not time: independent of machine load) per frame of the
# memif data path: memif_loop (two memif server interfaces, forwarding
# through OwnedTx) runs under valgrind's callgrind, fed by memif_gensink
# (native, 64 B frames, one direction). Prints memif_loop's summary, the
# sink's line, and the instruction counts of forward() and of
# MemifTx::tx_lock with their per-frame share.
#
# usage: [LEN=64] memif_callgrind.sh [SECONDS=25]   (LEN: frame bytes)
# needs: valgrind, cargo build --release -p ports --examples
set -u
SECS=${1:-25}
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
T=$ROOT/target/release/examples
command -v valgrind >/dev/null || { echo "valgrind missing"; exit 1; }
[ -x "$T/memif_loop" ] && [ -x "$T/memif_gensink" ] ||
    { echo "build first: cargo build --release -p ports --examples"; exit 1; }
D=$(mktemp -d /tmp/turnout-memif-cg-$$-XXXX)
trap 'rm -rf "$D"' EXIT
S=$D/loop.sock
# --fair-sched=yes: without it the polling worker holds valgrind's one
# running thread and the server thread never answers the handshake.
valgrind --tool=callgrind --fair-sched=yes --callgrind-out-file="$D/cg.out" "$T/memif_loop" --socket "$S" \
    --duration-s $((SECS + 15)) --batch 32 --quiet >"$D/loop.json" 2>"$D/vg.err" &
VP=$!
for _ in $(seq 1 300); do [ -S "$S" ] && break; sleep 0.2; done
sleep 2
"$T/memif_gensink" --socket "$S" --duration-s "$SECS" --warmup-s 1 --len "${LEN:-64}"
wait $VP
cat "$D/loop.json"
FRAMES=$(grep -o '"tx1": [0-9]*' "$D/loop.json" | grep -o '[0-9]*$')
callgrind_annotate --inclusive=yes "$D/cg.out" 2>/dev/null |
    grep -E "^ *[0-9,]+ .*(memif_loop::forward \[|MemifTx as fabric::port::TxQueue>::tx_lock)" |
    awk -v f="$FRAMES" '{n=$1; gsub(",", "", n); s[$0 ~ /tx_lock/] += n}
        END {printf "frames %d: forward %.0f Ir/frame (with empty polls), tx_lock %.2f Ir/frame\n",
             f, s[0] / f, s[1] / f}'
