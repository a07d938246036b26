"""Claims of docs/hta.md about HTA that no other test held, against HTA's recorded figures.

HTA need not be installed: each figure below was recorded once from HTA 0.5.0 (PyPI
``holistictraceanalysis``, pandas 2.3.3) and 0.6.1 (PyPI ``traceinsight``), with the call
written next to it, on the trace linked alone into a directory DIR:

    a = TraceAnalysis(trace_files={0: TRACE}, trace_dir=DIR)

and the tests check traceforge's side of each claim on the same trace.
"""

from __future__ import annotations

import numpy as np
import pytest

from traceforge.analyses.gpu_time.idle_intervals import idle_intervals
from traceforge.analyses.launches.calls import last_step_start
from traceforge.analyses.structure.steps import hta_ops

NS_PER_US = 1000

# df = a.t.get_trace(0); int((df.stream >= 0).sum()) on negative_queue: 5,500 (0.5.0 and 0.6.1).
HTA_NEGATIVE_QUEUE_GPU_ROWS = 5_500

# a.get_idle_time_breakdown(ranks=[0], visualize=False, show_idle_interval_stats=True)[1],
# HTA 0.5.0. trace_diff stream 16 host wait: count 4, mean 105,731.25, min 69,937,
# 50% 98,775.5, max 155,437 µs.
HTA_TRACE_DIFF_16_HOST_WAIT = {"count": 4, "mean_us": 105_731.25, "min_us": 69_937, "p50_us": 98_775.5,
                               "max_us": 155_437}
# ns_resolution stream 7: host wait count 90; kernel wait count 4,785, min 1 µs.
HTA_NS_RESOLUTION_7 = {"host_wait_count": 90, "kernel_wait_min_us": 1}


@pytest.mark.integration
def test_hta_loads_negative_queue_without_its_last_step(columns):
    """docs/hta.md, Filters: 'HTA loads a trace without its last step (5,500 of the 7,747 GPU ops)'."""
    cols = columns("negative_queue")
    assert len(cols.gpu) == 7_747
    assert int(hta_ops(cols).sum()) == HTA_NEGATIVE_QUEUE_GPU_ROWS


@pytest.mark.integration
def test_htas_idle_interval_median_is_interpolated_over_the_same_gaps(columns):
    """docs/hta.md, Idle intervals: with HTA's cut, trace_diff stream 16 has HTA's 4 host waits
    (count, mean, min, max equal); our p50 is the 2nd gap, 86,910 µs, HTA's 98,775.5 the mean of
    the 2nd and 3rd."""
    cols = columns("trace_diff")
    table = idle_intervals(cols, launched_before_ns=last_step_start(cols))
    row = table[(table.stream == 16) & (table.category == "host_wait")].iloc[0]
    hta = HTA_TRACE_DIFF_16_HOST_WAIT
    assert (int(row["count"]), row["mean_ns"] / NS_PER_US, row["min_ns"], row["max_ns"]) == (
        hta["count"], hta["mean_us"], hta["min_us"] * NS_PER_US, hta["max_us"] * NS_PER_US)
    assert row["p50_ns"] == 86_910 * NS_PER_US
    third = row["total_ns"] - row["min_ns"] - row["p50_ns"] - row["max_ns"]  # 4 gaps: the 3rd by difference
    assert (row["p50_ns"] + third) / 2 == hta["p50_us"] * NS_PER_US


@pytest.mark.integration
def test_ns_resolution_gaps_move_between_categories_under_htas_rounding(columns):
    """docs/hta.md, Idle intervals: on ns_resolution_trace 90 host waits in HTA, 47 here;
    kernel waits' min 0.64 µs here, 1 µs in HTA."""
    table = idle_intervals(columns("ns_resolution")).set_index(["stream", "category"])
    assert table.loc[(7, "host_wait"), "count"] == 47 != HTA_NS_RESOLUTION_7["host_wait_count"]
    assert table.loc[(7, "kernel_wait"), "min_ns"] == 640  # HTA: HTA_NS_RESOLUTION_7["kernel_wait_min_us"]


@pytest.mark.integration
def test_nccl_trace_has_no_gpu_op_at_a_whole_microsecond(columns):
    """docs/hta.md, Rounding: none of HTA's counter points on the NCCL trace has its kernel's ts.
    HTA rounds every start up to a whole µs (hta/common/trace_parser.py round_down_time_stamps,
    0.5.0 and 0.6.1), and no GPU op of that trace starts at a whole µs."""
    ts = np.asarray(columns("nccl").gpu.ts, dtype=np.int64)
    assert len(ts) == 3_774
    assert int((ts % NS_PER_US == 0).sum()) == 0
