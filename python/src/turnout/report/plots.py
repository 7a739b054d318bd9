"""Drawing: one ``Figure`` of plain data to a PNG and an SVG file.

matplotlib with the Agg backend (no display needed). The plot functions
read only the ``model`` dataclasses; what they draw is checked in tests
through that data, and the files through their existence and size.
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
from matplotlib.colors import to_rgb

from .model import Figure, Panel, Series

__all__ = ["PNG_DPI", "palette", "render_figure"]

#: Resolution of the PNG files (the SVG is vector).
PNG_DPI = 110
_PANEL_W_IN = 5.4
_PANEL_H_IN = 3.9
_COLORS = [to_rgb(c) for c in matplotlib.color_sequences["tab10"]]


def palette(figures: list[Figure]) -> dict[str, tuple]:
    """One colour per SUT over all these figures (SUT names in sorted order),
    so a SUT has the same colour in every plot of the page."""
    names = sorted({_sut_of(s.label) for f in figures for p in f.panels for s in p.series
                    if p.kind != "errbar"})
    return {n: _COLORS[i % len(_COLORS)] for i, n in enumerate(names)}


def _sut_of(label: str) -> str:
    """The SUT name of a series label: without method/percentile suffix and
    virtual port kind."""
    for suffix in (" R+", " PDR", " NDR", " p50", " p99"):
        if label.endswith(suffix):
            label = label[: -len(suffix)]
            break
    return label.split(" @", 1)[0].split(" [", 1)[0]


def _errs(series: Series) -> tuple[list[float], list[float]] | None:
    if not any(p.lo is not None and p.hi is not None and p.hi > p.lo for p in series.points):
        return None
    lo = [max(p.y - (p.lo if p.lo is not None else p.y), 0.0) for p in series.points]
    hi = [max((p.hi if p.hi is not None else p.y) - p.y, 0.0) for p in series.points]
    return lo, hi


def _draw_xy(ax, s: Series, color, kind: str) -> None:
    xs = [float(p.x) for p in s.points]
    ys = [p.y for p in s.points]
    style = s.style if kind != "scatter" else "-"
    ax.plot(xs, ys, linestyle=style or "none", color=color, label=s.label, linewidth=1.4)
    filled = [(x, y) for x, y, p in zip(xs, ys, s.points, strict=True) if not p.noisy]
    hollow = [(x, y) for x, y, p in zip(xs, ys, s.points, strict=True) if p.noisy]
    if filled:
        ax.plot(*zip(*filled, strict=True), linestyle="none", marker="o", markersize=4.5,
                color=color)
    if hollow:
        ax.plot(*zip(*hollow, strict=True), linestyle="none", marker="o", markersize=6,
                markerfacecolor="white", markeredgecolor=color, markeredgewidth=1.4)
    errs = _errs(s)
    if errs is not None:
        ax.errorbar(xs, ys, yerr=errs, fmt="none", ecolor=color, elinewidth=1, capsize=3)


def _draw_cat(ax, panel: Panel, colors: dict[str, tuple]) -> None:
    """One category per series along x (a SUT each): its median marker with
    the min..max bar, hollow when ``noisy``."""
    names = [s.label for s in panel.series if s.points]
    for i, s in enumerate(x for x in panel.series if x.points):
        color = colors[_sut_of(s.label)]
        for p in s.points:
            lo = p.y - (p.lo if p.lo is not None else p.y)
            hi = (p.hi if p.hi is not None else p.y) - p.y
            ax.errorbar([i], [p.y], yerr=[[max(lo, 0.0)], [max(hi, 0.0)]], fmt="none",
                        ecolor=color, elinewidth=1.6, capsize=5)
            ax.plot([i], [p.y], linestyle="none", marker="o", markersize=7, color=color,
                    markerfacecolor="white" if p.noisy else color, markeredgewidth=1.6)
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, fontsize=8, rotation=15 if len(names) > 3 else 0, ha="right"
                       if len(names) > 3 else "center")
    ax.set_xlim(-0.6, len(names) - 0.4)


def _draw_labelled(ax, panel: Panel, colors: dict[str, tuple]) -> None:
    """Markers joined in the order given (a SUT's loads), each labelled."""
    for s in panel.series:
        if not s.points:
            continue
        color = colors[_sut_of(s.label)]
        xs = [float(p.x) for p in s.points]
        ys = [p.y for p in s.points]
        ax.plot(xs, ys, linestyle="-", linewidth=1.0, color=color, alpha=0.6, label=s.label)
        for p, x, y in zip(s.points, xs, ys, strict=True):
            xerr = None
            if p.xlo is not None and p.xhi is not None and p.xhi > p.xlo:
                xerr = [[max(x - p.xlo, 0.0)], [max(p.xhi - x, 0.0)]]
            yerr = None
            if p.lo is not None and p.hi is not None and p.hi > p.lo:
                yerr = [[max(y - p.lo, 0.0)], [max(p.hi - y, 0.0)]]
            ax.errorbar([x], [y], xerr=xerr, yerr=yerr, fmt="o", color=color, capsize=3,
                        elinewidth=1, markersize=6,
                        markerfacecolor="white" if p.noisy else color)
            if p.label:
                ax.annotate(p.label, (x, y), textcoords="offset points", xytext=(5, 4),
                            fontsize=7, color=color)


def _draw_panel(ax, panel: Panel, colors: dict[str, tuple]) -> None:
    if panel.kind == "errbar":
        _draw_errbar(ax, panel)
    elif panel.kind in ("cat", "xy"):
        if panel.kind == "cat":
            _draw_cat(ax, panel, colors)
        else:
            _draw_labelled(ax, panel, colors)
        if panel.ylog and _all_positive(panel, "y"):
            ax.set_yscale("log")
        elif panel.kind == "cat":
            ax.set_ylim(bottom=0)
        if panel.kind == "xy":
            ax.set_xlim(left=0)
    else:
        for s in panel.series:
            if not s.points:
                continue
            color = colors[_sut_of(s.label)]
            if panel.kind == "cdf" or s.step:
                xs = [float(p.x) for p in s.points]
                ys = [p.y for p in s.points]
                ax.step(xs, ys, where="post", color=color, label=s.label, linewidth=1.4)
            else:
                _draw_xy(ax, s, color, panel.kind)
        if panel.kind == "cdf":
            ax.set_ylim(0, 1.02)
        if panel.xlog and _all_positive(panel, "x"):
            ax.set_xscale("log")
        if panel.ylog and _all_positive(panel, "y"):
            ax.set_yscale("log")
        if panel.kind in ("line", "scatter") and not panel.ylog:
            ax.set_ylim(bottom=0)
        xs = sorted({float(p.x) for s in panel.series for p in s.points})
        if panel.kind == "line" and 0 < len(xs) <= 8 and all(x == int(x) for x in xs) \
                and not panel.xlog:
            ax.set_xticks(xs)
    if panel.hline is not None:
        if panel.kind == "errbar":  # categories on y: the reference is vertical
            ax.axvline(panel.hline, color="grey", linewidth=0.8, linestyle=":")
        else:
            ax.axhline(panel.hline, color="grey", linewidth=0.8, linestyle=":")
    for y, text in panel.hlines:
        ax.axhline(y, color="black", linewidth=1.0, linestyle="--")
        ax.annotate(text, (0.01, y), xycoords=("axes fraction", "data"), textcoords="offset points",
                    xytext=(0, 3), fontsize=7, color="black")
    ax.set_title(panel.title, fontsize=10)
    if panel.kind == "errbar":  # drawn sideways
        ax.set_xlabel(panel.ylabel)
    else:
        ax.set_xlabel(panel.xlabel)
        ax.set_ylabel(panel.ylabel)
    ax.grid(True, which="major", alpha=0.3)
    if any(s.points for s in panel.series) and panel.kind not in ("errbar", "cat"):
        ax.legend(fontsize=7, loc="best")


def _all_positive(panel: Panel, axis: str) -> bool:
    if axis == "x" and panel.kind == "cat":
        return False
    vals = [float(p.x) if axis == "x" else p.y for s in panel.series for p in s.points]
    if axis == "y":
        vals += [y for y, _ in panel.hlines]
    return bool(vals) and all(v > 0 for v in vals)


def _draw_errbar(ax, panel: Panel) -> None:
    """Categories on the y axis (top to bottom), ratio on x: long labels stay readable."""
    labels: list[str] = []
    for si, s in enumerate(panel.series):
        color = _COLORS[si % len(_COLORS)]
        for p in s.points:
            if str(p.x) not in labels:
                labels.append(str(p.x))
            y = labels.index(str(p.x))
            lo = p.y - (p.lo if p.lo is not None else p.y)
            hi = (p.hi if p.hi is not None else p.y) - p.y
            ax.errorbar([p.y], [y], xerr=[[max(lo, 0.0)], [max(hi, 0.0)]], fmt="o",
                        color=color, capsize=4, elinewidth=1.6, markersize=5)
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(labels, fontsize=8)
    ax.set_ylim(len(labels) - 0.5, -0.5)
    xs = [v for s in panel.series for p in s.points for v in (p.lo, p.hi) if v is not None]
    if xs:
        ax.set_xlim(min(0.0, min(xs) - 0.05), max(xs) * 1.08 if max(xs) > 0 else 1.0)


def render_figure(fig: Figure, outdir: Path,
                  colors: dict[str, tuple] | None = None) -> tuple[Path, Path]:
    """Draw a figure; write ``<key>.png`` and ``<key>.svg`` into outdir.

    ``colors`` maps SUT names to colours (see :func:`palette`); SUTs not in
    it get one from this figure alone.

    Raises ValueError for a figure without a single point (the page says
    "no data" instead of drawing an empty plot).
    """
    if fig.is_empty():
        raise ValueError(f"figure {fig.key!r} has no data")
    n = len(fig.panels)
    cols = max(1, min(n, fig.cols or 3))
    rows = math.ceil(n / cols)
    cats = max((sum(len(s.points) for s in p.series) for p in fig.panels if p.kind == "errbar"),
               default=0)
    panel_h = max(_PANEL_H_IN, 0.3 * cats + 1.2)
    mfig, axes = plt.subplots(rows, cols, figsize=(_PANEL_W_IN * cols, panel_h * rows + 0.5),
                              squeeze=False)
    try:
        colors = dict(colors or {})
        for name, color in palette([fig]).items():
            colors.setdefault(name, color)
        for i, panel in enumerate(fig.panels):
            _draw_panel(axes[i // cols][i % cols], panel, colors)
        for j in range(n, rows * cols):
            axes[j // cols][j % cols].set_visible(False)
        mfig.suptitle(fig.title, fontsize=11)
        mfig.tight_layout()
        outdir.mkdir(parents=True, exist_ok=True)
        png = outdir / fig.png
        svg = outdir / fig.svg
        mfig.savefig(png, dpi=PNG_DPI)
        mfig.savefig(svg)
    finally:
        plt.close(mfig)
    return png, svg
