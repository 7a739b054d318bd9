"""The schema migration tests' shared steps: a database an older release
wrote (a gzipped file of golden/), its rows as they were, and the check
that a migration kept every value it had."""

from __future__ import annotations

import gzip
import sqlite3
from pathlib import Path

from turnout.results.schema import user_version

GOLDEN = Path(__file__).parent / "golden"

#: the tables whose every stored value a migration keeps
TABLES = ("trials", "results", "campaigns", "suts")

Rows = dict[str, list[dict[str, object]]]


def golden_copy(name: str, tmp_path: Path) -> Path:
    """A copy of golden/``name``.db.gz to work on, uncompressed."""
    path = tmp_path / f"{name}.db"
    path.write_bytes(gzip.decompress((GOLDEN / f"{name}.db.gz").read_bytes()))
    return path


def rows(conn: sqlite3.Connection, table: str) -> list[dict[str, object]]:
    """Every row of a table as a dict, by id."""
    conn.row_factory = sqlite3.Row
    return [dict(r) for r in conn.execute(f"SELECT * FROM {table} ORDER BY id")]


def stored(path: Path, version: int) -> Rows:
    """The rows of TABLES in the file as its release wrote them (at schema
    ``version``), read without migrating it."""
    conn = sqlite3.connect(path)
    try:
        assert user_version(conn) == version
        return {t: rows(conn, t) for t in TABLES}
    finally:
        conn.close()


def assert_kept(before: Rows, conn: sqlite3.Connection) -> None:
    """Every value the old release stored is still there, unchanged."""
    for table, old_rows in before.items():
        new_rows = rows(conn, table)
        assert len(new_rows) == len(old_rows), table
        for old, new in zip(old_rows, new_rows, strict=True):
            assert {k: new[k] for k in old} == old, table
