"""Which complete slices Perfetto would spill off their thread, on numpy columns.

The rules are ``check``'s (``check.perfetto`` for how times are read, ``check.replay``
for the slice stack); this is the same model for X slices only, vectorised where it
can be so that ``repair`` handles traces with millions of kernels: a slice that starts
after everything before it on its thread has ended cannot spill, which settles almost
every GPU event without the stack.
"""

from __future__ import annotations

import numpy as np


MAX_DEPTH = 512  # Perfetto drops a slice nested this deep (not a spill)


class SpillWalk:
    """Which complete slices Perfetto would spill (``slice_spill_overlapping_complete_event``).

    Slices are [start, end) in Perfetto's ns on thread ``track``, replayed in Perfetto's
    order (ts, longer first, file order): a slice that starts inside the slice on top of
    its thread's stack and ends after it spills and is not pushed. They come in windows of
    consecutive start times (each slice of a window starts at or after every slice of the
    windows before it; see ``windows.windows_by``): each thread's latest end and open slices
    carry over from one window to the next.
    """

    def __init__(self) -> None:
        self._reach: dict[int, int] = {}  # per thread: the latest end so far
        self._stack: dict[int, list[tuple[int, int]]] = {}  # per thread: its open slices

    def __call__(self, track: np.ndarray, start: np.ndarray, end: np.ndarray, ordinal: np.ndarray) -> np.ndarray:
        """The mask of one window's slices that spill."""
        n = len(start)
        out = np.zeros(n, bool)
        if n == 0:
            return out
        order = np.lexsort((ordinal, start - end, start, track))
        t, s, e = track[order], start[order], end[order]
        first = np.flatnonzero(np.r_[True, t[1:] != t[:-1]])
        last = np.r_[first[1:], n] - 1
        clear = np.empty(n, bool)  # everything before it on its thread has ended: empty stack
        for a, b in zip(first.tolist(), (last + 1).tolist()):
            reach = self._reach.get(int(t[a]))
            before = np.maximum.accumulate(e[a:b])
            clear[a] = reach is None or s[a] >= reach
            clear[a + 1:b] = s[a + 1:b] >= (before[:-1] if reach is None else np.maximum(before[:-1], reach))
            self._reach[int(t[a])] = int(before[-1]) if reach is None else max(int(before[-1]), reach)
        cluster = np.cumsum(clear)
        busy = np.bincount(cluster)[cluster] > 1  # rows in clusters of 2+ slices
        busy |= np.isin(cluster, cluster[first[~clear[first]]])  # a thread's first cluster, begun in a window before
        stack: list[tuple[int, int]] = []
        starts, ends = set(first.tolist()), set(last.tolist())
        for i in np.flatnonzero(busy).tolist():
            if clear[i]:
                stack = []
            elif i in starts:  # a thread's first slice here, inside a slice of a window before
                stack = self._stack.get(int(t[i]), [])
            ts, te = int(s[i]), int(e[i])
            zero = ts == te
            while stack and (stack[-1][1] < ts or (stack[-1][1] == ts and not (zero and stack[-1][0] == ts))):
                stack.pop()
            if stack and ts < stack[-1][1] < te:
                out[order[i]] = True
            elif len(stack) < MAX_DEPTH:
                stack.append((ts, te))
            if i in ends:
                self._stack[int(t[i])] = stack
        for i in last[~busy[last]].tolist():  # a thread ending on a slice alone: only it is open
            self._stack[int(t[i])] = [(int(s[i]), int(e[i]))]
        return out
