"""Greedy interval partitioning: put slices on as few lanes as possible, none overlapping.

Perfetto moves or drops a slice that partially overlaps another on the same track, so
every track traceforge draws is laid out here first: on one lane, each slice starts at
or after the previous one ends (as Perfetto will see the times, see ``perfetto_ns``).
"""

from __future__ import annotations

import heapq

import numpy as np

from ..perfetto.timestamps import perfetto_ns


def assign_lanes(ts: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """Lane index (0, 1, ...) for each slice [ts, ts + dur) in ns.

    Perfetto reads ts and dur separately, so the end it sees is the sum of the two readings.
    """
    start = perfetto_ns(ts)
    return partition(start, start + np.maximum(perfetto_ns(dur), 0))


def partition(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Lane index for each slice [start, end) whose ns are already as Perfetto reads them:
    each slice, by start, on the lowest-numbered lane that is free by then. Slices that never
    overlap stay on lane 0; a later lane is used only while the earlier ones are all busy."""
    order = np.lexsort((-end, start))
    lanes = np.empty(len(start), np.int64)
    busy: list[tuple[int, int]] = []  # (end of the lane's last slice, lane) of the lanes in use
    free: list[int] = []  # the lanes free again
    count = 0
    for i in order.tolist():
        at = int(start[i])
        while busy and busy[0][0] <= at:
            heapq.heappush(free, heapq.heappop(busy)[1])
        if free:
            lane = heapq.heappop(free)
        else:
            lane, count = count, count + 1
        lanes[i] = lane
        heapq.heappush(busy, (int(end[i]), lane))
    return lanes
