"""Turnout workbench: measures software switches fairly and reproducibly.

Subpackages: ``results`` (SQLite store), ``measure`` (Measurer interface,
turnout-gen driver, CPU sampling, statistics), ``search`` (R+, NDR/PDR),
``testbed`` (namespaces, veths, memif dirs), ``sut`` (switch adapters),
``scenarios``, ``campaign`` (TOML campaigns, runner), ``system`` (host checks
and fingerprint), ``report`` (HTML report, owned separately).
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
