#!/bin/bash
# Where turnoutd's AF_XDP port path costs, per frame, at a fixed rate:
# turnout-gen tx (sender namespace, afxdp, CPU 0) -> veth -> turnoutd (patch
# logic, two af_xdp ports, one worker on CPU 1) -> veth -> turnout-gen rx
# (receiver namespace, afxdp, CPU 0): the bench's p2p over veth.
# Over a fixed frame count it reads, for turnoutd's worker thread only:
#   - its user and system CPU time (/proc/PID/task/TID/stat utime, stime;
#     ticks of 1/CLK_TCK s) per frame, in µs;
#   - its system calls per frame, by name (perf stat on the syscall
#     tracepoints of that thread: counted in the kernel, no ptrace);
#   - the af_xdp ports' own counters (tx_kicks, rx_wakeups, ...) from
#     turnoutd's `stats`.
# Per frame, so the figures depend little on the host's load (say the load
# anyway: a preempted worker moves smaller batches).
#
# SUT=ovs measures OVS userspace's PMD thread instead (afxdp ports, native).
#
# usage (root): crates/ports/examples/af_xdp_cost.sh [rate_pps] [frames] [size]
#   env TURNOUTD=path (default target/release/turnoutd), GEN=path
#   (default target/release/turnout-gen), EXTRA_SWITCH='toml lines' (added
#   to [switch]), EXTRA_PORT='toml lines' (added to both ports),
#   PROFILE=file (also a perf cpu-clock profile of the worker into file),
#   RX_THREADED=1 (threaded NAPI on the receiver's veth end).
set -euo pipefail
RATE=${1:-200000}
FRAMES=${2:-2000000}
SIZE=${3:-64}
TURNOUTD=${TURNOUTD:-target/release/turnoutd}
GEN=${GEN:-target/release/turnout-gen}
for b in "$TURNOUTD" "$GEN"; do
    [ -x "$b" ] || { echo "build first: cargo build --release -p turnoutd -p turnout-gen ($b)" >&2; exit 2; }
done
P=$$
SW=xcsw$P SND=xcsnd$P RCV=xcrcv$P
A=xca$P B=xcb$P S=xcs$P R=xcr$P
TMP=$(mktemp -d)
BG=()
cleanup() {
    for p in "${BG[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    for ns in $SW $SND $RCV; do ip netns del "$ns" 2>/dev/null || true; done
    rm -rf "$TMP"
}
trap cleanup EXIT

for ns in $SW $SND $RCV; do
    ip netns add "$ns"
    ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
done
ip link add "$S" netns "$SND" type veth peer name "$A" netns "$SW"
ip link add "$R" netns "$RCV" type veth peer name "$B" netns "$SW"
for x in "$SND $S" "$RCV $R" "$SW $A" "$SW $B"; do
    set -- $x
    ip -n "$1" link set "$2" up
    ip netns exec "$1" ethtool -K "$2" tx off tso off gso off > /dev/null 2>&1 || true
done

SUT=${SUT:-turnoutd}
SOCK=$TMP/ctl.sock
OVSENV=(env OVS_RUNDIR="$TMP/ovs" OVS_LOGDIR="$TMP/ovs" OVS_DBDIR="$TMP/ovs" OVS_SYSCONFDIR="$TMP/ovs")
if [ "$SUT" = ovs ]; then
    # OVS userspace (netdev datapath), afxdp ports in native mode, one PMD
    # thread on CPU 1, the two cross-connect flows: the bench's OVS p2p.
    mkdir -p "$TMP/ovs"
    DB=$TMP/ovs/db.sock
    ovsdb-tool create "$TMP/ovs/conf.db" /usr/share/openvswitch/vswitch.ovsschema
    ip netns exec "$SW" "${OVSENV[@]}" ovsdb-server "$TMP/ovs/conf.db" --remote="punix:$DB" \
        --pidfile="$TMP/ovs/ovsdb-server.pid" --log-file="$TMP/ovs/ovsdb.log" --no-chdir > /dev/null 2>&1 &
    BG+=("$!")
    for _ in $(seq 100); do [ -S "$DB" ] && break; sleep 0.1; done
    vsctl() { ip netns exec "$SW" "${OVSENV[@]}" ovs-vsctl --db="unix:$DB" --timeout=60 "$@"; }
    vsctl --no-wait init
    vsctl --no-wait set Open_vSwitch . other_config:pmd-cpu-mask=0x2
    ip netns exec "$SW" "${OVSENV[@]}" ovs-vswitchd "unix:$DB" --pidfile="$TMP/ovs/ovs-vswitchd.pid" \
        --log-file="$TMP/ovs/ovs-vswitchd.log" --no-chdir > /dev/null 2>&1 &
    SWPID=$!; BG+=("$SWPID")
    vsctl add-br xcbr$P -- set bridge xcbr$P datapath_type=netdev fail_mode=secure
    vsctl add-port xcbr$P "$A" -- set interface "$A" type=afxdp options:xdp-mode=native ofport_request=1
    vsctl add-port xcbr$P "$B" -- set interface "$B" type=afxdp options:xdp-mode=native ofport_request=2
    for f in in_port=1,actions=output:2 in_port=2,actions=output:1; do
        ip netns exec "$SW" "${OVSENV[@]}" ovs-ofctl add-flow xcbr$P "$f"
    done
    WORKER=pmd
