"""Where to put a flow end so that Perfetto binds it to the intended slice.

Perfetto binds a v1 ``s`` (and an ``f`` with ``bp:"e"``) to the slice on top of the
thread's stack at the flow's ts, and pops that stack only when a new slice begins. So
the end of an arrow must lie strictly inside its slice *as Perfetto reads the times*
(``perfetto_ns``; a slice ends at ``perfetto(ts) + perfetto(dur)``) and before the next
slice on that thread begins (a child, or a zero-duration op, would take the binding).
A slice Perfetto spills to an overflow track is never on the thread's stack: an end
there would bind to the slice under it (``check``: ``flow_bound_to_other_slice``), so
such a slice gets no arrow.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from ..columns.scan import TraceColumns
from ..columns.table import Table
from ..perfetto.overlaps import spilled_on_thread
from ..perfetto.timestamps import perfetto_ns
from ..util.distinct import unique
from ..util.exacttime import NS_PER_US
from ..util.search import searchsorted

_MAX_THREAD_ID = 2**32 - 1
_FALLBACK_SAMPLES = 128
_SLACK_NS = 512  # how far Perfetto's reading of a fractional µs can move, with margin
_ANCHOR_BLOCK = 4096  # slices whose candidates are read at once (~150 each)
_CHUNK = 1 << 16  # rows per table visited at a time


def perfetto_thread(pid: object, tid: object) -> tuple:
    """The thread Perfetto puts (pid, tid) on: ids outside [0, 2^32) become 0, tid 0 the pid."""
    def norm(v: object) -> object:
        return 0 if type(v) is int and not 0 <= v <= _MAX_THREAD_ID else v

    pid, tid = norm(pid), norm(tid)
    return (pid, pid if tid == 0 else tid)


def flow_anchors(cols: TraceColumns, queries: list[tuple[Table, np.ndarray]],
                 after: np.ndarray | None = None) -> list[np.ndarray]:
    """For each ``(table, rows)`` of ``cols`` and each of its rows: a ts in ns at which a flow
    end binds to that slice, or -1 (also for an event Perfetto does not draw, e.g. one with
    a negative duration). ``after``: per queried row (the queries' rows one after another), a
    ns as Perfetto reads it that the ts must come after (an arrow's end after its start).

    Perfetto orders a thread's slices by start, longer first, then file order, so a slice's
    binding window ends at its end or where the next slice on its thread starts; a slice it
    spills has none. Only the threads of the queried slices are visited, one at a time, holding
    their slices' starts, ends and ordinals.
    """
    thread_of_track = _thread_of_track(cols)
    start = _gathered(queries, "ts", np.int64, perfetto_ns)
    limit = _gathered(queries, "dur", np.int64, perfetto_ns)
    limit += start
    drawn = _gathered(queries, "dur", bool, lambda dur: dur >= 0)
    thread = _gathered(queries, "track", np.int32, lambda track: thread_of_track[track])
    for t in unique(thread[drawn]).tolist():
        mine = np.flatnonzero(drawn & (thread == t))
        slices = _ThreadSlices.of(cols, thread_of_track == t)
        _clip_to_next(slices, start, limit, mine, queries)
        drawn[mine[np.isin(_ordinals(queries, mine), slices.spilled())]] = False
        del slices
    del thread
    if after is not None:  # the binding window starts later; where the slice's next one starts stays
        np.maximum(start, after, out=start)
    # First choice: the first whole µs after the start, which Perfetto reads exactly.
    out = start // NS_PER_US
    out += 1
    out *= NS_PER_US
    easy = out < limit
    easy &= drawn
    out[~easy] = -1
    hard = np.flatnonzero(drawn & ~easy & (limit - start > 1))
    out[hard] = _fractional_anchors(start[hard], limit[hard])
    return np.split(out, np.cumsum([len(rows) for _, rows in queries])[:-1])


def _gathered(queries: list[tuple[Table, np.ndarray]], column: str, dtype: type,
              convert: Callable[[np.ndarray], np.ndarray] | None = None) -> np.ndarray:
    """One column of every queried row, converted, filled into one array (no list to concatenate)."""
    out = np.empty(sum(len(rows) for _, rows in queries), dtype)
    at = 0
    for table, rows in queries:
        part = getattr(table, column)[rows]
        out[at:at + len(rows)] = part if convert is None else convert(part)
        at += len(rows)
    return out


def _thread_of_track(cols: TraceColumns) -> np.ndarray:
    """Perfetto's thread (a dense id) of each track: several tracks can share one."""
    thread_ids: dict[tuple, int] = {}
    return np.array([thread_ids.setdefault(perfetto_thread(*t), len(thread_ids)) for t in cols.tracks] or [0],
                    dtype=np.int32)


@dataclass
class _ThreadSlices:
    """The slices Perfetto draws on one thread (those of the columns): starts, ends (Perfetto's
    ns) and ordinals, in table order."""

    start: np.ndarray
    end: np.ndarray
    ordinal: np.ndarray

    @classmethod
    def of(cls, cols: TraceColumns, on_thread: np.ndarray) -> _ThreadSlices:
        parts = []
        for table, rows, mask in _slices_on(cols, on_thread):
            at = perfetto_ns(table.ts[rows][mask])
            parts.append((at, at + perfetto_ns(table.dur[rows][mask]), table.ordinal[rows][mask]))
        if not parts:
            return cls(*(np.zeros(0, np.int64) for _ in range(3)))
        return cls(*(np.concatenate(c).astype(np.int64, copy=False) for c in zip(*parts)))

    def spilled(self) -> np.ndarray:
        """Ordinals of the slices Perfetto spills off the thread."""
        return self.ordinal[spilled_on_thread(self.start, self.end, self.ordinal)]


def _clip_to_next(slices: _ThreadSlices, start: np.ndarray, limit: np.ndarray, mine: np.ndarray,
                  queries: list[tuple[Table, np.ndarray]]) -> None:
    """Lower ``limit[mine]`` (slices of one thread) to the start of the slice that follows each."""
    starts = _starts_within(slices, start, limit, mine)
    after = searchsorted(starts, start[mine], side="right")
    later = after < len(starts)
    limit[mine[later]] = np.minimum(limit[mine[later]], starts[after[later]])
    shared = mine[after - searchsorted(starts, start[mine], side="left") > 1]
    if len(shared):  # another slice starts with it: it comes next unless this one is the last of them
        shared = shared[_followed_at_start(slices, start[shared], _ordinals(queries, shared))]
        limit[shared] = start[shared]


def _ordinals(queries: list[tuple[Table, np.ndarray]], index: np.ndarray) -> np.ndarray:
    """Event ordinals of the queried slices at ``index`` (into all queries, in order)."""
    out = np.empty(len(index), np.int64)
    lo = 0
    for table, rows in queries:
        sel = (index >= lo) & (index < lo + len(rows))
        out[sel] = table.ordinal[rows[index[sel] - lo]]
        lo += len(rows)
    return out


def _slices_on(cols: TraceColumns, on_thread: np.ndarray) -> Iterator[tuple[Table, slice, np.ndarray]]:
    """(table, rows, mask) by chunks: the slices Perfetto draws on one thread."""
    for table in (cols.cpu_ops, cols.launches, cols.gpu, cols.ranges, cols.gpu_annotations):
        for lo in range(0, len(table), _CHUNK):
            rows = slice(lo, lo + _CHUNK)
            mask = on_thread[table.track[rows]]
            mask &= table.dur[rows] >= 0
            yield table, rows, mask


def _starts_within(slices: _ThreadSlices, start: np.ndarray, end: np.ndarray, mine: np.ndarray) -> np.ndarray:
    """Perfetto's starts, sorted, of the thread's slices that start inside one of the windows
    ``[start, end)`` at ``mine``: only those can end a window early, and there are few of them."""
    windows = _Windows.of(start[mine], end[mine])
    starts = slices.start[windows.inside(slices.start)]
    starts.sort()
    return starts


def _followed_at_start(slices: _ThreadSlices, start: np.ndarray, ordinal: np.ndarray) -> np.ndarray:
    """For slices sharing their start with another: is one of those after it in Perfetto's order?"""
    tied = np.isin(slices.start, unique(start))
    tie_start, tie_ordinal = slices.start[tied], slices.ordinal[tied]
    tie_length = slices.end[tied] - tie_start
    order = np.lexsort((tie_ordinal, -tie_length, tie_start))
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order))
    by_ordinal = np.argsort(tie_ordinal)
    pos = rank[by_ordinal[np.searchsorted(tie_ordinal, ordinal, sorter=by_ordinal)]]
    nxt = np.minimum(pos + 1, len(order) - 1)
    return (pos + 1 < len(order)) & (tie_start[order[nxt]] == start)


