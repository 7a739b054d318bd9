"""Plain data behind every plot and table of the report.

The section modules (``sections.py`` lists them) turn the results
database into these dataclasses; plot functions (``plots.py``) and the page (``page.py``) only
read them. Tests check these objects, never pixels.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = [
    "Figure",
    "Matrix",
    "MatrixCell",
    "MatrixRow",
    "Panel",
    "Point",
    "Section",
    "Series",
    "Spread",
    "Table",
    "distinct",
    "slug",
    "spread_of",
    "spread_or_none",
    "within_noise",
]


@dataclass(frozen=True)
class Spread:
    """Median of repetitions with their range (min..max) and count."""

    median: float
    min: float
    max: float
    n: int

    @property
    def width(self) -> float:
        """max - min: the measured spread, in the unit of the values."""
        return self.max - self.min

    @property
    def rel(self) -> float:
        """(max - min) / |median| (0 when every value is 0)."""
        if self.median == 0:
            return 0.0 if self.width == 0 else math.inf
        return self.width / abs(self.median)

    def scaled(self, k: float) -> Spread:
        """The same spread in another unit (k ≥ 0)."""
        return Spread(self.median * k, self.min * k, self.max * k, self.n)


def spread_of(values: Sequence[float]) -> Spread:
    """Median, min, max and count of a non-empty sequence."""
    if not values:
        raise ValueError("spread of no values")
    return Spread(statistics.median(values), min(values), max(values), len(values))


def spread_or_none(values: Sequence[float]) -> Spread | None:
    """``spread_of`` of some values, None of none (``fmt_spread`` shows it as "–")."""
    return spread_of(values) if values else None


def within_noise(a: Spread, b: Spread) -> bool | None:
    """Whether the difference between two medians is no larger than the
    measured spread (max - min) of either side.

    None when either side has fewer than two repetitions: its spread is
    unknown, so no difference can be shown to exceed it. Callers must treat
    None as "unknown" — never as "not within noise" (it is falsy).
    """
    if a.n < 2 or b.n < 2:
        return None
    spread = max(a.width, b.width)
    return abs(a.median - b.median) <= spread


def distinct(a: Spread, b: Spread) -> bool:
    """True only when the difference is known to exceed the spread: both
    sides measured at least twice and their medians further apart than
    either's range. What may be ranked."""
    return within_noise(a, b) is False


@dataclass
class Point:
    """One plotted point: x and the median of y with its range.

    ``noisy`` marks a point whose claimed difference (to the next SUT below
    it, or to the reference) is within the measured spread, or whose spread
    is unknown (one repetition); it is drawn hollow.
    """

    x: float | str
    y: float
    lo: float | None = None
    hi: float | None = None
    n: int = 1
    noisy: bool = False
    #: written next to the point (``xy`` panels: the load it was taken at)
    label: str = ""
    #: range of x (``xy`` panels: the CPU's min..max over repetitions)
    xlo: float | None = None
    xhi: float | None = None


@dataclass
class Series:
    """One line (or set of markers) of a panel."""

    label: str
    points: list[Point] = field(default_factory=list)
    style: str = "-"  # matplotlib line style: '-', '--', ':', '' (markers only)
    step: bool = False  # draw as a step function (CDFs)

    def xs(self) -> list[float | str]:
        """x values in plotting order."""
        return [p.x for p in self.points]

    def ys(self) -> list[float]:
        """y values (medians) in plotting order."""
        return [p.y for p in self.points]


@dataclass
class Panel:
    """One axes of a figure.

    ``kind``: ``line`` (lines with min..max error bars), ``cdf`` (step
    curves), ``scatter`` (markers joined in x order), ``errbar`` (categorical
    x, median marker with min..max bar: parameter error bars), ``cat`` (one
    category per series along x — a SUT each —, its median marker with the
    min..max bar), ``xy`` (markers joined in the order given, each labelled
    with ``Point.label``, bars in x and y).
    """

    title: str
    xlabel: str
    ylabel: str
    series: list[Series] = field(default_factory=list)
    kind: str = "line"
    xlog: bool = False
    ylog: bool = False
    hline: float | None = None  # a reference line (1.0 for normalised plots)
    #: labelled horizontal reference lines (the wire's p99: the floor)
    hlines: list[tuple[float, str]] = field(default_factory=list)