else
cat > "$TMP/t.toml" <<EOF2
[switch]
control_socket = "$SOCK"
${EXTRA_SWITCH:-}

[[workers]]
cpu = 1

[logic]
name = "patch"
pairs = [["a", "b"]]
bidirectional = true

[[ports]]
name = "a"
kind = "af_xdp"
iface = "$A"
${EXTRA_PORT:-}

[[ports]]
name = "b"
kind = "af_xdp"
iface = "$B"
${EXTRA_PORT:-}
EOF2
ip netns exec "$SW" "$TURNOUTD" --config "$TMP/t.toml" > "$TMP/sw.log" 2>&1 &
SWPID=$!; BG+=("$SWPID")
for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.1; done
[ -S "$SOCK" ] || { echo "turnoutd did not start: $(cat "$TMP/sw.log")" >&2; exit 1; }
WORKER=turnout-w0
fi
TID=""
for _ in $(seq 100); do
    for t in /proc/$SWPID/task/*; do
        case "$(cat "$t/comm")" in "$WORKER"*) TID=${t##*/} ;; esac
    done
    [ -n "$TID" ] && break
    sleep 0.1
done
[ -n "$TID" ] || { echo "no worker thread $WORKER* in $SUT $SWPID" >&2; exit 1; }

rpc() {
    python3 - "$SOCK" "$1" <<'PY'
import json, socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
s.sendall(json.dumps({"jsonrpc": "2.0", "id": 1, "method": sys.argv[2]}).encode() + b"\n")
buf = b""
while not buf.endswith(b"\n"):
    c = s.recv(1 << 20)
    if not c:
        break
    buf += c
print(json.dumps(json.loads(buf)["result"]))
PY
}

ip netns exec "$RCV" "$GEN" rx --port "af_xdp:$R" --cpu 0 --json "$TMP/rx.json" > /dev/null 2>&1 &
RXPID=$!; BG+=("$RXPID")
sleep 1
if [ -n "${RX_THREADED:-}" ]; then
    # The receiver's veth end (NAPI once its XDP program is attached) polls
    # in a kernel thread, not in the softirq turnoutd's sendto() runs.
    ip netns exec "$RCV" sh -c "echo 1 > /sys/class/net/$R/threaded"
fi
# utime stime (fields 14, 15) of the worker; comm has no spaces here
cpu_ticks() { awk '{ print $14, $15 }' "/proc/$SWPID/task/$TID/stat"; }
[ "$SUT" = ovs ] || rpc stats.reset > /dev/null
txp() { ip netns exec "$SW" cat "/sys/class/net/$B/statistics/tx_packets"; }
K1=$(txp)
read -r U1 S1 < <(cpu_ticks)
# softirq work the kernel defers to ksoftirqd is charged to no SUT thread
KSI=$(pgrep -x ksoftirqd/1 | head -1)
ksi_ticks() { awk '{ print $14 + $15 }' "/proc/$KSI/stat"; }
Q1=$(ksi_ticks)
# the thread's exact CPU time (sum_exec_runtime, ns; ticks only split it)
runtime_ns() { awk '{ print $1 }' "/proc/$SWPID/task/$TID/schedstat"; }
R1=$(runtime_ns)
EV="raw_syscalls:sys_enter,syscalls:sys_enter_sendto,syscalls:sys_enter_recvfrom,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_epoll_pwait,syscalls:sys_enter_nanosleep,syscalls:sys_enter_clock_nanosleep,syscalls:sys_enter_poll,syscalls:sys_enter_ppoll,syscalls:sys_enter_futex,syscalls:sys_enter_read,syscalls:sys_enter_write,syscalls:sys_enter_sched_yield,syscalls:sys_enter_getsockopt"
perf stat -x, -e "$EV" -t "$TID" -o "$TMP/perf.csv" &
PERFPID=$!; BG+=("$PERFPID")
RECPID=""
if [ -n "${PROFILE:-}" ]; then
    # a cpu-clock profile of the worker (kernel and user; no hardware
    # counters in this VM): perf report -i $PROFILE --no-children
    perf record -q -e cpu-clock -F 4000 -g -t "$TID" -o "$PROFILE" > /dev/null 2>&1 &
    RECPID=$!; BG+=("$RECPID")
