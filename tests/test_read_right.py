"""Numbers that read right (issue 53 item 10): one meaning per name, integer counts as integers,
one verdict per flow end, missing values alike in CSV and parquet."""

import json

import numpy as np
import pytest

from traceforge.columns.scan import scan
from traceforge.columns.info import _union_ns

from .conftest import TRACES, run_cli


def test_union_counts_each_instant_once():
    start = np.array([0, 5, 20, 21], np.int64)
    end = np.array([10, 8, 30, 25], np.int64)
    assert _union_ns(start, end) == 10 + 10
    assert _union_ns(start[:0], end[:0]) == 0


def test_info_busy_is_the_union_and_summed_is_the_sum(sample):
    streams = json.loads(run_cli("info", str(sample.path), "--format", "json").stdout)["gpu_streams"]
    cols = scan(str(sample.path))
    for s in streams:
        rows = (cols.gpu.device == s["device"]) & (cols.gpu.stream == s["stream"])
        ts, dur = cols.gpu.ts[rows].astype(np.int64), cols.gpu.dur[rows].astype(np.int64)
        covered = np.zeros(int((ts + dur).max() - ts.min()), bool)
        for a, d in zip((ts - ts.min()).tolist(), dur.tolist()):
            covered[a:a + d] = True
        assert s["busy_ms"] * 1e6 == pytest.approx(int(covered.sum()), abs=1e-3)
        assert s["summed_ms"] * 1e6 == pytest.approx(int(dur.sum()), abs=1e-3)
    text = run_cli("info", str(sample.path)).stdout.decode()
    assert "busy ms" in text and "summed ms" in text


@pytest.mark.integration
def test_info_and_stats_busy_agree_on_resnet():
    info = run_cli("info", str(TRACES["h100_resnet50"])).stdout.decode()
    stats = run_cli("stats", str(TRACES["h100_resnet50"])).stdout.decode()
    assert "118.405    119.315" in info  # busy (the union), summed
    assert "118.405" in stats
