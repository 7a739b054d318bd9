"""os-ken's OpenFlow 1.3 switch test suite against turnoutd (or Open
vSwitch), the way the suite expects to be wired:

    tester app (os_ken.tests.switch.tester, 127.0.0.1:PORT)
        |                                  |
    target switch (dpid 1)            tester switch (dpid 2): an OVS bridge
      port 1 u1 ==== veth ==== t1 port 1  (sends each test's frame)
      port 2 u2 ==== veth ==== t2 port 2  (frames out of the target's port 2
      port 3 u3 ==== veth ==== t3 port 3   and 3 come back as packet-ins)

Everything in one network namespace of its own (IPv6 off, so that the
kernel sends nothing on the veths), with a private OVS (privovs.py) for the
tester bridge, and the target either turnoutd (the `flows` logic, three
af_packet ports, `datapath_id = 1`, connecting to the tester app) or a
second OVS bridge. The tester app is python/tests/turnoutd/apps/osken_switch_tester.py
under .venv-osken's Python (os-ken 4.2.2, eventlet hub), the suite's
tester.py unchanged but for one step on the tester switch (its
``steady_tester``: between tests the tester OVS bridge keeps its one flow
instead of deleting and re-adding it, which made it drop frames a fast
target sent back; and its sender counts the packets a throughput test
sends from the clock instead of from its 10 ms ticks, which a busy host
stretches, in ticks of 2 ms whose bursts the tester switch's socket
holds when the target sends them straight back: ``paced_sender``;
``--published-tester`` runs both as published). Each test of the
suite's four folders (of13/action, group, match, meter: 991 tests) is
OK or ERROR; the counts are per folder, from the test files' descriptions.
Files with errors that say more about the machine's load than about the
switch (``TIMING``: the tester's sender not keeping the rate of a
throughput test, a reply later than its 3 s wait, a table-miss counter
read before an earlier test's update) get one more try in the same lab; a
test passes if it passed in either, and both counts are printed.
Everything started is stopped by PID and the namespace deleted, also on
failure or Ctrl-C. ``--folder NAME`` (repeatable) runs only those folders
(the tester app gets a copy of just them): ``--folder group`` is the 15
group tests, ALL and SELECT groups each sending for 30 s, about 8 minutes.

As a command (the comparison, `make test-openflow-compare`):
    .venv/bin/python python/tests/turnoutd/osken_suite.py --target turnoutd --target ovs
prints each target's counts per folder and the causes of its errors, and
with --json FILE writes them. Only the group folder, against turnoutd:
    .venv/bin/python python/tests/turnoutd/osken_suite.py --folder group
python/tests/turnoutd/test_osken_suite.py runs the turnoutd target (the
whole suite) and holds it to the floor in osken_suite_floor.json.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import (
    NS_MARKS,
    REPO,
    Turnoutd,
    mark_netns,
    stop_pid,
    sweep_dead_netns,
    turnoutd_binary,
    unmark_netns,
    wait_for,
)
from privovs import PrivateOvs

FOLDERS = ("action", "group", "match", "meter")
APP = Path(__file__).resolve().parent / "apps" / "osken_switch_tester.py"
TARGET_DPID, TESTER_DPID = 1, 2
#: The longest a whole run may take before it is stopped as hung.
RUN_TIMEOUT_S = 3 * 3600.0

_RESULT = re.compile(r"^    (\S.*?)\s+(OK|ERROR)\s*$")
_REASON = re.compile(r"^        (\S.*)$")
_END = re.compile(r"^OK\((\d+)\) / ERROR\((\d+)\)")


def osken_python() -> str | None:
    """.venv-osken's Python with os-ken importable ($TURNOUT_OSKEN_PYTHON first)."""
    for c in (os.environ.get("TURNOUT_OSKEN_PYTHON"), str(REPO / ".venv-osken" / "bin" / "python")):
        if c and Path(c).is_file():
            r = subprocess.run([c, "-c", "import os_ken.tests.switch"], capture_output=True,
                               check=False)
            if r.returncode == 0:
                return c
    return None


def suite_dir(py: str) -> Path:
    """The installed suite's of13 folder."""
    r = subprocess.run([py, "-c", "import os_ken.tests.switch as t, os; "
                        "print(os.path.dirname(t.__file__))"],
                       capture_output=True, text=True, check=True)
    return Path(r.stdout.strip()) / "of13"


