"""A spilled table read back in windows of consecutive values of a key, one in memory at a time.

For work that must see rows in time order, or all rows of a group together, but cannot
hold them all (``check`` replays every slice and flow event as Perfetto does, ``repair``
every slice, ``export`` nests CPU ops and launch calls, and both ``repair`` and ``trim`` take
flow events a window of ids at a time). A first pass over the spill takes a sample of the
keys, which sets window bounds of about ``max_rows`` rows each. Every row of a window has a key at or above
those of all rows in the windows before it, so sorting each window by the key (then
anything) and joining the windows gives the whole table in that order; rows with equal
keys are always in the same window.

A window is then gathered one of two ways. Where the spill is mostly in key order already
(a trace's events are written roughly in time order, thread by thread), each window reads
back the blocks whose keys reach into it; otherwise each row is written once more, to its
window's temporary file. Writing costs several times what reading back costs
(docs/benchmarks.md), so the blocks are read again while that reads each block at most
``REREADS`` times on average.

One key repeated on more rows than a window holds (a trace whose events share one time) would
make one window of them all. Given a second key (``then``), such a table is windowed by
(key, then, row) instead, which never repeats, so every window stays about ``max_rows``.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator

import numpy as np

from ..util import progress
from ..util.distinct import unique
from .table import SpilledColumns, Table

SAMPLE_EVERY = 64  # rows per sampled key when setting the bounds
MAX_ROWS = 1 << 20  # rows a window holds at most: the memory bound of a window of repair's slices, sorted
BLOCK = 1 << 16  # rows read from the spill at a time (fewer windows each, where the spill is read again)
REREADS = 4


def windows_by(table: SpilledColumns, key: Callable[[Table, int], np.ndarray], max_rows: int | None = None,
               pass_name: str | None = None, then: Callable[[Table, int], np.ndarray] | None = None) -> Iterator[Table]:
    """``table``'s rows in windows by ``key``, in key order (not sorted within a window, where
    rows keep their order in ``table``), each with one more column: ``index`` (the row's place
    in ``table``). ``key(chunk, first)``: the keys (int64) of a chunk whose first row is row
    ``first``. A window holds about ``max_rows`` (default ``MAX_ROWS``) rows; more only where
    one key repeats that often. ``pass_name``: shown on the progress bar (if one is drawn)
    with the bytes of the rows dealt with so far, in every pass they go through. ``then(chunk,
    first)``: the keys (int64) that order rows of one ``key`` (before their order in ``table``);
    given, a key repeated on more than ``max_rows`` rows is split across windows by (``key``,
    ``then``, place in ``table``), and the windows, each sorted stably by (``key``, ``then``), still
    join into the table in that order."""
    shown = _Progress(table, pass_name)
    for window in _windows(table, key, max_rows or MAX_ROWS, shown, then):
        rows = len(window)
        yield window
        del window  # not held while the next window is read
        shown.advance(rows)


class _Progress:
    """Bytes of rows dealt with, of all the passes over them: one reading the windows, and
    before it one sampling the keys and maybe one writing each row to its window's file."""

    def __init__(self, table: SpilledColumns, pass_name: str | None):
        self._bar = progress.active() if pass_name else None
        self._name, self._row_bytes, self._rows = pass_name, len(table.fields) * 8, len(table)
        self.passes, self._done = 1, 0

    def advance(self, rows: int) -> None:
        self._done += rows * self._row_bytes
        if self._bar is not None:
            self._bar(self._name, self._done, self.passes * self._rows * self._row_bytes)