@dataclass
class Figure:
    """One plot file pair (``<key>.png`` and ``<key>.svg``) of one or more panels."""

    key: str
    title: str
    panels: list[Panel] = field(default_factory=list)
    caption: str = ""
    cols: int | None = None  # panels per row (default: up to 3)

    @property
    def png(self) -> str:
        """File name of the PNG next to the page."""
        return f"{self.key}.png"

    @property
    def svg(self) -> str:
        """File name of the SVG next to the page."""
        return f"{self.key}.svg"

    def is_empty(self) -> bool:
        """True when no panel has a single point."""
        return not any(s.points for p in self.panels for s in p.series)


@dataclass
class Table:
    """A table of the page (and of the terminal summary).

    ``flags[i]`` is a short mark for row i (e.g. "within noise"), shown
    highlighted; empty for an unmarked row.
    """

    key: str
    title: str
    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    note: str = ""
    mono: list[int] = field(default_factory=list)  # columns shown as preformatted code
    #: the table in words, a sentence a line, shown under it (and in the summary)
    sentences: list[str] = field(default_factory=list)


@dataclass
class MatrixCell:
    """One SUT at one row of the verdict matrix.

    ``cls``: how it is coloured — ``best`` (ranked first alone), ``tie``
    (shares the first rank), ``mid``, ``last`` (the last rank, below the
    first), ``unranked`` (a value but no rank: one repetition, or no
    account of the row's measure), ``skipped``, ``failed``, or ``""`` (the
    SUT has no place in this row: another port type, not in the campaign).
    """

    value: str = ""  # the row's measure, median ("202", "0.71")
    ratio: str = ""  # to the best: "best", "1.36×"
    rank: str = ""  # "1", "=1", "3", "–"
    cls: str = ""
    title: str = ""  # the full story, shown on hover

    def text(self) -> str:
        """The cell as plain text (terminal)."""
        if self.cls in ("skipped", "failed"):
            return self.cls
        if not self.value:
            return ""
        return " ".join(x for x in (self.rank, self.value, self.ratio) if x)


@dataclass
class MatrixRow:
    """One use case at one frame size and port type: a cell per SUT."""

    label: str
    measure: str  # what the cells hold: "cyc/frame ↓" | "Mpps ↑"
    cells: list[MatrixCell] = field(default_factory=list)
    sentence: str = ""


@dataclass
class Matrix:
    """The verdict at a glance: use cases × frame sizes down, SUTs across."""

    key: str
    title: str
    columns: list[str]
    rows: list[MatrixRow] = field(default_factory=list)
    note: str = ""


@dataclass
class Section:
    """A heading with its explanation, figures and tables; ``empty`` says
    why there is nothing to show (the page prints it instead of plots)."""

    key: str
    title: str
    intro: str
    figures: list[Figure] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    empty: str = ""
    #: shown first, before figures and tables (the verdict's matrix)
    matrices: list[Matrix] = field(default_factory=list)

    def has_data(self) -> bool:
        """True when the section has at least one non-empty figure, table row or matrix row."""
        return (any(not f.is_empty() for f in self.figures) or any(t.rows for t in self.tables)
                or any(m.rows for m in self.matrices))


_SLUG = re.compile(r"[^a-z0-9]+")


def slug(*parts: object) -> str:
    """A file-name-safe key from parts: lower case, [a-z0-9-] only."""
    s = "-".join(str(p) for p in parts if p is not None and str(p) != "")
    s = _SLUG.sub("-", s.lower()).strip("-")
    return s or "plot"
