#!/bin/bash
# v2v over vhost-user: a VNF testpmd with two net_virtio_user ports in io
# forwarding (seeded with `start tx_first`) loops frames through a switch
# between its two vhost-user sockets. The switch is either turnoutd's
# fabric (crates/ports/examples/vhost_fwd: two vhost-user ports, patch logic)
# or testpmd io-forwarding between two net_vhost ports. Same pinning for
# both: VNF forwarding lcore on CPU 0, switch on CPU 1. Runs are interleaved
# (turnout, testpmd, turnout, ...); prints one line per run and medians.
#
#   scripts/bench/bench-v2v.sh [RUNS=3] [SECONDS=5] [SIZES="64 1518"]
set -u
RUNS=${1:-3}; SECS=${2:-5}; SIZES=${3:-"64 1518"}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
FWD=$ROOT/target/release/examples/vhost_fwd
[ -x "$FWD" ] || (cd "$ROOT" && cargo build --release -p ports --example vhost_fwd >&2) || exit 1
DIR=$(mktemp -d /tmp/turnout-v2v-$$.XXXX)
PIDS=()
cleanup() { for p in "${PIDS[@]:-}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$DIR" /var/run/dpdk/tv2v$$*; }
trap cleanup EXIT INT TERM
[ -n "${KEEP:-}" ] && trap - EXIT
TP="stdbuf -o0 dpdk-testpmd --no-huge -m 1024 --no-pci"

# vnf SIZE -> prints the loop rate (sum of the VNF's two Rx-pps)
vnf() {
    local size=$1 tag=$2 out=$DIR/vnf-$tag.log
    # Rx-pps is testpmd's rate between two `show port stats`: the second
    # one covers the SECS-long measurement window after a 2 s warm-up.
    ( (sleep 6; echo "start tx_first 16"; sleep 2; echo "show port stats all"; sleep "$SECS"; echo "show port stats all"; sleep 1; echo stop; sleep 1; echo quit) |
      timeout $((SECS + 30)) $TP -l 0,1 --main-lcore 1 --file-prefix=tv2v$$v$tag \
        --vdev=net_virtio_user0,path=$DIR/a.sock,queues=1,queue_size=1024 \
        --vdev=net_virtio_user1,path=$DIR/b.sock,queues=1,queue_size=1024 \
        -- -i --total-num-mbufs=16384 --forward-mode=io --txpkts=$size --no-lsc-interrupt > "$out" 2>&1 )
    rm -rf /var/run/dpdk/tv2v$$v$tag
    grep 'Rx-pps:' "$out" | tail -n 2 | awk '{s+=$2} END{print s+0}'
}

run_turnout() {
    local size=$1 tag=$2
    rm -f $DIR/a.sock $DIR/b.sock
    $FWD --sock $DIR/a.sock --sock $DIR/b.sock --cpu 1 --poll --duration-s $((SECS + 14)) \
        < /dev/null > $DIR/fwd-$tag.log 2>&1 &
    local p=$!; PIDS+=($p); wait_socks
    local r; r=$(vnf "$size" "$tag")
    kill $p 2>/dev/null; wait $p 2>/dev/null
    echo "$r"
}

run_testpmd() {
    local size=$1 tag=$2
    rm -f $DIR/a.sock $DIR/b.sock
    ( (while ! [ -S $DIR/b.sock ]; do sleep 0.1; done; sleep 1; echo start; sleep $((SECS + 14)); echo stop; echo quit) |
      timeout $((SECS + 30)) $TP -l 0,1 --main-lcore 0 --file-prefix=tv2v$$s$tag \
        --vdev=net_vhost0,iface=$DIR/a.sock,queues=1 --vdev=net_vhost1,iface=$DIR/b.sock,queues=1 \
        -- -i --total-num-mbufs=16384 --forward-mode=io --no-lsc-interrupt > $DIR/sut-$tag.log 2>&1 ) &
    local p=$!; PIDS+=($p); wait_socks
    local r; r=$(vnf "$size" "$tag")
    wait $p 2>/dev/null
    rm -rf /var/run/dpdk/tv2v$$s$tag
    echo "$r"
}

# Waits (≤ 60 s) until both sockets exist: testpmd's -m 1024 start is slow.
wait_socks() { for _ in $(seq 600); do [ -S $DIR/a.sock ] && [ -S $DIR/b.sock ] && return 0; sleep 0.1; done; return 1; }

median() { sort -n | awk '{a[NR]=$1} END{ if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2 }'; }

for size in $SIZES; do
    : > $DIR/t.$size; : > $DIR/d.$size; : > $DIR/r.$size
    for i in $(seq 1 "$RUNS"); do
        t=$(run_turnout "$size" "t$size$i"); d=$(run_testpmd "$size" "d$size$i")
        echo "size=$size run=$i turnout_pps=$t testpmd_pps=$d"
        # A pair with a failed side (0: a peer did not start) is left out.
        if [ "${t:-0}" -gt 0 ] 2>/dev/null && [ "${d:-0}" -gt 0 ] 2>/dev/null; then
            echo "$t" >> $DIR/t.$size; echo "$d" >> $DIR/d.$size
            awk -v a="$t" -v b="$d" 'BEGIN{printf "%.3f\n", a/b}' >> $DIR/r.$size
        fi
    done
    echo "size=$size median turnout_pps=$(median < $DIR/t.$size) testpmd_pps=$(median < $DIR/d.$size) ratio=$(median < $DIR/r.$size) (pairwise ratios: $(tr '\n' ' ' < $DIR/r.$size))"
done
