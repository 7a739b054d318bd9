#!/usr/bin/env python3
"""`make test`: every step of the test suite, timed, run to the end.

Each step runs even when an earlier one failed (a Rust failure must not hide
the Python results); the run ends with the time of each step, the ten
slowest tests and one list of every failure, and exits 1 if anything failed.
The steps, how they are split and the time budget: docs/testing.md.

    scripts/test.py                 # every step (lanes, then the serial tests)
    scripts/test.py rust python     # only these steps (names as --list prints)
    scripts/test.py --list          # the steps
    scripts/test.py --serial        # one step at a time, one test tree at a time

Standard library only: the first step installs everything else. Every
step's whole output goes to target/test-logs/STEP.log.

By default, after `setup`, the steps run in three lanes at once (LANES):
the test build, then the tests without peers; the Rust system tests,
each executable's as soon as cargo has linked it and its package's
binaries (beside the rest of the build), then clippy; the Python system
tests, in three runs at once (the SUT adapters' file, the rest of the
workbench's, the turnoutd tree). The system tests mostly wait (on
namespaces, daemons, traffic at a set rate, timeouts), so they share the
two CPUs with the compiler and with each other; each waits for the event it checks with a
deadline, and what cannot share (hugepages) takes a lock. The test build
runs at normal priority (the system tests wait for its executables);
clippy, the doc tests and mypy at a lower one (`nice`), so a system
test's threads get the CPU before them when they wake. The Python
system tests that measure (rates with a loss bound, timing, CPU
accounting) or change the whole machine (CPU
isolation) carry the pytest marker `serial`: they run last, in the step
`python-serial`, alone, once every lane has ended (ALONE). The terminal
shows each lane's lines prefixed with its step; each step's log is whole.
With `--serial` every step runs alone, in the order --list prints.

The Rust test executables are started here, not through `cargo test`, so
that each test's time is known: `cargo test --profile test-release
--tests --no-run` builds them (not the examples: clippy checks that they
compile), then each runs with libtest's JSON report
(`-Z unstable-options --format json --report-time`, which stable libtest
accepts under `RUSTC_BOOTSTRAP=1`: set for the test processes only, never
for the compiler), in its package's directory as cargo would. Tests marked
`#[ignore = "system: ..."]` run in their own step, one at a time; other
ignored tests (measurements run by hand) are not run.

The binaries the Python system tests run are the tests' profile's
(TURNOUT_PROFILE=test-release, set here): `setup` builds them, and the
test build then compiles only the test executables (docs/testing.md).
Without `setup`, a run with a Python system step builds them first (the
step `binaries`).

Ctrl-C reaches the tests' children: a shell that starts this script in
the background (`cmd &` without job control) hands it SIGINT ignored,
which every child would inherit, and the tests that stop a command with
SIGINT (`turnout ctl stats --watch`, a campaign) would wait for nothing;
so the default action is put back first.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

ROOT = Path(__file__).resolve().parent.parent
LOGS = ROOT / "target" / "test-logs"
PY = ROOT / ".venv" / "bin"
#: The cargo profile of the tests' build (Cargo.toml: release without LTO).
PROFILE = "test-release"
#: The reason of a Rust system test's mark: `#[ignore = "system: ..."]`.
SYSTEM_PREFIX = "system:"
#: The package whose single test replays the fuzz corpora (its own step).
FUZZ_PACKAGE = "fuzzreplay"
#: Clippy, the doc tests and mypy run under `nice -n NICE` while system tests
#: run beside them.
NICE = ["nice", "-n", "5"]

_PRINT = threading.Lock()
_LANE = threading.local()
#: One step at a time, one test tree at a time (`--serial`; the default
#: runs the lanes at once, then ALONE).
SERIAL = False
#: The pytest marker of the Python system tests that run alone (conftest.py
#: of each tree; docs/testing.md says which and why).
SERIAL_MARK = "serial"


@dataclass
class Outcome:
    """What a step found: failures (one line each; details in its log) and
    the time of each test it ran."""

    failures: list[str] = field(default_factory=list)
    tests: list[tuple[float, str]] = field(default_factory=list)


def say(text: str) -> None:
    """Text to the terminal, each line prefixed with the lane's step when
    lanes run at once."""
    tag = getattr(_LANE, "tag", "")
    if tag:
        text = "".join(f"{tag:>13} | {ln}\n" for ln in text.splitlines())
    elif not text.endswith("\n"):
        text += "\n"
    with _PRINT:
        sys.stdout.write(text)
        sys.stdout.flush()


def echo(log: TextIO, line: str) -> None:
    """A line to the terminal and the step's log."""
    say(line)
    log.write(line + "\n")
    log.flush()


