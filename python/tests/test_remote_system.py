"""Remote campaigns end to end (docs/bench.md, "Across hosts"): hosts are
namespaces with their own sshd, PID namespace and /proc (tests/sshlab.py);
the campaign runs with ``location = "remote"`` from a controller namespace
through the real CLI, with this checkout's turnout-gen and turnoutd copied
to each host's install directory.

- every kind of SUT on the SUT host, the tester on the tester host: p2p
  through turnoutd, the Linux bridge, OVS and testpmd, a one-VNF loopback
  chain and p2v (memif) through turnoutd, v2v through the bridge (veth
  pairs made on the SUT host): rates, latency and its
  mode (same-host; p2v cross-host, its latency not taken), the SUT's cost,
  CPU, run-queue waits and what else ran on its CPUs read on its host, the
  builds on the hosts, the report's host listing and latency labels, and
  nothing left on any host (processes, interfaces, redirects, promiscuous
  NICs, hugepages);
- the cross-host latency mode: the sender on one tester host, the
  receiver on another, through turnoutd and the bare wire (two wires joined
  on the SUT host), with the SUT's CPUs isolated on its host: rates kept,
  latency dropped with the reason, the isolation put back;
- bad input: an unreachable host, a wrong key, a missing interface, a
  build mismatch, a host without a required package: refused, naming the
  host and the problem, nothing started or written on any host;
- a host that drops off mid-campaign (its links down): the trial fails
  naming it, the campaign goes on to its end, and once the host is back
  nothing of the run is running there (its agent's dead man's switch);
- Ctrl-C and SIGKILL of the controller mid-trial, with the SUT's CPUs
  isolated: nothing left running, the isolation put back.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import needs_root
from sshlab import Lab
from turnout import testpeers
from turnout.build import built
from turnout.hosts.remote import sha256_file
from turnout.results import ResultsDB
from turnout.sut import make_sut

pytestmark = [pytest.mark.system, needs_root]

REPO = Path(__file__).resolve().parents[2]
GEN = built("turnout-gen")
TURNOUTD = built("turnoutd")
TURNOUT = [sys.executable, "-m", "turnout.cli"]
WIRES = [("tester:ens1f0", "sut:ens1f0"), ("tester:ens1f1", "sut:ens1f1")]
TESTER = {"roles": ["tester"], "grace_s": 4, "connect_timeout_s": 5}
SUT = {"roles": ["sut", "vnf"], "grace_s": 4, "connect_timeout_s": 5}
#: the lab's hosts share this machine's 2 CPUs: the VNF on the SUT host's
#: CPU 0 is the tester's CPU 0, so it sleeps on its memif eventfds as a
#: local 2-CPU layout would make it (a busy-polling VNF and tester on one
#: core lose frames to the scheduler)
#: 0.5 s of traffic: at 10 kpps a capacity figure needs 1000 frames between
#: two cost samples inside the window, and a remote SUT's sample (testpmd's
#: "show fwd stats" read back over the agent) takes up to 0.1 s on this loaded
#: machine: 0.3 s left 977 frames between the first and the last one
CAMPAIGN = {"duration_s": 0.5, "warmup_s": 0.2, "methods": ["rplus", "fixed"],
            "tester_cpu": 0, "sut_cpus": "1", "vnf_wakeup": "interrupt"}
MATRIX = """
[matrix]
suts = SUTS
scenarios = SCENARIOS
vnfs = [1]
frame_sizes_b = [64]
rates_pps = [10000]
"""


def body(suts: list[str], scenarios: list[str], suts_opts: dict[str, dict[str, object]] | None
         = None, **campaign: object) -> str:
    """[campaign] keys (CAMPAIGN, with ``campaign`` over them), [matrix], and
    a [sut.NAME] table per SUT (turnoutd's kernel_port af_xdp, ``suts_opts`` over them)."""
    keys = "".join(f"{k} = {json.dumps(v)}\n" for k, v in (CAMPAIGN | campaign).items())
    tables = {"turnoutd": {"kernel_port": "af_xdp"}}
    for n, o in (suts_opts or {}).items():
        tables[n] = tables.get(n, {}) | o
    text = "".join(f"[sut.{n}]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in o.items())
                   for n, o in tables.items())
    return keys + MATRIX.replace("SUTS", json.dumps(suts)).replace(
        "SCENARIOS", json.dumps(scenarios)) + text


@pytest.fixture(scope="module")
def lab() -> Iterator[Lab]:
    testpeers.need(os.geteuid() == 0, "needs root (network namespaces)")
    testpeers.need(Path("/usr/sbin/sshd").exists(), "sshd not installed (openssh-server)")
    testpeers.need(shutil.which("unshare") is not None, "unshare not installed (util-linux)")
    testpeers.need(GEN.exists() and TURNOUTD.exists(),
                   "release binaries not built (cargo build --release)")
    with Lab({"tester": ["ens1f0", "ens1f1"], "sut": ["ens1f0", "ens1f1", "ens2f0"],
              "bare": ["ens1f0", "ens1f1"], "far": ["ens2f0"]},
             [("tester", "ens1f0", "sut", "ens1f0"), ("tester", "ens1f1", "sut", "ens1f1"),
              ("bare", "ens1f0", "bare", "ens1f1"), ("far", "ens2f0", "sut", "ens2f0")],
             hide={"bare": ["/usr/bin/taskset"]}) as lab:
        yield lab


def run(lab: Lab, campaign: Path, db: Path, timeout_s: float = 600,
        ) -> subprocess.CompletedProcess[str]:
    """``turnout bench run`` in the controller namespace (as a user would)."""
    return subprocess.run(["ip", "netns", "exec", lab.ctl, *TURNOUT, "bench", "run",
                           str(campaign), "--db", str(db), "--no-progress"],
                          capture_output=True, text=True, timeout=timeout_s,
                          env={**os.environ, "PYTHONPATH": str(REPO / "python" / "src")})


def spawn(lab: Lab, campaign: Path, db: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(["ip", "netns", "exec", lab.ctl, *TURNOUT, "bench", "run",
                             str(campaign), "--db", str(db), "--no-progress"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO / "python" / "src")})


def nothing_left(lab: Lab, hosts: tuple[str, ...] = ("tester", "sut")) -> None:
    for h in hosts:
        left = lab.run_procs(h)
        assert not left, f"left running on host {h}: {left}"


def host_state(lab: Lab, host: str) -> str:
    """A host's interfaces (names, flags, XDP), qdiscs and the mounts under
    its install directory, through its sshd: what the bench may change
    there. (Its hugepages are this machine's, which other tests change.)"""
    return lab.ssh(host, f"ip -o link | cut -d: -f2,3; tc qdisc show; "
                         f"grep -c ' {lab.hosts[host].install_dir}' /proc/self/mounts")


def isolation_state(lab: Lab) -> str:
    """The SUT host's unbound-workqueue CPU mask and whether an isolation's
    restore file is there (system/isolate.py; its state dir is this
    machine's, the hosts share its kernel)."""
    return lab.ssh("sut", "cat /sys/devices/virtual/workqueue/cpumask; "
                          "ls /run/turnout-bench/sut-isolation.restore 2>&1 | grep -c 'No such'")


def wait_for(lab: Lab, host: str, what: str, campaign: subprocess.Popen[str],
             deadline_s: float = 120) -> None:
    """Until a process of the run whose command line has ``what`` runs on
    the host (looked up through its sshd)."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if any(what in ln for ln in lab.run_procs(host)):
            return
        if campaign.poll() is not None:
            _, err = campaign.communicate()
            raise AssertionError(f"the campaign ended before {what} ran: {err[-2000:]}")
        time.sleep(0.2)
    raise AssertionError(f"no {what} on host {host} within {deadline_s} s")


# ------------------------------------------------------------------ refused


def refused(lab: Lab, tmp_path: Path, name: str, hosts: dict[str, dict[str, object]],
            wires: list[tuple[str, str]] = WIRES) -> str:
    """Run a campaign that must be refused; return its stderr. Nothing may
    have been started or written on any host."""
    for h in lab.hosts.values():
        hosts.setdefault(h.name, {}) if h.name in hosts else None
    tables = {n: {"install_dir": f"{lab.hosts[n].dir}/refused", **t} for n, t in hosts.items()}
    c = lab.campaign(name, body(["turnoutd"], ["p2p"]), tables, wires)
    r = run(lab, c, tmp_path / f"{name}.db", timeout_s=120)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "does not start (nothing was started on any host)" in r.stderr, r.stderr
    for n in ("tester", "sut", "bare", "far"):
        assert not lab.exists(n, f"{lab.hosts[n].dir}/refused"), f"{n}: install dir made"
        left = lab.run_procs(n)
        assert not left, f"{n}: {left}"
    return r.stderr


def test_refuses_unreachable_host(lab: Lab, tmp_path: Path) -> None:
    err = refused(lab, tmp_path, "unreach", {
        "tester": TESTER, "sut": {**SUT, "ssh": "root@10.231.2.77", "connect_timeout_s": 2}})
    assert "host sut (root@10.231.2.77:22): unreachable" in err, err


def test_refuses_wrong_key(lab: Lab, tmp_path: Path) -> None:
    err = refused(lab, tmp_path, "wrongkey", {
        "tester": {**TESTER, "key_file": str(lab.wrong_key)}, "sut": SUT})
    assert "host tester (root@10.231.1.2:22): authentication failed with key" in err, err


def test_refuses_missing_interface(lab: Lab, tmp_path: Path) -> None:
    err = refused(lab, tmp_path, "noiface", {"tester": TESTER, "sut": SUT},
                  [("tester:ens1f0", "sut:ens1f0"), ("tester:ens1f1", "sut:ens1f7")])
    assert "host sut (root@10.231.2.2:22): interface ens1f7 of wire tester:ens1f1 - " \
           "sut:ens1f7 not found" in err, err


def test_refuses_build_mismatch(lab: Lab, tmp_path: Path) -> None:
    other = lab.hosts["sut"].dir / "other-turnoutd"
    shutil.copy(TURNOUTD, other)
    with open(other, "ab") as f:
        f.write(b"another build")
    try:
        err = refused(lab, tmp_path, "mismatch", {
            "tester": TESTER, "sut": {**SUT, "turnoutd": str(other)}})
    finally:
        other.unlink()
    assert f"host sut (root@10.231.2.2:22): build mismatch: {other} has SHA-256" in err, err
    assert sha256_file(TURNOUTD)[:16] in err


def test_refuses_missing_package(lab: Lab, tmp_path: Path) -> None:
    """The bare host's mount namespace has no taskset (util-linux)."""
    err = refused(lab, tmp_path, "nopkg", {"bare": TESTER, "sut": SUT},
                  [("bare:ens1f0", "sut:ens1f0"), ("bare:ens1f1", "sut:ens1f1")])
    assert "host bare (root@10.231.3.2:22): missing packages: taskset (util-linux)" in err, err
    # the same problem from `turnout system check --campaign` (it starts nothing either)
    c = lab.dir / "nopkg.toml"
    r = subprocess.run(["ip", "netns", "exec", lab.ctl, *TURNOUT, "system", "check", "--campaign",
                        str(c)], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(REPO / "python" / "src")})
    assert r.returncode == 1, r.stdout + r.stderr
    assert "MISSING host bare (root@10.231.3.2:22): missing packages: taskset" in r.stdout
    assert "host sut (root@10.231.2.2:22; sut, vnf)" in r.stdout and "ens1f0: veth" in r.stdout


