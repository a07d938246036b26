"""Where to put a flow end so that Perfetto binds it to the intended slice.

Perfetto binds a v1 ``s`` (and an ``f`` with ``bp:"e"``) to the slice on top of the
thread's stack at the flow's ts, and pops that stack only when a new slice begins. So
the end of an arrow must lie strictly inside its slice *as Perfetto reads the times*
(``perfetto_ns``; a slice ends at ``perfetto(ts) + perfetto(dur)``) and before the next
slice on that thread begins (a child, or a zero-duration op, would take the binding).
"""

from __future__ import annotations

from itertools import chain

import numpy as np

from .exacttime import NS_PER_US
from .perfetto_time import perfetto_ns, perfetto_ns_of
from .scan import TraceColumns

_MAX_THREAD_ID = 2**32 - 1
_FALLBACK_SAMPLES = 128
_SLACK_NS = 512  # how far Perfetto's reading of a fractional µs can move, with margin


def perfetto_thread(pid: object, tid: object) -> tuple:
    """The thread Perfetto puts (pid, tid) on: ids outside [0, 2^32) become 0, tid 0 the pid."""
    def norm(v: object) -> object:
        return 0 if type(v) is int and not 0 <= v <= _MAX_THREAD_ID else v

    pid, tid = norm(pid), norm(tid)
    return (pid, pid if tid == 0 else tid)


class ThreadSlices:
    """Every slice the scan knows of (CPU ops, launch calls, GPU ops, profiler ranges) in
    Perfetto's order per thread: by start, longer first, then file order."""

    def __init__(self, cols: TraceColumns):
        # Millions of slices on big traces: each temporary is dropped as soon as it is used.
        tables = [t for t in (cols.cpu_ops, cols.launches, cols.gpu, cols.ranges) if len(t)]

        def column(name: str) -> np.ndarray:
            return np.concatenate([getattr(t, name) for t in tables] or [np.zeros(0, np.int64)])

        dur = column("dur")
        keep = dur >= 0  # Perfetto drops slices with a negative duration
        length = perfetto_ns(dur[keep])
        del dur
        start = perfetto_ns(column("ts")[keep])
        thread_ids: dict[tuple, int] = {}
        thread_of_track = np.array([thread_ids.setdefault(perfetto_thread(*t), len(thread_ids)) for t in cols.tracks]
                                   or [0], dtype=np.int32)
        thread = thread_of_track[column("track")[keep]]
        ordinal = column("ordinal")[keep]
        del keep
        order = np.lexsort((ordinal, -length, start, thread))
        self._start = start[order]
        del start
        self._end = self._start + length[order]
        del length
        self._thread = thread[order]
        del thread
        ordinal = ordinal[order]
        del order
        self._by_ordinal = np.argsort(ordinal, kind="stable")
        self._ordinals = ordinal[self._by_ordinal]

    def anchors(self, ordinals: np.ndarray) -> np.ndarray:
        """For each slice (by event ordinal): a ts in ns at which a flow end binds to it, or -1
        (also for an event Perfetto does not draw, e.g. one with a negative duration)."""
        out = np.full(len(ordinals), -1, np.int64)
        if not len(self._ordinals):
            return out
        found = np.minimum(np.searchsorted(self._ordinals, ordinals), len(self._ordinals) - 1)
        known = self._ordinals[found] == ordinals
        pos = self._by_ordinal[found]
        start, limit = self._start[pos], self._end[pos]
        nxt = np.minimum(pos + 1, len(self._start) - 1)
        has_next = (pos + 1 < len(self._start)) & (self._thread[nxt] == self._thread[pos])
        limit = np.where(has_next, np.minimum(limit, self._start[nxt]), limit)
        # First choice: the first whole µs after the start, which Perfetto reads exactly.
        whole = (start // NS_PER_US + 1) * NS_PER_US
        out[known & (whole < limit)] = whole[known & (whole < limit)]
        for i in np.flatnonzero(known & (out < 0) & (limit - start > 1)).tolist():
            out[i] = _fractional_anchor(int(start[i]), int(limit[i]))
        return out


def _fractional_anchor(start: int, limit: int) -> int:
    """A ts whose Perfetto reading lies in (start, limit), for slices with no whole µs there.

    Perfetto's reading of a fractional µs truncates, moves by up to a few hundred ns at
    epoch magnitude and is not monotonic across whole µs, so candidates are sampled: the
    first ns after the start, then a grid around the window.
    """
    step = max(1, (limit - start + 2 * _SLACK_NS) // _FALLBACK_SAMPLES)
    for t in chain(range(start + 1, min(limit, start + 17)), range(start - _SLACK_NS, limit + _SLACK_NS, step)):
        if start < perfetto_ns_of(t) < limit:
            return t
    return -1
