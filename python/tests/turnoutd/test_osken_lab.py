"""osken_suite's lab cleans up after runs that could not: the namespace of
a run killed before its close is deleted by the next run's set-up."""

from __future__ import annotations

import os
import random
import subprocess

from osken_suite import SuiteLab

from turnout import testpeers


def test_a_killed_runs_namespace_is_deleted_by_the_next_run(tmp_path) -> None:
    """A run killed before its close (SIGKILL) left its namespace behind;
    the next run's set-up deletes the namespaces whose run is gone, and
    leaves a live run's."""
    testpeers.need_root()
    marks = tmp_path / "marks"
    marks.mkdir()
    dead = subprocess.Popen(["true"])
    dead.wait()  # its pid is gone
    ns = f"tosk{os.getpid() % 100000}{random.randint(0, 9999):04d}"
    subprocess.run(["ip", "netns", "add", ns], check=True, capture_output=True)
    try:
        (marks / ns).write_text(str(dead.pid))
        (marks / "tosk-live").write_text(str(os.getpid()))
        assert SuiteLab.sweep(marks) == [ns]
        listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        assert ns not in listed.split()
        assert not (marks / ns).exists() and (marks / "tosk-live").exists()
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False, capture_output=True)
