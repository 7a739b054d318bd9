"""Reports: the HTML page with plots, the terminal summary, comparisons.

- :func:`build_report` writes ``index.html`` and a PNG and an SVG of every
  plot for one campaign;
- :func:`print_summary` prints the summary table (the bench calls it after
  every campaign);
- :func:`compare_campaigns` puts two campaigns side by side.

``points`` loads a campaign's test points; one module per section
(``sections`` lists them in order) turns them into plain data (``model``);
plot functions (``plots``) only draw that data. matplotlib is imported only
when a report is built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .summary import print_summary, summary_text
from .units import GBPS_DEFINITION, gbps_l1, wire_bits

if TYPE_CHECKING:
    from .build import ReportOutput

__all__ = [
    "GBPS_DEFINITION",
    "build_report",
    "compare_campaigns",
    "gbps_l1",
    "print_summary",
    "summary_text",
    "wire_bits",
]


def build_report(db: Any, campaign: Any, outdir: Any) -> ReportOutput:
    """Write the report of one campaign; see :func:`turnout.report.build.build_report`."""
    from .build import build_report as _build

    return _build(db, campaign, outdir)


def compare_campaigns(db_a: Any, a: Any, b: Any, db_b: Any = None) -> Any:
    """Compare two campaigns; see :func:`turnout.report.compare.compare_campaigns`."""
    from .compare import compare_campaigns as _cmp

    return _cmp(db_a, a, b, db_b)
