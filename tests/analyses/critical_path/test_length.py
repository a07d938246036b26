"""The critical path's length is its real span of work: ops of one stream that overlap (a
cuDNN helper kernel beside its main kernel) count their union once, so ``length_ns`` equals
the summed lengths of the path's tiled work segments (every category but idle and sync)."""

from __future__ import annotations

import json
from functools import lru_cache

import numpy as np
import pytest

from tests.conftest import TRACE_FILES, TRACES
from traceforge.analyses.critical_path.graph import instances
from traceforge.analyses.critical_path.path import critical_path
from traceforge.columns.scan import scan

WAITS = ("idle", "wait", "sync")  # the 0-weight categories: no work on the path's length


def _x(cat, name, ts, dur, pid=1, tid=1, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _kernel(name, ts, dur, corr, stream=7):
    return _x("kernel", name, ts, dur, pid=0, tid=stream, device=0, stream=stream, correlation=corr)


def tiled_work(path) -> np.ndarray:
    """Per instance: the ns of the path's tiled segments that are work."""
    seg = path.segments
    work = seg[~seg["category"].isin(WAITS)]
    sums = (work["end"] - work["start"]).groupby(work["instance"]).sum()
    return sums.reindex(range(len(path.summary)), fill_value=0).to_numpy()


# One thread launches three kernels onto one stream (µs): K2 starts 10 µs before K1 ends (a
# helper kernel beside the main one), K3 after a 5 µs gap. The stream is busy 10..60 and 65..80.
OVERLAP = [
    _x("user_annotation", "ProfilerStep#1", 0, 100),
    _x("cpu_op", "A", 0, 5),
    _x("cuda_runtime", "cudaLaunchKernel", 1, 1, correlation=1),
    _x("cuda_runtime", "cudaLaunchKernel", 2, 1, correlation=2),
    _x("cuda_runtime", "cudaLaunchKernel", 3, 1, correlation=3),
    _kernel("K1", 10, 40, 1),
    _kernel("K2", 40, 20, 2),
    _kernel("K3", 65, 15, 3),
]


def test_overlapping_kernels_on_a_stream_count_once(tmp_path):
    path = tmp_path / "overlap.json"
    path.write_text(json.dumps({"traceEvents": OVERLAP}))
    r = critical_path(scan(str(path)))
    row = r.summary.iloc[0]
    # Three ops queued: no launch edge (HTA's rule); the stream busy 10..60 (50), gap 5, K3 15.
    # Counting K1 and K2 whole would give 80.
    assert row["length_ns"] == (50 + 5 + 15) * 1000
    assert tiled_work(r).tolist() == [row["length_ns"]]
    named = [(c, n, s // 1000, e // 1000) for c, n, s, e in
             r.segments[["category", "name", "start", "end"]].itertuples(index=False)]
    assert named == [("wait", "", 0, 5), ("idle", "", 5, 10), ("compute", "K1", 10, 40),
                     ("compute", "K1", 40, 50), ("compute", "K2", 50, 60), ("gpu_gap", "K2", 60, 65),
                     ("compute", "K3", 65, 80), ("idle", "", 80, 100)]


@lru_cache(maxsize=1)
def _columns(name):
    return scan(str(TRACES[name]))


@pytest.mark.integration
@pytest.mark.parametrize("name", sorted(TRACE_FILES))
@pytest.mark.parametrize("hta", [False, True])
def test_length_equals_the_tiled_segments_on_every_shared_trace(name, hta):
    cols = _columns(name)
    path = critical_path(cols, None if len(instances(cols)) else "", hta=hta)
    assert path.summary["length_ns"].to_numpy().tolist() == tiled_work(path).tolist()


# HTA 0.5.0 (networkx 3.6.1), the trace alone in DIR:
#   g, ok = TraceAnalysis(trace_dir=DIR).critical_path_analysis(rank=R, annotation="ProfilerStep", instance_id=1)
#   networkx.dag_longest_path_length(g, weight="weight")
# h100/resnet50_train (R 0, instance 1 = ProfilerStep#3): 18636.0 µs (HTA's weights are whole µs);
# hta/trace_diff/test (R 1, instance 1 = ProfilerStep#1010): 117122.0 µs.
HTA_LENGTH_US = {"h100_resnet50": (3, 18_636), "trace_diff": (1010, 117_122)}


@pytest.mark.integration
@pytest.mark.parametrize("name", sorted(HTA_LENGTH_US))
def test_length_agrees_with_hta(name):
    step, hta_us = HTA_LENGTH_US[name]
    row = critical_path(_columns(name), step=step, hta=True).summary.iloc[0]  # HTA's graph
    assert abs(row["length_ns"] - hta_us * 1000) <= hta_us * 1000 // 1000  # within 0.1 %
