"""Step series: +/- changes at timestamps into one running value per distinct timestamp."""

from __future__ import annotations

import numpy as np


def net_steps(keys: list[np.ndarray], ts: np.ndarray, delta: np.ndarray) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    """Group by ``keys``; within a group, net all ``delta`` at equal ``ts`` (int64, exact).

    Returns (keys per point, ts per point, running total per point), one point per
    distinct (keys, ts), sorted by keys then ts.
    """
    if len(ts) == 0:
        return [k[:0] for k in keys], ts[:0], delta[:0]
    order = np.lexsort((ts, *reversed(keys)))
    keys = [k[order] for k in keys]
    ts = ts[order]
    delta = delta[order]
    del order
    new_group = np.zeros(len(ts), bool)
    new_group[0] = True
    for k in keys:
        new_group[1:] |= k[1:] != k[:-1]
    new_point = new_group.copy()
    new_point[1:] |= ts[1:] != ts[:-1]
    starts = np.flatnonzero(new_point)
    net = np.add.reduceat(delta, starts)
    total = np.cumsum(net)
    group_start = new_group[starts]
    group_of_point = np.cumsum(group_start) - 1
    first = np.flatnonzero(group_start)
    carried = np.concatenate([[0], total[first[1:] - 1]]).astype(total.dtype)
    return [k[starts] for k in keys], ts[starts], total - carried[group_of_point]