def folder_tests(of13: Path, folders: Sequence[str] = FOLDERS
                 ) -> dict[str, dict[str, tuple[Path, int]]]:
    """Folder -> {file description -> (file, number of tests in it)}, for
    each of ``folders``."""
    out: dict[str, dict[str, tuple[Path, int]]] = {}
    for f in folders:
        files: dict[str, tuple[Path, int]] = {}
        for p in sorted((of13 / f).rglob("*.json")):
            items = json.loads(p.read_text())
            desc = next(x for x in items if isinstance(x, str))
            files[desc] = (p, sum(1 for x in items if not isinstance(x, str)))
        out[f] = files
    return out


def chosen_folders(names: Sequence[str] | None) -> tuple[str, ...]:
    """The folders of ``names`` (all of them when None or empty) in the
    suite's order, each once; ValueError for one the suite lacks."""
    if not names:
        return FOLDERS
    unknown = sorted(set(names) - set(FOLDERS))
    if unknown:
        raise ValueError(f"no folder {', '.join(unknown)} in the suite ({', '.join(FOLDERS)})")
    return tuple(f for f in FOLDERS if f in names)


def tests_dir(of13: Path, folders: Sequence[str], dest: Path) -> Path:
    """The folder the tester app runs: ``of13`` itself for the whole suite,
    else ``dest`` made afresh with copies of just ``folders`` (the tester
    runs every JSON file under the folder it is given)."""
    if tuple(folders) == FOLDERS:
        return of13
    shutil.rmtree(dest, ignore_errors=True)
    for f in folders:
        shutil.copytree(of13 / f, dest / f)
    return dest


#: Errors that say more about the machine's load than the switch: the
#: tester's sender not keeping its rate, a reply or packet-in later than
#: the tester's wait, a counter read before an earlier test's update.
#: Files with such errors get one more try.
TIMING = re.compile(r"Received unexpected throughput|Receiving timeout|request timeout|"
                    r"Table-miss error|barrier request timeout")

#: (file description, index of the test in the file)
TestId = tuple[str, int]


def parse(log: str, files: set[str]) -> tuple[dict[TestId, str | None], bool]:
    """Each test's outcome in a tester log (None: OK, else the error's
    reason; each test line follows its file's description line), and
    whether the tester reached its report."""
    out: dict[TestId, str | None] = {}
    current: str | None = None
    index = 0
    pending: TestId | None = None
    finished = False
    for raw in log.splitlines():
        # the sender's progress dots can land at the start of the next line
        line = raw.lstrip(".")
        if pending is not None:
            m = _REASON.match(line)
            out[pending] = m[1] if m else "(no reason given)"
            pending = None
            if m:
                continue
        if not line.startswith(" ") and line.strip() in files:
            current, index = line.strip(), 0
            continue
        if _END.match(line.strip()):
            finished = True
            continue
        m = _RESULT.match(line)
        if m and current is not None:
            tid = (current, index)
            index += 1
            if m[2] == "OK":
                out[tid] = None
            else:
                out[tid] = "(no reason given)"
                pending = tid
    return out, finished


