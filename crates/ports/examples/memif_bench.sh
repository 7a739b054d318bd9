#!/bin/bash
# v2v over memif, 64 B: testpmd txonly (client id 0) -> SWITCH -> testpmd
# rxonly (client id 1). SWITCH is either our memif_loop example (two memif
# server interfaces, forwarding through the fabric::Port trait) or testpmd
# io-forwarding between two memif server ports on the same socket.
# The switch runs on CPU 1, generator and sink share CPU 0. Trials are
# interleaved (loop, testpmd, loop, ...); the figure is the sink's Rx-pps,
# median of the per-second samples of a trial after a warm-up.
#
# GEN=ours replaces the two testpmds by memif_gensink (our memif client
# sending on id 0 and counting on id 1 in one thread on CPU 0), so the
# generator and the sink do not time-share CPU 0 and the switch is what is
# measured. RSIZE sets the testpmd clients' ring size (log2, default 10).
#
# usage: [GEN=ours] [RSIZE=n] memif_bench.sh [TRIALS=3] [SECONDS=8] [PKT=64]
# needs: root, dpdk-testpmd, target/release/examples/memif_loop (and memif_gensink)
set -u
TRIALS=${1:-3}
SECS=${2:-8}
PKT=${3:-64}
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
LOOP=$ROOT/target/release/examples/memif_loop
TP=/usr/bin/dpdk-testpmd
[ -x "$TP" ] || { echo "SKIP: $TP missing"; exit 0; }
[ -x "$LOOP" ] || { echo "build first: cargo build --release -p ports --example memif_loop"; exit 1; }
DIR=$(mktemp -d /tmp/turnout-memif-bench-$$-XXXX)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
    rm -rf /var/run/dpdk/tmb-$$-*
    [ -n "${KEEP:-}" ] || rm -rf "$DIR"
}
trap cleanup EXIT INT TERM HUP PIPE

EAL="--no-huge -m 256 --no-pci"
RS=",rsize=${RSIZE:-10}"
if [ "$PKT" -gt 2048 ]; then MB="--mbuf-size=$((PKT + 1024))"; BS=",bsize=$(( (PKT + 1023) / 1024 * 1024 ))"; else MB=""; BS=""; fi

testpmd() { # name lcores vdevs... -- app args; sets TPPID
    local name=$1 lcores=$2; shift 2
    local prefix="tmb-$$-$name"
    rm -rf "/var/run/dpdk/$prefix"
    stdbuf -oL "$TP" --lcores="$lcores" $EAL --file-prefix="$prefix" "$@" > "$DIR/$name.log" 2>&1 &
    TPPID=$!
    PIDS+=($TPPID)
}

started() { # wait until a testpmd forwards (or failed)
    for _ in $(seq 600); do
        grep -q "Logical Core 1 (socket 0) forwards" "$1" 2>/dev/null && return 0
        grep -q "Fail to start\|Cause:" "$1" 2>/dev/null && return 1
        sleep 0.05
    done
    return 1
}

median() { sort -n | awk '{a[NR]=$1} END {if (NR==0) print 0; else if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }

trial() { # kind n
    local kind=$1 n=$2
    local sock="$DIR/sw-$kind-$n.sock" swpid
    if [ "$kind" = loop ]; then
        taskset -c 1 "$LOOP" --socket "$sock" --duration-s 600 --quiet --buffer-size 2048 > "$DIR/loop-$n.log" 2>&1 &
        swpid=$!; PIDS+=($swpid)
        for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.05; done
    else
        testpmd "sw$n" "0@1,1@1" \
            --vdev="net_memif0,role=server,id=0,socket=$sock,socket-abstract=no" \
            --vdev="net_memif1,role=server,id=1,socket=$sock,socket-abstract=no" \
            -- --total-num-mbufs=8192 $MB --forward-mode=io -a --stats-period=100
        swpid=$TPPID
        for _ in $(seq 200); do grep -q "Checking link statuses" "$DIR/sw$n.log" 2>/dev/null && break; sleep 0.05; done
    fi
    local rx tx
    if [ "${GEN:-testpmd}" = ours ]; then
        local out
        out=$(taskset -c 0 "$ROOT/target/release/examples/memif_gensink" --socket "$sock" --duration-s "$SECS" --warmup-s 2 --len "$PKT" 2>&1)
        kill -TERM "$swpid" 2>/dev/null; sleep 0.5; kill -9 "$swpid" 2>/dev/null; wait "$swpid" 2>/dev/null
        local mpps
        mpps=$(echo "$out" | sed -n 's/.*rx_mpps=\([0-9.]*\).*/\1/p')
        [ -n "$mpps" ] || { echo "$kind trial $n: $out"; return; }
        echo "$kind trial $n: $mpps Mpps ($out)"
        awk -v m="$mpps" 'BEGIN {print m * 1e6}' >> "$DIR/res-$kind"
        return
    fi
    testpmd "rx$kind$n" "0@0,1@0" --vdev="net_memif1,role=client,id=1,socket=$sock,socket-abstract=no$BS$RS" \
        -- --total-num-mbufs=8192 $MB --forward-mode=rxonly -a --stats-period=1
    rx=$TPPID
    started "$DIR/rx$kind$n.log" || { echo "$kind trial $n: sink did not start"; return; }
    testpmd "tx$kind$n" "0@0,1@0" --vdev="net_memif0,role=client,id=0,socket=$sock,socket-abstract=no$BS$RS" \
        -- --total-num-mbufs=8192 $MB --forward-mode=txonly --txpkts=$PKT -a --stats-period=100
    tx=$TPPID
    started "$DIR/tx$kind$n.log" || { echo "$kind trial $n: generator did not start"; }
    local skip
    skip=$(grep -c "Rx-pps" "$DIR/rx$kind$n.log")
    sleep "$SECS"
    kill -TERM "$tx" "$rx" "$swpid" 2>/dev/null
    for _ in $(seq 100); do kill -0 "$tx" 2>/dev/null || kill -0 "$rx" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$tx" "$rx" "$swpid" 2>/dev/null
    wait "$tx" "$rx" "$swpid" 2>/dev/null
    # per-second Rx-pps of the sink, skipping the first 3 samples (connect, warm-up)
    local mpps
    mpps=$(grep -o "Rx-pps: *[0-9]*" "$DIR/rx$kind$n.log" | awk '{print $2}' | tail -n +$((skip + 3)) | head -n -1 | median)
    awk -v p="$mpps" -v k="$kind" -v n="$n" 'BEGIN {printf "%s trial %d: %.2f Mpps\n", k, n, p/1e6}'
    echo "$mpps" >> "$DIR/res-$kind"
}

echo "memif v2v ${PKT} B, ${TRIALS} interleaved trials of ${SECS}s; switch on CPU 1, txonly+rxonly on CPU 0"
for n in $(seq "$TRIALS"); do
    trial loop "$n"
    trial testpmd "$n"
done
L=$(median < "$DIR/res-loop")
T=$(median < "$DIR/res-testpmd")
awk -v l="$L" -v t="$T" 'BEGIN {printf "median: memif_loop %.2f Mpps, testpmd io %.2f Mpps, ratio %.2f\n", l/1e6, t/1e6, (t>0 ? l/t : 0)}'