def _fractional_anchors(start: np.ndarray, limit: np.ndarray) -> np.ndarray:
    """Per slice, a ts whose Perfetto reading lies in (start, limit), for slices with no
    whole µs there; -1 where none is found.

    Perfetto's reading of a fractional µs truncates, moves by up to a few hundred ns at
    epoch magnitude and is not monotonic across whole µs, so candidates are sampled: the
    first ns after the start, then a grid around the window; the first that reads inside
    wins. A block of slices at a time, as one array of candidates per slice.
    """
    out = np.empty(len(start), np.int64)
    for lo in range(0, len(start), _ANCHOR_BLOCK):
        s, limit_ = start[lo:lo + _ANCHOR_BLOCK, None], limit[lo:lo + _ANCHOR_BLOCK, None]
        step = np.maximum(1, (limit_ - s + 2 * _SLACK_NS) // _FALLBACK_SAMPLES)
        points = -(-(limit_ - s + 2 * _SLACK_NS) // step)  # grid points up to limit + slack
        near = s + np.arange(1, 17)
        grid = s - _SLACK_NS + step * np.arange(int(points.max()))
        candidates = np.concatenate([near, grid], axis=1)
        seen = perfetto_ns(candidates.ravel()).reshape(candidates.shape)
        good = np.concatenate([near < limit_, np.arange(grid.shape[1]) < points], axis=1)
        good &= (s < seen) & (seen < limit_)
        first = good.argmax(axis=1)
        out[lo:lo + len(s)] = np.where(good.any(axis=1), candidates[np.arange(len(s)), first], -1)
    return out


@dataclass
class _Windows:
    """Intervals ``[start, end)`` as their union (sorted disjoint intervals, touching ones
    merged): whether a point is inside any of them is one bisection."""

    first: np.ndarray
    reach: np.ndarray

    @classmethod
    def of(cls, starts: np.ndarray, ends: np.ndarray) -> _Windows:
        """The union of the windows; consumes ``starts`` and ``ends`` (int64, fresh arrays)."""
        if len(starts) > 1 and not bool(np.all(starts[1:] >= starts[:-1])):  # launch calls come in order: no sort
            order = np.argsort(starts, kind="stable")
            starts, ends = starts[order], ends[order]
            del order
        np.maximum.accumulate(ends, out=ends)
        new = np.ones(len(starts), bool)
        np.greater(starts[1:], ends[:-1], out=new[1:])
        if bool(new.all()):  # none merge: no copy
            return cls(starts, ends)
        first = np.flatnonzero(new)
        del new
        return cls(starts[first], ends[np.append(first[1:] - 1, len(starts) - 1)])

    def inside(self, at: np.ndarray) -> np.ndarray:
        window = searchsorted(self.first, at, side="right") - 1
        inside = window >= 0
        inside &= at < self.reach[np.maximum(window, 0)]
        return inside


class LaunchWindows:
    """Launch calls as time windows per Perfetto thread, widened by a µs either side.

    ``flow_anchors`` for arrows from these calls meets no CPU-side slice that neither starts
    nor ends ``near`` one of them: a caller that draws only such arrows can drop the rest of
    the CPU ops (most of a big trace's columns). One that starts near can end a call's binding
    window early; one that ends near can make Perfetto spill the call (it starts inside that
    slice and ends after it); one that holds the whole window does neither. Exact ns with a µs
    of slack contain Perfetto's reading of every start and end.
    """

    def __init__(self, cols: TraceColumns, launch_rows: np.ndarray):
        """``launch_rows``: a mask of ``cols.launches``."""
        self._thread_of_track = _thread_of_track(cols)
        launches = cols.launches
        thread = self._thread_of_track[launches.track]
        self._windows: dict[int, _Windows] = {}  # per thread
        for t in unique(thread[launch_rows]).tolist():
            mine = thread == t
            mine &= launch_rows
            ts = launches.ts[mine].astype(np.int64, copy=False)
            ends = np.maximum(launches.dur[mine], 0).astype(np.int64)
            del mine
            ends += ts
            ends += NS_PER_US + 1
            ts -= NS_PER_US
            self._windows[t] = _Windows.of(ts, ends)  # their union: far fewer than the calls
            del ts, ends

    def near(self, table: Table) -> np.ndarray:
        """Mask of the rows of ``table`` (a slice table of the same trace) that start or end near a window."""
        out = np.zeros(len(table), bool)
        for lo in range(0, len(table), _CHUNK):
            at = table.ts[lo:lo + _CHUNK]
            thread = self._thread_of_track[table.track[lo:lo + _CHUNK]]
            for t, windows in self._windows.items():
                mine = np.flatnonzero(thread == t)  # each row is looked up on its own thread only
                start = at[mine].astype(np.int64, copy=False)
                near = windows.inside(start)
                start += np.maximum(table.dur[lo:lo + _CHUNK][mine], 0)
                near |= windows.inside(start)
                out[lo + mine] = near
        return out
