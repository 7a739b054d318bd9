"""A run of these tests ended by SIGTERM (a timeout's kill, `kill` of its
process group) still tears down what the running test made: conftest.py
turns SIGTERM into an interrupt. Checked on a real pytest process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

CHILD = textwrap.dedent('''
    import os, time
    from pathlib import Path

    import pytest

    MARK = Path(os.environ["MARK_DIR"])

    @pytest.fixture
    def made():
        (MARK / "made").write_text("")
        yield
        (MARK / "fixture-torn-down").write_text("")

    def test_long(made):
        try:
            (MARK / "running").write_text("")
            time.sleep(120)
        finally:
            (MARK / "finally-ran").write_text("")
''')


def test_sigterm_runs_finally_and_fixture_teardown(tmp_path: Path) -> None:
    (tmp_path / "test_child.py").write_text(CHILD)
    marks = tmp_path / "marks"
    marks.mkdir()
    env = {**os.environ, "MARK_DIR": str(marks),
           "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    # this directory's conftest.py as a plugin, as pytest loads it for the suite
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "conftest",
         "--rootdir", str(tmp_path), "-c", os.devnull, str(tmp_path / "test_child.py")],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while not (marks / "running").exists():
            assert proc.poll() is None, proc.communicate()[0].decode()
            assert time.monotonic() < deadline, "the child test never started"
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        out = proc.communicate(timeout=60)[0].decode()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert (marks / "finally-ran").exists(), out
    assert (marks / "fixture-torn-down").exists(), out
    assert proc.returncode != 0, out
