"""The report page in headless Chromium: every plot image loads, every table is there,
the verdict matrix is in the first screen and nothing scrolls sideways at 1400 px.

A test copy of the page gets a small script that writes, after the load
event, each image's naturalWidth/naturalHeight, each table's id, row count
and width against its container, the page's scroll width and where the
verdict matrix lies into the DOM; ``chromium --dump-dom`` prints the DOM,
and the test reads that back. A control image pointing at a missing file
must report width 0, and a control table wider than the page must be seen
overflowing, so the checks themselves are shown to work. The page of a
campaign shaped like the default one (every use case, six SUTs, skipped
cells with their long reasons) is also photographed at 1400 × 900
(``--screenshot``). Fails without chromium when TURNOUT_REQUIRE_PEERS=1,
else skipped.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from synth_db import default_like
from test_report import fill_campaign
from turnout import testpeers
from turnout.report import build_report
from turnout.results import ResultsDB

if TYPE_CHECKING:
    from turnout.report.build import ReportOutput

#: Chromium, a process of its own (docs/testing.md, system tests).
pytestmark = pytest.mark.system

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

#: the window the report must fit: no horizontal scrolling, the verdict
#: matrix in its first screen
WIDTH, HEIGHT = 1400, 900

_PROBE = """
<img class="plot" id="turnout-control" src="no-such-plot.png" alt="control">
<div class="tablewrap" id="turnout-wide-control" style="position:absolute;left:0;top:0;
  visibility:hidden"><table class="data"><tbody><tr><td style="white-space:nowrap">
  CONTROL</td></tr></tbody></table></div>
