"""Lanes (emit/lanes.py) and the "Critical path" track: a slice goes on the lowest lane free
at its start, so a path that does not overlap itself stays on one lane and a second lane is
used only where slices really overlap (issue 49 item 2: the path zig-zagged between
``Critical path`` and ``Critical path (lane 2)``, 8,467 switches in 12,877 slices on
h100/resnet50_train)."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest

from tests.annotator.plugins.test_critical_path import annotate, most, path_tracks, read
from tests.conftest import TRACES
from traceforge.emit.lanes import partition


def test_lowest_free_lane():
    # A [0,10) on lane 0, B [5,8) beside it on lane 1, C [10,20) after both: lane 0 again (the
    # lane that ended first, B's, would zig-zag).
    assert partition(np.array([0, 5, 10]), np.array([10, 8, 20])).tolist() == [0, 1, 0]
    # Abutting slices: one lane; three at once: three lanes, then back to lane 0.
    assert partition(np.array([0, 10, 20, 30]), np.array([10, 20, 30, 40])).tolist() == [0, 0, 0, 0]
    assert partition(np.array([0, 1, 2, 9]), np.array([5, 6, 7, 12])).tolist() == [0, 1, 2, 0]
    assert partition(np.zeros(0, np.int64), np.zeros(0, np.int64)).tolist() == []


def test_lanes_never_overlap_and_are_fewest():
    rng = np.random.default_rng(7)
    start = rng.integers(0, 1000, 400)
    end = start + rng.integers(0, 50, 400)
    lanes = partition(start, end)
    for lane in np.unique(lanes).tolist():
        mine = np.flatnonzero(lanes == lane)
        o = mine[np.argsort(start[mine], kind="stable")]
        assert (start[o][1:] >= end[o][:-1]).all()
    points = sorted([(int(s), 1) for s in start] + [(int(e), -1) for e in end])  # ends first at a tie
    depth = max(np.cumsum([d for _, d in points]))
    assert lanes.max() + 1 == max(depth, 1)


def lane_switches(events) -> tuple[int, int, int]:
    """(slices, lane switches between consecutive slices of one instance in one process, those
    of them where neither slice overlaps another slice of the process as Perfetto reads them)."""
    by_pid = defaultdict(list)
    for (pid, tid), slices in path_tracks(events).items():
        by_pid[pid] += [(read(e["ts"]), read(e["ts"]) + read(e["dur"]), most(e["ts"]) + most(e["dur"]), tid,
                         e["args"]["instance"]) for e in slices]
    count = switches = bad = 0
    for slices in by_pid.values():
        slices.sort()
        count += len(slices)
        starts = np.array([s[0] for s in slices])
        ends = np.array([s[2] for s in slices])
        # a slice overlaps another: one starting before it ends, or ending after it starts
        later = np.searchsorted(starts, ends, "left") - np.arange(len(slices)) - 1 > 0
        reach = np.maximum.accumulate(ends)
        earlier = np.r_[False, reach[:-1] > starts[1:]]
        overlaps = later | earlier
        for k in range(1, len(slices)):
            a, b = slices[k - 1], slices[k]
            if a[4] == b[4] and a[3] != b[3]:
                switches += 1
                bad += not (overlaps[k - 1] or overlaps[k])
    return count, switches, bad


@pytest.mark.integration
@pytest.mark.parametrize("name", ["h100_resnet50", "nccl", "ns_resolution"])
def test_path_switches_lanes_only_where_slices_overlap(name, tmp_path):
    count, switches, bad = lane_switches(annotate(TRACES[name], tmp_path))
    assert count > 100
    assert bad == 0
    if name == "h100_resnet50":  # a few, where a step's first slices lie beside the last step's GPU tail
        assert switches <= count // 1000  # 10 in 27,798 (the heap by lane end: 8,464 in 12,877)
