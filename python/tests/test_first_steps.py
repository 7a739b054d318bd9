"""The first steps of a new user with the workbench: ``turnout
bench list`` (and ``compare`` with no names) lists a database's campaigns,
``compare``'s error names the ones that exist, and ``turnout ctl ... | head``
ends quietly (no BrokenPipeError traceback)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from turnout import cli
from turnout.cli import EXIT_BROKEN_PIPE
from turnout.results import Campaign, ResultsDB, Trial


def _db(path: Path) -> Path:
    """Runs 1 and 3 of `default` (3 unfinished), run 2 of `smoke`, with trials."""
    with ResultsDB(path) as db:
        for name, status, trials in (("default", "done", 3), ("smoke", "done", 1),
                                     ("default", "interrupted", 2)):
            cid = db.add_campaign(Campaign(name=name, file=f"campaigns/{name}.toml",
                                           status=status, started_at=1.8e9))
            for i in range(trials):
                db.add_trial(Trial.of(campaign_id=cid, key=f"{name}{cid}-{i}", sut="wire"))
    return path


def test_bench_list_shows_every_run_with_its_counts(tmp_path, capsys):
    db = _db(tmp_path / "t.db")
    assert cli.main(["bench", "list", "--db", str(db)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["id", "name", "status", "started", "finished", "trials",
                                "results", "file"]
    rows = [ln.split() for ln in lines[1:4]]
    assert [(r[0], r[1], r[2]) for r in rows] == [("1", "default", "done"), ("2", "smoke", "done"),
                                                  ("3", "default", "interrupted")]
    # id, name, status, start (2 words), finish, trials, results, file
    assert [r[-3:] for r in rows] == [["3", "0", "campaigns/default.toml"],
                                      ["1", "0", "campaigns/smoke.toml"],
                                      ["2", "0", "campaigns/default.toml"]]
    assert lines[4].startswith(f"3 runs in {db}. A name means its latest run")


def test_bench_list_of_an_empty_or_missing_database(tmp_path, capsys):
    empty = tmp_path / "e.db"
    ResultsDB(empty).close()
    assert cli.main(["bench", "list", "--db", str(empty)]) == 0
    assert capsys.readouterr().out.startswith(f"no campaigns in {empty} (turnout bench run")
    missing = tmp_path / "nothing.db"
    assert cli.main(["bench", "list", "--db", str(missing)]) == 2
    assert f"no results database at {missing}" in capsys.readouterr().err
    assert not missing.exists(), "listing must not create a database"


def test_compare_without_names_lists_and_its_errors_name_what_exists(tmp_path, capsys):
    db = str(_db(tmp_path / "t.db"))
    assert cli.main(["compare", "--db", db]) == 0
    out = capsys.readouterr().out
    assert "smoke" in out and "interrupted" in out and out.splitlines()[0].startswith("id")
    known = f"campaigns in {db}: default (runs 1, 3), smoke (run 2)"
    assert cli.main(["compare", "defualt", "smoke", "--db", db]) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"turnout compare: no campaign 'defualt' in {db}; {known}"
    assert cli.main(["compare", "default", "--db", db]) == 2
    assert capsys.readouterr().err.strip() == f"turnout compare: compare A with what? {known}"
    other = tmp_path / "o.db"
    ResultsDB(other).close()
    assert cli.main(["compare", "default", "smoke", "--db", db, "--db-b", str(other)]) == 2
    assert capsys.readouterr().err.strip().endswith(f"{known}; {other} holds no campaign")
    # export names them too
    assert cli.main(["export", "--db", db, "--campaign", "smok"]) == 2
    assert capsys.readouterr().err.strip().endswith(known)


class _SlowDaemon:
    """turnoutd's control socket, answering each request once `go` is set."""

    def __init__(self, path: Path, results: list[Any]) -> None:
        self.path = str(path)
        self.results = results
        self.go = threading.Event()
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(self.path)
        self.srv.listen(1)
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        conn, _ = self.srv.accept()
        with conn, conn.makefile("rwb") as f:
            for result in self.results:
                req = json.loads(f.readline())
                self.go.wait(30)
                f.write(json.dumps({"jsonrpc": "2.0", "id": req["id"],
                                    "result": result}).encode() + b"\n")
                f.flush()


@pytest.mark.parametrize("flows", [1, 5000])  # flushed at exit / written while printing
def test_ctl_into_a_pipe_its_reader_closed_ends_quietly(tmp_path, flows):
    dump = {"flows": [{"flow": f"table=0,priority={i},in_port=0,actions=output:1"}
                      for i in range(flows)], "tables": []}
    d = _SlowDaemon(tmp_path / "s", [dump, [{"id": 0, "name": "a"}, {"id": 1, "name": "b"}]])
    p = subprocess.Popen([sys.executable, "-m", "turnout.cli", "ctl", "--socket", d.path,
                          "dump-flows"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout is not None and p.stderr is not None
    p.stdout.close()  # `| head` that has left: every write now meets a closed pipe
    d.go.set()
    err = p.stderr.read().decode()
    assert p.wait(timeout=60) == EXIT_BROKEN_PIPE, err
    assert err == "", err
