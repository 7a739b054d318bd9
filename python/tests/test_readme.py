"""Every command of README.md's "Using the pieces" block, as a new user runs
it, and a check that each did what its comment says.

The block is read from README.md, so the test follows the README: a line
added there without a check here fails ``test_every_readme_command_has_a_check``.
The commands run one after the other, as written (the text of each line is
given to ``bash -c``), from a sandbox directory whose ``target``, ``docs``,
``campaigns`` and ``.venv`` are the checkout's and whose ``results/`` is its
own, inside namespaces of their own (``unshare``: mount, network and PID): a
private tmpfs on ``/run``, so the example's ``/run/turnout`` is this test's
alone (turnoutd creates it) and other engineers' turnoutd instances, netns
and veths are never touched; when the test ends, the PID namespace's init
is killed and everything started in it goes with it.

Run as written, for real: turnoutd (kept running, in the foreground, until
the end), ``turnout ctl stats --watch`` (until its first report, then Ctrl-C),
turnout-gen ``txrx`` (on a pseudo-terminal, as a user sees its summary),
``system check``, ``bench run campaigns/smoke.toml`` (< 1 min), ``bench list``,
``report`` and ``compare``.

Not run in full, and why:

- ``bench run campaigns/update.toml``: with ``--dry-run`` appended. It starts
  every SUT with rules, OVS-DPDK with hugepages included, for about a
  minute on 2 cores; what it measures is tested by
  ``python/tests/test_update_system.py``. The dry run checks that the file and
  the command line are valid and name the trials the comment promises.
- ``make bench-*``: ``make -n`` (print the recipe, run nothing). They take
  from minutes (criterion benches) to 2.5 hours, and most need a quiet
  machine; the check is that the target exists, its recipe names what the
  comment says, and every campaign file and script it names exists (each
  campaign also passes ``turnout bench run FILE --dry-run``).
"""

from __future__ import annotations

import contextlib
import json
import os
import pty
import re
import select
import shlex
import signal
import sqlite3
import subprocess
import time
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import needs_root
from turnout import testpeers
from turnout.build import BIN_DIR
from turnout.measure.gen import REPO

README = REPO / "README.md"
RELEASE = BIN_DIR


@dataclass
class Cmd:
    """One command of the block: its text as written (continuation lines
    joined), its words, and what its comment says it does."""

    text: str
    argv: list[str]
    comment: str


def readme_commands(readme: str | None = None) -> list[Cmd]:
    """The commands of the first code block after "## Using the pieces". A
    comment is a line of its own before the command, or the end of its line."""
    text = README.read_text() if readme is None else readme
    section = text.split("## Using the pieces", 1)[1]
    block = section.split("```", 2)[1].split("\n", 1)[1]
    cmds: list[Cmd] = []
    comment: list[str] = []
    pending = ""
    for raw in block.splitlines():
        line = raw.strip()
        if not line:
            continue
        if not pending and line.startswith("#"):
            comment.append(line.lstrip("# "))
            continue
        if line.endswith("\\"):
            pending += line[:-1].strip() + " "
            continue
        line = pending + line
        pending = ""
        m = re.search(r"\s#\s", line)
        cmd_text, tail = (line[:m.start()].strip(), line[m.end():].strip()) if m else (line, "")
        cmds.append(Cmd(cmd_text, shlex.split(cmd_text), " ".join([*comment, tail]).strip()))
        comment = []
    return cmds


def test_the_readme_block_parses_as_the_user_reads_it():
    cmds = readme_commands()
    assert cmds[0].argv == ["target/release/turnoutd", "--config", "docs/examples/turnoutd.toml"]
    assert "foreground" in cmds[0].comment
    gen = next(c for c in cmds if c.argv[0].endswith("turnout-gen"))
    assert "--rx-port" in gen.argv, "the turnout-gen line must receive through the switch"
    assert all(c.comment for c in cmds), [c.text for c in cmds if not c.comment]
    sample = "```\n# one\n# two\na b \\\n   c  # three\nd 'e f'\n```\n"
    assert readme_commands("## Using the pieces\n" + sample) == [
        Cmd("a b c", ["a", "b", "c"], "one two three"), Cmd("d 'e f'", ["d", "e f"], "")]


