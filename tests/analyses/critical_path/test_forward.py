"""The critical path runs through the forward pass (issue 53 item 1): the graph links each
forward operator to its backward operator by the trace's ``fwdbwd`` flows, and a thread's
first op in a step to the other thread's op that handed over to it, so a step's path
starts at its forward pass, not at the first backward op on the autograd thread; HTA's graph
(``hta=True``, ``critical-path --hta``) has no such edge. A 0-weight span of the path is
``wait`` where work ran elsewhere, ``idle`` only where nothing ran, so the path's idle share
is the trace's own GPU-and-CPU idle time."""

from __future__ import annotations

import gzip
import json
from decimal import Decimal
from pathlib import Path

import pytest

from tests.conftest import TRACES, run_cli
from traceforge.analyses.critical_path.graph import instances
from traceforge.analyses.critical_path.path import critical_path
from traceforge.columns.scan import scan


def _x(cat, name, ts, dur, tid=1, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _flow(ph, ts, tid, flow_id):
    event = {"ph": ph, "cat": "fwdbwd", "name": "fwdbwd", "pid": 1, "tid": tid, "ts": ts, "id": flow_id}
    return {**event, "bp": "e"} if ph == "f" else event


# The main thread runs the forward op F (0..10 µs, a child at its start too); the autograd
# thread (tid 2) runs its backward B (12..30). The flow links F to B.
EVENTS = [
    _x("user_annotation", "ProfilerStep#1", 0, 40),
    _x("cpu_op", "F", 0, 10), _x("cpu_op", "F.child", 0, 4),
    _flow("s", 0, 1, 7),
    _x("cpu_op", "B", 12, 18, tid=2),
    _flow("f", 12, 2, 7),
]


@pytest.fixture
def linked(tmp_path):
    path = tmp_path / "fwdbwd.json"
    path.write_text(json.dumps({"traceEvents": EVENTS}))
    return str(path)


def test_scan_keeps_the_flows(linked):
    flows = scan(linked).fwdbwd
    assert flows.ts.tolist() == [0, 12_000] and flows.is_end.tolist() == [0, 1] and flows.id.tolist() == [7, 7]


def test_forward_links_to_backward(linked):
    cols = scan(linked)
    row = critical_path(cols).summary.iloc[0]
    assert row["length_ns"] == (10 + 18) * 1000  # F, then (0 weight) B
    named = [(c, n, s // 1000, e // 1000) for c, n, s, e in
             critical_path(cols).segments[["category", "name", "start", "end"]].itertuples(index=False)]
    # F's time (its child's first), the hand-off to B where nothing ran (idle), B, then idle.
    assert named == [("cpu", "F.child", 0, 4), ("cpu", "F", 4, 10), ("idle", "B", 10, 12), ("cpu", "B", 12, 30),
                     ("idle", "", 30, 40)]
    hta = critical_path(cols, hta=True).summary.iloc[0]
    assert hta["length_ns"] == 18_000  # HTA's graph: B alone; F's time is a wait (work ran, off the path)
    assert (hta["wait_ns"], hta["idle_ns"]) == (10_000, 2_000 + 10_000)


def test_cli_hta_switch(linked):
    ours, theirs = (json.loads(run_cli("critical-path", linked, "--format", "json", *flag).stdout)["summary"][0]
                    for flag in ((), ("--hta",)))
    assert (ours["length_ns"], theirs["length_ns"]) == (28_000, 18_000)


def test_a_flow_backwards_in_time_is_no_edge(tmp_path):
    """A backward op that starts before its forward op ends (clocks, nesting): no edge."""
    events = [e if e.get("name") != "B" else _x("cpu_op", "B", 8, 22, tid=2) for e in EVENTS]
    events = [e if not (e["ph"] == "f") else _flow("f", 8, 2, 7) for e in events]
    path = tmp_path / "back.json"
    path.write_text(json.dumps({"traceEvents": events}))
    assert critical_path(scan(str(path))).summary["length_ns"].tolist() == [22_000]


def test_thread_hand_off_without_flows(tmp_path):
    """No fwdbwd flow (Kineto before them, HTA's test traces): a thread's first op in the step
    follows the other thread's top-level op that ended last before it (F2, not F1)."""
    events = [_x("user_annotation", "ProfilerStep#1", 0, 40), _x("cpu_op", "F1", 0, 4), _x("cpu_op", "F2", 5, 5),
              _x("cpu_op", "B", 12, 18, tid=2)]
    path = tmp_path / "handoff.json"
    path.write_text(json.dumps({"traceEvents": events}))
    cols = scan(str(path))
    seg = critical_path(cols).segments
    assert critical_path(cols).summary["length_ns"].tolist() == [(4 + 5 + 18) * 1000]
    assert [(c, n, s // 1000, e // 1000) for c, n, s, e in seg[["category", "name", "start", "end"]].itertuples(index=False)] \
        == [("cpu", "F1", 0, 4), ("idle", "", 4, 5), ("cpu", "F2", 5, 10), ("idle", "B", 10, 12), ("cpu", "B", 12, 30),
            ("idle", "", 30, 40)]
    assert critical_path(cols, hta=True).summary["length_ns"].tolist() == [18_000]


def trace_idle(path: Path, start: int, end: int) -> int:
    """The ns of [start, end] in which no operator, runtime call or GPU op of the trace runs,
    from the JSON itself (times as exact Decimals)."""
    raw = Path(path).read_bytes()
    events = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw, parse_float=Decimal)["traceEvents"]
    cats = {"cpu_op", "operator", "cuda_runtime", "cuda_driver", "runtime", "driver", "kernel", "gpu_memcpy",
            "gpu_memset", "memcpy", "memset"}
    spans = sorted((int(Decimal(e["ts"]) * 1000), int((Decimal(e["ts"]) + Decimal(e["dur"])) * 1000))
                   for e in events if e.get("ph") == "X" and str(e.get("cat", "")).lower() in cats
                   and Decimal(e.get("dur", 0)) > 0)
    busy, reach = 0, start
    for a, b in spans:
        a, b = max(a, reach), min(b, end)
        if b > a:
            busy += b - a
            reach = b
    return (end - start) - busy


H100 = ["h100_resnet50", "h100_ddp", "h100_cudagraph", "h100_ncu_target"]


@pytest.mark.integration
@pytest.mark.parametrize("name", H100)
@pytest.mark.parametrize("hta", [False, True])
def test_idle_share_is_the_traces_idle_time(name, hta):
    """Per step (the whole trace where it has none): the path's idle share within 2 points of
    the time the trace shows nothing running (resnet50_train's steps were 40-51 % idle)."""
    cols = scan(str(TRACES[name]))
    annotation = None if len(instances(cols)) else ""
    summary = critical_path(cols, annotation, segments=False, hta=hta).summary
    for row in summary.itertuples():
        idle = trace_idle(TRACES[name], row.start, row.end)
        assert abs(row.idle_ns - idle) <= 0.02 * row.span_ns, (row.label, row.idle_ns, idle, row.span_ns)


@pytest.mark.integration
def test_resnet_step_3_runs_through_the_forward_pass():
    cols = scan(str(TRACES["h100_resnet50"]))
    ours, theirs = (critical_path(cols, step=3, hta=hta) for hta in (False, True))
    for path in (ours, theirs):
        assert path.summary["length_ns"].iloc[0] <= path.summary["span_ns"].iloc[0]
    seg, start = ours.segments, int(ours.summary["start"].iloc[0])
    work = seg[~seg["category"].isin(["idle", "wait", "sync"])]
    # The path starts in the forward pass (the step's first 0.1 ms) and holds its convolutions;
    # HTA's graph starts 11.5 ms later at NllLossBackward0 (issue 53: "the forward pass idle").
    assert int(work["start"].iloc[0]) - start < 100_000
    assert (work["name"] == "aten::conv2d").sum() > 50
    first = theirs.segments[~theirs.segments["category"].isin(["idle", "wait", "sync"])]
    assert int(first["start"].iloc[0]) - start > 10_000_000 and "NllLossBackward0" in first["name"].iloc[0]
    # HTA 0.6.1 (traceinsight, which also links runtime calls across threads by the CUDA runtime
    # lock): TraceAnalysis(trace_dir=DIR).critical_path_analysis(rank=0, annotation="ProfilerStep",
    # instance_id=1) then networkx.dag_longest_path_length(g, weight="weight") -> 26993.0 µs.
    assert abs(int(ours.summary["length_ns"].iloc[0]) - 26_993_000) < 0.01 * 26_993_000
    assert ours.summary["idle_ns"].iloc[0] < 0.01 * ours.summary["span_ns"].iloc[0]


def test_annotate_follows_the_forward_pass_unless_hta(linked, tmp_path):
    from tests.annotator.plugins.test_critical_path import annotate, ns

    for extra, length, marked in (((), 28_000, {"F", "F.child", "B"}), (("--critical-path-hta",), 18_000, {"B"})):
        events = annotate(linked, tmp_path, *extra)
        on = [e for e in events if e.get("args", {}).get("critical") == 1]
        assert {e["name"] for e in on} == marked
        assert sum(ns(e["args"]["critical_us"]) for e in on) == length
