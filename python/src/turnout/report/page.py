"""The static HTML page: inline CSS, no scripts, no network; plots are the
PNG files next to it (with links to the SVGs)."""

from __future__ import annotations

import html
from datetime import UTC, datetime

from .model import Figure, Matrix, Section, Table
from .units import GBPS_DEFINITION

__all__ = ["render_page"]

_CSS = """
body { font-family: system-ui, -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif;
       margin: 0 auto; max-width: 1320px; padding: .6em 1.5em 4em; color: #1b1f24;
       line-height: 1.4; background: #fff; }
h1 { font-size: 1.45em; margin: .2em 0 0; }
h2 { font-size: 1.25em; border-bottom: 2px solid #d0d7de; padding-bottom: .2em;
     margin-top: 2.2em; }
section:first-of-type h2 { margin-top: .5em; }
h3 { font-size: 1.02em; margin: 1.4em 0 .4em; }
p.meta { color: #57606a; margin: 0 0 .3em; font-size: .88em; }
p.units { background: #f6f8fa; border-left: 4px solid #0969da; padding: .5em .8em; }
p.empty { color: #57606a; font-style: italic; background: #f6f8fa; padding: .6em .8em; }
nav ul { display: flex; flex-wrap: wrap; gap: .1em 1.1em; padding: 0; margin: .2em 0;
         list-style: none; font-size: .85em; }
figure { margin: 1.2em 0; }
figure img { max-width: 100%; height: auto; border: 1px solid #d0d7de; }
figcaption { font-size: .88em; color: #57606a; }
div.tablewrap { max-width: 100%; }
table.data { border-collapse: collapse; font-size: .84em; margin: .4em 0 1.2em;
             font-variant-numeric: tabular-nums; max-width: 100%; }
table.data th, table.data td { border: 1px solid #d0d7de; padding: .25em .45em;
                               text-align: left; vertical-align: top;
                               overflow-wrap: break-word; }
table.data td.long { overflow-wrap: anywhere; min-width: 8em; }
table.data th { background: #f6f8fa; }
table.data tr.flag td { background: #fff8c5; }
td.mark { color: #9a6700; font-weight: 600; }
td details summary { cursor: pointer; }
td details[open] summary { display: none; }
pre { margin: 0; font-size: .92em; white-space: pre-wrap; overflow-wrap: anywhere;
      max-height: 24em; overflow-y: auto; }
p.note { font-size: .85em; color: #57606a; }
table.matrix { border-collapse: collapse; font-size: .9em; margin: .5em 0 .3em;
               font-variant-numeric: tabular-nums; max-width: 100%; }
table.matrix th, table.matrix td { border: 1px solid #d0d7de; padding: .2em .55em;
                                   text-align: left; overflow-wrap: break-word; }
table.matrix th { background: #f6f8fa; }
table.matrix td.v { text-align: right; white-space: nowrap; }
table.matrix td.v b { font-weight: 600; }
table.matrix td.v small { color: #424a53; }
table.matrix td.best { background: #aceebb; }
table.matrix td.tie { background: #dafbe1; }
table.matrix td.mid { background: #fff8c5; }
table.matrix td.last { background: #ffdcd7; }
table.matrix td.unranked { background: #eaeef2; }
table.matrix td.skipped { color: #6e7781; font-style: italic; }
table.matrix td.failed { color: #cf222e; font-style: italic; }
table.matrix td.m { color: #57606a; font-size: .85em; white-space: nowrap; }
ul.sentences { margin: .3em 0 .8em; padding-left: 1.2em; font-size: .92em; }
"""


def _e(s: object) -> str:
    return html.escape(str(s), quote=True)


def _figure(f: Figure) -> str:
    if f.is_empty():
        return f'<p class="empty">{_e(f.title)}: no data.</p>'
    return (
        f'<figure id="fig-{_e(f.key)}">'
        f'<img class="plot" src="{_e(f.png)}" alt="{_e(f.title)}">'
        f"<figcaption>{_e(f.title)}{(' — ' + _e(f.caption)) if f.caption else ''} · "
        f'<a href="{_e(f.svg)}">SVG</a> · <a href="{_e(f.png)}">PNG</a></figcaption></figure>'
    )


#: cells longer than this are shown abbreviated, the full text on hover and
#: one click away (a details element): every table fits the page's width
LONG_CELL = 160
#: cells longer than this may break inside a word (class "long")
LONG_WORDS = 40


def _cell(text: str) -> str:
    if len(text) <= LONG_CELL:
        return _e(text)
    cut = text[:LONG_CELL - 40].rsplit(" ", 1)[0]
    return (f'<details title="{_e(text)}"><summary>{_e(cut)} …</summary>'
            f"{_e(text)}</details>")