# ------------------------------------------------------------------ end to end


#: the end-to-end campaign's cells: SUT -> the scenarios it runs
CELLS = {"turnoutd": ["p2p", "loopback", "p2v"], "bridge": ["p2p", "v2v"], "ovs": ["p2p"],
         "testpmd": ["p2p"]}


# serial: it checks the CPU samples of the SUT's other threads inside a
# traffic window (measure/others.py), which a loaded machine starves
@pytest.mark.serial
def test_remote_suts_and_scenarios(lab: Lab, tmp_path: Path) -> None:
    for sut in ("bridge", "ovs", "testpmd"):  # the peers the setup installs
        why = make_sut(sut).available()
        testpeers.need(why is None, f"{sut}: {why}")
    opts: dict[str, dict[str, object]] = {n: {"scenarios": sc} for n, sc in CELLS.items()}
    opts["testpmd"]["hugepages"] = 64
    # 1 s of traffic: the SUT's other threads are sampled every 0.15 s, and
    # a window of 0.5 s held a single sample once (a CI rehearsal)
    c = lab.campaign("remote-ns", body(list(CELLS), sorted({x for v in CELLS.values() for x in v}),
                                       opts, duration_s=1.0),
                     {"tester": TESTER, "sut": SUT}, WIRES)
    db = tmp_path / "remote.db"
    before = {h: host_state(lab, h) for h in ("tester", "sut")}
    nr_hugepages = Path("/proc/sys/vm/nr_hugepages").read_text()  # serial: nobody else's
    t0 = time.monotonic()
    r = run(lab, c, db)
    print(f"campaign wall time {time.monotonic() - t0:.0f} s")
    print(r.stderr[-3000:])
    assert r.returncode == 0, r.stdout + r.stderr
    gen_sha, tnd_sha = sha256_file(GEN)[:16], sha256_file(TURNOUTD)[:16]
    # the same builds on each host, in its own install directory
    for host, names in (("tester", ["turnout-gen"]), ("sut", ["turnout-gen", "turnoutd"])):
        for n in names:
            sha = gen_sha if n == "turnout-gen" else tnd_sha
            p = f"{lab.hosts[host].install_dir}/{sha}/{n}"
            assert lab.exists(host, p), f"{p} not on {host}"
    assert not lab.exists("tester", f"{lab.hosts['tester'].install_dir}/{tnd_sha}/turnoutd")
    with ResultsDB(db) as rdb:
        trials = rdb.trials("remote-ns")
        for t in trials:
            print(t.sut, t.scenario, t.point.virtual_port, t.method, t.status, t.reason)
        ok = [t for t in trials if t.status == "ok"]
        for sut, scenarios in CELLS.items():
            for sc in scenarios:
                cell = [t for t in ok if t.sut == sut and t.scenario == sc]
                rp = [t for t in cell if t.method == "rplus"]
                assert rp and max(t.rx_total_pps for t in rp) > 1000, (sut, sc, rp)
                f = [t for t in cell if t.method == "fixed"][-1]
                # frames cross the remote switch (loss on this shared, loaded
                # machine is the scheduler's, not what is tested here)
                assert f.received > 0.5 * f.sent > 0, (sut, sc, f.sent, f.received, f.lost)
                cross = sc == "p2v"  # sent on the tester host, received on the SUT's
                assert f.extra["latency_mode"] == ("cross-host" if cross else "same-host")
                if cross:
                    assert f.latency_p50_ns is None and "two hosts" in f.extra["latency_why"]
                else:
                    assert f.latency_p50_ns is not None and f.latency_p50_ns > 0, (sut, sc)
                # the kernel-path accounting, read on the SUT's host: the
                # kernel share of its CPU, its CPU's other threads, its load
                assert f.extra["kernel_cpus"] == "1", (sut, sc)
                assert "kernel_cycles_per_frame" in f.extra or f.extra.get("kernel_why")
                assert "ms" in f.extra["sut_cpu_others"], f.extra["sut_cpu_others"]
                assert f.extra["host_load"][1] == 2
                # the SUT's CPU's steal time, read by that host's agent
                steal = f.extra["sut_cpu_steal"]
                assert steal["cpus"] == [1] and steal["ms"] >= 0, (sut, sc, steal)
                if sut != "bridge":  # a kernel switch has no process: its CPUs' kernel time
                    assert f.busy_cycles_per_frame is not None, (sut, sc, f.extra.get("cost_why"))
                    # its threads, read from the SUT host's /proc (its PIDs are
                    # that host's: read here, they would be other processes)
                    assert [x for x in f.cpu if x["role"] == "sut"], (sut, sc)
                    # its data path's run-queue waits: its thread pinned to CPU 1 there
                    assert "pinned to the SUT's CPUs" in f.extra["sut_sched"]["threads"], \
                        (sut, sc, f.extra["sut_sched"])
                    assert "on" in f.extra["sut_placement"]
        p2p = next(t for t in ok if t.sut == "turnoutd" and t.scenario == "p2p"
                   and t.method == "fixed")
        names = {x["name"] for x in p2p.cpu if x["role"] == "sut"}
        assert "turnoutd" in names and "turnout-w0" in names, names
        assert p2p.extra["sut_placement"]["on"].get("turnout-w0") == 1
        loop = next(t for t in ok if t.scenario == "loopback" and t.method == "fixed")
        assert loop.extra["vnfs"] and loop.extra["vnfs"][0]["received"] > 0
        kinds = {(t.sut, t.scenario): t.point.virtual_port for t in ok}
        assert kinds[("bridge", "v2v")] == "veth"
        assert kinds[("turnoutd", "p2v")] == "memif"
        suts = {s.name: s for s in rdb.suts()}
        cfgs = [s.config["remote"] for s in rdb.suts() if s.name == "turnoutd"]
        for cfg in cfgs:  # what ran where, per session
            assert cfg["sut_host"] == "sut" and cfg["tester_host"] == "tester"
            assert any("turnoutd" in x for x in cfg["ran"]["sut"])
        ran = [(" ".join(c["ran"]["tester"]), " ".join(c["ran"]["sut"])) for c in cfgs]
        assert any("turnout-gen txrx" in t for t, _ in ran), ran  # p2p, loopback
        # p2v: the sender on the tester host, the receiver on the SUT's
        assert any("turnout-gen tx " in t and "turnout-gen rx " in u for t, u in ran), ran
        cfg = suts["turnoutd"].config["remote"]
        # the SUTs' versions come from the SUT's host
        assert suts["ovs"].version.startswith("ovs-vswitchd") and suts["bridge"].version \
            .startswith("linux ")
        # turnoutd's log, fetched from the SUT's host before its run directory went
        logs = Path(cfg["logs"])
        assert logs.is_relative_to(tmp_path) and (logs / "turnoutd" / "turnoutd.log").exists()
        host = rdb.hosts()[-1]
        remote = host.extra["remote_hosts"]
        assert remote["sut"]["nics"]["ens1f0"]["driver"] == "veth"
        assert remote["tester"]["builds"]["turnout-gen"]["how"] in ("copied", "found")
        assert remote["sut"]["agent_cpus"] == "0"  # off the SUT's CPU 1
        assert remote["sut"]["hostname"] == "lab-sut"  # the facts come from that host
    from turnout.report.build import build_report

    out = build_report(db, "remote-ns", tmp_path / "report")
    setup = out.section("setup")
    t = next(x for x in setup.tables if x.key == "remote-hosts")
    text = "\n".join(" | ".join(r) for r in t.rows)
    print(text)
    assert "veth" in text and "turnoutd (CPUs 1)" in text and "turnout-gen txrx" in text
    # every latency figure says its mode
    latency = [x for s in out.sections for x in [*s.tables, *s.figures]
               if ("p99" in x.title or "latency" in x.title.lower())
               and not x.key.startswith("remote-")]
    assert latency and all("latency mode: same-host" in x.title for x in latency), \
        [x.title for x in latency]
    assert all("cross-host trials without latency" in x.title for x in latency)
    keep = os.environ.get("TURNOUT_REMOTE_KEEP")
    if keep:  # the namespace run's database and report, for the docs
        shutil.copy(db, Path(keep) / "remote.db")
        shutil.copy(c, Path(keep) / "remote-ns.toml")
        shutil.copytree(tmp_path / "report", Path(keep) / "report", dirs_exist_ok=True)
    nothing_left(lab)
    # the hosts as they were: no veth, bridge, redirect, promiscuous NIC,
    # XDP program, hugepage or hugetlbfs mount of the run left
    assert {h: host_state(lab, h) for h in ("tester", "sut")} == before
    # what the campaign's hold on the SUT host added, given back at its end
    assert Path("/proc/sys/vm/nr_hugepages").read_text() == nr_hugepages


