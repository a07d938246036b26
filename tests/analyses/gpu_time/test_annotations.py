"""Time per gpu_user_annotation name: a brute-force sum over the parsed events, and HTA's numbers."""

from __future__ import annotations

import json
from collections import defaultdict
from decimal import Decimal

import pytest

from tests.conftest import TRACES, raw_json, run_cli
from traceforge.analyses.gpu_time.annotations import gpu_annotation_times
from traceforge.analyses.structure.steps import profiler_steps
from traceforge.columns.scan import scan


def _ns(value) -> int:
    return int(Decimal(str(value)) * 1000)


def _annotations(path) -> list[dict]:
    events = json.loads(raw_json(path), parse_float=Decimal)["traceEvents"]
    return [e for e in events if e.get("cat") == "gpu_user_annotation" and e.get("ph") == "X"]


def _brute(annotations) -> dict[tuple[int, str], list[int]]:
    out = defaultdict(list)
    for e in annotations:
        out[(e["pid"], e["name"])].append(max(_ns(e["dur"]), 0))
    return out


def test_hand_written(tmp_path):
    def anno(name, ts, dur, pid=0, tid=7):
        return {"ph": "X", "cat": "gpu_user_annotation", "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur}
    events = [anno("fwd", 0, 60), anno("fwd", 100, 40), anno("bwd", 140, 20), anno("fwd", 0, 10, pid=1),
              {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 0, "dur": 200,
               "args": {"device": 0, "stream": 7}}]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    df = gpu_annotation_times(scan(str(path)))
    assert df[["device", "name", "count", "total_ns", "min_ns", "max_ns"]].values.tolist() == [
        [0, "fwd", 2, 100_000, 40_000, 60_000], [0, "bwd", 1, 20_000, 20_000, 20_000], [1, "fwd", 1, 10_000, 10_000, 10_000]]
    assert df.pct_of_annotated.tolist() == pytest.approx([100 * 100 / 120, 100 * 20 / 120, 100.0])
    # device 0's GPU span is its kernel's 200 µs; device 1 has no GPU op: its annotations' own span
    assert df.pct_of_span.tolist() == pytest.approx([50.0, 10.0, 100.0])


@pytest.mark.integration
@pytest.mark.parametrize("name", ["nccl", "ns_resolution", "amd"])
def test_equals_brute_force_sum(name):
    df = gpu_annotation_times(scan(str(TRACES[name])))
    truth = _brute(_annotations(TRACES[name]))
    got = {(r.device, r.name): (r.count, r.total_ns, r.min_ns, r.max_ns) for r in df.itertuples()}
    assert got == {k: (len(v), sum(v), min(v), max(v)) for k, v in truth.items()}
    for _, of_device in df.groupby("device"):
        assert of_device.pct_of_annotated.sum() == pytest.approx(100.0)


# TraceAnalysis(trace_dir="hta/nccl_parser_config").get_gpu_user_annotation_breakdown(visualize=False)
# -> name: (sum (us), max (us), min (us), rows). HTA drops the last profiler step (2 of 3 here)
# and writes its times in whole µs after "Rounding down ns resolution events".
HTA_NCCL = {
    "## backward ##": (1279.0, 646.0, 633.0, 2),
    "DistributedDataParallel.forward": (195524.0, 97917.0, 97607.0, 2),
    "Optimizer.step#SGD.step": (18712.0, 9443.0, 9269.0, 2),
    "nccl:all_reduce": (24216.0, 3307.0, 1690.0, 10),
    "nccl:broadcast": (81.0, 32.0, 9.0, 4),
}


@pytest.mark.integration
def test_matches_hta_without_the_last_step():
    """With HTA's choice (annotations that start before the last step's CPU start), each name's
    count equals HTA's, and its sum, min and max agree within HTA's µs rounding (2 µs an instance)."""
    cols = scan(str(TRACES["nccl"]))
    last = int(profiler_steps(cols).start[-1])
    a = cols.gpu_annotations
    keep = a.ts < last
    cols.gpu_annotations = a.take(keep.nonzero()[0])
    df = gpu_annotation_times(cols).set_index("name")
    assert set(df.index) == set(HTA_NCCL)
    for name, (total, longest, shortest, count) in HTA_NCCL.items():
        row = df.loc[name]
        assert row["count"] == count
        assert abs(row["total_ns"] / 1000 - total) <= 2 * count
        assert abs(row["max_ns"] / 1000 - longest) <= 2 and abs(row["min_ns"] / 1000 - shortest) <= 2
    # Ours, every step included: forward 292.764 ms over 3 instances (HTA: 195.524 over 2).
    full = gpu_annotation_times(scan(str(TRACES["nccl"]))).set_index("name")
    assert full.loc["DistributedDataParallel.forward", "total_ns"] == 292_764_153


@pytest.mark.integration
def test_stats_table_text():
    r = run_cli("stats", str(TRACES["nccl"]), "--table", "gpu_annotations")
    assert r.returncode == 0, r.stderr
    assert b"GPU user annotations" in r.stdout and b"nccl:all_reduce" in r.stdout


def test_ranks_without_annotations_keep_the_columns_integer(tmp_path):
    """Over ranks where one has no gpu_user_annotation, the joined table's counts and ns stay
    integers (the empty table is typed; it made every int column float: device 0.0, count 1.0)."""
    anno = {"ph": "X", "cat": "gpu_user_annotation", "name": "fwd", "pid": 0, "tid": 7, "ts": 0, "dur": 60}
    kernel = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 0, "dur": 200,
              "args": {"device": 0, "stream": 7}}
    for rank, events in ((0, [anno, kernel]), (1, [kernel])):
        (tmp_path / f"rank{rank}.json").write_text(json.dumps({"distributedInfo": {"rank": rank}, "traceEvents": events}))
    r = run_cli("stats", str(tmp_path), "--table", "gpu_annotations", "--format", "csv")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[1].startswith(b"0,0,fwd,1,60000,60000.0,60000,60000,0.0,"), r.stdout