def excerpt(text: str, lines: int = 8, width: int = 240) -> str:
    """The head of a failure's message for the run's summary (the whole of
    it is in the step's log): so that a CI excerpt that shows only the end
    of the output still says why."""
    kept = [ln[:width] for ln in text.strip().splitlines()[:lines]]
    return "\n".join(kept)


def run(cmd: list[str], log: TextIO, out: Outcome, what: str = "",
        ok: tuple[int, ...] = (0,)) -> int:
    """Runs `cmd` in the checkout, its output streamed to the terminal and
    the log; an exit status not in `ok` is a failure named `what` (else the
    command)."""
    echo(log, "+ " + " ".join(cmd))
    p = subprocess.Popen(
        cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        errors="replace",
    )
    assert p.stdout is not None
    for line in p.stdout:
        say(line)
        log.write(line)
    p.wait()
    if p.returncode not in ok:
        out.failures.append(f"{what or ' '.join(cmd)}: exit {p.returncode}")
    return p.returncode


# --- Rust ---------------------------------------------------------------------------


@dataclass
class TestBinary:
    """One test executable cargo built, named by its source file, and the
    package directory cargo runs it in."""

    label: str
    path: str
    cwd: Path


#: The executables of the run's test build, in the order cargo reported
#: them; _BUILT guards them and is notified at each one and at the end.
_BINARIES: list[TestBinary] = []
_BUILD = threading.Lock()
_BUILT = threading.Condition()
_BUILD_STARTED = False
_BUILD_DONE = False
#: The `rust-build` step builds the tests beside `rust-system` (lanes): the
#: system tests then start on each executable as soon as cargo has linked
#: it, while the rest of the workspace still compiles.
BUILD_STEP_BESIDE = False


def test_binaries(log: TextIO, out: Outcome) -> list[TestBinary]:
    """Builds every test target of the workspace once per run (`cargo test
    --profile test-release --no-run`; the first caller builds, the others
    wait) and returns its executables, by label."""
    global _BUILD_STARTED, _BUILD_DONE
    with _BUILD:
        with _BUILT:
            first = not _BUILD_STARTED
            _BUILD_STARTED = True
            _BUILT.notify_all()
        if first:
            try:
                _build_test_binaries(log, out)
            finally:
                with _BUILT:
                    _BUILD_DONE = True
                    _BUILT.notify_all()
    return sorted(_BINARIES, key=lambda b: b.label)


def built_binaries(log: TextIO, out: Outcome) -> Iterator[TestBinary]:
    """The test executables one by one as cargo links them, when the
    `rust-build` step is building them beside this one; else (a step run
    alone or `--serial`) once they are all built, by label."""
    if not BUILD_STEP_BESIDE:
        yield from test_binaries(log, out)
        return
    i = 0
    while True:
        with _BUILT:
            while not _BUILD_DONE and (not _BUILD_STARTED or i >= len(_BINARIES)):
                _BUILT.wait()
            if i >= len(_BINARIES):
                return
            b = _BINARIES[i]
        i += 1
        yield b


def _package_bins() -> dict[str, set[str]] | None:
    """The binary targets of each workspace package, by its Cargo.toml
    (`cargo metadata`); None when cargo cannot say."""
    r = subprocess.run(["cargo", "metadata", "--no-deps", "--format-version", "1"], cwd=ROOT,
                       capture_output=True, text=True, check=False)
    if r.returncode != 0:
        return None
    try:
        packages = json.loads(r.stdout)["packages"]
    except (ValueError, KeyError):
        return None
    return {p["manifest_path"]: {t["name"] for t in p["targets"] if "bin" in t["kind"]}
            for p in packages}


