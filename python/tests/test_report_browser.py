"""The report page in headless Chromium: every plot image loads, every table is there.

A test copy of the page gets a small script that writes, after the load
event, each image's naturalWidth/naturalHeight and each table's id and row
count into the DOM; ``chromium --dump-dom`` prints the DOM, and the test
reads that back. A control image pointing at a missing file must report
width 0, so the check itself is shown to work. Skipped without chromium.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess

import pytest

from test_report import fill_campaign
from turnout import testpeers
from turnout.report import build_report
from turnout.results import ResultsDB

#: Chromium, a process of its own (docs/testing.md, system tests).
pytestmark = pytest.mark.system

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

_PROBE = """
<img class="plot" id="turnout-control" src="no-such-plot.png" alt="control">
<script>
window.addEventListener('load', function () {
  var imgs = Array.prototype.slice.call(document.querySelectorAll('img.plot'));
  var tables = Array.prototype.slice.call(document.querySelectorAll('table.data'));
  var out = document.createElement('pre');
  out.id = 'turnout-check';
  out.textContent = JSON.stringify({
    images: imgs.map(function (i) {
      return {src: i.getAttribute('src'), w: i.naturalWidth, h: i.naturalHeight};
    }),
    tables: tables.map(function (t) {
      return {id: t.id, rows: t.tBodies[0].rows.length, cols: t.tHead.rows[0].cells.length};
    })
  });
  document.body.appendChild(out);
});
</script>
"""


def _dump_dom(page, profile_dir) -> str:
    cmd = [
        CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--no-first-run", f"--user-data-dir={profile_dir}", "--virtual-time-budget=10000",
        "--dump-dom", page.as_uri(),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_page_renders_in_chromium(tmp_path):
    testpeers.need(CHROMIUM, "chromium not installed (Debian package chromium)")
    db_path = tmp_path / "results.db"
    with ResultsDB(db_path) as db:
        fill_campaign(db, "base")
    out = build_report(db_path, "base", tmp_path / "report")
    text = out.page.read_text(encoding="utf-8")
    assert text.count("</body>") == 1
    probe = out.page.with_name("browser-check.html")  # the page itself stays script-free
    probe.write_text(text.replace("</body>", _PROBE + "</body>"), encoding="utf-8")

    dom = _dump_dom(probe, tmp_path / "chromium-profile")
    m = re.search(r'<pre id="turnout-check">(.*?)</pre>', dom, re.S)
    assert m, "the probe script did not run: " + dom[-500:]
    found = json.loads(html.unescape(m.group(1)))

    images = {i["src"]: i for i in found["images"]}
    assert images.pop("no-such-plot.png")["w"] == 0  # the check can see a broken image
    figures = out.figures()
    assert sorted(images) == sorted(f.png for f in figures)
    for src, i in images.items():
        assert i["w"] > 0 and i["h"] > 0, f"{src} did not load"

    tables = {t["id"]: t for t in found["tables"]}
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
        assert row[4] in body and row[6] in body