@dataclass
class Result:
    """One target's run: each test's outcome in the first pass and in the
    retry of the files whose errors were timing (None: OK, else the
    reason; a test not reported is missing), and how long it all took."""

    target: str
    tests: dict[str, dict[str, tuple[Path, int]]]
    first: dict[TestId, str | None]
    retry: dict[TestId, str | None] = field(default_factory=dict)
    seconds: float = 0.0
    finished: bool = False
    log: str = ""

    def outcome(self, t: TestId) -> str | None:
        """OK (None) if it passed in either pass; else its last reason."""
        if t in self.first and self.first[t] is None:
            return None
        if t in self.retry:
            return self.retry[t]
        return self.first.get(t, "(not run)")

    @property
    def folders(self) -> tuple[str, ...]:
        """The folders run (all four unless a run chose some)."""
        return tuple(self.tests)

    def ids(self, folder: str) -> list[TestId]:
        return [(d, i) for d, (_, n) in self.tests[folder].items() for i in range(n)]

    @property
    def passed(self) -> dict[str, int]:
        return {f: sum(1 for t in self.ids(f) if self.outcome(t) is None)
                for f in self.folders}

    @property
    def first_passed(self) -> dict[str, int]:
        return {f: sum(1 for t in self.ids(f) if self.first.get(t, "") is None)
                for f in self.folders}

    @property
    def total(self) -> dict[str, int]:
        return {f: len(self.ids(f)) for f in self.folders}

    @property
    def ok(self) -> int:
        return sum(self.passed.values())

    @property
    def all(self) -> int:
        return sum(self.total.values())

    def table(self) -> str:
        first = self.first_passed
        lines = [f"os-ken OpenFlow 1.3 switch suite, target {self.target}: "
                 f"{self.ok} / {self.all} ({sum(first.values())} in the first pass; "
                 f"{self.seconds:.0f} s{'' if self.finished else ', DID NOT FINISH'})"]
        for f in self.folders:
            lines.append(f"  {f:<7} {self.passed[f]:>4} / {self.total[f]:<4} "
                         f"(first pass {first[f]})")
        return "\n".join(lines)

    def causes(self) -> dict[str, collections.Counter[str]]:
        out: dict[str, collections.Counter[str]] = {}
        for f in self.folders:
            c: collections.Counter[str] = collections.Counter()
            for t in self.ids(f):
                why = self.outcome(t)
                if why is not None:
                    c[cause(why)] += 1
            out[f] = c
        return out

    def causes_text(self, top: int = 12) -> str:
        c: collections.Counter[str] = collections.Counter()
        for x in self.causes().values():
            c.update(x)
        return "\n".join(f"  {n:>4}  {why}" for why, n in c.most_common(top))

    def to_json(self) -> dict[str, Any]:
        return {"target": self.target, "passed": self.passed, "total": self.total,
                "first_pass": self.first_passed, "ok": self.ok, "all": self.all,
                "seconds": round(self.seconds, 1), "finished": self.finished,
                "causes": {f: dict(c.most_common()) for f, c in self.causes().items()}}


def cause(reason: str) -> str:
    """An error's reason without the flow or packet it quotes."""
    reason = re.sub(r"OFPErrorMsg\[type=0x([0-9a-f]+), code=0x([0-9a-f]+)\]",
                    lambda m: f"OFPErrorMsg[type={int(m[1], 16)}, code={int(m[2], 16)}]", reason)
    for cut in (": flow_stats(", ": group_stats(", ": meter_stats(", "Received incorrect packet: ",
                "Received incorrect packet-in: ", "Received unexpected throughput: "):
        i = reason.find(cut)
        if i >= 0:
            return reason[:i + len(cut)].rstrip(": (") + " ..."
    return reason[:160]