def _build_test_binaries(log: TextIO, out: Outcome) -> None:
    """Runs the test build and hands out each test executable as soon as it
    can run: cargo reports an integration test once it is linked, which can
    be before its package's binaries (`CARGO_BIN_EXE_*` is only a path
    compiled in), so a package's executables wait until every binary target
    of that package has been reported; all of them once the build ends (and
    all at the end when `cargo metadata` cannot list the binaries)."""
    bins = _package_bins()
    if bins is None:
        echo(log, "cargo metadata failed: the test executables are handed out at the build's end")
    missing = {m: set(b) for m, b in (bins or {}).items()}
    waiting: dict[str, list[TestBinary]] = {}

    def hand_out(ready: list[TestBinary]) -> None:
        with _BUILT:
            _BINARIES.extend(ready)
            _BUILT.notify_all()

    # At normal priority, unlike clippy and mypy: the system tests wait for
    # its executables, and under `nice` it took half of one CPU for twice
    # as long, ending after the Python system tests (docs/testing.md).
    cmd = [
        "cargo", "test", "--profile", PROFILE, "--workspace", "--tests", "--no-run",
        "--message-format=json-render-diagnostics",
    ]
    echo(log, "+ " + " ".join(cmd))
    p = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True, errors="replace")
    assert p.stdout is not None
    for line in p.stdout:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if msg.get("reason") == "compiler-message":
            text = msg.get("message", {}).get("rendered") or ""
            if text:
                say(text)
            log.write(text)
        if msg.get("reason") != "compiler-artifact" or not msg.get("executable"):
            continue
        manifest = msg.get("manifest_path", "")
        target = msg["target"]
        if not msg.get("profile", {}).get("test"):
            if "bin" in target["kind"] and manifest in missing:
                missing[manifest].discard(target["name"])
                if not missing[manifest]:
                    hand_out(waiting.pop(manifest, []))
            continue
        src = Path(target["src_path"])
        label = str(src.relative_to(ROOT)) if src.is_relative_to(ROOT) else str(src)
        if target["kind"][0] in ("lib", "bin"):
            label += f" ({target['kind'][0]})"
        b = TestBinary(label, msg["executable"], Path(manifest).parent)
        if bins is not None and not missing.get(manifest):
            hand_out([b])
        else:
            waiting.setdefault(manifest, []).append(b)
    p.wait()
    hand_out([b for bs in waiting.values() for b in bs])
    if p.returncode != 0:
        out.failures.append(f"cargo test --no-run: exit {p.returncode}")


def libtest(binary: TestBinary, args: list[str], log: TextIO, out: Outcome) -> tuple[int, int]:
    """Runs one test executable with libtest's JSON report and `args`;
    records each test's time and each failure (with its output, printed);
    returns (passed, failed)."""
    env = dict(os.environ, RUSTC_BOOTSTRAP="1", CARGO_MANIFEST_DIR=str(binary.cwd))
    cmd = [binary.path, "-Z", "unstable-options", "--format", "json", "--report-time", *args]
    log.write(f"+ (in {binary.cwd}) {' '.join(cmd)}\n")
    p = subprocess.Popen(
        cmd, cwd=binary.cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, errors="replace",
    )
    assert p.stdout is not None
    passed = failed = 0
    for line in p.stdout:
        try:
            ev = json.loads(line)
        except ValueError:
            log.write(line)  # what a test printed outside libtest's capture
            continue
        if ev.get("type") != "test" or ev.get("event") not in ("ok", "failed", "timeout"):
            continue
        if ev["event"] == "timeout":
            # libtest's notice that a test has run for over 60 s; its
            # "ok" or "failed" follows.
            log.write(f"slow (over 60 s, still running): {ev.get('name', '?')}\n")
            continue
        name, secs = ev.get("name", "?"), float(ev.get("exec_time", 0.0))
        out.tests.append((secs, f"{binary.label}: {name}"))
        if ev["event"] == "ok":
            passed += 1
            log.write(f"ok     {secs:8.2f} s  {name}\n")
        else:
            failed += 1
            text = ev.get("stdout", "")
            echo(log, f"---- {binary.label}: {name} FAILED after {secs:.1f} s ----\n{text}")
            panic = text[text.find("panicked at"):] if "panicked at" in text else text
            out.failures.append(f"{binary.label}: {name} (after {secs:.1f} s)\n{excerpt(panic)}")
    p.wait()
    if p.returncode != 0 and failed == 0:
        out.failures.append(f"{binary.label}: exit {p.returncode} (crashed; see the log)")
    return passed, failed


def listed(binary: TestBinary) -> list[tuple[str, bool, str]]:
    """The tests of an executable: (name, ignored, the ignore's reason)."""
    env = dict(os.environ, RUSTC_BOOTSTRAP="1")
    cmd = [binary.path, "-Z", "unstable-options", "--format", "json", "--list"]
    p = subprocess.run(cmd, cwd=binary.cwd, env=env, capture_output=True, text=True)
    tests = []
    for line in p.stdout.splitlines():
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        if ev.get("type") == "test" and ev.get("event") == "discovered":
            tests.append((ev["name"], bool(ev.get("ignore")), ev.get("ignore_message") or ""))
    return tests


