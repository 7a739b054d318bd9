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

Needs root (memif sockets under the test's directory, like the other
system tests) and the release binaries turnoutd, turnout-gen and the
example hostile_peer (built with the ports crate's test-utils feature by
`make build` and scripts/setup.sh).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from harness import REPO, Turnoutd, stop_pid, wait_for

from turnout import testpeers

pytestmark = pytest.mark.system

RELEASE = REPO / "target" / "release"
GEN = RELEASE / "turnout-gen"
HOSTILE = RELEASE / "examples" / "hostile_peer"
RATE_PPS = 10_000


@pytest.fixture(autouse=True)
def _peers():
    testpeers.need_root()
    for b in (RELEASE / "turnoutd", GEN, HOSTILE):
        testpeers.need(b.is_file(), f"{b} is not built (cargo build --release "
                                    "--workspace --bins --examples)")


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
    # The child keeps its own copy of the log's descriptor.
    with open(out.with_suffix(".log"), "wb") as log:
        return subprocess.Popen(
            [str(GEN), "txrx", "--port", tx, "--rx-port", rx, "--rate-pps", str(RATE_PPS),
             "--cooldown-s", "0.5", "--json", str(out), *extra],
            stdout=subprocess.DEVNULL, stderr=log)


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

        # The honest stream, for longer than the attack takes.
        honest_out = tmp_path / "honest.json"
        honest = txrx(tmp_path, f"{memif},id=0", f"{memif},id=1", honest_out,
                      "--duration-s", "45")
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
                        f"{name} liar of attack {attack} did: lengthen it"
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

        doc = finish(honest, honest_out, 60)
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

