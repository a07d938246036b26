"""Printing DataFrames for the table commands (stats, diff): aligned text, CSV or JSON.

CSV of several tables: each starts with a ``# <table>`` line (``--table`` gives plain CSV).
JSON: ``{table: [row, ...]}``, integers exact.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import orjson

from ..errors import UsageError
from ..util.lazy_pandas import pd

FORMATS = ("text", "csv", "json")


@dataclass(frozen=True)
class Col:
    """A text column: header, DataFrame column, how to show a value; text columns align left."""

    header: str
    key: str
    show: Callable[[object], str] = str
    left: bool = False


def ms(ns: object) -> str:
    return f"{int(ns) / 1e6:,.3f}"


def us(ns: object) -> str:
    return f"{float(ns) / 1e3:,.3f}"


def pct(value: object) -> str:
    return f"{float(value):.2f}"


def count(value: object) -> str:
    return f"{int(value):,}"


def short(name: object, width: int = 100) -> str:
    """Long kernel names cut in the middle, so the start and the end stay readable."""
    text = str(name)
    return text if len(text) <= width else text[: width // 2 - 2] + " .. " + text[-(width // 2 - 2):]


def render(df: pd.DataFrame, cols: list[Col], indent: str = "  ") -> list[str]:
    """Aligned rows under a header line."""
    cells = [[c.header for c in cols]] + [[c.show(v) for c, v in zip(cols, row)] for row in df[[c.key for c in cols]].itertuples(index=False)]
    widths = [max(len(r[i]) for r in cells) for i in range(len(cols))]
    lines = []
    for r in cells:
        parts = [v.ljust(w) if c.left else v.rjust(w) for v, w, c in zip(r, widths, cols)]
        lines.append((indent + "  ".join(parts)).rstrip())
    return lines


def check_one_csv_table(command: str, fmt: str, wanted: Sequence[str], choices: Sequence[str]) -> None:
    """A CSV holds one table (so ``pandas.read_csv`` reads it): with ``--format csv``, ``--table``
    must name exactly one of ``choices``; said before any work is done."""
    if fmt == "csv" and len(wanted) != 1:
        raise UsageError(f"{command} --format csv writes one table: name it with --table ({', '.join(choices)})")


def emit(tables: dict[str, pd.DataFrame], fmt: str, text: Callable[[], list[str]]) -> None:
    """Print ``tables`` as JSON, or the one table as CSV (``check_one_csv_table``), or the
    ``text`` lines."""
    out = sys.stdout
    if fmt == "json":
        doc = {name: df.to_dict("records") for name, df in tables.items()}
        out.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY).decode() + "\n")
    elif fmt == "csv":
        (df,) = tables.values()
        out.write(df.to_csv(index=False))
    else:
        out.write("\n".join(text()) + "\n")