def run_binaries(
    binaries: Iterable[TestBinary], args: Callable[[TestBinary], list[str] | None],
    log: TextIO, out: Outcome,
) -> None:
    """Each executable in turn with the arguments `args` gives it (None:
    skip it); one line per executable."""
    for b in binaries:
        a = args(b)
        if a is None:
            continue
        t0 = time.monotonic()
        p, f = libtest(b, a, log, out)
        echo(log, f"{b.label}: {p} passed, {f} failed, {time.monotonic() - t0:.1f} s")


def step_rust_build(log: TextIO, out: Outcome) -> None:
    """Every test executable of the workspace, with the `test-release`
    profile (release without LTO)."""
    test_binaries(log, out)


def step_rust(log: TextIO, out: Outcome) -> None:
    """Unit, property and in-process integration tests (no peer): each
    executable's tests in parallel (libtest: one thread per CPU); then the
    doc tests."""
    binaries = [b for b in test_binaries(log, out) if FUZZ_PACKAGE not in b.label]
    run_binaries(binaries, lambda b: [], log, out)
    run([*NICE, "cargo", "test", "--profile", PROFILE, "--workspace", "--doc", "-q"], log, out,
        "doc tests")


def step_rust_system(log: TextIO, out: Outcome) -> None:
    """Tests marked `#[ignore = "system: ..."]` (root and namespaces,
    testpmd, OVS-DPDK, QEMU): one at a time, each executable's as soon as
    it is built (`built_binaries`)."""

    def system(b: TestBinary) -> list[str] | None:
        names = [n for n, ign, why in listed(b) if ign and why.startswith(SYSTEM_PREFIX)]
        return ["--ignored", "--exact", "--test-threads=1", *names] if names else None

    run_binaries(built_binaries(log, out), system, log, out)


def step_fuzz_replay(log: TextIO, out: Outcome) -> None:
    """Every fuzz target over its checked-in corpus (fuzz/seeds.py first)."""
    run(["python3", "fuzz/seeds.py"], log, out)
    binaries = [b for b in test_binaries(log, out) if FUZZ_PACKAGE in b.label]
    if not binaries:
        out.failures.append("no fuzz-replay test executable was built")
    # One at a time: each target checks that no descriptor leaked by
    # counting the process's open descriptors.
    run_binaries(binaries, lambda b: ["--test-threads=1"], log, out)


# --- Python -------------------------------------------------------------------------


def pytest(args: list[str], name: str, log: TextIO, out: Outcome) -> None:
    """pytest with a JUnit XML report, from which each test's time is read."""
    xml = LOGS / f"{name}.xml"
    xml.unlink(missing_ok=True)
    cmd = [str(PY / "pytest"), "-q", "-rfEs", f"--junitxml={xml}", *args]
    # 5: no test selected (a tree without a test of that mark) is no failure
    run(cmd, log, out, f"pytest {' '.join(args)}", ok=(0, 5))
    if not xml.exists():
        return
    for case in ET.parse(xml).getroot().iter("testcase"):
        label = f"{case.get('classname', '')}::{case.get('name', '')}"
        out.tests.append((float(case.get("time") or 0.0), label))
        bad = case.find("failure")
        if bad is None:
            bad = case.find("error")
        if bad is not None:
            why = bad.get("message") or bad.text or ""
            out.failures.append(f"{label} (after {float(case.get('time') or 0.0):.1f} s)\n"
                                f"{excerpt(why)}")


#: The system tests of the real turnoutd: a tree of their own under
#: python/tests (its own conftest and helpers), run apart from the rest of
#: python/tests so that the two trees can run at once.
TURNOUTD_TREE = "python/tests/turnoutd"
#: The rest of python/tests: the workbench's tests.
WORKBENCH = ["python/tests", f"--ignore={TURNOUTD_TREE}"]
#: os-ken's switch suite: `make test-openflow`, not `make test`.
OSKEN_SUITE = f"--ignore={TURNOUTD_TREE}/test_osken_suite.py"
#: The workbench's system tests of every SUT adapter: a run of their own
#: beside the rest of the workbench's (step_python_system).
SUTS_FILE = "python/tests/test_system.py"


def step_python(log: TextIO, out: Outcome) -> None:
    """The workbench's tests without peers, two at a time (pytest-xdist)."""
    pytest(["-m", "not system", "-n", "2", *WORKBENCH], "python", log, out)


