"""Printing DataFrames for the table commands (stats, diff): aligned text, CSV or JSON.

Text fits ``WIDTH`` columns: a table wider than that is printed as several blocks, each
repeating the key columns (``Col.repeat``, else the first column); titles are wrapped.
A CSV is one table (``check_one_csv_table``). JSON: ``{table: [row, ...]}``, integers exact;
every command's JSON is written by ``json_text``.
"""

from __future__ import annotations

import json
import re
import sys
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import orjson

from ..errors import UsageError
from ..util.lazy_pandas import pd
from ..util.short_names import shorten, shorten_distinct

FORMATS = ("text", "csv", "json")
WIDTH = 100  # text outputs fit this many columns (a path longer than that aside)
MIN_CUT = 24  # a text column is cut (in the middle) to fit a block, but not below this


@dataclass(frozen=True)
class Col:
    """A text column: header, DataFrame column, how to show a value; text columns align left.
    ``repeat``: a key column, repeated in each block of a table too wide for ``WIDTH``."""

    header: str
    key: str
    show: Callable[[object], str] = str
    left: bool = False
    repeat: bool = False
    width: int | None = None  # a text column's most characters (names cut to it, kept distinct)


def ms(ns: object) -> str:
    """ns (an int, or a per-step mean) as ms with three decimals, for reading only."""
    return f"{float(ns) / 1e6:,.3f}"


def us(ns: object) -> str:
    return f"{float(ns) / 1e3:,.3f}"


def pct(value: object) -> str:
    return f"{float(value):.2f}"


def count(value: object) -> str:
    return f"{int(value):,}"


def short(name: object, width: int = WIDTH) -> str:
    """A long name cut in the middle (``util.short_names.shorten``), for a line of its own; in a
    table, ``render`` cuts a column's names so that different names stay different."""
    return shorten(str(name), width)


def wrap(text: str, indent: str = "", width: int = WIDTH) -> list[str]:
    """``text`` as lines of at most ``width`` columns (a word longer than that stays whole),
    the first starting with ``indent``, the rest with ``indent`` and two spaces more."""
    return textwrap.wrap(text, width, initial_indent=indent, subsequent_indent=indent + "  ",
                         break_long_words=False, break_on_hyphens=False) or [indent.rstrip()]


def note(text: str) -> None:
    """``traceforge: note: text`` on stderr, wrapped to ``WIDTH`` columns."""
    print("\n".join(wrap(f"traceforge: note: {text}")), file=sys.stderr)


def render(df: pd.DataFrame, cols: list[Col], indent: str = "  ", width: int = WIDTH) -> list[str]:
    """Aligned rows under a header line; a table wider than ``width`` as several such blocks
    (a blank line between), each with the key columns (``Col.repeat``, else the first) and as
    many of the others as fit; a text column wider than a block allows is cut in the middle."""
    cells = [[c.header for c in cols]] + [[c.show(v) for c, v in zip(cols, row)]
                                          for row in df[[c.key for c in cols]].itertuples(index=False)]
    for i, c in enumerate(cols):
        if c.width is not None:
            _cut_column(cells, i, c.width)
    widths = [max(len(r[i]) for r in cells) for i in range(len(cols))]
    lines: list[str] = []
    for block in _blocks(cols, widths, width - len(indent)):
        if lines:
            lines.append("")
        shown = [list(r) for r in cells]
        for i, w in block:
            _cut_column(shown, i, w)
        for r in shown:
            parts = [r[i].ljust(w) if cols[i].left else r[i].rjust(w) for i, w in block]
            lines.append((indent + "  ".join(parts)).rstrip())
    return lines


def _cut_column(cells: list[list[str]], i: int, width: int) -> None:
    """Column ``i`` of ``cells`` (a header row, then the rows) cut to ``width``, in place; names
    that differ still differ (``shorten_distinct``)."""
    if all(len(r[i]) <= width for r in cells):
        return
    cells[0][i] = shorten(cells[0][i], width)
    for r, v in zip(cells[1:], shorten_distinct([r[i] for r in cells[1:]], width)):
        r[i] = v


def _blocks(cols: list[Col], widths: list[int], room: int) -> list[list[tuple[int, int]]]:
    """(column, width) per block: all columns if they fit ``room``, else the key columns and
    then the others in order, a new block where the next one does not fit (a text column is
    cut to the room left instead where that keeps two thirds of it)."""
    if sum(widths) + 2 * (len(cols) - 1) <= room:
        return [list(enumerate(widths))]
    keys = [i for i, c in enumerate(cols) if c.repeat] or [0]
    base = sum(widths[i] for i in keys) + 2 * (len(keys) - 1)
    blocks: list[list[tuple[int, int]]] = []
    used = room + 1
    for i, w in enumerate(widths):
        if i in keys:
            continue
        left = room - used - 2
        if used + 2 + w > room and not (cols[i].left and left >= MIN_CUT and 3 * left >= 2 * w):
            blocks.append([(k, widths[k]) for k in keys])
            used = base
        fit = w if used + 2 + w <= room or not cols[i].left else max(min(MIN_CUT, w), room - used - 2)
        blocks[-1].append((i, fit))
        used += 2 + fit
    return blocks or [[(k, widths[k]) for k in keys]]


_SURROGATE = re.compile("[\ud800-\udfff]")
_JSON_OPTIONS = orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY


def json_text(doc: object) -> str:
    """``doc`` as indented JSON text. Text the trace held that is not UTF-8 (read as lone
    surrogates: a ``\\ud800`` escape as written, invalid bytes by ``surrogateescape``), which
    orjson refuses, is written as ``\\uXXXX`` escapes of those surrogates, never a crash."""
    try:
        return orjson.dumps(doc, option=_JSON_OPTIONS).decode()
    except TypeError:
        odd: dict[str, str] = {}  # odd text -> its placeholder
        text = orjson.dumps(_placeheld(doc, odd), option=_JSON_OPTIONS).decode()
        if not odd:
            raise  # not odd text: a real bug, reported as one
        quoted = {json.dumps(k): _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", json.dumps(v, ensure_ascii=False))
                  for v, k in odd.items()}
        return re.sub("|".join(map(re.escape, quoted)), lambda m: quoted[m.group()], text)


def _placeheld(value: object, odd: dict[str, str]) -> object:
    """``value`` with each string that has a surrogate replaced by a placeholder (noted in ``odd``)."""
    if isinstance(value, str):
        if not _SURROGATE.search(value):
            return value
        return odd.setdefault(value, f"traceforge-odd-text-{id(odd)}-{len(odd)}")
    if isinstance(value, dict):
        return {_placeheld(k, odd): _placeheld(v, odd) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_placeheld(v, odd) for v in value]
    return value


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
        out.write(json_text(doc) + "\n")
    elif fmt == "csv":
        (df,) = tables.values()
        out.write(df.to_csv(index=False))
    else:
        out.write("\n".join(text()) + "\n")