# serial: isolate_sut_cpus moves kernel threads, IRQs and the workqueue
# mask of the whole machine off a CPU (one isolation at a time)
@pytest.mark.serial
def test_cross_host_latency_and_isolation(lab: Lab, tmp_path: Path) -> None:
    """Two tester hosts: t0 on tester, t1 on far. The trials keep their
    rates and drop their latency, saying why; the SUT's CPUs are isolated
    on its host for the campaign and put back at its end."""
    iso_before = isolation_state(lab)
    wires = [("tester:ens1f0", "sut:ens1f0"), ("far:ens2f0", "sut:ens2f0")]
    c = lab.campaign("cross", body(["turnoutd", "wire"], ["p2p"], isolate_sut_cpus=True),
                     {"tester": TESTER, "far": TESTER, "sut": SUT}, wires)
    db = tmp_path / "cross.db"
    r = run(lab, c, db)
    print(r.stderr[-3000:])
    assert r.returncode == 0, r.stdout + r.stderr
    assert "isolate_sut_cpus on host sut: moved" in r.stderr
    with ResultsDB(db) as rdb:
        trials = rdb.trials("cross")
        for t in trials:
            print(t.sut, t.scenario, t.method, t.status, t.reason)
        for sut in ("turnoutd", "wire"):
            ok = [t for t in trials if t.sut == sut and t.status == "ok"]
            rp = [t for t in ok if t.method == "rplus"]
            assert rp and max(t.rx_total_pps for t in rp) > 1000, (sut, rp)
            f = [t for t in ok if t.method == "fixed"][-1]
            assert f.received > 0.5 * f.sent > 0, (sut, f.sent, f.received)
            for t in ok:  # rates kept, latency dropped with the reason
                assert t.extra["latency_mode"] == "cross-host"
                assert t.latency_p50_ns is None and t.latency_p99_ns is None
                assert "two hosts" in t.extra["latency_why"]
            iso = f.extra["isolation"]
            assert iso["host"] == "sut" and iso["sut_cpus"] == "1" and iso["moved"]
        cfg = {s.name: s.config["remote"] for s in rdb.suts()}
        ran = cfg["turnoutd"]["ran"]
        assert any("turnout-gen tx " in x for x in ran["tester"]), ran
        assert any("turnout-gen rx " in x for x in ran["far"]), ran
        assert cfg["turnoutd"]["latency_mode"] == "cross-host"
        assert any("tc mirred" in n for n in cfg["wire"]["notes"]), cfg["wire"]["notes"]
    from turnout.report.build import build_report

    out = build_report(db, "cross", tmp_path / "report")
    mode = next(x for x in out.section("setup").tables if x.key == "remote-latency-mode")
    assert any(row[0].startswith("cross-host") for row in mode.rows), mode.rows
    nothing_left(lab, ("tester", "far", "sut"))
    assert isolation_state(lab) == iso_before, "the SUT host's isolation was not put back"