<script>
window.addEventListener('load', function () {
  var imgs = Array.prototype.slice.call(document.querySelectorAll('img.plot'));
  var tables = Array.prototype.slice.call(document.querySelectorAll('table.data'));
  var wraps = Array.prototype.slice.call(document.querySelectorAll('div.tablewrap'));
  var m = document.querySelector('table.matrix');
  var r = m ? m.getBoundingClientRect() : null;
  var out = document.createElement('pre');
  out.id = 'turnout-check';
  out.textContent = JSON.stringify({
    images: imgs.map(function (i) {
      return {src: i.getAttribute('src'), w: i.naturalWidth, h: i.naturalHeight};
    }),
    tables: tables.filter(function (t) { return t.tHead; }).map(function (t) {
      var b = t.getBoundingClientRect();
      return {id: t.id, rows: t.tBodies[0].rows.length, cols: t.tHead.rows[0].cells.length,
              right: b.right};
    }),
    wraps: wraps.map(function (w) {
      var t = w.querySelector('table');
      return {id: w.id || (t && t.id), scroll: w.scrollWidth, client: w.clientWidth,
              right: t ? t.getBoundingClientRect().right : 0};
    }),
    page: {scroll: document.documentElement.scrollWidth,
           client: document.documentElement.clientWidth,
           width: window.innerWidth, height: window.innerHeight},
    matrix: r ? {top: r.top, bottom: r.bottom, right: r.right,
                 rows: m.tBodies[0].rows.length} : null
  });
  document.body.appendChild(out);
});
</script>
"""


def _chromium(profile_dir, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [
        CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--no-first-run", f"--user-data-dir={profile_dir}", "--virtual-time-budget=10000",
        f"--window-size={WIDTH},{HEIGHT}", *args,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc


def _dump_dom(page, profile_dir) -> str:
    return _chromium(profile_dir, "--dump-dom", page.as_uri()).stdout


def _probe(out, tmp_path) -> tuple[str, dict]:
    """The page with the probe script in Chromium: its DOM and what the probe saw."""
    text = out.page.read_text(encoding="utf-8")
    assert text.count("</body>") == 1
    probe = out.page.with_name("browser-check.html")  # the page itself stays script-free
    probe.write_text(text.replace("</body>", _PROBE + "</body>"), encoding="utf-8")
    dom = _dump_dom(probe, tmp_path / "chromium-profile")
    m = re.search(r'<pre id="turnout-check">(.*?)</pre>', dom, re.S)
    assert m, "the probe script did not run: " + dom[-500:]
    return dom, json.loads(html.unescape(m.group(1)))


def _png_size(path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


@pytest.fixture(scope="module")
def base_report(tmp_path_factory: pytest.TempPathFactory) -> ReportOutput:
    """The report of a campaign with every kind of result, built once for
    the tests that only read it (each writes its probe page beside it)."""
    testpeers.need(CHROMIUM, "chromium not installed (Debian package chromium)")
    d: Path = tmp_path_factory.mktemp("base-report")
    with ResultsDB(d / "results.db") as db:
        fill_campaign(db, "base")
    return build_report(d / "results.db", "base", d / "report")


def test_the_verdict_is_in_the_first_screen_and_nothing_scrolls_sideways(tmp_path):
    """The default campaign's shape (18 verdict rows, six SUTs, OVS-DPDK's
    long skip reason on every cell but one) at 1400 × 900: the matrix is
    whole in the first screen, the page and every table fit the width."""
    testpeers.need(CHROMIUM, "chromium not installed (Debian package chromium)")
    db_path = tmp_path / "results.db"
    with ResultsDB(db_path) as db:
        default_like(db)
    out = build_report(db_path, "default", tmp_path / "report")
    _, found = _probe(out, tmp_path)
    page = found["page"]
    # the viewport: the window less what headless Chromium keeps of it (757
    # of 900 px here), about what a desktop browser's toolbars leave
    assert page["width"] == WIDTH and 600 <= page["height"] <= HEIGHT, page
    assert page["scroll"] <= page["client"], f"the page scrolls sideways: {page}"
    for w in found["wraps"]:
        if w["id"] == "turnout-wide-control":
            continue
        assert w["scroll"] <= w["client"] + 1, f"table {w['id']} scrolls sideways: {w}"
        assert w["right"] <= page["client"] + 1, f"table {w['id']} is wider than the page: {w}"
    (m,) = [x for s in out.sections for x in s.matrices]
    mx = found["matrix"]
    assert mx is not None and mx["rows"] == len(m.rows) >= 16
    assert mx["top"] >= 0 and mx["bottom"] <= page["height"], (
        f"the matrix leaves the first screen: {mx}, viewport {page}")
    assert mx["right"] <= WIDTH
    # the first screen, as a reader sees it
    shot = tmp_path / "first-screen.png"
    _chromium(tmp_path / "chromium-profile", f"--screenshot={shot}", out.page.as_uri())
    assert _png_size(shot) == (WIDTH, HEIGHT)


def test_the_overflow_check_sees_a_table_wider_than_the_page(tmp_path, base_report):
    """The control: a table whose one cell cannot wrap and is wider than the
    window is seen overflowing, and so is the page (the checks above can
    fail)."""
    out = base_report
    text = out.page.read_text(encoding="utf-8")
    probe = out.page.with_name("browser-check-wide.html")
    probe.write_text(text.replace("</body>", _PROBE.replace("CONTROL", "W" * 400) + "</body>"),
                     encoding="utf-8")
    dom = _dump_dom(probe, tmp_path / "chromium-profile")
    m = re.search(r'<pre id="turnout-check">(.*?)</pre>', dom, re.S)
    assert m, dom[-500:]
    found = json.loads(html.unescape(m.group(1)))
    (ctl,) = [w for w in found["wraps"] if w["id"] == "turnout-wide-control"]
    assert ctl["right"] > found["page"]["client"]
    assert found["page"]["scroll"] > found["page"]["client"]


def test_page_renders_in_chromium(tmp_path, base_report):
    out = base_report
    dom, found = _probe(out, tmp_path)

    images = {i["src"]: i for i in found["images"]}
    assert images.pop("no-such-plot.png")["w"] == 0  # the check can see a broken image
    figures = out.figures()
    assert sorted(images) == sorted(f.png for f in figures)
    for src, i in images.items():
        assert i["w"] > 0 and i["h"] > 0, f"{src} did not load"

    tables = {t["id"]: t for t in found["tables"] if t["id"]}
    expected = [t for s in out.sections if s.has_data() and not s.empty for t in s.tables
                if t.rows]
    assert len(expected) >= 8
    for t in expected:
        got = tables.get(f"tbl-{t.key}")
        assert got is not None, f"table {t.key} missing"
        assert got["rows"] == len(t.rows)
        assert got["cols"] == len(t.columns) + (1 if any(t.flags) else 0)
    # the page opens with the verdict, and it shows the rows it was made from
    assert re.findall(r'<section id="([^"]+)"', dom)[0] == "verdict"
    (vt,) = [t for s in out.sections if s.key == "verdict" for t in s.tables
             if t.key == "verdict-table"]
    assert vt.rows and tables["tbl-verdict-table"]["rows"] == len(vt.rows)
    body = dom[dom.index('id="tbl-verdict-table"'):]
    body = html.unescape(body[:body.index("</table>")])
    for row in vt.rows:
        assert row[4] in body and row[7] in body  # the SUT and its capacity
    # the matrix opens the verdict, every SUT a column
    (m,) = [x for s in out.sections for x in s.matrices]
    assert found["matrix"]["rows"] == len(m.rows)
    head = dom[dom.index('id="verdict-matrix"'):]
    head = head[:head.index("</thead>")]
    for c in m.columns:
        assert f"<th>{html.escape(c)}</th>" in head
