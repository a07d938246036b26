"""Which complete slices Perfetto would spill off their thread: ``check``'s walk of Perfetto's
slice stacks (``_replay``, rules in ``check.replay``) over X slices only, for ``repair``, and
for the slices flow arrows are placed on (``spilled_on_thread``)."""

from __future__ import annotations

import numpy as np

from .. import _native


class SpillWalk:
    """Which complete slices Perfetto would spill (``slice_spill_overlapping_complete_event``).

    Slices are [start, end) in Perfetto's ns on thread ``track`` (0 .. ``n_tracks`` - 1),
    replayed in Perfetto's order (ts, longer first, file order): a slice that starts inside the
    slice on top of its thread's stack and ends after it spills and is not pushed. They come in
    windows of consecutive start times (each slice of a window starts at or after every slice of
    the windows before it; see ``windows.windows_by``): each thread's stack carries over from
    one window to the next, in the C walker.
    """

    def __init__(self, n_tracks: int) -> None:
        self._replay = _native.replay  # the walker belongs to the backend that made it
        self._walker = self._replay.walker(n_tracks, 0, True)

    def __call__(self, track: np.ndarray, start: np.ndarray, end: np.ndarray, ordinal: np.ndarray) -> np.ndarray:
        """The mask of one window's slices that spill."""
        n = len(start)
        start, dur = start.astype(np.int64, copy=False), (end - start).astype(np.int64, copy=False)
        order = np.lexsort((ordinal, -dur, start)).astype(np.int64, copy=False)
        zeros, none = np.zeros(n, np.int64), np.full(n, -1, np.int64)
        found = self._replay.walk(self._walker, order, np.full(n, self._replay.SLICE, np.int64), start, dur,
                                  track.astype(np.int64, copy=False), zeros, zeros, none, zeros, zeros, zeros,
                                  np.arange(n, dtype=np.int64))  # "ordinal": the row, as records give it back
        records = np.frombuffer(found, np.int64).reshape(-1, self._replay.RECORD)
        out = np.zeros(n, bool)
        out[records[records[:, 0] == self._replay.SPILL, 1]] = True
        return out


def spilled_on_thread(start: np.ndarray, end: np.ndarray, ordinal: np.ndarray) -> np.ndarray:
    """The mask of one thread's X slices (Perfetto's ns, [start, end); ``ordinal``: file order)
    that Perfetto spills. Only runs of slices that overlap are walked: a slice that starts at or
    after the end of every slice before it finds its stack empty (all popped), so it is pushed,
    and what came before it cannot make a later one spill. On a GPU stream that is most slices."""
    n = len(start)
    out = np.zeros(n, bool)
    if n < 2:
        return out
    order = None if bool(np.all(start[1:] >= start[:-1])) else np.argsort(start, kind="stable")
    s = start if order is None else start[order]
    reach = end if order is None else end[order]
    reach = np.maximum.accumulate(reach)
    alone = np.ones(n + 1, bool)  # alone[i]: sorted slice i starts a run (nothing open); alone[n]: the end
    np.greater_equal(s[1:], reach[:-1], out=alone[1:n])
    del s, reach
    first = np.flatnonzero(alone)
    runs = np.diff(first)
    walked = np.repeat(runs > 1, runs)  # per sorted slice: in a run of two or more
    if not walked.any():
        return out
    rows = np.flatnonzero(walked)
    if order is not None:
        rows = order[rows]
    rows.sort()  # file order among equal starts and lengths, as the walk breaks ties by ``ordinal``
    out[rows] = SpillWalk(1)(np.zeros(len(rows), np.int64), start[rows], end[rows], ordinal[rows])
    return out