def test_host_dropping_off(lab: Lab, tmp_path: Path) -> None:
    """The SUT host drops off the network during a trial: that trial fails
    naming it, the campaign goes on to the end, and the host's agent stops
    turnoutd by itself (grace_s without a word from the controller)."""
    c = lab.campaign("drop", body(["turnoutd"], ["p2p"], duration_s=3.0, repetitions=2,
                                  methods=["fixed"]),
                     {"tester": TESTER, "sut": SUT}, WIRES)
    db = tmp_path / "drop.db"
    p = spawn(lab, c, db)
    try:
        wait_for(lab, "tester", "txrx", p)
        lab.link("sut", up=False)
        _, err = p.communicate(timeout=300)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        lab.link("sut", up=True)
    print(err[-3000:])
    assert p.returncode == 0, err
    with ResultsDB(db) as rdb:
        trials = rdb.trials("drop")
        camp = rdb.campaign("drop")
    assert camp is not None and camp.status == "done"
    for t in trials:
        print(t.repetition, t.status, t.reason)
    failed = [t for t in trials if t.status == "failed"]
    assert failed and "host sut (root@10.231.2.2:22) dropped off" in (failed[0].reason or ""), \
        [t.reason for t in trials]
    assert len(trials) == 2  # both repetitions have a row: the campaign went on
    # the agent's grace time is 4 s: by now it has stopped the run's processes
    deadline = time.monotonic() + 30
    while lab.run_procs("sut") and time.monotonic() < deadline:
        time.sleep(0.5)
    nothing_left(lab)