def _matrix(m: Matrix) -> str:
    if not m.rows:
        return ""
    head = "".join(f"<th>{_e(c)}</th>" for c in ["use case", "measure", *m.columns])
    body = []
    for r in m.rows:
        cells = [f"<td>{_e(r.label)}</td>", f'<td class="m">{_e(r.measure)}</td>']
        for c in r.cells:
            title = f' title="{_e(c.title)}"' if c.title else ""
            if c.cls in ("skipped", "failed"):
                cells.append(f'<td class="v {c.cls}"{title}>{c.cls}</td>')
            elif c.value:
                rank = f"<small>{_e(c.rank)}</small> " if c.rank else ""
                ratio = f" <small>{_e(c.ratio)}</small>" if c.ratio else ""
                cells.append(f'<td class="v {c.cls}"{title}>{rank}<b>{_e(c.value)}</b>'
                             f"{ratio}</td>")
            else:
                cells.append('<td class="v"></td>')
        body.append(f"<tr>{''.join(cells)}</tr>")
    sentences = "".join(f"<li>{_e(r.sentence)}</li>" for r in m.rows if r.sentence)
    note = f'<p class="note">{_e(m.note)}</p>' if m.note else ""
    return (f'<table class="matrix" id="{_e(m.key)}"><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(body)}</tbody></table>"
            + (f'<ul class="sentences">{sentences}</ul>' if sentences else "") + note)


def _table(t: Table) -> str:
    if not t.rows:
        return f'<p class="empty">{_e(t.title)}: no rows.</p>'
    has_flags = any(t.flags)
    head = "".join(f"<th>{_e(c)}</th>" for c in t.columns)
    if has_flags:
        head += "<th>mark</th>"
    body = []
    for i, row in enumerate(t.rows):
        flag = t.flags[i] if i < len(t.flags) else ""
        cells = []
        for j, cell in enumerate(row):
            inner = f"<pre>{_e(cell)}</pre>" if j in t.mono else _cell(cell)
            # free text may break anywhere (a path, a long reason): the
            # table never grows wider than the page
            cls = ' class="long"' if len(cell) > LONG_WORDS and j not in t.mono else ""
            cells.append(f"<td{cls}>{inner}</td>")
        if has_flags:
            cells.append(f'<td class="mark{" long" if len(flag) > LONG_WORDS else ""}">'
                         f"{_cell(flag)}</td>")
        cls = ' class="flag"' if flag else ""
        body.append(f"<tr{cls}>{''.join(cells)}</tr>")
    note = f'<p class="note">{_e(t.note)}</p>' if t.note else ""
    words = "".join(f"<li>{_e(x)}</li>" for x in t.sentences)
    return (
        f"<h3>{_e(t.title)}</h3>"
        f'<div class="tablewrap"><table class="data" id="tbl-{_e(t.key)}">'
        f"<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table></div>"
        + (f'<ul class="sentences">{words}</ul>' if words else "") + note
    )


def _section(s: Section) -> str:
    parts = [f'<section id="{_e(s.key)}"><h2>{_e(s.title)}</h2>']
    if s.intro:
        parts.append(f"<p>{_e(s.intro)}</p>")
    if s.empty or not s.has_data():
        parts.append(f'<p class="empty">{_e(s.empty or "No data in this campaign.")}</p>')
    else:
        parts.extend(_matrix(m) for m in s.matrices)
        parts.extend(_figure(f) for f in s.figures)
        parts.extend(_table(t) for t in s.tables)
    parts.append("</section>")
    return "\n".join(parts)


def render_page(title: str, sections: list[Section], generated_by: str = "turnout report") -> str:
    """The whole page as one string."""
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    toc = "".join(
        f'<li><a href="#{_e(s.key)}">{_e(s.title)}</a>'
        f"{'' if s.has_data() and not s.empty else ' (no data)'}</li>"
        for s in sections
    )
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>\n"
        f"<h1>{_e(title)}</h1>"
        f'<p class="meta">Generated by {_e(generated_by)} at {now}. Every value is the '
        "median over repetitions with its range [min–max].</p>"
        f"<nav><ul>{toc}</ul></nav>\n"
        # the verdict first, within the first screen; the units after it
        + "\n".join(_section(s) for s in sections[:1])
        + f'\n<p class="units">{_e(GBPS_DEFINITION)} Mpps = 10⁶ packets per second. Every '
        "value is the median over repetitions with its range [min–max]; rows marked in "
        "yellow claim a difference that is within the measured spread.</p>\n"
        + "\n".join(_section(s) for s in sections[1:])
        + "\n</body></html>\n"
    )
