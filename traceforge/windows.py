"""A spilled table read back in windows of consecutive values of a key, one in memory at a time.

For work that must see rows in time order, or all rows of a group together, but cannot
hold them all (``repair`` replays every slice of every thread as Perfetto does, and pairs
flow events by id). Two passes over the spill: a sample of the keys sets window bounds
of about ``max_rows`` rows each, then each row goes to its window's temporary file. Every
row of a window has a key at or above those of all rows in the windows before it, so
sorting each window by the key (then anything) and joining the windows gives the whole
table in that order; rows with equal keys are always in the same window.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator

import numpy as np

from .scan import SpilledColumns, Table

SAMPLE_EVERY = 64  # rows per sampled key when setting the bounds
MAX_ROWS = 1 << 20  # ~100 MB for a window of repair's slices, sorted


def windows_by(table: SpilledColumns, key: Callable[[Table, int], np.ndarray], max_rows: int | None = None
               ) -> Iterator[Table]:
    """``table``'s rows in windows by ``key``, in key order (not sorted within a window), each
    with one more column: ``index`` (the row's place in ``table``).
    ``key(chunk, first)``: the keys (int64) of a chunk whose first row is row ``first``.
    A window holds about ``max_rows`` (default ``MAX_ROWS``) rows; more only where one key
    repeats that often."""
    max_rows = max_rows or MAX_ROWS
    if len(table) <= max_rows:
        yield _joined([_indexed(chunk, first) for chunk, first in _chunks(table)], table.fields)
        return
    # copies, not views: a view of a chunk's column holds the whole chunk
    sample = np.sort(np.concatenate([key(chunk, first)[::SAMPLE_EVERY].copy() for chunk, first in _chunks(table)]))
    windows = -(-len(table) // max_rows)
    bounds = np.unique(sample[[len(sample) * k // windows for k in range(1, windows)]])
    fields = [*table.fields, "index"]
    files = [tempfile.TemporaryFile() for _ in range(len(bounds) + 1)]
    try:
        for chunk, first in _chunks(table):
            rows = _indexed(chunk, first)
            window = np.searchsorted(bounds, key(chunk, first), side="right")
            order = np.argsort(window, kind="stable")
            ends = np.cumsum(np.bincount(window, minlength=len(files)))
            for f, part in zip(files, np.split(rows[order], ends[:-1])):
                f.write(part.data)
        for f in files:
            f.seek(0)
            rows = np.fromfile(f, np.int64).reshape(-1, len(fields))
            f.close()
            yield Table({name: rows[:, j] for j, name in enumerate(fields)})
    finally:
        for f in files:
            f.close()


def picked(table: SpilledColumns, keep: Callable[[Table], np.ndarray]) -> Table:
    """The rows of ``table`` that ``keep`` (a mask per chunk) picks, with their ``index``."""
    return _joined([_indexed(chunk, first)[keep(chunk)] for chunk, first in _chunks(table)], table.fields)


def _chunks(table: SpilledColumns) -> Iterator[tuple[Table, int]]:
    first = 0
    for chunk in table.chunks():
        yield chunk, first
        first += len(chunk)


def _indexed(chunk: Table, first: int) -> np.ndarray:
    """The chunk's rows as an int64 matrix, with each one's index as a last column."""
    columns = [*chunk.cols.values(), np.arange(first, first + len(chunk))]
    return np.column_stack([np.asarray(c, np.int64) for c in columns])


def _joined(parts: list[np.ndarray], fields: list[str]) -> Table:
    rows = np.concatenate(parts) if parts else np.zeros((0, len(fields) + 1), np.int64)
    return Table({name: rows[:, j] for j, name in enumerate([*fields, "index"])})
