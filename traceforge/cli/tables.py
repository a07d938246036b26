"""The text of a declared table (``annotator.plugin.Table``): its title and its columns, each
shown in its unit. CSV and JSON write the DataFrame as it is (``output.emit``)."""

from __future__ import annotations

from collections.abc import Callable

from ..annotator.plugin import Column, Table
from ..util.exacttime import ns_to_us_text
from ..util.lazy_pandas import pd
from .output import Col, count, ms, pct, render, us, wrap

WHOLE_TRACE_TEXT = "all"  # a per-step table's whole-trace row (``Column.unit`` "step")


def _step(step: object) -> str:
    return WHOLE_TRACE_TEXT if int(step) < 0 else str(step)


def _mb(value: object) -> str:
    """Bytes as MB (10^6 bytes); -1 (no level) as "-"."""
    return "-" if int(value) < 0 else f"{int(value) / 1e6:,.1f}"


def _ts(ns: object) -> str:
    return "-" if int(ns) < 0 else ns_to_us_text(int(ns))


# Each unit a declared column may name, and how its values are shown in text.
UNITS: dict[str, Callable[[object], str]] = {
    "": str,
    "count": count,
    "ms": ms,
    "us": us,
    "pct": pct,
    "step": _step,  # a step number; the whole-trace row (a negative step) as "all"
    "MB": _mb,  # bytes as MB with one decimal; -1 (none) as "-"
    "MB.3": lambda v: f"{int(v) / 1e6:,.3f}",  # bytes as MB with three decimals
    "ts_us": _ts,  # a ts in ns as exact us; -1 (none) as "-"
    "GB/s": lambda v: f"{float(v):,.3f}",
    "0.1": lambda v: f"{float(v):,.1f}",  # a number with one decimal
}


def text_columns(columns: tuple[Column, ...], df: pd.DataFrame) -> list[Col]:
    """The ``Col`` of each declared column (those ``if_positive`` only where a row of ``df`` is above 0)."""
    return [Col(c.header, c.key, UNITS[c.unit], left=c.left, repeat=c.repeat, width=c.width) for c in columns
            if not c.if_positive or bool((df[c.key] > 0).any())]


def section(table: Table, df: pd.DataFrame | None) -> list[str]:
    """A blank line, the wrapped title and the rows of ``df`` (nothing for no row, or a table without columns)."""
    if df is None or not len(df) or not table.columns:
        return []
    return ["", *wrap(table.title), *render(df, text_columns(table.columns, df))]
