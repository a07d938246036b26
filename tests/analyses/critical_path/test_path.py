"""Critical path (analyses/critical_path/graph.py, critical_path.py): a hand-built trace with a known
longest path, and HTA 0.5's numbers on its own critical-path test traces."""

from __future__ import annotations

import gzip
import json

import pandas as pd
import pytest

from tests.conftest import TRACES
from traceforge.analyses.critical_path.path import CATEGORY_COLUMNS, critical_path
from traceforge.columns.scan import scan


def _x(cat, name, ts, dur, pid=1, tid=1, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _kernel(name, ts, dur, stream, corr):
    return _x("kernel", name, ts, dur, pid=0, tid=stream, device=0, stream=stream, correlation=corr)


# One thread, two streams. K1 (stream 7) is recorded, stream 8 waits for it (K2 starts at K1's end),
# then cudaDeviceSynchronize waits for both. Times in µs.
EVENTS = [
    _x("user_annotation", "ProfilerStep#1", 0, 100),
    _x("cpu_op", "A", 1, 19),
    _x("cuda_runtime", "cudaLaunchKernel", 2, 3, correlation=1),
    _kernel("K1", 6, 34, 7, 1),
    _x("cuda_runtime", "cudaEventRecord", 21, 1, correlation=2),
    _x("cuda_runtime", "cudaStreamWaitEvent", 23, 1, correlation=3),
    _x("cuda_sync", "Stream Wait Event", 24, 1, pid=0, tid=8, device=0, stream=8, correlation=3,
       wait_on_stream=7, wait_on_cuda_event_record_corr_id=2),
    _x("cuda_runtime", "cudaLaunchKernel", 25, 2, correlation=4),
    _kernel("K2", 41, 19, 8, 4),
    _x("cuda_runtime", "cudaDeviceSynchronize", 28, 34, correlation=5),
    _x("cuda_sync", "Context Sync", 61, 1, pid=0, tid=-1, device=0, stream=-1, correlation=5),
    _x("cpu_op", "B", 63, 7),
]


@pytest.fixture
def synthetic(tmp_path):
    path = tmp_path / "cp.json"
    path.write_text(json.dumps({"traceEvents": EVENTS}))
    return str(path)


def test_synthetic_longest_path(synthetic):
    r = critical_path(scan(synthetic))
    row = r.summary.iloc[0]
    # A's start -> launch of K1 -> K1 -> (event wait) K2 -> (device sync) end of the sync -> B
    assert row["length_ns"] == (1 + 4 + 34 + 19 + 7) * 1000
    assert row["span_ns"] == 100_000
    expect = {"cpu": 8, "launch": 4, "compute": 53, "communication": 0, "memory": 0, "gpu_gap": 0, "sync": 3, "idle": 32,
              "wait": 0}
    assert {c[:-3]: int(row[c]) // 1000 for c in CATEGORY_COLUMNS} == expect
    seg = r.segments
    assert seg["start"].iloc[0] == 0 and seg["end"].iloc[-1] == 100_000
    assert (seg["start"].to_numpy()[1:] == seg["end"].to_numpy()[:-1]).all()  # tiles, no overlap
    named = [(c, n, s // 1000, e // 1000) for c, n, s, e in seg[["category", "name", "start", "end"]].itertuples(index=False)]
    assert named == [("idle", "", 0, 1), ("cpu", "A", 1, 2), ("launch", "cudaLaunchKernel", 2, 6),
                     ("compute", "K1", 6, 40), ("sync", "K1", 40, 41), ("compute", "K2", 41, 60),
                     ("sync", "K2", 60, 62), ("idle", "", 62, 63), ("cpu", "B", 63, 70), ("idle", "", 70, 100)]


def test_without_the_wait_the_path_changes(synthetic, tmp_path):
    """Without the cuda_sync events K2 hangs off its own launch: the path is shorter."""
    path = tmp_path / "nosync.json"
    path.write_text(json.dumps({"traceEvents": [e for e in EVENTS if e["cat"] != "cuda_sync"]}))
    r = critical_path(scan(str(path)))
    assert not r.has_syncs
    # cpu 1 (A to launch 2) + launch L2 -> K2 (41 - 25 = 16) ... the best is A..L1 -> K1 = 1 + 4 + 34
    assert r.summary["length_ns"].iloc[0] == max(1 + 4 + 34, 19 + 1 + 1 + 0 + 16 + 19) * 1000


def _hta_rows(name):
    return critical_path(scan(str(TRACES[name])), *HTA[name][:2], hta=True).summary.iloc[0]


# HTA 0.5.0 (networkx 3.6.1): a = TraceAnalysis(trace_dir=DIR);
# g, ok = a.critical_path_analysis(rank=R, annotation=ANN, instance_id=0);
# networkx.dag_longest_path_length(g, weight="weight"), g.get_critical_path_breakdown().groupby("bound_by").duration.sum()
# (µs). Ours: ns. HTA's compute is our compute + memory.
HTA = {
    # DIR hta/critical_path/alexnet, R 0, ANN "[param|pytorch.model.alex_net|0|0|0|measure|forward]"
    "alexnet": ("[param|pytorch.model.alex_net|0|0|0|measure|forward]", 0,
                {"length": 78776, "cpu_bound": 74984, "gpu_compute_bound": 3712, "gpu_kernel_kernel_overhead": 50,
                 "gpu_kernel_launch_overhead": 30}),
    # DIR hta/critical_path/cuda_event_sync_multi_stream, R 0, ANN "" (the whole trace)
    "event_sync": ("", 0, {"length": 1178, "cpu_bound": 1025, "gpu_compute_bound": 124,
                           "gpu_kernel_kernel_overhead": 15, "gpu_kernel_launch_overhead": 14}),
    # DIR hta/df_index_resolver, R 1, ANN "ProfilerStep" (instance 0 = ProfilerStep#2; ours: --step 2)
    "df_index": (None, 2, {"length": 238893, "cpu_bound": 238893}),
}


@pytest.mark.parametrize("name", list(HTA))
def test_agrees_with_hta(name):
    row = _hta_rows(name)
    want = HTA[name][2]
    ours = {"length": row["length_ns"], "cpu_bound": row["cpu_ns"], "gpu_compute_bound": row["compute_ns"] + row["memory_ns"],
            "gpu_kernel_kernel_overhead": row["gpu_gap_ns"], "gpu_kernel_launch_overhead": row["launch_ns"],
            "gpu_communication_bound": row["communication_ns"]}
    assert {k: v * 1000 for k, v in want.items()} == {k: int(ours[k]) for k in want}
    assert sum(int(row[c]) for c in CATEGORY_COLUMNS) == row["span_ns"]


def test_event_sync_trace_reads_cuda_sync_args():
    cols = scan(str(TRACES["event_sync"]))
    raw = json.load(gzip.open(TRACES["event_sync"]))["traceEvents"]
    syncs = [e for e in raw if e.get("cat") == "cuda_sync"]
    assert cols.syncs.record_correlation.tolist() == [e["args"].get("wait_on_cuda_event_record_corr_id", -1) for e in syncs]
    assert cols.syncs.wait_stream.tolist() == [e["args"].get("wait_on_stream", -1) for e in syncs]


def test_an_instance_without_events_is_idle(tmp_path):
    path = tmp_path / "two.json"
    path.write_text(json.dumps({"traceEvents": [*EVENTS, _x("user_annotation", "ProfilerStep#2", 200, 10)]}))
    r = critical_path(scan(str(path)))
    empty = r.summary.iloc[1]
    assert (empty["label"], empty["length_ns"], empty["idle_ns"], empty["span_ns"]) == ("ProfilerStep#2", 0, 10_000, 10_000)
    assert r.summary["length_ns"].iloc[0] == 65_000  # the first step's path is as alone
    last = r.segments[r.segments["instance"] == 1]
    assert last[["start", "end", "category", "from_row", "to_row"]].values.tolist() == [[200_000, 210_000, "idle", -1, -1]]


# HTA 0.5.0: TraceAnalysis(trace_dir="hta/critical_path/alexnet").critical_path_analysis(rank=0,
# annotation="[param|pytorch.model.alex_net|0|0|0|measure|forward]", instance_id=1), then
# networkx.dag_longest_path_length(g, weight="weight") -> 35834.0 and
# g.get_critical_path_breakdown().groupby("bound_by").duration.sum() -> cpu_bound 32042,
# gpu_compute_bound 3712, gpu_kernel_kernel_overhead 50, gpu_kernel_launch_overhead 30 (µs).
# Instance 1 lies inside instance 0 (nested annotations): each gets a graph of its own.
def test_nested_instances_each_agree_with_hta():
    r = critical_path(scan(str(TRACES["alexnet"])), HTA["alexnet"][0], hta=True)
    assert r.summary["length_ns"].tolist() == [78_776_000, 35_834_000]
    one = r.summary.iloc[1]
    assert (one["cpu_ns"], one["compute_ns"] + one["memory_ns"], one["gpu_gap_ns"], one["launch_ns"]) == \
        (32_042_000, 3_712_000, 50_000, 30_000)


def test_paths_solved_in_batches_equal_one_graph(sample, monkeypatch):
    """A big trace's instances are solved a batch at a time: the same paths as in one graph."""
    from traceforge.analyses.critical_path import path as module

    cols = scan(str(sample.path))
    whole = module.critical_path(cols)
    monkeypatch.setattr(module, "BATCH_EVENTS", 1)  # one step per batch
    assert len(module._batches(cols, module.instances(cols))) == len(whole.summary) > 1
    batched = module.critical_path(cols)
    pd.testing.assert_frame_equal(batched.summary, whole.summary)
    pd.testing.assert_frame_equal(batched.segments, whole.segments)
    summary_only = module.critical_path(cols, segments=False)
    pd.testing.assert_frame_equal(summary_only.summary, whole.summary)
    assert len(summary_only.segments) == 0 and list(summary_only.segments.columns) == list(whole.segments.columns)
