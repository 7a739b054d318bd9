"""Every relative link in README.md and docs/**/*.md resolves.

A link is ``[text](target)`` outside code blocks and code spans; external
targets (a scheme such as ``https:``, ``mailto:``) and in-page anchors
(``#...``) are not checked, a ``#anchor`` after a path is dropped and the
path must name a file or directory of the checkout. Also: every study in
docs/results/ is listed in docs/results/README.md, and no doc links a path
outside the repository.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def links(text: str) -> list[tuple[int, str]]:
    """(line number, target) of every markdown link outside code."""
    out = []
    fenced = False
    for n, line in enumerate(text.split("\n"), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        prose = re.sub(r"`[^`]*`", "", line)
        out += [(n, m.group(1)) for m in LINK.finditer(prose)]
    return out


def broken(doc: Path, root: Path = REPO) -> list[str]:
    bad = []
    for n, target in links(doc.read_text()):
        if SCHEME.match(target) or target.startswith("#"):
            continue
        path = target.split("#", 1)[0]
        resolved = (doc.parent / path).resolve()
        name = doc.relative_to(root)
        if not resolved.is_relative_to(root):
            bad.append(f"{name}:{n}: {target} leaves the repository")
        elif not resolved.exists():
            bad.append(f"{name}:{n}: {target} does not exist")
    return bad


def test_the_link_finder_sees_links_and_skips_code():
    text = "a [x](a.md) `[y](b.md)` [z](https://e.org) [w](c.md#s)\n```\n[v](d.md)\n```\n"
    assert links(text) == [(1, "a.md"), (1, "https://e.org"), (1, "c.md#s")]


def test_a_missing_or_outside_target_is_reported(tmp_path: Path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "bench.md").write_text("# bench\n")
    doc = tmp_path / "docs" / "probe.md"
    doc.write_text("[gone](no-such-file.md) [ok](bench.md#running) [out](../../x.md)\n")
    assert broken(doc, tmp_path) == ["docs/probe.md:1: no-such-file.md does not exist",
                                     "docs/probe.md:1: ../../x.md leaves the repository"]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(doc: Path):
    assert broken(doc) == []


def test_every_study_is_in_the_results_index():
    results = REPO / "docs" / "results"
    index = (results / "README.md").read_text()
    listed = {t for _, t in links(index)}
    studies = {p.name for p in results.glob("*.md") if p.name != "README.md"}
    assert studies, "docs/results/ holds no study"
    assert studies - listed == set()