def step_python_system(log: TextIO, out: Outcome) -> None:
    """The Python system tests (marked `system`; all of python/tests/turnoutd) but
    those marked `serial`, in three runs at once (one after the other with
    `--serial`), each one test at a time: the workbench's tests of the SUT
    adapters (SUTS_FILE, about half the workbench's system tests' time),
    the rest of the workbench's, the turnoutd tree."""
    trees(log, out, [
        (["-m", f"system and not {SERIAL_MARK}", *WORKBENCH, f"--ignore={SUTS_FILE}"],
         "python-system"),
        (["-m", f"system and not {SERIAL_MARK}", SUTS_FILE], "suts-system"),
        (["-m", f"not {SERIAL_MARK}", TURNOUTD_TREE, OSKEN_SUITE], "turnoutd-system"),
    ], at_once=not SERIAL)


def step_python_serial(log: TextIO, out: Outcome) -> None:
    """The Python system tests marked `serial` (they measure rates, timing or
    CPU, or isolate CPUs machine-wide): one at a time, alone (after every
    lane)."""
    trees(log, out, [
        (["-m", f"system and {SERIAL_MARK}", *WORKBENCH], "python-serial"),
        (["-m", SERIAL_MARK, TURNOUTD_TREE, OSKEN_SUITE], "turnoutd-serial"),
    ], at_once=False)


def trees(log: TextIO, out: Outcome, runs: list[tuple[list[str], str]], at_once: bool) -> None:
    """One pytest per (arguments, name), at once or one after the other; a
    run that breaks is a failure, the others go on."""
    outs = [Outcome() for _ in runs]
    tag = getattr(_LANE, "tag", "")

    def one(i: int) -> None:
        args, name = runs[i]
        _LANE.tag = name if tag or at_once else ""
        try:
            pytest(args, name, log, outs[i])
        except Exception as e:  # a broken run is a failure, not the end of the step
            outs[i].failures.append(f"{name}: {type(e).__name__}: {e}")
        finally:
            if not at_once:
                _LANE.tag = tag

    if not at_once:
        for i in range(len(runs)):
            one(i)
    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(runs))] if at_once \
        else []
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for o in outs:
        out.failures += o.failures
        out.tests += o.tests


# --- the steps ----------------------------------------------------------------------


def commands(*cmds: list[str]) -> Callable[[TextIO, Outcome], None]:
    def step(log: TextIO, out: Outcome) -> None:
        for c in cmds:
            run(c, log, out)

    return step


CLIPPY = [
    *NICE, "cargo", "clippy", "--workspace", "--all-targets", "--all-features",
    "--profile", PROFILE, "-q", "--", "-D", "warnings",
]
#: The binaries the Python system tests run (python/src/turnout/build.py):
#: the tests' profile's (TURNOUT_PROFILE, set in main), which `setup` builds
#: and the Rust tests' build then reuses instead of compiling every
#: dependency and library a second time; setup.sh runs the same script.
BINARIES = ["bash", "scripts/build-bins.sh"]
#: The Python system steps, which need BINARIES.
NEEDS_BINARIES = ("python-system", "python-serial")
STEPS: list[tuple[str, Callable[[TextIO, Outcome], None]]] = [
    ("setup", commands(["bash", "scripts/setup.sh"])),
    # only when `setup` does not run and a step of NEEDS_BINARIES does
    ("binaries", commands(BINARIES)),
    ("fmt", commands(["cargo", "fmt", "--all", "--", "--check"])),
    ("clippy", commands(CLIPPY)),
    ("ruff", commands([str(PY / "ruff"), "check", "python", "tests", "scripts"])),
    ("mypy", commands([*NICE, "bash", "-c", "cd python && ../.venv/bin/mypy"])),
    ("rust-build", step_rust_build),
    ("rust", step_rust),
    ("rust-system", step_rust_system),
    ("fuzz-replay", step_fuzz_replay),
    ("python", step_python),
    ("python-system", step_python_system),
    ("python-serial", step_python_serial),
]


