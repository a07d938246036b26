"""``numpy.searchsorted`` for the analyses' integer look-ups, galloping from the previous answer.

Columns are looked up in file order: their times mostly rise by a few places of the sorted
array from one row to the next, so each search starting where the last one ended stays in
cache (faster than numpy's bisection of the rest of the array for such needles, about as fast
for random ones). Other dtypes, mixed ones and small lookups go to numpy.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from .. import _native

_MIN_NEEDLES = 64  # below this the call's set-up is most of the cost either way
_TYPES = (np.dtype(np.int32), np.dtype(np.int64))  # both arrays of one of these


def searchsorted(haystack: np.ndarray, needles: np.ndarray, side: Literal["left", "right"] = "left") -> np.ndarray:
    """``np.searchsorted(haystack, needles, side=side)`` (``haystack`` sorted), as intp indices."""
    if (haystack.dtype not in _TYPES or not isinstance(needles, np.ndarray) or needles.dtype != haystack.dtype
            or needles.ndim != 1 or len(needles) < _MIN_NEEDLES):
        return np.searchsorted(haystack, needles, side=side)
    out = np.empty(len(needles), np.intp)
    _native.search.search_sorted(np.ascontiguousarray(haystack), np.ascontiguousarray(needles),
                                 haystack.dtype.itemsize, side == "right", out)
    return out


def in_sorted(sorted_values: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Whether each of ``values`` is in ``sorted_values`` (sorted)."""
    if not len(sorted_values):
        return np.zeros(len(values), bool)
    at = np.minimum(searchsorted(sorted_values, values), len(sorted_values) - 1)
    return sorted_values[at] == values