# serial: isolate_sut_cpus, as above
@pytest.mark.serial
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_controller_stopped_mid_trial(lab: Lab, tmp_path: Path, sig: signal.Signals) -> None:
    """Ctrl-C: every session and agent cleans up before the CLI exits;
    SIGKILL: the agents notice the connection gone and stop the run."""
    iso_before = isolation_state(lab)
    c = lab.campaign(f"stop{int(sig)}", body(["turnoutd"], ["loopback"], duration_s=3.0,
                                             repetitions=3, methods=["fixed"],
                                             isolate_sut_cpus=True),
                     {"tester": TESTER, "sut": SUT}, WIRES)
    p = spawn(lab, c, tmp_path / "stop.db")
    try:
        wait_for(lab, "tester", "txrx", p)
        assert lab.run_procs("sut"), "nothing of the run on the sut host mid-trial"
        p.send_signal(sig)
        p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    if sig == signal.SIGINT:
        assert p.returncode == 130
        nothing_left(lab)
        assert isolation_state(lab) == iso_before, "the isolation was not put back"
        return
    deadline = time.monotonic() + 60
    while (lab.run_procs("sut") or lab.run_procs("tester")) and time.monotonic() < deadline:
        time.sleep(0.5)
    nothing_left(lab)
    # the SUT host's agent put the isolation back when the controller was gone
    assert isolation_state(lab) == iso_before, "the isolation was not put back"
    # and the agent removed the run's directory on the SUT's host
    runs = lab.ssh("sut", f"ls {lab.hosts['sut'].install_dir}").split()
    assert not [r for r in runs if r.startswith("run-")], runs