# ----------------------------------------------------------------- sandbox


class Sandbox:
    """Mount, network and PID namespaces of this test, with a private /run,
    and a directory that looks like the checkout (results/ its own)."""

    def __init__(self, root: Path) -> None:
        self.dir = root / "checkout"
        self.dir.mkdir()
        for name in ("docs", "campaigns", ".venv", "python", "scripts", "Makefile"):
            (self.dir / name).symlink_to(REPO / name)
        # target/release, as the README writes it, is this run's build
        # (turnout.build: `make test` runs its own profile's binaries).
        (self.dir / "target").mkdir()
        for entry in (REPO / "target").iterdir():
            if entry.name != "release":
                (self.dir / "target" / entry.name).symlink_to(entry)
        (self.dir / "target" / "release").symlink_to(BIN_DIR)
        # A private /run (tmpfs), lo up, and a /proc of the new PID
        # namespace; its init sleeps until the test kills it, and with it
        # every process started in the namespaces.
        self.holder = subprocess.Popen(
            ["unshare", "--fork", "--pid", "--mount-proc", "--kill-child", "--mount",
             "--propagation", "private", "--net", "--", "bash", "-c",
             "mount -t tmpfs -o mode=755 tmpfs /run && ip link set lo up && echo ready "
             "&& exec sleep infinity"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert self.holder.stdout is not None
        ready = self.holder.stdout.readline().strip()
        if ready != "ready":
            err = self.holder.stderr.read() if self.holder.stderr else ""
            raise AssertionError(f"the sandbox did not start: {ready!r} {err}")
        children = Path(f"/proc/{self.holder.pid}/task/{self.holder.pid}/children").read_text()
        self.init = int(children.split()[0])
        env = {k: v for k, v in os.environ.items()
               if k != "TURNOUT_CTL_SOCKET" and not k.startswith("CNI_")}
        self.env = env

    def argv(self, text: str) -> list[str]:
        """`text` run by bash inside the namespaces, from the sandbox's checkout."""
        return ["nsenter", "-t", str(self.init), "-m", "-n", "-p", f"--wd={self.dir}",
                "bash", "-c", text]

    def run(self, text: str, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.argv(text), capture_output=True, text=True, env=self.env,
                              timeout=timeout_s)

    def start(self, text: str, **kw: object) -> subprocess.Popen[str]:
        """In a session of its own, so Ctrl-C (SIGINT to the group) reaches it."""
        return subprocess.Popen(self.argv(text), text=True, env=self.env,
                                start_new_session=True, **kw)

    def close(self) -> None:
        self.holder.kill()  # --kill-child: the namespace's init, and all in it
        self.holder.wait(timeout=30)


def ctrl_c(p: subprocess.Popen[str], timeout_s: float = 30) -> int:
    """Ctrl-C for a command started with `Sandbox.start`: SIGINT to the
    command (nsenter's child: bash -c of one command execs it); nsenter
    then exits with its status."""
    children = Path(f"/proc/{p.pid}/task/{p.pid}/children").read_text().split()
    assert children, "the command is not running"
    for child in children:
        os.kill(int(child), signal.SIGINT)
    return p.wait(timeout=timeout_s)


def wait_for(what: str, timeout_s: float, check: Callable[[], object]) -> object:
    deadline = time.monotonic() + timeout_s
    while True:
        got = check()
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def on_a_terminal(sb: Sandbox, text: str, timeout_s: float) -> tuple[int, str]:
    """Runs `text` with its stdout on a pseudo-terminal; (exit code, what it showed)."""
    master, slave = pty.openpty()
    p = sb.start(text, stdout=slave, stderr=subprocess.PIPE)
    os.close(slave)
    out = b""
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            r, _, _ = select.select([master], [], [], 0.5)
            if r:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: the other side is closed
                    break
                if not chunk:
                    break
                out += chunk
            elif p.poll() is not None:
                break
        rc = p.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        os.close(master)
    err = p.stderr.read() if p.stderr else ""
    return rc, out.decode(errors="replace").replace("\r", "") + err


# ------------------------------------------------------------------ checks


class Session:
    """The README's commands, run in order in one sandbox, with what each
    left behind for the next (turnoutd runs from the first to the end)."""

    def __init__(self, sb: Sandbox) -> None:
        self.sb = sb
        self.daemon: subprocess.Popen[str] | None = None

    def ctl_json(self, *args: str) -> object:
        r = self.sb.run(".venv/bin/turnout ctl --json " + " ".join(args))
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    # target/release/turnoutd --config docs/examples/turnoutd.toml
    def turnoutd(self, c: Cmd) -> None:
        assert self.sb.run("test -e /run/turnout").returncode == 1, "/run/turnout pre-exists"
        self.daemon = self.sb.start(c.text, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

        def ports() -> object:
            assert self.daemon is not None
            assert self.daemon.poll() is None, \
                f"turnoutd exited: {self.daemon.stderr.read() if self.daemon.stderr else ''}"
            r = self.sb.run(".venv/bin/turnout ctl --json ports")
            return json.loads(r.stdout) if r.returncode == 0 else None

        got = wait_for("turnoutd's control socket", 60, ports)
        # a learning bridge between two memif ports vnf0 (id 0) and vnf1 (id 1)
        assert [(p["id"], p["name"], p["kind"]) for p in got] == [
            (0, "vnf0", "memif"), (1, "vnf1", "memif")], got
        assert self.ctl_json("logic", "show")["name"] == "bridge"
        # it created /run/turnout, and stays in the foreground: still running
        assert self.sb.run("test -S /run/turnout/memif.sock").returncode == 0
        time.sleep(0.5)
        assert self.daemon.poll() is None, "turnoutd did not stay in the foreground"

    # .venv/bin/turnout ctl stats --watch
    def watch(self, c: Cmd) -> None:
        p = self.sb.start(c.text, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert p.stdout is not None
        lines: list[str] = []

        def reported() -> bool:
            r, _, _ = select.select([p.stdout], [], [], 0.5)
            if r:
                line = p.stdout.readline()
                assert line or p.poll() is None, f"--watch ended: {lines}"
                lines.append(line.rstrip())
            text = "\n".join(lines)
            return "vnf1" in text and "wake-up policy" in text

        try:
            wait_for("a report of --watch", 60, reported)
        finally:
            rc = ctrl_c(p)
        text = "\n".join(lines)
        assert rc == 0, (rc, text, p.stderr.read() if p.stderr else "")
        # pps, bps and drops per port, worker CPU, every second
        assert re.search(r"^-- \d\d:\d\d:\d\d \(every 1 s, Ctrl-C to stop\)", text, re.M), text
        for word in ("rx_pps", "tx_bps", "drops/s", "vnf0", "vnf1", "worker", "cpu_%"):
            assert word in text, (word, text)

    # target/release/turnout-gen txrx --port ...,id=0 --rx-port ...,id=1 ...
    def gen(self, c: Cmd) -> None:
        before = {p["name"]: p for p in self.ctl_json("stats")["ports"]}
        rc, out = on_a_terminal(self.sb, c.text, 120)
        assert rc == 0, out
        # prints sent, received, lost, latency (a summary on a terminal)
        assert out.startswith("turnout-gen txrx: memif:/run/turnout/memif.sock -> "
                              "memif:/run/turnout/memif.sock,id=1, 64 B frames"), out

        def n(word: str) -> int:
            m = re.search(rf"^  {word}\s+([\d ]+?)(?: frames|$)", out, re.M)
            assert m, (word, out)
            return int(m.group(1).replace(" ", ""))

        sent, received, lost = n("sent"), n("received"), n("lost")
        assert re.search(r"sent .* in 5\.\d\d s, .* \(asked 1\.00 Mpps\)", out), out
        assert received > 0, out
        assert received + lost == sent, out
        assert re.search(r"^  latency   p50 .+, p99 .+, max .+", out, re.M), out
        assert "{" not in out, "JSON on a terminal"
        # into vnf0 and out of vnf1, through the bridge
        after = {p["name"]: p for p in self.ctl_json("stats")["ports"]}
        assert after["vnf0"]["rx_packets"] - before["vnf0"]["rx_packets"] >= sent
        assert after["vnf1"]["tx_packets"] - before["vnf1"]["tx_packets"] >= received

    # .venv/bin/turnout system check
    def system_check(self, c: Cmd) -> None:
        r = self.sb.run(c.text)
        assert r.returncode == 0, r.stdout + r.stderr
        # what on this host will skew results: one verdict per check
        checks = [ln.split()[:2] for ln in r.stdout.splitlines() if ln[:1].isalpha()]
        assert {"load", "pinning", "software"} <= {c[1] for c in checks if len(c) == 2}, r.stdout
        assert "results are stamped with the host state" in r.stdout

    # .venv/bin/turnout bench run campaigns/smoke.toml --db results/smoke.db
    def smoke(self, c: Cmd) -> None:
        r = self.sb.run(c.text, timeout_s=1200)
        assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
        db = sqlite3.connect(self.sb.dir / "results" / "smoke.db")
        try:
            assert db.execute("SELECT name, status FROM campaigns").fetchall() == [
                ("smoke", "done")]
            # the wire and the Linux bridge, p2p
            rows = db.execute("SELECT DISTINCT sut, scenario FROM trials WHERE status = 'ok'")
            assert set(rows.fetchall()) == {("wire", "p2p"), ("bridge", "p2p")}
        finally:
            db.close()

    # .venv/bin/turnout bench list --db results/smoke.db
    def bench_list(self, c: Cmd) -> None:
        r = self.sb.run(c.text)
        assert r.returncode == 0, r.stderr
        rows = [ln.split() for ln in r.stdout.splitlines()]
        assert rows[0][:3] == ["id", "name", "status"] and rows[1][:3] == ["1", "smoke", "done"]

    # .venv/bin/turnout report --db results/smoke.db -o results/smoke-report
    def report(self, c: Cmd) -> None:
        r = self.sb.run(c.text, timeout_s=600)
        assert r.returncode == 0, r.stdout + r.stderr
        page = self.sb.dir / "results" / "smoke-report" / "index.html"
        assert page.is_file() and "smoke" in page.read_text()
        # writes index.html, prints the verdict
        assert f"report: {page.resolve()}" in r.stdout, r.stdout
        assert "verdict" in r.stdout.lower(), r.stdout

    # .venv/bin/turnout compare 1 smoke --db results/smoke.db
    def compare(self, c: Cmd) -> None:
        r = self.sb.run(c.text, timeout_s=300)
        assert r.returncode == 0, r.stdout + r.stderr
        # run 1 against the latest smoke run (the same one here: no change)
        assert r.stdout.startswith("A = smoke (run 1)   B = smoke (run 1)\n"), r.stdout
        assert "regression" not in r.stdout.lower().split("verdict:")[0], r.stdout

    # .venv/bin/turnout bench run campaigns/update.toml --db results/update.db
    def update(self, c: Cmd) -> None:
        # --dry-run: see the module's docstring
        r = self.sb.run(c.text + " --dry-run")
        assert r.returncode == 0, r.stdout + r.stderr
        lines = r.stdout.splitlines()
        # rule-update time under traffic, every SUT with rules
        assert lines and all("rule_update" in ln for ln in lines[:-1]), r.stdout
        assert {ln.split()[0] for ln in lines[:-1]} == {"turnoutd", "bridge", "ovs", "ovs-dpdk"}
        assert lines[-1].endswith("work items")

    # make bench-... (make -n: see the module's docstring)
    def make(self, c: Cmd) -> None:
        r = subprocess.run(["make", "-n", *c.argv[1:]], cwd=REPO, capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 0, r.stdout + r.stderr
        recipe = r.stdout
        target = c.argv[1]
        expect = {
            "bench-rust": ["cargo bench -p fabric --bench fabric --features bench",
                           "cargo bench -p logic --bench logics --features bench",
                           "cargo bench -p logic --bench flows --features bench",
                           "cargo bench -p ports --bench tunnel --features bench"],
            "bench-wakeup": ["scripts/bench/bench_wakeup.py"],
            "bench-latency": ["campaigns/latency.toml"],
            "bench-overlay": ["campaigns/overlay.toml"],
            "bench-flows": ["campaigns/flows.toml"],
            "bench-flows-full": ["campaigns/flows-full.toml"],
            "bench-ab": ["scripts/bench-ab.sh main~1"],
        }[target]
        for want in expect:
            assert want in recipe, (target, want, recipe)
        # what the comment names is what the recipe runs
        for named in re.findall(r"campaigns/[\w.-]+\.toml", c.comment):
            assert named in recipe, (named, recipe)
        for path in sorted(set(re.findall(r"(?:campaigns|scripts|tests)/[\w./-]+", recipe))):
            assert (REPO / path).exists(), (target, path)
            if path.startswith("campaigns/"):
                d = self.sb.run(f".venv/bin/turnout bench run {path} --dry-run")
                assert d.returncode == 0 and d.stdout.rstrip().endswith("work items"), \
                    (path, d.stdout[-500:], d.stderr)

    def checks(self) -> list[tuple[Callable[[Cmd], bool], Callable[[Cmd], None]]]:
        def words(*w: str) -> Callable[[Cmd], bool]:
            return lambda c: tuple(c.argv[:len(w)]) == w

        t = ".venv/bin/turnout"
        return [
            (words("target/release/turnoutd", "--config"), self.turnoutd),
            (words(t, "ctl", "stats", "--watch"), self.watch),
            (words("target/release/turnout-gen", "txrx"), self.gen),
            (words(t, "system", "check"), self.system_check),
            (words(t, "bench", "run", "campaigns/smoke.toml"), self.smoke),
            (words(t, "bench", "list"), self.bench_list),
            (words(t, "report"), self.report),
            (words(t, "compare"), self.compare),
            (words(t, "bench", "run", "campaigns/update.toml"), self.update),
            (words("make"), self.make),
        ]

    def check_of(self, c: Cmd) -> Callable[[Cmd], None] | None:
        return next((f for match, f in self.checks() if match(c)), None)


def test_every_readme_command_has_a_check():
    s = Session.__new__(Session)
    missing = [c.text for c in readme_commands() if s.check_of(c) is None]
    assert not missing, f"README commands this test does not know how to check: {missing}"


@pytest.fixture
def sandbox(tmp_path: Path) -> Iterator[Sandbox]:
    testpeers.need_root()
    for binary in ("turnoutd", "turnout-gen"):
        testpeers.need((RELEASE / binary).is_file(),
                       f"{RELEASE / binary} not built (scripts/setup.sh)")
    sb = Sandbox(tmp_path)
    try:
        yield sb
    finally:
        sb.close()


@needs_root
@pytest.mark.system
def test_every_command_of_the_readme_as_written(sandbox: Sandbox):
    s = Session(sandbox)
    cmds = readme_commands()
    try:
        for c in cmds:
            check = s.check_of(c)
            assert check is not None, c.text
            check(c)
        # Ctrl-C ends turnoutd: exit 0, its sockets removed
        assert s.daemon is not None
        rc = ctrl_c(s.daemon)
        err = s.daemon.stderr.read() if s.daemon.stderr else ""
        assert rc == 0, err[-2000:]
        assert sandbox.run("ls -A /run/turnout").stdout == "", "sockets left behind"
    finally:
        if s.daemon is not None and s.daemon.poll() is None:
            os.killpg(s.daemon.pid, signal.SIGKILL)
            s.daemon.wait(timeout=30)


# ------------------------------------------------- the examples on one CPU


class OneCpu:
    """A cpuset cgroup holding CPU 0 alone: what runs in it sees a one-CPU
    host (`nproc` 1; pinning to another CPU fails). cgroup v2, or v1's
    cpuset hierarchy."""

    def __init__(self, name: str) -> None:
        v2, v1 = Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/cpuset")
        if "cpuset" in _read(v2 / "cgroup.controllers"):
            with contextlib.suppress(OSError):
                (v2 / "cgroup.subtree_control").write_text("+cpuset")
            self.dir = v2 / name
        elif (v1 / "cpuset.cpus").exists():
            self.dir = v1 / name
        else:
            testpeers.need(False, "no cpuset cgroup (v1 or v2) on this host")
        self.dir.mkdir()
        (self.dir / "cpuset.cpus").write_text("0")
        if (self.dir / "cpuset.mems").exists() and not _read(self.dir / "cpuset.mems").strip():
            (self.dir / "cpuset.mems").write_text(_read(self.dir.parent / "cpuset.mems"))

    def enter(self) -> str:
        """Shell words that move the shell running them into the cgroup."""
        return f"echo $$ > {self.dir}/cgroup.procs"

    def close(self) -> None:
        deadline = time.monotonic() + 10
        while True:  # empty once the processes that ran in it are gone
            try:
                self.dir.rmdir()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)


def _read(p: Path) -> str:
    try:
        return p.read_text()
    except OSError:
        return ""


@needs_root
@pytest.mark.system
@pytest.mark.parametrize("example", ["turnoutd.toml", "flows.toml", "vxlan.toml"])
def test_the_examples_run_on_a_one_cpu_host(sandbox: Sandbox, example: str):
    """Each docs/examples file starts turnoutd with every port of the file on
    a host of one CPU, with no warning about a CPU it cannot use; the same
    file with `[[workers]] cpu = 1` (as the examples had) does warn."""
    path = REPO / "docs" / "examples" / example
    names = [p["name"] for p in tomllib.loads(path.read_text())["ports"]]
    # the interfaces vxlan.toml's ports open, in the sandbox's network namespace
    for a in ("eth1", "veth-pod0", "veth-pod1"):
        r = sandbox.run(f"ip link add {a} type veth peer name {a}p && ip link set {a} up "
                        f"&& ip link set {a}p up")
        assert r.returncode == 0, r.stderr
    cg = OneCpu(f"turnout-onecpu-{os.getpid()}")
    try:
        pinned = sandbox.dir / "pinned.toml"
        pinned.write_text(path.read_text() + "\n[[workers]]\ncpu = 1\n")
        for config, warns in ((f"docs/examples/{example}", False), (pinned.name, True)):
            d = sandbox.start(f"{cg.enter()} && test $(nproc) = 1 && "
                              f"exec target/release/turnoutd --config {config}",
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            try:
                def up(d: subprocess.Popen[str] = d) -> object:
                    assert d.poll() is None, d.stderr.read() if d.stderr else ""
                    r = sandbox.run(".venv/bin/turnout ctl --json ports")
                    return r.returncode == 0 and [p["name"] for p in json.loads(r.stdout)]

                assert wait_for(f"turnoutd with {config}", 60, up) == names
            finally:
                rc = ctrl_c(d)
            log = d.stderr.read() if d.stderr else ""
            assert rc == 0, log[-2000:]
            said = "a worker's cpu is not one this process may run on" in log
            assert said == warns, (config, log[-2000:])
    finally:
        cg.close()
