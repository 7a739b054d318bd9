"""Hostile peers against a turnoutd process.

turnoutd (bridge logic) serves four ports on unix sockets in a private
directory: two honest memif interfaces (m0, m1) carrying a turnout-gen
stream at a fixed moderate rate (txrx m0 -> m1; the destination is never
learned, so the bridge floods every frame to the hostile ports too), a
memif interface hm whose client lies, and a vhost-user port hv whose
frontend (a hostile VM) lies. The liars are `examples/hostile_peer.rs`,
built on the same kits as the in-process tests (ports::memif::hostile,
crates/ports/tests/vhost_common/liar.rs):

- hm: bad descriptors (region, offset, length, flags), endless chains, a
  head index out of range, an overwritten cookie, then 18 kinds of bad
  control messages (sizes, types, versions, ids, regions, rings, fds);
- hv: memory tables with overlapping, zero-size, huge, unmappable or
  short-file regions, vrings outside guest memory, descriptor loops and
  chains outside guest memory, index jumps, kicks on bad rings, messages
  out of order or of the wrong size, disconnects mid-setup and
  mid-transfer.

Checks: honest peers on hm and hv work before the attack; turnoutd stays
up; the honest stream loses nothing and the honest ports count no drop;
every lie ends the connection with its reason counted in the `stats` API
(each violation / lie counter exactly); afterwards an honest turnout-gen
reconnects on hm and on hv and gets every frame through; turnoutd's open
descriptors, by kind, are exactly what its connections account for: with
no peer, those of a fresh turnoutd (the warm-up peers and, at the end,
every peer leave nothing behind); during the attacks, those plus the
honest stream's two memif connections (each its control socket and the
interrupt eventfds of its two rings) and nothing more after each attack
(docs/fuzzing.md).

The second test gives turnoutd one worker, the honest memif
stream as a bystander pair on it and four hostile vhost-user ports
(hv0..hv3) whose guests turn what they share into a weapon
(`hostile_peer guard`): memory truncated to zero, to the middle of a
ring, under the receive buffers and after a remap; a full blocking pipe
as the call fd of each virtqueue, a call eventfd made blocking and full
after the handover, a full non-blocking one; control messages cut at
every byte boundary of a header and a body, and replies left unread.
turnoutd must survive, count each as the reason it is (exactly, per
port), lose nothing of the honest stream, serve honest guests on every
hostile port afterwards, keep no descriptor, and, with guests holding
all of it at once (`hostile_peer hold`), stop within 5 s of SIGTERM.

Needs root (memif sockets under the test's directory, like the other
system tests) and the release binaries turnoutd, turnout-gen and the
example hostile_peer (built with the ports crate's test-utils feature by
`make build` and scripts/setup.sh).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harness import Turnoutd, need_built, stop_pid, wait_for

from turnout import testpeers
from turnout.build import BIN_DIR

pytestmark = pytest.mark.system

RELEASE = BIN_DIR
GEN = RELEASE / "turnout-gen"
HOSTILE = RELEASE / "examples" / "hostile_peer"
RATE_PPS = 10_000


@pytest.fixture(autouse=True)
def _peers():
    testpeers.need_root()
    need_built(RELEASE / "turnoutd", GEN, HOSTILE, build="--workspace --bins --examples")


def config(d: Path) -> str:
    ports = "".join(
        f'[[ports]]\nname = "{n}"\nkind = "memif"\nsocket = "{d}/memif.sock"\nid = {i}\n'
        for n, i in (("m0", 0), ("m1", 1), ("hm", 2))
    )
    ports += f'[[ports]]\nname = "hv"\nkind = "vhost_user"\nsocket = "{d}/hv.sock"\n'
    return ('[switch]\ncontrol_socket = "@CTL@"\nwakeup = "adaptive"\n[[workers]]\n'
            '[logic]\nname = "bridge"\n' + ports)


def fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def fd_kinds(pid: int) -> dict[str, int]:
    """Open descriptors by what they point at (anon_inode:[eventfd], socket, ...)."""
    out: dict[str, int] = {}
    for f in os.listdir(f"/proc/{pid}/fd"):
        try:
            t = os.readlink(f"/proc/{pid}/fd/{f}")
        except OSError:
            continue
        k = t.split(":[")[0] if t.startswith(("socket", "pipe")) else t.split(" (")[0]
        out[k] = out.get(k, 0) + 1
    return out


# What each memif connection of the honest stream (one queue pair) holds
# open in turnoutd: its control socket and the client's interrupt eventfd
# of each of its two rings.
HONEST_CONNECTION_FDS = {"socket": 1, "anon_inode:[eventfd]": 2}


def fds_settle(pid: int, want: dict[str, int], what: str) -> None:
    """Waits (10 s) until turnoutd's descriptors by kind are exactly ``want``
    (a departed peer's connection is closed by the port's control thread a
    moment after its link goes down)."""
    try:
        wait_for(what, 10, lambda: fd_kinds(pid) == want)
    except AssertionError:
        got = fd_kinds(pid)
        diff = {k: got.get(k, 0) - want.get(k, 0) for k in set(got) | set(want)
                if got.get(k, 0) != want.get(k, 0)}
        raise AssertionError(f"{what}: turnoutd's descriptors differ by {diff} "
                             f"(want {want}, have {got})") from None


def fds_steady(pid: int) -> dict[str, int]:
    """turnoutd's descriptors by kind once they stop changing (the same for
    1 s; 10 s at most)."""
    last, since = fd_kinds(pid), time.monotonic()
    end = since + 10
    while time.monotonic() < end:
        time.sleep(0.1)
        now = fd_kinds(pid)
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= 1.0:
            return now
    raise AssertionError(f"turnoutd's descriptors did not settle: {last}")


def backend(d: Turnoutd, port: str) -> dict[str, int]:
    return dict(d.port(port)["backend"])


def txrx(d: Path, tx: str, rx: str, out: Path, *extra: str) -> subprocess.Popen:
    # The cool-down ends as soon as every frame sent is back, so its length
    # costs only a stream that really lost frames: long enough that frames
    # a busy machine delays still count (0.5 s lost 39 of 2000 in one run
    # beside the other test lanes).
    # The child keeps its own copy of the log's descriptor.
    with open(out.with_suffix(".log"), "wb") as log:
        return subprocess.Popen(
            [str(GEN), "txrx", "--port", tx, "--rx-port", rx, "--rate-pps", str(RATE_PPS),
             "--cooldown-s", str(COOLDOWN_S), "--json", str(out), *extra],
            stdout=subprocess.DEVNULL, stderr=log)


#: txrx's longest wait for the frames in flight after the sending ends
COOLDOWN_S = 5


#: A stream (``start_stream``) runs until the test stops it
#: (``end_stream``), and ends by itself after this long at most.
STREAM_CAP_S = 600
#: The streams of the running test, stopped when it ends (also on failure).
STREAMS: list[subprocess.Popen] = []


@pytest.fixture(autouse=True)
def _stop_streams() -> Iterator[None]:
    yield
    while STREAMS:
        stop_pid(STREAMS.pop())


def start_stream(d: Path, tx: str, rx: str, out: Path) -> subprocess.Popen:
    """A stream for as long as the attacks take: stopped by ``end_stream``
    once they are over, not after a guessed time."""
    p = txrx(d, tx, rx, out, "--duration-s", str(STREAM_CAP_S))
    STREAMS.append(p)
    return p


def end_stream(p: subprocess.Popen, out: Path) -> dict[str, Any]:
    """Stops a ``start_stream`` (SIGINT ends the sending; its cool-down still
    receives the frames in flight) and returns its document."""
    assert p.poll() is None, "the stream ended before it was stopped"
    os.kill(p.pid, signal.SIGINT)
    return finish(p, out, 60)


def finish(p: subprocess.Popen, out: Path, timeout_s: float) -> dict[str, Any]:
    try:
        rc = p.wait(timeout=timeout_s)
    finally:
        stop_pid(p)
    log = out.with_suffix(".log").read_text(errors="replace")
    assert rc == 0, f"turnout-gen exited with {rc}: {log[-800:]}"
    return json.loads(out.read_text())


def lossless(doc: dict[str, Any], what: str) -> None:
    tx, rx = doc["tx"]["packets"], doc["rx"]["packets"]
    assert tx > 0, f"{what}: nothing sent"
    assert rx == tx and doc["rx"]["lost"] == 0, f"{what}: sent {tx}, received {rx}, " \
        f"lost {doc['rx']['lost']}"


def hostile(*args: str) -> subprocess.Popen:
    return subprocess.Popen([str(HOSTILE), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def check_liar(p: subprocess.Popen, name: str, before: dict[str, int],
               after: dict[str, int]) -> dict[str, Any]:
    out, err = p.communicate(timeout=180)
    doc = json.loads(out)
    bad = [x for x in doc["lies"] if not x["ok"]]
    assert p.returncode == 0 and not bad, f"{name}: lies not ended as they must: {bad}\n{err}"
    delta = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    for k, n in doc["expected"].items():
        assert delta.get(k) == n, f"{name}: counter {k} rose by {delta.get(k)}, expected {n}; " \
            f"all increases: { {k: v for k, v in delta.items() if v} }"
    for k, n in doc["at_least"].items():
        assert delta.get(k, 0) >= n, f"{name}: counter {k} rose by {delta.get(k)}, expected >= {n}"
    return {"lies": len(doc["lies"]), "delta": {k: v for k, v in delta.items() if v}}


def test_hostile_peers_against_a_turnoutd_process(tmp_path: Path) -> None:
    d = Turnoutd(tmp_path / "d", config(tmp_path))
    memif = f"memif:{tmp_path}/memif.sock"
    with d:
        assert d.proc is not None
        pid = d.proc.pid
        # A fresh turnoutd's descriptors, with no peer ever connected.
        kinds_fresh = fd_kinds(pid)
        # Before the attack, honest peers on hm and hv receive a stream:
        # the ports work, and each has held a connection it transmitted to.
        for port, spec in (("hm", f"{memif},id=2"), ("hv", f"vhost-user:{tmp_path}/hv.sock")):
            out = tmp_path / f"before-{port}.json"
            doc = finish(txrx(tmp_path, f"{memif},id=0", spec, out, "--count", "2000"), out, 60)
            lossless(doc, f"honest peer on {port} before the attack")
        wait_for("the warm-up peers gone", 10, lambda: not any(
            d.port(n)["link_up"] for n in ("m0", "hm", "hv")))
        # Idle again: nothing more than a fresh turnoutd (which may still
        # hold the harness's first control connection: a socket less now).
        kinds_idle = fds_steady(pid)
        fds_start = fds(pid)
        grown = {k: n - kinds_fresh.get(k, 0) for k, n in kinds_idle.items()
                 if n > kinds_fresh.get(k, 0)}
        assert not grown, f"the warm-up peers left descriptors behind: {grown} " \
            f"(fresh {kinds_fresh}, now {kinds_idle})"
        honest0 = {n: dict(d.port(n)["drops"]) for n in ("m0", "m1")}

        # The honest stream, until the attacks are over.
        honest_out = tmp_path / "honest.json"
        honest = start_stream(tmp_path, f"{memif},id=0", f"{memif},id=1", honest_out)
        wait_for("the honest ports' link", 10,
                 lambda: d.port("m0")["link_up"] and d.port("m1")["link_up"])
        time.sleep(1.0)
        # With the honest stream: exactly its two connections more.
        kinds_stream = dict(kinds_idle)
        for k, n in HONEST_CONNECTION_FDS.items():
            kinds_stream[k] = kinds_stream.get(k, 0) + 2 * n
        fds_settle(pid, kinds_stream, "with the honest stream")
        # Two attacks, each by both liars at once; each must leave nothing
        # behind.
        seen: list[dict[str, Any]] = []
        for attack in (1, 2):
            hm0, hv0 = backend(d, "hm"), backend(d, "hv")
            liars = {
                "memif": hostile("memif", f"{tmp_path}/memif.sock", "2"),
                "vhost": hostile("vhost", f"{tmp_path}/hv.sock"),
            }
            try:
                for name, p in liars.items():
                    p.wait(timeout=120)
                    assert honest.poll() is None, f"the honest stream ended before the " \
                        f"{name} liar of attack {attack} did"
            finally:
                for p in liars.values():
                    stop_pid(p)
            assert d.proc.poll() is None, f"turnoutd died: {d.log()[-1500:]}"
            seen.append({
                "hm": check_liar(liars["memif"], "memif liar", hm0, backend(d, "hm")),
                "hv": check_liar(liars["vhost"], "vhost liar", hv0, backend(d, "hv")),
            })
            wait_for("the liars gone", 10, lambda: not any(
                d.port(n)["link_up"] for n in ("hm", "hv")))
            fds_settle(pid, kinds_stream, f"after attack {attack} (the honest stream on)")
        print(json.dumps({"attacks": seen, "fds": {"idle": [fds_start, kinds_idle],
                                                   "with_stream": kinds_stream}}))

        doc = end_stream(honest, honest_out)
        lossless(doc, "honest stream m0 -> m1 during the attack")
        for n in ("m0", "m1"):
            drops = {k: v - honest0[n][k] for k, v in d.port(n)["drops"].items()
                     if v != honest0[n][k]}
            assert not drops, f"honest port {n} dropped {drops} during the attack"
        assert d.proc.poll() is None, f"turnoutd died: {d.log()[-1500:]}"

        # The attacked ports serve honest peers again.
        for port, spec in (("hm", f"{memif},id=2"), ("hv", f"vhost-user:{tmp_path}/hv.sock")):
            rx0 = d.port(port)["rx_packets"]
            out = tmp_path / f"reconnect-{port}.json"
            doc = finish(txrx(tmp_path, spec, f"{memif},id=1", out, "--count", "5000"), out, 60)
            lossless(doc, f"honest peer on {port} after the attack")
            assert d.port(port)["rx_packets"] - rx0 >= doc["tx"]["packets"]

        # No descriptor left behind by the liars (or by anyone) since the
        # first attack.
        wait_for("every peer gone", 10, lambda: not any(
            d.port(n)["link_up"] for n in ("m0", "m1", "hm", "hv")))
        fds_settle(pid, kinds_idle, "with every peer gone")
        assert d.proc.poll() is None


def guard_config(d: Path) -> str:
    ports = "".join(
        f'[[ports]]\nname = "{n}"\nkind = "memif"\nsocket = "{d}/memif.sock"\nid = {i}\n'
        for n, i in (("m0", 0), ("m1", 1))
    )
    ports += "".join(
        f'[[ports]]\nname = "hv{i}"\nkind = "vhost_user"\nsocket = "{d}/hv{i}.sock"\n'
        for i in range(4)
    )
    # One worker: the honest pair and every hostile port share it.
    return ('[switch]\ncontrol_socket = "@CTL@"\nwakeup = "adaptive"\n[[workers]]\n'
            '[logic]\nname = "bridge"\n' + ports)


def test_guests_that_shrink_memory_block_fds_or_stall_cannot_take_turnoutd_down(
        tmp_path: Path) -> None:
    d = Turnoutd(tmp_path / "d", guard_config(tmp_path))
    memif = f"memif:{tmp_path}/memif.sock"
    hv = [f"{tmp_path}/hv{i}.sock" for i in range(4)]
    names = {sock: f"hv{i}" for i, sock in enumerate(hv)}
    with d:
        assert d.proc is not None
        pid = d.proc.pid
        kinds_idle = fds_steady(pid)
        honest0 = {n: dict(d.port(n)["drops"]) for n in ("m0", "m1")}
        # The bystander pair: an honest stream m0 -> m1 on the same worker,
        # flooded to the hostile ports too (its destination is never
        # learned), so the worker writes into their guests' memory and
        # signals their call fds.
        honest_out = tmp_path / "honest.json"
        honest = start_stream(tmp_path, f"{memif},id=0", f"{memif},id=1", honest_out)
        wait_for("the honest ports' link", 10,
                 lambda: d.port("m0")["link_up"] and d.port("m1")["link_up"])
        before = {n: backend(d, n) for n in names.values()}
        liar = hostile("guard", *hv)
        try:
            out, err = liar.communicate(timeout=150)
        finally:
            stop_pid(liar)
        assert d.proc.poll() is None, f"turnoutd died ({d.proc.returncode}): {d.log()[-1500:]}"
        doc = json.loads(out)
        bad = [x for x in doc["lies"] if not x["ok"]]
        hv0_log = "\n".join([ln for ln in d.log().splitlines() if "hv0" in ln][-40:])
        assert liar.returncode == 0 and not bad, f"attacks not ended as they must: {bad}\n{err}\n" \
            f"turnoutd on hv0 (the guard cases' port):\n{hv0_log}"
        assert honest.poll() is None, "the honest stream ended before the guard attacks did"
        seen = {}
        for sock, want in doc["ports"].items():
            n = names[sock]
            after = backend(d, n)
            delta = {k: after.get(k, 0) - before[n].get(k, 0) for k in after}
            seen[n] = {k: v for k, v in delta.items() if v}
            for k, v in want["expected"].items():
                assert delta.get(k) == v, f"{n}: {k} rose by {delta.get(k)}, expected {v}; " \
                    f"all increases: {seen[n]}"
            for k, v in want["at_least"].items():
                assert delta.get(k, 0) >= v, f"{n}: {k} rose by {delta.get(k)}, expected >= {v}"
            lies = {k: v for k, v in delta.items() if k.startswith("lie_") and v}
            assert not lies, f"{n}: counted as lies: {lies}"
        print(json.dumps({"attacks": len(doc["lies"]), "increases": seen}))
        doc = end_stream(honest, honest_out)
        # The honest stream's frames go m0 -> m1. (What the hostile guests
        # send is flooded to m0 too, whose turnout-gen only sends: m0 drops
        # those as tx_full, foreign frames, not the stream's.)
        drops = {k: v - honest0["m1"].get(k, 0) for k, v in d.port("m1")["drops"].items()
                 if v != honest0["m1"].get(k, 0)}
        stream = {k: doc["tx"][k] for k in ("packets", "full", "behind_max")}
        stream.update({k: doc["rx"][k] for k in ("lost", "reordered", "duplicated", "foreign")})
        print(json.dumps({"honest_stream": stream, "m1_drops": drops}))
        assert not drops, f"honest port m1 dropped {drops} during the attacks: {stream}"
        lossless(doc, "honest stream m0 -> m1 beside the guard attacks")
        # Every attacked port serves an honest guest again.
        for i, sock in enumerate(hv):
            out_i = tmp_path / f"after-hv{i}.json"
            doc = finish(txrx(tmp_path, f"vhost-user:{sock}", f"{memif},id=1", out_i,
                              "--count", "2000"), out_i, 60)
            lossless(doc, f"honest guest on hv{i} after the attacks")
        wait_for("every peer gone", 10, lambda: not any(
            d.port(n)["link_up"] for n in ("m0", "m1", *names.values())))
        fds_settle(pid, kinds_idle, "after the guard attacks")

        # All of it at once, held, with traffic flooded to the guests:
        # turnoutd still stops promptly.
        flood_out = tmp_path / "flood.json"
        flood = txrx(tmp_path, f"{memif},id=0", f"{memif},id=1", flood_out, "--duration-s", "60")
        wait_for("the honest ports' link again", 10,
                 lambda: d.port("m0")["link_up"] and d.port("m1")["link_up"])
        with open(tmp_path / "hold.err", "wb") as herr:
            holder = subprocess.Popen([str(HOSTILE), "hold", *hv], stdout=subprocess.PIPE,
                                      stderr=herr, text=True)
        try:
            assert holder.stdout is not None
            line = holder.stdout.readline()
            assert line.strip() == "ready", \
                f"the holding guests never got ready: {(tmp_path / 'hold.err').read_text()}"
            t0 = time.monotonic()
            os.kill(pid, signal.SIGTERM)
            try:
                rc = d.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                raise AssertionError(f"turnoutd still running 5 s after SIGTERM: "
                                     f"{d.log()[-1500:]}") from None
            took = time.monotonic() - t0
            assert rc == 0, f"turnoutd exited with {rc}: {d.log()[-1500:]}"
            print(json.dumps({"sigterm_exit_s": round(took, 3)}))
        finally:
            stop_pid(holder)
            stop_pid(flood)

