"""Time on a device counted once: each instant goes to the interval that started first.

This is the vLLM nsys classifier's "elapsed" time, vectorised: sorted by start, an
interval owns the part of itself after the furthest end of every interval that started
before it, so concurrent kernels on several streams are not counted twice and the owned
parts add up to the union (busy time), exactly, in integer ns.
"""

from __future__ import annotations

import numpy as np

from ...util.distinct import unique


def first_start_owned(ts: np.ndarray, end: np.ndarray, tiebreak: np.ndarray) -> np.ndarray:
    """Owned ns of each interval [ts, end) (int64, input order); equal starts go by ``tiebreak``.

    ``end`` below ``ts`` counts as empty. The sum of the result is the union's length.
    Three int64 arrays live besides the order (the steps write into them in place).
    """
    n = len(ts)
    if n == 0:
        return np.zeros(0, np.int64)
    order = np.lexsort((tiebreak, ts))
    start = ts[order].astype(np.int64, copy=False)
    stop = end[order].astype(np.int64, copy=False)
    np.maximum(stop, start, out=stop)
    reach = np.empty(n, np.int64)  # furthest end of the intervals sorted before each one
    reach[0] = start[0]
    np.maximum.accumulate(stop[:-1], out=reach[1:])
    np.maximum(reach, start, out=reach)  # where each one's owned part begins
    del start
    np.subtract(stop, reach, out=stop)
    np.maximum(stop, 0, out=stop)
    del reach
    owned = np.empty(n, np.int64)
    owned[order] = stop
    return owned


def grouped_first_start_owned(group: np.ndarray, ts: np.ndarray, end: np.ndarray, tiebreak: np.ndarray) -> np.ndarray:
    """``first_start_owned`` within each value of ``group`` (e.g. per device), input order;
    one group (one device) is done on the arrays as they are, without a copy of them."""
    groups = unique(group).tolist()
    if len(groups) == 1:
        return first_start_owned(ts, end, tiebreak)
    owned = np.zeros(len(ts), np.int64)
    for g in groups:
        rows = np.flatnonzero(group == g)
        owned[rows] = first_start_owned(ts[rows], end[rows], tiebreak[rows])
    return owned

