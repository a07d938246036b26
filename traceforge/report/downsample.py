"""A step series cut to a few points per pixel without losing its peaks.

A series of change points (``ts`` ns, ascending; ``value`` holds from its ts to the next) is
split into ``buckets`` equal spans of [lo, hi] (integer ns: point i goes to bucket
``(ts - lo) * buckets // (hi - lo + 1)``). Each bucket keeps its first point, a lowest and a
highest point, and its last point (the level it leaves), in time order, without repeats. So the kept series has the input's every bucket minimum and maximum at their exact
ts, hence its global peak and trough, and ends on the input's last level; a series with no
more than ``4 * buckets`` points comes back whole.
"""

from __future__ import annotations

import numpy as np

from ..util.distinct import unique

DEFAULT_BUCKETS = 1000


def min_max_buckets(ts: np.ndarray, values: np.ndarray, *, buckets: int = DEFAULT_BUCKETS,
                    lo: int | None = None, hi: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(ts, values) kept: see the module docstring. ``lo``/``hi`` default to the first and last ts."""
    ts = np.asarray(ts, dtype=np.int64)
    values = np.asarray(values)
    if len(ts) <= 4 * buckets:
        return ts, values
    lo = int(ts[0]) if lo is None else lo
    hi = int(ts[-1]) if hi is None else hi
    # a trace spans far less than 2**63 / buckets ns (106 days at 1,000 buckets), so no overflow
    bucket = (ts - lo) * buckets // (hi - lo + 1)
    starts = np.flatnonzero(np.r_[True, bucket[1:] != bucket[:-1]])
    ends = np.r_[starts[1:], len(ts)] - 1
    order = np.lexsort((values, bucket))  # by bucket, then value (stable: ties in time order)
    keep = unique(np.concatenate([starts, ends, order[starts], order[ends]]))
    return ts[keep], values[keep]