#: After `setup`, the lanes that run at once, each its steps in order. A
#: step listed in AFTER starts when that step (if selected) has ended.
LANES: list[list[str]] = [
    # the tests without peers after the build, not beside it: streamed
    # beside the build (as the system tests are) they slowed the build and
    # the system tests more than they gained (docs/testing.md)
    ["rust-build", "fmt", "rust", "fuzz-replay"],
    # the system tests start on each test executable as soon as it is built
    # (`built_binaries`); clippy, a compile of its own, after them
    ["rust-system", "clippy"],
    # the Python steps need no test build: they end while it is still going
    ["python-system", "ruff", "mypy", "python"],
]
AFTER: dict[str, str] = {}
#: After every lane has ended, one at a time with nothing beside them.
ALONE = ["python-serial"]

Result = tuple[str, float, float, tuple[float, ...], Outcome]


def run_step(name: str, t_all: float, results: list[Result]) -> None:
    """One step: its log, its time (and when it started), its outcome."""
    fn = dict(STEPS)[name]
    say(f"=== {name} (load average {os.getloadavg()[0]:.1f})")
    out = Outcome()
    t0 = time.monotonic()
    with open(LOGS / f"{name}.log", "w") as log:
        try:
            fn(log, out)
        except Exception as e:  # a broken step is a failure, not the end of the run
            out.failures.append(f"{type(e).__name__}: {e}")
    secs = time.monotonic() - t0
    say(f"=== {name}: {'FAILED' if out.failures else 'ok'} in {secs:.0f} s")
    results.append((name, t0 - t_all, secs, os.getloadavg(), out))


def run_lanes(selected: list[str], t_all: float, results: list[Result]) -> None:
    """The selected steps of each lane in order, the lanes at once."""
    done = {n: threading.Event() for n in selected}

    def lane(steps: list[str]) -> None:
        for name in steps:
            before = AFTER.get(name)
            if before in done:
                done[before].wait()
            _LANE.tag = name
            try:
                run_step(name, t_all, results)
            finally:
                done[name].set()

    lanes = [[n for n in ln if n in selected] for ln in LANES]
    threads = [threading.Thread(target=lane, args=(ln,)) for ln in lanes if ln]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def main(argv: list[str]) -> int:
    global SERIAL, BUILD_STEP_BESIDE
    names = [n for n, _ in STEPS]
    if "--list" in argv:
        print("\n".join(names))
        return 0
    SERIAL = "--serial" in argv
    argv = [a for a in argv if a not in ("--serial", "--lanes")]  # --lanes: the default
    unknown = [a for a in argv if a not in names]
    if unknown:
        print(f"unknown step {', '.join(unknown)}; steps: {', '.join(names)}", file=sys.stderr)
        return 2
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        # started in the background without job control (module docstring)
        signal.signal(signal.SIGINT, signal.default_int_handler)
    LOGS.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("TURNOUT_PROFILE", PROFILE)
    selected = [n for n in names if n in argv or (not argv and n != "binaries")]
    if "setup" not in selected and any(n in selected for n in NEEDS_BINARIES):
        selected.insert(0, "binaries")
    results: list[Result] = []
    t_all = time.monotonic()
    for first in ("binaries", "setup"):
        if first in selected:
            run_step(first, t_all, results)
    rest = [n for n in selected if n not in ("setup", "binaries")]
    laned = [n for n in rest if n not in ALONE]
    if SERIAL or len(laned) < 2:
        for name in laned:
            run_step(name, t_all, results)
    else:
        BUILD_STEP_BESIDE = "rust-build" in laned
        run_lanes(laned, t_all, results)
    for name in rest:
        if name in ALONE:
            run_step(name, t_all, results)
    total = time.monotonic() - t_all

    results.sort(key=lambda r: names.index(r[0]))
    print("\n=== time per step (started at, after the run's start; load average over the last "
          "minute at its end)")
    for name, start, secs, load, out in results:
        verdict = "FAILED" if out.failures else "ok"
        print(f"  {name:14s} {secs:6.0f} s  at {start:5.0f} s  load {load[0]:4.1f}  {verdict}")
    print(f"  {'total':14s} {total:6.0f} s  ({total / 60:.1f} min)")
    tests = sorted((t for *_, o in results for t in o.tests), reverse=True)
    if tests:
        print("\n=== the ten slowest tests")
        for secs, label in tests[:10]:
            print(f"  {secs:6.1f} s  {label}")
    failures = [(name, f) for name, *_, o in results for f in o.failures]
    if failures:
        print(f"\n=== {len(failures)} failure(s); the logs are in {LOGS.relative_to(ROOT)}/")
        for name, f in failures:
            head, *why = f.splitlines()
            print(f"  [{name}] {head}")
            for ln in why:
                print(f"      {ln}")
        return 1
    print("\n=== every step passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