fi
sleep 0.5
T1=$(date +%s.%N)
ip netns exec "$SND" "$GEN" tx --port "af_xdp:$S" --size "$SIZE" --rate-pps "$RATE" --count "$FRAMES" \
    --cpu 0 --json "$TMP/tx.json" > /dev/null 2> "$TMP/tx.err" || { echo "tx failed: $(cat "$TMP/tx.err")" >&2; exit 1; }
sleep 0.5
T2=$(date +%s.%N)
kill -INT "$PERFPID"; wait "$PERFPID" 2>/dev/null || true
[ -n "$RECPID" ] && { kill -INT "$RECPID"; wait "$RECPID" 2>/dev/null || true; }
read -r U2 S2 < <(cpu_ticks)
Q2=$(ksi_ticks)
R2=$(runtime_ns)
K2=$(txp)
if [ "$SUT" = ovs ]; then echo '{}' > "$TMP/stats.json"; else rpc stats > "$TMP/stats.json"; fi
LOAD=$(cut -d' ' -f1-3 /proc/loadavg)
HZ=$(getconf CLK_TCK)
python3 - "$TMP/stats.json" "$TMP/perf.csv" "$U1" "$S1" "$U2" "$S2" "$HZ" "$T1" "$T2" "$RATE" "$SIZE" "$LOAD" "$SUT" "$((K2 - K1))" "$((Q2 - Q1))" "$((R2 - R1))" <<'PY'
import json, sys
st = json.load(open(sys.argv[1]))
sut, ktx, ksi = sys.argv[13], int(sys.argv[14]), int(sys.argv[15])
run_ns = int(sys.argv[16])
u1, s1, u2, s2, hz = (int(x) for x in sys.argv[3:8])
t1, t2 = float(sys.argv[8]), float(sys.argv[9])
rate, size, load = sys.argv[10], sys.argv[11], sys.argv[12]
sc = {}
for line in open(sys.argv[2]):
    f = line.strip().split(",")
    if len(f) > 2 and f[0].replace(".", "").isdigit():
        sc[f[2].split(":")[-1].replace("sys_enter_", "")] = int(float(f[0]))
# frames: what the egress veth sent in the window (the same for every SUT)
frames = max(ktx, 1)
print(f"{sut}: rate={rate} pps size={size} B window={t2 - t1:.2f} s load={load}")
print(f"frames sent by the egress veth: {ktx}")
if st:
    ports = {p["name"]: p for p in st["ports"]}
    rx = sum(ports[p]["rx_packets"] for p in ports)
    tx = sum(ports[p]["tx_packets"] for p in ports)
    drops = {f"{p}.{k}": v for p in ports for k, v in ports[p]["drops"].items() if v}
    w = st["workers"][0]
    print(f"turnoutd rx_packets={rx} tx_packets={tx} drops={drops}")
    print(f"worker: batches={w['batches']} frames/batch={w['packets'] / max(w['batches'], 1):.1f} "
          f"own-account cycles/frame={w['busy_cycles'] / max(w['packets'], 1):.0f} "
          f"sleeps={w['sleeps']} naps={w['naps']} tsc_hz={st['tsc_hz']}")
    for p in sorted(ports):
        b = ports[p]["backend"]
        keep = ("tx_budget", "tx_kicks", "tx_kicks_refused", "tx_kick_errors", "rx_wakeups",
                "kernel_tx_ring_empty", "kernel_rx_fill_ring_empty", "kernel_rx_ring_full",
                "xdp_native", "zero_copy")
        print(f"port {p}: " + " ".join(f"{k}={b.get(k)}" for k in keep))
user_us = (u2 - u1) / hz * 1e6 / frames
sys_us = (s2 - s1) / hz * 1e6 / frames
print(f"worker CPU per frame: user {user_us:.3f} us, system {sys_us:.3f} us "
      f"(ticks user {u2 - u1}, system {s2 - s1}, CLK_TCK {hz})")
print(f"worker CPU per frame, exact (schedstat): {run_ns / 1e3 / frames:.3f} us")
print(f"ksoftirqd/1 (the SUT's CPU) per frame: {ksi / hz * 1e6 / frames:.3f} us ({ksi} ticks)")
tot = sc.pop("sys_enter", None)
print(f"worker syscalls per frame: all {tot / frames:.3f}" if tot is not None else "no syscall count")
for k, v in sorted(sc.items(), key=lambda kv: -kv[1]):
    if v:
        print(f"  {k}: {v / frames:.3f} per frame ({v})")
PY
