"""``build_report``: one campaign of a results database to a directory with
``index.html`` and a PNG and an SVG of every plot."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..results import ResultsDB
from .model import Figure, Section
from .page import render_page
from .plots import palette, render_figure
from .points import CampaignData, load_campaign
from .sections import all_sections

__all__ = ["PAGE_NAME", "ReportOutput", "build_report"]

#: File name of the page inside the output directory.
PAGE_NAME = "index.html"


@dataclass
class ReportOutput:
    """What a report run wrote, and the data every plot was drawn from."""

    page: Path
    data: CampaignData
    sections: list[Section]
    files: list[Path] = field(default_factory=list)

    def figures(self) -> list[Figure]:
        """Every figure with data (each has a PNG and an SVG next to the page)."""
        return [f for s in self.sections for f in s.figures if not f.is_empty()]

    def section(self, key: str) -> Section:
        """The section with this key (KeyError if none)."""
        for s in self.sections:
            if s.key == key:
                return s
        raise KeyError(key)


def build_report(db: ResultsDB | str | Path, campaign: Any, outdir: str | Path) -> ReportOutput:
    """Write the report of one campaign (name, id, or None for the latest) to outdir.

    Raises KeyError when the campaign does not exist.
    """
    if not isinstance(db, ResultsDB):
        path = Path(db)
        if not path.exists():
            raise FileNotFoundError(f"no results database at {path}")
        with ResultsDB(path) as opened:
            return build_report(opened, campaign, outdir)
    out = Path(outdir)
    data = load_campaign(db, campaign)
    sections = all_sections(data)
    out.mkdir(parents=True, exist_ok=True)
    files: list[Path] = []
    keys: set[str] = set()
    colors = palette([f for s in sections for f in s.figures])
    for s in sections:
        for f in s.figures:
            if f.is_empty():
                continue
            base, i = f.key, 2
            while f.key in keys:  # two figures must never share a file
                f.key = f"{base}-{i}"
                i += 1
            keys.add(f.key)
            files.extend(render_figure(f, out, colors))
    c = data.campaign
    page = out / PAGE_NAME
    tmp = out / (PAGE_NAME + ".tmp")
    tmp.write_text(render_page(f"Turnout report: {c.name} (run {c.id})", sections),
                   encoding="utf-8")
    tmp.replace(page)
    return ReportOutput(page=page, data=data, sections=sections, files=files)