class SuiteLab:
    """The namespace, veths, tester OVS bridge, target and tester app of
    one run (see the module's documentation)."""

    @staticmethod
    def sweep(marks: Path = NS_MARKS) -> list[str]:
        """Deletes the namespaces of runs whose process is gone (killed
        before their close), and their marks; returns their names."""
        return sweep_dead_netns("tosk", marks)

    def __init__(self, work: Path, target: str, py: str,
                 wait_s: float | None = None, steady_tester: bool = True) -> None:
        if target not in ("turnoutd", "ovs"):
            raise ValueError(f"target {target!r}: turnoutd or ovs")
        self.work = work
        self.target = target
        self.py = py
        self.wait_s = wait_s
        self.steady_tester = steady_tester
        self.ns = f"tosk{os.getpid() % 100000}{random.randint(0, 9999):04d}"
        self.ns_made = False
        self.ovs: PrivateOvs | None = None
        self.daemon: Turnoutd | None = None
        self.app: subprocess.Popen | None = None
        self.app_log = work / "tester.log"
        self.port = random.randint(20000, 60000)

    def nx(self, *cmd: str, check: bool = True) -> subprocess.CompletedProcess:
        r = subprocess.run(["ip", "netns", "exec", self.ns, *cmd], capture_output=True,
                           text=True, timeout=60, check=False)
        if check and r.returncode != 0:
            raise AssertionError(f"{' '.join(cmd)} -> {r.returncode}: {r.stderr.strip()}")
        return r

    def setup(self, tests_dir: Path, log: Path) -> None:
        """The namespace and veths, the tester app on ``tests_dir``, the
        tester switch and the target, connected to the app."""
        self.sweep()
        mark_netns(self.ns)
        subprocess.run(["ip", "netns", "add", self.ns], check=True, capture_output=True)
        self.ns_made = True
        for k in ("all", "default"):
            self.nx("sysctl", "-qw", f"net.ipv6.conf.{k}.disable_ipv6=1")
        self.nx("ip", "link", "set", "lo", "up")
        for i in (1, 2, 3):
            self.nx("ip", "link", "add", f"t{i}", "type", "veth", "peer", "name", f"u{i}")
            for dev in (f"t{i}", f"u{i}"):
                self.nx("ethtool", "-K", dev, "tx", "off", "tso", "off", "gso", "off", "gro",
                        "off", "rxvlan", "off", "txvlan", "off", check=False)
                self.nx("ip", "link", "set", dev, "up")
        # The tester app first: both switches connect to it.
        self.start_app(tests_dir, log)
        ctl = f"tcp:127.0.0.1:{self.port}"
        self.ovs = PrivateOvs(self.work / "ovs", self.ns).start()
        self.ovs.add_bridge("tester", TESTER_DPID, ["t1", "t2", "t3"], ctl)
        if self.target == "ovs":
            self.ovs.add_bridge("target", TARGET_DPID, ["u1", "u2", "u3"], ctl)
        else:
            config = ('[switch]\ncontrol_socket = "@CTL@"\n'
                      f'openflow = ["{ctl}"]\ndatapath_id = {TARGET_DPID}\n\n'
                      '[logic]\nname = "flows"\n\n')
            for i in (1, 2, 3):
                config += f'[[ports]]\nname = "u{i}"\nkind = "af_packet"\niface = "u{i}"\n\n'
            self.daemon = Turnoutd(self.work / "turnoutd", config, binary=turnoutd_binary(),
                                   netns=self.ns).start()

    def start_app(self, tests_dir: Path, log: Path) -> None:
        """The tester app on the tests of ``tests_dir``, logging to ``log``
        (the switches, once set up, reconnect to it by themselves)."""
        self.app_log = log
        env = dict(os.environ, OSKEN_HUB_TYPE="eventlet")
        args = [self.py, str(APP), "--host", "127.0.0.1", "--port", str(self.port),
                "--target", f"{TARGET_DPID:016x}", "--tester", f"{TESTER_DPID:016x}",
                "--dir", str(tests_dir)]
        if self.wait_s is not None:
            args += ["--wait-s", str(self.wait_s)]
        if self.steady_tester:
            args += ["--keep-tester-flow", "--paced-sender"]
        out = open(log, "wb")  # noqa: SIM115 - lives with the process
        self.app = subprocess.Popen(["ip", "netns", "exec", self.ns, *args], stdout=out,
                                    stderr=subprocess.STDOUT, env=env)
        out.close()
        wait_for("the tester app listening", 60, self._listening, every_s=0.2)

    def _listening(self) -> bool:
        if self.app is not None and self.app.poll() is not None:
            raise AssertionError(f"the tester app exited with {self.app.returncode}: "
                                 f"{self.app_log.read_text(errors='replace')[-2000:]}")
        return f":{self.port} " in self.nx("ss", "-ltn").stdout

    def wait_app(self, timeout_s: float = RUN_TIMEOUT_S, progress: bool = False) -> str:
        """Waits for the tester to finish (it ends its own process after
        its report; stopped after ``timeout_s``); its log."""
        assert self.app is not None
        end = time.monotonic() + timeout_s
        seen = 0
        while self.app.poll() is None and time.monotonic() < end:
            time.sleep(1)
            if progress:
                text = self.app_log.read_text(errors="replace")
                n = sum(1 for x in text.splitlines() if _RESULT.match(x.lstrip(".")))
                if n // 100 > seen // 100:
                    print(f"  {self.target}: {n} tests run", file=sys.stderr, flush=True)
                seen = n
        stop_pid(self.app)
        self.app = None
        return self.app_log.read_text(errors="replace")

    def close(self) -> None:
        """Ends what it started and deletes the namespace, also when
        ending one of them fails (that failure is raised afterwards)."""
        try:
            if self.app is not None:
                app, self.app = self.app, None
                stop_pid(app)
            if self.daemon is not None:
                daemon, self.daemon = self.daemon, None
                daemon.stop()
            if self.ovs is not None:
                ovs, self.ovs = self.ovs, None
                ovs.stop()
        finally:
            if self.ns_made:
                self.ns_made = False
                end = time.monotonic() + 10
                while subprocess.run(["ip", "netns", "del", self.ns], check=False,
                                     capture_output=True).returncode != 0:
                    if self.ns not in subprocess.run(["ip", "netns", "list"],
                                                     capture_output=True, text=True).stdout:
                        break
                    if time.monotonic() > end:
                        raise AssertionError(f"namespace {self.ns} could not be deleted")
                    time.sleep(0.2)
            unmark_netns(self.ns)


