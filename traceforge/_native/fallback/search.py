"""Searches of sorted int arrays and the greedy choice of non-overlapping windows: the
fallback of ``_search.c``.

``search_sorted`` is numpy's searchsorted, which gives the C's answers for a sorted haystack
(the C's contract; it gallops from the previous answer only to be faster).
``non_overlapping`` follows each kept window to the first start at or after its end, found
for every start at once by one searchsorted; starts not in ascending order are walked one by
one, as the C walks every input.
"""

from __future__ import annotations

import numpy as np

from ._buffers import as_c_int, as_long_long, contiguous, items, writable


def search_sorted(haystack: object, needles: object, itemsize: object, right: object, out: object) -> None:
    """``out[i]`` (intp) = the first index of ``haystack`` (sorted ascending) whose value is
    ``>= needles[i]`` (``>`` with ``right``), ``len(haystack)`` if none. Both int32 (``itemsize``
    4) or both int64 (8)."""
    hay_v, needles_v = contiguous(haystack), contiguous(needles)
    size = as_c_int(itemsize)
    side = "right" if right else "left"
    out_v = writable(out, 5)
    per = size or 1
    m = len(needles_v) // per
    if size not in (4, 8) or len(hay_v) % size or len(needles_v) % size or len(out_v) != m * 8:
        raise ValueError("haystack and needles must be int32 or int64 buffers (itemsize 4 or 8), "
                         "out an intp buffer as long as needles")
    dtype = np.int32 if size == 4 else np.int64
    items(out_v, np.intp)[:] = np.searchsorted(items(hay_v, dtype), items(needles_v, dtype), side=side)


def non_overlapping(starts: object, n: object, out: object) -> int:
    """The starts (int64, ascending) of windows of ``n`` kept left to right, each one that begins
    at or after the last kept one's end (start + n), written to ``out`` (int64, as long as
    ``starts``). Returns how many."""
    starts_v = contiguous(starts)
    width = as_long_long(n)
    out_v = writable(out, 3)
    if len(starts_v) % 8 or len(out_v) != len(starts_v):
        raise ValueError("starts and out must be int64 buffers of one length")
    s = items(starts_v, np.int64)
    kept = _kept_sorted(s, width) if np.all(s[1:] >= s[:-1]) else _kept_any(s.tolist(), width)
    items(out_v, np.int64)[:len(kept)] = s[kept]
    return len(kept)


def _kept_sorted(s: np.ndarray, n: int) -> list[int]:
    """The kept indexes of ascending starts: from each kept one, the first later start at or
    after its end (int64 sums wrap, as in the C)."""
    with np.errstate(over="ignore"):
        ends = s + np.int64(n)
    following = np.maximum(np.searchsorted(s, ends, side="left"), np.arange(1, len(s) + 1)).tolist()
    kept, i = [], 0
    while i < len(s):
        kept.append(i)
        i = following[i]
    return kept


def _kept_any(s: list[int], n: int) -> list[int]:
    """The kept indexes of starts in any order, one start at a time."""
    kept: list[int] = []
    end = 0
    for i, start in enumerate(s):
        if kept and start < end:
            continue
        kept.append(i)
        end = _wrapped(start + n)
    return kept


def _wrapped(x: int) -> int:
    """``x`` as an int64 sum wraps."""
    return (x + 2**63) % 2**64 - 2**63
