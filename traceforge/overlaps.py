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


def spilled(track: np.ndarray, start: np.ndarray, end: np.ndarray, ordinal: np.ndarray) -> np.ndarray:
    """Mask of the slices Perfetto would spill (``slice_spill_overlapping_complete_event``).

    Slices are [start, end) in Perfetto's ns on thread ``track``, replayed in Perfetto's
    order (ts, longer first, file order): a slice that starts inside the slice on top of
    its thread's stack and ends after it spills and is not pushed.
    """
    n = len(start)
    out = np.zeros(n, bool)
    if n == 0:
        return out
    order = np.lexsort((ordinal, start - end, start, track))
    t, s, e = track[order], start[order], end[order]
    first = np.r_[True, t[1:] != t[:-1]]
    clear = np.empty(n, bool)  # everything before it on its thread has ended: empty stack
    for a, b in zip(np.flatnonzero(first).tolist(), np.r_[np.flatnonzero(first)[1:], n].tolist()):
        before = np.maximum.accumulate(e[a:b])
        clear[a] = True
        clear[a + 1:b] = s[a + 1:b] >= before[:-1]
    cluster = np.cumsum(clear)
    busy = np.flatnonzero(np.bincount(cluster)[cluster] > 1)  # rows in clusters of 2+ slices
    stack: list[tuple[int, int]] = []
    for i, new, ts, te in zip(busy.tolist(), clear[busy].tolist(), s[busy].tolist(), e[busy].tolist()):
        if new:
            stack.clear()
        zero = ts == te
        while stack and (stack[-1][1] < ts or (stack[-1][1] == ts and not (zero and stack[-1][0] == ts))):
            stack.pop()
        if stack and ts < stack[-1][1] < te:
            out[order[i]] = True
        elif len(stack) < MAX_DEPTH:
            stack.append((ts, te))
    return out
