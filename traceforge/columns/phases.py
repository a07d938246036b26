"""Event phases as the row collectors sort them: one vocabulary for ``scan``, ``repair`` and
``trim`` (``perfetto.collect`` models the importer's finer cases itself).

A row's phase comes from its ``ph`` string id (``phase_table``). A row the scanner could not
hold exactly, or a flow event whose id it could not read as an integer, is read with a JSON
parser instead (``needs_parser``).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..io.read import rows as R

OTHER, SLICE, METADATA, FLOW = 0, 1, 2, 3  # SLICE: a complete (X) event; FLOW: s, t or f
FLOW_PHASES = ("s", "t", "f")


def phase_code(ph: str | None) -> int:
    """The phase of a ``ph`` text."""
    return SLICE if ph == "X" else METADATA if ph == "M" else FLOW if ph in FLOW_PHASES else OTHER


def phase_table(scanner: R.RowScanner, extra: Callable[[str | None], tuple] = lambda ph: ()) -> R.IdTable:
    """Per ``ph`` string id: (its phase, *``extra(ph)``), growing with the scanner's strings."""
    return R.IdTable(scanner.strings, lambda raw: (phase_code(text := R.decode_string(raw)), *extra(text)),
                     (OTHER, *extra(None)))


def needs_parser(flags: np.ndarray, phase: np.ndarray) -> np.ndarray:
    """Per row: read it with a JSON parser (an odd row, or a flow whose id is not an integer)?"""
    return (flags & R.F_ODD != 0) | ((phase == FLOW) & (flags & R.F_ID_KEY != 0) & (flags & R.F_ID == 0))


def earliest_ts(ts: np.ndarray, timed: np.ndarray, phase: np.ndarray) -> int | None:
    """The earliest non-negative ts of the timed rows that place something (not metadata, whose
    ts places nothing: traceforge writes 0)."""
    low = ts[timed & (ts >= 0) & (phase != METADATA)]
    return int(low.min()) if len(low) else None
