"""The options of a SUT adapter (``[sut.NAME]`` of a campaign) as a typed,
frozen dataclass, one per adapter (``SutAdapter.Options``).

Each field says what it accepts (``opt(default, check, help)``); ``parse``
refuses an unknown key or a bad value with the key and the accepted values,
as turnoutd's config refuses an unknown field. The campaign parser
(campaign/spec.py) runs it on every ``[sut.NAME]`` table, so a typo stops
the campaign before any trial instead of running the SUT in its default.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Self

from ..portkind import KERNEL, PortKind, PortKindError, describe

__all__ = ["KERNEL_PORTS", "Bool", "Choice", "Fractions", "Int", "Kind", "OptionError",
           "Strings", "SutOptions", "Table", "Text", "opt"]


class OptionError(ValueError):
    """A ``[sut.NAME]`` key the adapter does not take, or a value it does not
    accept. ``key`` is the option, ``why`` says what is accepted."""

    def __init__(self, key: str, why: str) -> None:
        super().__init__(f"{key}: {why}")
        self.key = key
        self.why = why


class Check(ABC):
    """What one option accepts: ``__call__`` returns the value in its
    canonical form or raises ValueError; ``accepts`` says what it takes."""

    accepts = ""

    @abstractmethod
    def __call__(self, v: object) -> Any:
        """The value in its canonical form; ValueError if not accepted."""

    def stored(self, v: Any) -> Any:
        """The canonical value as stored with the SUT's configuration."""
        return v


class Choice(Check):
    """One of some names (``aliases``: other spellings of them)."""

    def __init__(self, *values: str, aliases: Mapping[str, str] | None = None) -> None:
        self.values = values
        self.aliases = dict(aliases or {})
        self.accepts = " or ".join(values) if len(values) <= 2 else \
            "one of " + ", ".join(values)

    def __call__(self, v: object) -> str:
        if isinstance(v, str):
            v = self.aliases.get(v, v)
            if v in self.values:
                return v
        raise ValueError(f"{v!r} is not {self.accepts}")


class Kind(Check):
    """A port kind (turnout.portkind), among ``kinds``."""

    def __init__(self, *kinds: PortKind) -> None:
        self.kinds = kinds
        self.accepts = describe(kinds)

    def __call__(self, v: object) -> PortKind:
        try:
            return PortKind.parse(v, self.kinds)
        except PortKindError as e:
            raise ValueError(str(e)) from None

    def stored(self, v: Any) -> Any:
        return str(v)


class Int(Check):
    """An integer within ``lo..hi``."""

    def __init__(self, lo: int, hi: int, unit: str = "") -> None:
        self.lo, self.hi = lo, hi
        self.accepts = f"an integer within {lo}..{hi}{' ' + unit if unit else ''}"

    def __call__(self, v: object) -> int:
        if isinstance(v, int) and not isinstance(v, bool) and self.lo <= v <= self.hi:
            return v
        raise ValueError(f"{v!r} is not {self.accepts}")


class Bool(Check):
    """true or false."""

    accepts = "true or false"

    def __call__(self, v: object) -> bool:
        if isinstance(v, bool):
            return v
        raise ValueError(f"{v!r} is not {self.accepts}")


class Fractions(Check):
    """A non-empty list of numbers within (0, 1]."""

    accepts = "a non-empty list of numbers within (0, 1]"

    def __call__(self, v: object) -> tuple[float, ...]:
        if isinstance(v, list) and v and all(
                isinstance(x, int | float) and not isinstance(x, bool) and 0 < x <= 1
                for x in v):
            return tuple(float(x) for x in v)
        raise ValueError(f"{v!r} is not {self.accepts}")

    def stored(self, v: Any) -> Any:
        return list(v)


class Text(Check):
    """A non-empty string."""

    accepts = "a non-empty string"

    def __call__(self, v: object) -> str:
        if isinstance(v, str) and v:
            return v
        raise ValueError(f"{v!r} is not {self.accepts}")


class Strings(Check):
    """A non-empty list of strings."""

    accepts = "a non-empty list of strings"

    def __call__(self, v: object) -> tuple[str, ...]:
        if isinstance(v, list) and v and all(isinstance(x, str) for x in v):
            return tuple(v)
        raise ValueError(f"{v!r} is not {self.accepts}")

    def stored(self, v: Any) -> Any:
        return list(v)


class Table(Check):
    """A table (its keys are another program's: passed on as they are)."""

    accepts = "a table"

    def __call__(self, v: object) -> dict[str, Any]:
        if isinstance(v, dict):
            return dict(v)
        raise ValueError(f"{v!r} is not {self.accepts}")


def opt(default: Any, check: Check, help: str) -> Any:
    """A field of an options dataclass: its default, what it accepts, what it does."""
    return field(default=default, metadata={"check": check, "help": help})


@dataclass(frozen=True)
class SutOptions:
    """The options every adapter takes. Subclasses add their own fields
    (``opt``); an adapter names its class in ``SutAdapter.Options``."""

    scenarios: tuple[str, ...] | None = opt(
        None, Strings(), "the scenarios this SUT runs in the campaign (SCENARIO or "
        "SCENARIO/vhost-user); the others are skipped with scenarios_reason")
    scenarios_reason: str | None = opt(
        None, Text(), "why the SUT runs only ``scenarios`` (shown in the verdict)")
    latency_fractions: tuple[float, ...] | None = opt(
        None, Fractions(), "this SUT's latency loads, fractions of its own R+, instead of "
        "the campaign's latency_fractions (e.g. a power-saving setting also at 0.1)")
    ranked: bool = opt(
        True, Bool(), "false: measured and drawn in every table and picture (latency, CPU "
        "vs p99) but left out of the verdict's ranks: a setting of another SUT shown for "
        "the trade it makes, not a competitor")

    @classmethod
    def names(cls) -> list[str]:
        """The keys it takes, in declaration order."""
        return [f.name for f in dataclasses.fields(cls)]

    @classmethod
    def check_of(cls, key: str) -> Check:
        for f in dataclasses.fields(cls):
            if f.name == key:
                c = f.metadata["check"]
                assert isinstance(c, Check)
                return c
        raise KeyError(key)

    @classmethod
    def parse(cls, table: Mapping[str, Any] | None) -> Self:
        """The options of a ``[sut.NAME]`` table; OptionError on an unknown
        key or a bad value."""
        values: dict[str, Any] = {}
        keys = cls.names()
        for k, v in (table or {}).items():
            if k not in keys:
                raise OptionError(k, f"unknown option (accepted: {', '.join(keys)})")
            try:
                values[k] = cls.check_of(k)(v)
            except ValueError as e:
                raise OptionError(k, str(e)) from None
        return cls(**values)

    @classmethod
    def canonical(cls, table: Mapping[str, Any] | None) -> dict[str, Any]:
        """The table with each value in its canonical spelling (``afxdp`` ->
        ``af_xdp``), the keys it gives only: what a SUT's configuration
        stores. Raises OptionError as ``parse``."""
        parsed = cls.parse(table)
        return {k: cls.check_of(k).stored(getattr(parsed, k)) for k in (table or {})}

    @classmethod
    def reference(cls) -> str:
        """One line per option: key, accepted values, default, what it does
        (docs/bench.md lists the same)."""
        lines = []
        for f in dataclasses.fields(cls):
            c = f.metadata["check"]
            d = "" if f.default is None else f"; default {f.default}"
            lines.append(f"{f.name}: {c.accepts}{d}. {f.metadata['help']}")
        return "\n".join(lines)


#: the kinds of port a SUT can open a veth end with
KERNEL_PORTS = Kind(*KERNEL)
