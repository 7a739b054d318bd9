#!/bin/bash
# Instructions (not time: independent of machine load) per forwarded frame
# of the vhost-user backend, v2v: vhost_fwd (two vhost-user ports through
# the fabric, patch logic, adaptive wake-up) runs under valgrind's
# callgrind; two native turnout-gen vhost-user frontends feed it, one `tx`
# at full rate on port 0 (a.sock), one `rx` on port 1 (b.sock). The
# switch runs ~50x slower than natively, so the guest's transmit ring is
# always full and its receive ring always has room: full bursts, the
# backend-bound cost. Frames = port 1's transmitted count (exact).
#
# Per frame, from callgrind's inclusive counts of the worker thread:
#   rx     VhostRx::burst + VhostRx::release (dequeue from the guest's TX
#          ring: avail index, descriptor walk, used entries, notification)
#   tx     the transmit queue's VhostProducer::free_slots/reserve/
#          publish_deferred and VhostTx::slots_for/write_burst/kick
#          (enqueue into the other guest's RX ring: copy, header,
#          mergeable buffers, used ring, EVENT_IDX check)
#   fabric fabric::worker::run minus rx and tx (worker loop, batch, logic,
#          forwarder, TxLock); includes the few empty polls
# rx and fabric are per received frame, tx and total per forwarded one
# (the same when port 1 drops nothing, as expected).
# The eventfd writes (kicks) are system calls: their kernel work is not
# counted, their number is in vhost_fwd's counters.
#
# usage: vhost_callgrind.sh [SECONDS=20] [SIZES="64 1518"] [FWD...]
#   FWD: vhost_fwd binaries to compare (default target/release/examples/
#   vhost_fwd); with several, runs are interleaved per size.
# needs: valgrind, cargo build --release -p ports --example vhost_fwd and
#   cargo build --release -p turnout-gen (one command with both packages
#   builds only the example: --example selects targets in every package)
set -u
SECS=${1:-20}
SIZES=${2:-"64 1518"}
shift 2 2>/dev/null || shift $#
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
GEN=$ROOT/target/release/turnout-gen
FWDS=("$@")
[ ${#FWDS[@]} -eq 0 ] && FWDS=("$ROOT/target/release/examples/vhost_fwd")
command -v valgrind >/dev/null || { echo "valgrind missing"; exit 1; }
command -v callgrind_annotate >/dev/null || { echo "callgrind_annotate missing"; exit 1; }
for f in "$GEN" "${FWDS[@]}"; do
    [ -x "$f" ] || { echo "$f missing: cargo build --release -p ports --example vhost_fwd; cargo build --release -p turnout-gen"; exit 1; }
done
D=$(mktemp -d /tmp/turnout-vhost-cg-$$-XXXX)
PIDS=()
cleanup() { for p in "${PIDS[@]:-}"; do kill "$p" 2>/dev/null; done; rm -rf "$D"; }
trap cleanup EXIT INT TERM
[ -n "${KEEP:-}" ] && trap - EXIT && echo "# keeping $D"

# one FWD SIZE TAG: prints "rx tx fabric total frames kicks"
one() {
    local fwd=$1 size=$2 tag=$3
    local a=$D/$tag-a.sock b=$D/$tag-b.sock out=$D/$tag.cg
    valgrind --tool=callgrind --callgrind-out-file="$out" "$fwd" --sock "$a" --sock "$b" \
        --duration-s $((SECS + 12)) >"$D/$tag.json" 2>"$D/$tag.vg" &
    local vp=$!
    PIDS+=("$vp")
    for _ in $(seq 1 600); do [ -S "$a" ] && [ -S "$b" ] && break; sleep 0.1; done
    "$GEN" rx --port "vhost_user:$b,queue-size=32768" --duration-s $((SECS + 6)) --wait-peer-s 30 \
        --json "$D/$tag-rx.json" >/dev/null 2>"$D/$tag-rx.err" &
    local rp=$!
    PIDS+=("$rp")
    sleep 1
    "$GEN" tx --port "vhost_user:$a" --size "$size" --duration-s "$SECS" --wait-peer-s 30 \
        --stall-s 30 --json "$D/$tag-tx.json" >/dev/null 2>"$D/$tag-tx.err"
    wait "$rp"
    wait "$vp"
    local fin
    fin=$(grep '"final": true' "$D/$tag.json" | tail -n 1)
    [ -n "$fin" ] || { echo "no final line from vhost_fwd ($D/$tag.vg)" >&2; tail -n 5 "$D/$tag.vg" >&2; return 1; }
    callgrind_annotate --inclusive=yes --threshold=100 "$out" 2>/dev/null >"$D/$tag.ann"
    python3 - "$D/$tag.ann" "$fin" <<'EOF'
import json, re, sys
ann, fin = open(sys.argv[1]).read().splitlines(), json.loads(sys.argv[2])
inc = {}
for line in ann:
    m = re.match(r"^\s*([\d,]+)\s+\([^)]*\)\s+(\S.*?)\s*$", line) or re.match(r"^\s*([\d,]+)\s+(\S.*?)\s*$", line)
    if not m:
        continue
    n, name = int(m.group(1).replace(",", "")), m.group(2)
    # "file:function [object]": a function's inclusive count is its
    # largest entry (the others are code inlined into it from other files).
    name = re.sub(r"^(\?\?\?|[^ ]*?\.(rs|c|h|S|cc)):", "", name, count=1)
    name = re.sub(r" \[[^\]]*\]$", "", name)
    inc[name] = max(inc.get(name, 0), n)
def pick(*pats):
    return sum(v for k, v in inc.items() if any(re.search(p, k) for p in pats))
rx = pick(r"VhostRx as fabric::port::RxQueue>::(burst|release)$")
tx = pick(r"VhostProducer as fabric::port::TxProducer>::(free_slots|reserve|publish_deferred)$",
          r"VhostTx as fabric::port::TxQueue>::(slots_for|write_burst|kick)$")
total = pick(r"^fabric::worker::run$")
ports = fin["ports"]
frames = ports[1]["tx"]
kicks = sum(p["backend"].get("calls", 0) for p in ports)
if frames <= 0 or total <= 0:
    sys.exit(f"no frames ({frames}) or no worker count ({total})")
# rx and fabric work is done for every received frame, tx for every sent
# one: with drops (a starved receiver), each is divided by its own count.
received = ports[0]["rx"]
print(rx / received, tx / frames, (total - rx - tx) / received, total / frames, frames,
      received, sum(ports[1]["drops"].values()))
EOF
}

echo "# vhost_callgrind: ${SECS}s per run, sizes $SIZES, $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
for size in $SIZES; do
    for i in "${!FWDS[@]}"; do
        r=$(one "${FWDS[$i]}" "$size" "s${size}b$i") || { echo "size=$size fwd=${FWDS[$i]} failed"; continue; }
        read -r rx tx fab tot frames rxd drops <<<"$r"
        printf "size=%s fwd=%s frames=%s (port0 rx %s, port1 drops %s) Ir/frame: rx %.1f tx %.1f fabric %.1f total %.1f\n" \
            "$size" "${FWDS[$i]}" "$frames" "$rxd" "$drops" "$rx" "$tx" "$fab" "$tot"
        [ "$drops" = 0 ] || echo "  (drops: the receiver was starved; rx and fabric per received frame, total per forwarded one: rerun on a quieter machine to compare totals)"
    done
done
