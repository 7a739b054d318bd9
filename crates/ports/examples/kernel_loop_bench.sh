#!/bin/bash
# p2p over veth: trafgen (sender namespace, CPU 0) -> veth -> SUT -> veth ->
# receiver namespace; the rate is the receiver veth's rx_packets growth.
# SUTs, interleaved per round: the bare wire (count at the first veth's far
# end, no switch), kernel_loop with AF_XDP, kernel_loop with AF_PACKET (both
# pinned to CPU 1), a Linux bridge. Prints one line per trial and medians.
#
# usage (root): crates/ports/examples/kernel_loop_bench.sh [reps] [trial_s] [sizes]
# needs: cargo build --release -p ports --example kernel_loop; trafgen.
set -euo pipefail
REPS=${1:-3}
DUR=${2:-4}
SIZES=${3:-"64 1518"}
LOOP=${LOOP:-target/release/examples/kernel_loop}
SUTS=${SUTS:-"wire af_xdp af_packet bridge"}
[ -x "$LOOP" ] || { echo "build first: cargo build --release -p ports --example kernel_loop" >&2; exit 2; }
P=$$
SW=klsw$P SND=klsnd$P RCV=klrcv$P
A=kla$P B=klb$P S=kls$P R=klr$P
TMP=$(mktemp -d)
WMEM_OLD=$(sysctl -n net.core.wmem_default)
BG=()

cleanup() {
    for p in "${BG[@]:-}"; do [ -n "$p" ] && { kill -TERM -- -"$p" 2>/dev/null || kill "$p" 2>/dev/null || true; }; done
    wait 2>/dev/null || true
    for ns in $SW $SND $RCV; do ip netns del $ns 2>/dev/null || true; done
    sysctl -qw net.core.wmem_default="$WMEM_OLD"
    rm -rf "$TMP"
}
trap cleanup EXIT

for ns in $SW $SND $RCV; do
    ip netns add $ns
    ip netns exec $ns sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
done
ip link add $S netns $SND type veth peer name $A netns $SW
ip link add $R netns $RCV type veth peer name $B netns $SW
ip -n $SND link set $S up
ip -n $RCV link set $R up
ip -n $SW link set $A up
ip -n $SW link set $B up
# trafgen cannot raise its socket memory inside a namespace (docs/peers.md).
sysctl -qw net.core.wmem_default=4194304

mac() { ip netns exec "$1" cat "/sys/class/net/$2/address"; }
DST=$(mac $RCV $R)
SRC=$(mac $SND $S)
for sz in $SIZES; do
    # A valid IPv4/UDP frame (the host's bridge netfilter drops bad IP
    # headers); size counts the 4-byte FCS, as in RFC 2544.
    echo "{ eth(da=$DST, sa=$SRC, type=0x0800), ipv4(saddr=10.0.0.1, daddr=10.0.0.2, ttl=64), \
udp(sp=1000, dp=9), fill(0x00, $((sz - 46))) }" > "$TMP/f$sz.cfg"
done

rx_count() { ip netns exec "$1" cat "/sys/class/net/$2/statistics/rx_packets"; }

# trial SUT SIZE -> prints Mpps
trial() {
    local sut=$1 sz=$2 ns=$RCV dev=$R loop_pid=""
    case $sut in
        wire) ns=$SW; dev=$A ;;
        af_xdp|af_packet)
            setsid ip netns exec $SW taskset -c 1 "$LOOP" --type "$sut" --a $A --b $B --duration-s $((DUR + 3)) \
                > "$TMP/loop.json" 2> "$TMP/loop.err" &
            loop_pid=$!; BG+=("$loop_pid")
            sleep 1 ;;
        bridge)
            ip -n $SW link add br$P type bridge
            ip -n $SW link set $A master br$P
            ip -n $SW link set $B master br$P
            ip -n $SW link set br$P up
            sleep 1 ;;
    esac
    # own session: trafgen signals its whole process group when stopped
    setsid ip netns exec $SND taskset -c 0 trafgen --dev $S --conf "$TMP/f$sz.cfg" --cpus 1 > /dev/null 2>&1 &
    local tg=$!; BG+=("$tg")
    sleep 1
    local c1 t1 c2 t2
    c1=$(rx_count $ns $dev); t1=$(date +%s.%N)
    sleep "$DUR"
    c2=$(rx_count $ns $dev); t2=$(date +%s.%N)
    # trafgen's worker is a child in its session: stop the whole group
    kill -TERM -- -$tg 2>/dev/null || true
    wait $tg 2>/dev/null || true
    if [ -n "$loop_pid" ]; then
        wait "$loop_pid" || { echo "kernel_loop failed: $(cat "$TMP/loop.err")" >&2; exit 1; }
        cp "$TMP/loop.json" "$TMP/last_$sut.json"
    fi
    if [ "$sut" = bridge ]; then
        ip -n $SW link del br$P
    fi
    echo "$c1 $c2 $t1 $t2" | awk '{ printf "%.4f", ($2 - $1) / ($4 - $3) / 1e6 }'
}

declare -A RES
for sz in $SIZES; do
    for r in $(seq 1 "$REPS"); do
        for sut in $SUTS; do
            m=$(trial $sut "$sz")
            RES[$sut,$sz]+="$m "
            echo "size=$sz round=$r sut=$sut mpps=$m"
        done
    done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else printf "%.4f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
echo "== medians (Mpps) and ratios, $REPS rounds of ${DUR}s, $(nproc) CPUs, kernel $(uname -r)"
for sz in $SIZES; do
    w=$(echo "${RES[wire,$sz]}" | median)
    br=$(echo "${RES[bridge,$sz]}" | median)
    for sut in $SUTS; do
        m=$(echo "${RES[$sut,$sz]}" | median)
        echo "$sz $sut $m [${RES[$sut,$sz]% }] $(awk -v m="$m" -v w="$w" -v b="$br" 'BEGIN { printf "vs_wire=%.2f vs_bridge=%.2f", m / w, m / b }')"
    done
done
for sut in af_xdp af_packet; do
    [ -f "$TMP/last_$sut.json" ] && echo "last $sut loop: $(cat "$TMP/last_$sut.json")"
done
