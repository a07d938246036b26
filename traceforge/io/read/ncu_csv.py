"""Nsight Compute ``ncu --csv --page raw`` files: profiled launches with metrics in base units.

The file: a header row (``ID``, ``Process ID``, ..., ``Kernel Name``, ``Context``,
``Stream``, ``Block Size``, ``Grid Size``, ``Device``, ``CC``, then one column per metric),
a units row (empty under the id columns), then one row per profiled launch. Values may
carry thousands separators; ``==PROF==``/``==WARNING==`` lines may be mixed in; names are
quoted (they contain commas). ncu auto-scales units (``Kbyte``, ``usecond``,
``Gbyte/second``, ...): values are converted to its base units (``byte``, ``nsecond``,
``byte/second``, ...). Non-numeric metric columns are kept aside. ``gpu__time_duration.sum``
is also read exactly, from its text, into integer ns (``time_ns``): ncu's own time of each
launch, the only duration a CSV without a trace has.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from functools import lru_cache

import numpy as np

from ...errors import TraceFormatError, UsageError
from ...util.lazy_pandas import pd
from .codec import iter_decompressed, read_once

IDENTITY = ("ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream",
            "Block Size", "Grid Size", "Device", "CC")
DURATION = "gpu__time_duration.sum"  # ncu's time of one launch
REQUIRED = ("ID", "Kernel Name", "Stream", "Block Size", "Grid Size", "Device")
_TOOL_LINE = re.compile(r"^==[A-Z]+==")
_DIMS = re.compile(r"^\(?\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\)?$")
_MISSING = {"", "n/a", "N/A", "nan"}
_TIME_NS = {"nsecond": 1.0, "usecond": 1e3, "msecond": 1e6, "second": 1e9,
            "ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}  # recent ncu versions print the short names
_PREFIX = {"K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_BINARY = {"Ki": 2.0 ** 10, "Mi": 2.0 ** 20, "Gi": 2.0 ** 30, "Ti": 2.0 ** 40}
_BASES = {"byte", "bit", "cycle", "inst", "sector", "request", "warp", "thread", "block", "wavefront",
          "transaction", "hz", "Hz", "flop", "B"}


@dataclass
class NcuCsv:
    """Profiled launches in ID order: identity columns (``grid``/``block`` as (x, y, z)),
    ``time_ns`` (``DURATION`` in exact integer ns, -1 where the CSV has none) and metric
    columns in base units (``units`` says which); ``text_metrics`` are non-numeric."""

    path: str
    rows: pd.DataFrame
    metrics: list[str]
    units: dict[str, str]
    text_metrics: list[str]


def _scale(unit: str) -> tuple[float, str]:
    """(factor to the base unit, base unit) of one unit without ``/``."""
    if unit in _TIME_NS:
        return _TIME_NS[unit], "nsecond"
    factor, base = 1.0, unit
    if unit[:2] in _BINARY and unit[2:] in _BASES:
        factor, base = _BINARY[unit[:2]], unit[2:]
    elif unit[:1] in _PREFIX and unit[1:] in _BASES:
        factor, base = _PREFIX[unit[:1]], unit[1:]
    return factor, "byte" if base == "B" else base


def unit_factor(unit: str) -> tuple[float, str]:
    """Factor that turns a value in ``unit`` into ncu's base unit, and that base unit.

    ``Mbyte`` -> (1e6, byte), ``usecond`` -> (1e3, nsecond), ``Gbyte/second`` -> (1e9, byte/second).
    """
    num, slash, den = unit.partition("/")
    factor, base = _scale(num)
    if not slash:
        return factor, base
    if den in _TIME_NS:
        return factor * 1e9 / _TIME_NS[den], f"{base}/second"
    den_factor, den_base = _scale(den)
    return factor / den_factor, f"{base}/{den_base}"


@lru_cache(maxsize=1 << 12)
def _dims(text: str) -> tuple[int, int, int] | None:
    m = _DIMS.match(text.strip())
    return (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else None


def _numbers(cells: pd.Series) -> tuple[pd.Series, bool]:
    """Cells as floats (thousands separators dropped) and whether every filled cell is a number."""
    text = cells.astype(str).str.strip()
    values = pd.to_numeric(text.str.replace(",", "", regex=False), errors="coerce")
    filled = ~text.isin(_MISSING)
    return values.astype(float), bool(values[filled].notna().all())


def _exact_ns(cells: pd.Series, unit: str, path: str) -> np.ndarray:
    """Durations as integer ns from their text (``5.920000`` usecond -> 5920), rounded
    half-even below 1 ns; -1 for an empty cell."""
    factor = _TIME_NS.get(unit or "nsecond")
    if factor is None:
        raise TraceFormatError(path, f"ncu CSV: {DURATION} is in {unit!r}, not a unit of time")
    scale = Decimal(int(factor))
    out = np.full(len(cells), -1, np.int64)
    for i, text in enumerate(cells.tolist()):
        text = str(text).strip().replace(",", "")
        if text in _MISSING:
            continue
        try:
            value = Decimal(text) * scale
        except InvalidOperation:
            raise TraceFormatError(path, f"ncu CSV: {DURATION} {text!r} is not a number") from None
        if not value.is_finite() or value < 0:
            raise TraceFormatError(path, f"ncu CSV: {DURATION} {text!r} is not a duration")
        out[i] = int(value.to_integral_value(rounding=ROUND_HALF_EVEN))
    return out


def looks_like_ncu_csv(path: str) -> bool:
    """Whether ``path`` (plain, .gz or .zst) starts like an ncu CSV: its first line that is
    not blank nor a ``==PROF==`` tool line names the ``ID`` and ``Kernel Name`` columns.
    Stdin or a FIFO is read once, as a trace: never sniffed (its head would be gone)."""
    if read_once(path):
        return False
    try:
        for block in iter_decompressed(path):
            for line in bytes(block[:1 << 16]).decode("utf-8", "replace").splitlines():
                if line.strip() and not _TOOL_LINE.match(line):
                    return '"ID"' in line and '"Kernel Name"' in line or line.startswith("ID,")
            return False
    except (TraceFormatError, OSError):
        return False
    return False


def read_ncu_csv(path: str) -> NcuCsv:
    """Parse an ``ncu --csv --page raw`` file (plain, .gz or .zst)."""
    try:
        data = b"".join(iter_decompressed(path))
    except TraceFormatError as e:
        raise UsageError(f"ncu CSV {path}: {e.what}") from None
    lines = [ln for ln in data.decode("utf-8", "replace").splitlines() if ln.strip() and not _TOOL_LINE.match(ln)]
    table = list(csv.reader(lines))
    head = next((i for i, row in enumerate(table) if "ID" in row and "Kernel Name" in row), None)
    if head is None:
        raise TraceFormatError(path, 'not an ncu --csv --page raw file: no header row with "ID" and "Kernel Name"')
    header = table[head]
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise TraceFormatError(path, f"ncu CSV lacks column(s) {', '.join(missing)} (export with --page raw)")
    body = table[head + 1:]
    id_col = header.index("ID")
    units_row = body[0] if body and body[0][id_col] == "" else None
    body = body[1:] if units_row is not None else body
    for k, row in enumerate(body):
        if len(row) != len(header):
            raise TraceFormatError(path, f"ncu CSV data row {k + 1} has {len(row)} cells, the header {len(header)}")
    raw = pd.DataFrame(body, columns=header, dtype=str) if body else pd.DataFrame(columns=header, dtype=str)

    rows = pd.DataFrame({"ncu_id": pd.to_numeric(raw["ID"], errors="coerce")})
    if rows["ncu_id"].isna().any():
        raise TraceFormatError(path, "ncu CSV has a row whose ID is not a number")
    rows["ncu_id"] = rows["ncu_id"].astype(np.int64)
    rows["kernel"] = raw["Kernel Name"]
    for column, name in (("Device", "device"), ("Stream", "stream")):
        values = pd.to_numeric(raw[column], errors="coerce")
        rows[name] = values.fillna(-1).astype(np.int64)
    rows["grid"] = [_dims(t) for t in raw["Grid Size"]]
    rows["block"] = [_dims(t) for t in raw["Block Size"]]
    if "Process ID" in raw:
        rows["pid"] = pd.to_numeric(raw["Process ID"], errors="coerce").fillna(-1).astype(np.int64)
    rows["time_ns"] = (_exact_ns(raw[DURATION], units_row[header.index(DURATION)].strip() if units_row else "", path)
                       if DURATION in raw else np.full(len(raw), -1, np.int64))

    metrics, text_metrics, units = [], [], {}
    for k, column in enumerate(header):
        if column in IDENTITY or column in rows:
            continue
        values, numeric = _numbers(raw[column])
        if not numeric:
            text_metrics.append(column)
            continue
        unit = units_row[k].strip() if units_row is not None else ""
        factor, base = unit_factor(unit) if unit else (1.0, "")
        rows[column] = values * factor
        units[column] = base
        metrics.append(column)
    rows = rows.sort_values("ncu_id", kind="stable").reset_index(drop=True)
    return NcuCsv(path, rows, metrics, units, text_metrics)