def run_suite(work: Path, target: str, wait_s: float | None = None,
              progress: bool = False, steady_tester: bool = True,
              retry: bool = True, folders: Sequence[str] = FOLDERS) -> Result:
    """One run of the suite's ``folders`` (all four by default) against
    ``target``, then (``retry``) one more of the files that had timing
    errors (``TIMING``); everything it started is gone when it returns or
    raises."""
    folders = chosen_folders(folders)
    py = osken_python()
    if py is None:
        raise RuntimeError("os-ken is not installed (scripts/setup.sh: .venv-osken)")
    of13 = suite_dir(py)
    tests = folder_tests(of13, folders)
    descs = {d for files in tests.values() for d in files}
    work.mkdir(parents=True, exist_ok=True)
    lab = SuiteLab(work, target, py, wait_s, steady_tester)
    t0 = time.monotonic()
    try:
        lab.setup(tests_dir(of13, folders, work / "suite"), work / "tester.log")
        log = lab.wait_app(progress=progress)
        first, finished = parse(log, descs)
        r = Result(target, tests, first, finished=finished, log=log)
        again = sorted({d for (d, _), why in first.items() if why and TIMING.search(why)})
        if retry and again and finished:
            rdir = work / "retry"
            shutil.rmtree(rdir, ignore_errors=True)
            for f, files in tests.items():
                for d in again:
                    if d in files:
                        src = files[d][0]
                        dst = rdir / f / src.name
                        dst.parent.mkdir(parents=True, exist_ok=True)
                        shutil.copyfile(src, dst)
            if progress:
                print(f"  {target}: trying {len(again)} files again", file=sys.stderr,
                      flush=True)
            lab.start_app(rdir, work / "tester-retry.log")
            rlog = lab.wait_app()
            r.retry, rdone = parse(rlog, set(again))
            r.finished = r.finished and rdone
            r.log += "\n--- retry ---\n" + rlog
    finally:
        lab.close()
    r.seconds = time.monotonic() - t0
    return r


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--target", action="append", choices=["turnoutd", "ovs"],
                   help="switch under test (repeat for both; default turnoutd)")
    p.add_argument("--folder", action="append", choices=FOLDERS,
                   help="run only this folder of the suite (repeat for more; default all: "
                        "action 226, group 15, match 714, meter 36 tests)")
    p.add_argument("--work", type=Path, default=None, help="directory for logs")
    p.add_argument("--wait-s", type=float, default=None,
                   help="the tester's wait for each reply (3 s as published)")
    p.add_argument("--json", type=Path, default=None, help="write the results here")
    p.add_argument("--no-retry", action="store_true",
                   help="no second try of the files whose errors were timing")
    p.add_argument("--published-tester", action="store_true",
                   help="initialise the tester switch and send throughput tests' frames as "
                        "the suite does (its OVS then drops some frames a fast target sends "
                        "back, its sender falls behind its rate on a busy host; see "
                        "apps/osken_switch_tester.py, steady_tester and paced_sender)")
    a = p.parse_args()
    if os.geteuid() != 0:
        print("osken_suite: needs root (network namespaces)", file=sys.stderr)
        return 2
    work = a.work or Path(f"/tmp/turnout-osken-{os.getpid()}")
    folders = chosen_folders(a.folder)
    results = []
    for t in a.target or ["turnoutd"]:
        r = run_suite(work / t, t, a.wait_s, progress=True,
                      steady_tester=not a.published_tester, retry=not a.no_retry,
                      folders=folders)
        results.append(r)
        print(r.table())
        print("  errors by cause:")
        print(r.causes_text())
        print(f"  tester logs: {work / t}/tester*.log", flush=True)
    if len(results) > 1:
        print("per folder: " + ", ".join(
            f"{f} " + " / ".join(f"{r.target} {r.passed[f]}" for r in results)
            for f in folders))
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps([r.to_json() for r in results], indent=1) + "\n")
    return 0 if all(r.finished for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