def _windows(table: SpilledColumns, key: Callable[[Table, int], np.ndarray], max_rows: int,
             shown: _Progress, then: Callable[[Table, int], np.ndarray] | None) -> Iterator[Table]:
    if len(table) <= max_rows:
        yield _joined([_indexed(rows, first) for rows, first in _blocks(table)], table)
        return
    shown.passes = 3  # until the keys tell whether rows go to files (the bar may then jump ahead, never back)
    # copies, not views: a view of a chunk's column holds the whole chunk
    samples, spans = [], []
    for rows, first in _blocks(table):
        keys = key(table.as_table(rows), first)
        samples.append(keys[::SAMPLE_EVERY].copy())
        spans.append((keys.min(), keys.max()))
        shown.advance(len(rows))
    sample = np.sort(np.concatenate(samples))
    if then is not None and _most_repeated(sample) * SAMPLE_EVERY > max_rows:
        shown.passes = 4
        yield from _split(table, key, then, max_rows, shown.advance)
        return
    # Gathered from blocks, a window is held twice at once (the parts, then joined): those
    # windows hold half as many rows, so that either way peaks at about the same memory.
    halves = _bounds(sample, 2 * -(-len(table) // max_rows))
    reach = np.searchsorted(halves, np.array(spans), side="right")  # per block: first and last window
    if (reach[:, 1] - reach[:, 0] + 1).sum() <= REREADS * len(reach):
        shown.passes = 2
        yield from _reread(table, key, halves, reach)
    else:
        bounds = _bounds(sample, -(-len(table) // max_rows))
        yield from _distributed(table, lambda chunk, first: np.searchsorted(bounds, key(chunk, first), side="right"),
                                len(bounds) + 1, shown.advance)


def _most_repeated(sample: np.ndarray) -> int:
    """How often the most frequent value of a sorted sample occurs."""
    if not len(sample):
        return 0
    starts = np.flatnonzero(np.r_[True, sample[1:] != sample[:-1], True])
    return int(np.diff(starts).max())


def _split(table: SpilledColumns, key: Callable[[Table, int], np.ndarray], then: Callable[[Table, int], np.ndarray],
           max_rows: int, advance: Callable[[int], None]) -> Iterator[Table]:
    """Windows by (``key``, ``then``, row index): a sample of those triples sets the bounds, then every
    row is written to its window's file (``_distributed``)."""
    samples = []
    for rows, first in _blocks(table):
        chunk = table.as_table(rows)
        picks = slice(None, None, SAMPLE_EVERY)
        samples.append(np.stack([key(chunk, first)[picks], then(chunk, first)[picks],
                                 np.arange(first, first + len(rows))[picks]]))
        advance(len(rows))
    sample = np.concatenate(samples, axis=1)
    sample = sample[:, np.lexsort(sample[::-1])]
    windows = -(-len(table) // max_rows)
    bounds = sample[:, [sample.shape[1] * k // windows for k in range(1, windows)]]

    def window_of(chunk: Table, first: int) -> np.ndarray:
        rows = np.stack([key(chunk, first), then(chunk, first), np.arange(first, first + len(chunk))])
        return _lexsorted_place(bounds, rows)

    yield from _distributed(table, window_of, bounds.shape[1] + 1, advance)


def _lexsorted_place(bounds: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Per column of ``rows`` (keys by row, compared in order), how many columns of ``bounds``
    (sorted the same way) are at or below it: ``searchsorted(side="right")`` on tuples."""
    m = bounds.shape[1]
    keys = np.concatenate([bounds, rows], axis=1)
    is_row = np.r_[np.zeros(m, np.int8), np.ones(rows.shape[1], np.int8)]
    order = np.lexsort((is_row, *keys[::-1]))  # at equal keys a bound goes first: it counts
    bounds_before = np.cumsum(order < m)
    place = np.empty(rows.shape[1], np.int64)
    at_rows = order >= m
    place[order[at_rows] - m] = bounds_before[at_rows]
    return place


def _bounds(sample: np.ndarray, windows: int) -> np.ndarray:
    """The keys that start windows 1, 2, ... of about equal rows, from a sorted sample."""
    return unique(sample[[len(sample) * k // windows for k in range(1, windows)]])


def _reread(table: SpilledColumns, key: Callable[[Table, int], np.ndarray], bounds: np.ndarray,
            reach: np.ndarray) -> Iterator[Table]:
    """Each window from the blocks whose keys reach into it."""
    for w in range(len(bounds) + 1):
        parts = []
        for b in np.flatnonzero((reach[:, 0] <= w) & (w <= reach[:, 1])).tolist():
            first = b * BLOCK
            rows = table.rows(first, min(BLOCK, len(table) - first))
            inside = np.searchsorted(bounds, key(table.as_table(rows), first), side="right") == w
            parts.append(_indexed(rows, first, inside))
        yield _joined(parts, table)
        del parts  # not held while the next window is read


def _distributed(table: SpilledColumns, window_of: Callable[[Table, int], np.ndarray], windows: int,
                 written: Callable[[int], None]) -> Iterator[Table]:
    """Each of ``windows`` windows from its own temporary file, every row written to one in a pass
    (``window_of(chunk, first)``: each row's window; ``written`` is told the rows of each block)."""
    fields = [*table.fields, "index"]
    files = [tempfile.TemporaryFile() for _ in range(windows)]
    try:
        for rows, first in _blocks(table):
            window = window_of(table.as_table(rows), first)
            order = np.argsort(window.astype(np.uint16 if len(files) <= 1 << 16 else np.int64), kind="stable")
            ends = np.cumsum(np.bincount(window, minlength=len(files)))
            rows = _indexed(rows, first)[order]
            for f, part in zip(files, np.split(rows, ends[:-1])):
                f.write(part.data)
            written(len(rows))
        for f in files:
            f.seek(0)
            window_rows = np.fromfile(f, np.int64).reshape(-1, len(fields))
            f.close()
            yield Table.of_rows(window_rows, fields)
            del window_rows  # not held while the next window is read
    finally:
        for f in files:
            f.close()


def picked(table: SpilledColumns, keep: Callable[[Table], np.ndarray]) -> Table:
    """The rows of ``table`` that ``keep`` (a mask per chunk) picks, with their ``index``."""
    return _joined([_indexed(rows, first, keep(table.as_table(rows))) for rows, first in _blocks(table)], table)


def _blocks(table: SpilledColumns) -> Iterator[tuple[np.ndarray, int]]:
    """Each block of rows (in memory reused for the next: callers copy what they keep) and its first row."""
    first = 0
    for rows in table.blocks(BLOCK, reuse=True):
        yield rows, first
        first += len(rows)


def _indexed(rows: np.ndarray, first: int, keep: np.ndarray | None = None) -> np.ndarray:
    """The block's rows (those ``keep`` picks), each with its index as a last column."""
    index = np.arange(first, first + len(rows))
    if keep is not None:
        rows, index = rows[keep], index[keep]
    out = np.empty((len(rows), rows.shape[1] + 1), np.int64)
    out[:, :-1] = rows
    out[:, -1] = index
    return out


def _joined(parts: list[np.ndarray], table: SpilledColumns) -> Table:
    """Indexed row blocks of ``table`` as one table."""
    if len(parts) == 1:
        rows = parts[0]  # not copied
    else:
        rows = np.concatenate(parts) if parts else np.zeros((0, len(table.fields) + 1), np.int64)
    return Table.of_rows(rows, [*table.fields, "index"])
