"""Arrows that Perfetto binds to another slice: where the launch call or the GPU op spills.

A slice Perfetto spills (it starts inside the slice on top of its thread and ends after it)
goes to an overflow track, off the thread's stack, so a flow end at its ts binds to the
slice under it. ``check`` reports such flow events (``flow_bound_to_other_slice``), and
``annotate`` draws no arrow to or from a slice that spills (``emit.flow_anchors``).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import TRACES, run_cli
from tests.perfetto.test_trace_processor import binary  # noqa: F401 (the fixture: trace_processor, or a skip saying why)
from traceforge import annotate
from traceforge.annotator.plugins.launch_delay import FLOW_CATEGORY
from traceforge.perfetto import check_trace
from traceforge.perfetto import trace_processor as tp
from traceforge.perfetto.overlaps import SpillWalk, spilled_on_thread

MISBOUND = "flow_bound_to_other_slice"

# Per arrow of a category: its two slices' names and args.correlation (NULL: none), as trace_processor binds it.
FLOW_SQL = """
select so.name as out_name, si.name as in_name,
       extract_arg(so.arg_set_id, 'args.correlation') as out_corr,
       extract_arg(si.arg_set_id, 'args.correlation') as in_corr
  from flow f join slice so on so.id = f.slice_out join slice si on si.id = f.slice_in
 where extract_arg(f.arg_set_id, 'cat') = '{cat}'
"""


def _x(cat: str, name: str, ts: int, dur: int, correlation: int | None, tid: int) -> dict:
    args = {} if correlation is None else {"correlation": correlation, "device": 0, "stream": 7}
    return {"ph": "X", "cat": cat, "name": name, "pid": 0 if cat == "kernel" else 1, "tid": tid, "ts": ts,
            "dur": dur, "args": args}


def spilling_trace(path: Path) -> Path:
    """Four launches, each delay above 100 us. Kernel 2 overlaps kernel 1 on its stream, and launch 3
    starts inside a cudaEventQuery (begun 5 us before it, so not near it by its start) and ends after
    it: Perfetto spills kernel 2 and launch 3. Kineto's own ac2g arrow for each launch."""
    launches = [(1, 10, 5), (2, 20, 5), (3, 45, 10), (4, 60, 5)]  # correlation, ts, dur
    kernels = [(1, 300, 100), (2, 350, 100), (3, 500, 10), (4, 600, 10)]
    events = [_x("cpu_op", "aten::mm", 0, 100, None, 2), _x("cuda_runtime", "cudaEventQuery", 40, 10, None, 2)]
    events += [_x("cuda_runtime", "cudaLaunchKernel", ts, dur, c, 2) for c, ts, dur in launches]
    events += [_x("kernel", f"k{c}", ts, dur, c, 7) for c, ts, dur in kernels]
    for (c, launch_ts, _), (_, kernel_ts, _) in zip(launches, kernels):
        events.append({"ph": "s", "id": c, "pid": 1, "tid": 2, "ts": launch_ts, "cat": "ac2g", "name": "ac2g"})
        events.append({"ph": "f", "id": c, "pid": 0, "tid": 7, "ts": kernel_ts, "cat": "ac2g", "name": "ac2g",
                       "bp": "e"})
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    return path


def test_check_reports_arrows_inside_a_spilled_slice(tmp_path):
    report = check_trace(str(spilling_trace(tmp_path / "t.json")), max_examples=5)
    assert report.stats[MISBOUND] == 2 and report.stats["slice_spill_overlapping_complete_event"] == 2
    notes = sorted(e.note for e in report.examples[MISBOUND])
    assert "inside 'cudaLaunchKernel'" in notes[0] and "inside 'k2'" in notes[1], notes
    assert report.exit_code == 1
    text = run_cli("check", str(tmp_path / "t.json")).stdout.decode()
    assert f"MISRENDER {MISBOUND} 2:" in text


def test_check_reports_no_arrow_where_nothing_spills(tmp_path):
    path = spilling_trace(tmp_path / "t.json")
    events = json.loads(path.read_text())
    for e in events["traceEvents"]:  # kernel 2 after kernel 1, launch 3 after the query: nothing spills
        if e.get("name") == "k2":
            e["ts"] = 400
        if e.get("name") == "cudaEventQuery":
            e["dur"] = 4
    path.write_text(json.dumps(events))
    assert MISBOUND not in check_trace(str(path)).stats


def _arrows(path: Path) -> list[dict]:
    return [e for e in json.loads(path.read_text())["traceEvents"] if e.get("cat") == FLOW_CATEGORY]


def test_annotate_draws_no_arrow_to_or_from_a_spilled_slice(tmp_path):
    src, out = spilling_trace(tmp_path / "t.json"), tmp_path / "out.json"
    result = annotate(str(src), str(out), analyses=["launch_delay"])
    arrows = _arrows(out)
    assert len(arrows) == 4  # an s and an f for launches 1 and 4
    assert sorted(e["ts"] for e in arrows if e["ph"] == "s") == [11, 61]
    assert sorted(e["ts"] for e in arrows if e["ph"] == "f") == [301, 601]
    assert any("2 outliers without one" in line for line in result.summary), result.summary
    # Perfetto's model: the only arrows bound under a spilled slice are the input's own
    assert check_trace(str(out)).stats[MISBOUND] == check_trace(str(src)).stats[MISBOUND] == 2


def test_trace_processor_binds_as_check_says(tmp_path, binary):  # noqa: F811
    src, out = spilling_trace(tmp_path / "t.json"), tmp_path / "out.json"
    annotate(str(src), str(out), analyses=["launch_delay"])
    kineto = tp.query(binary, str(out), FLOW_SQL.format(cat="ac2g"), timeout=120)
    wrong = sorted((r["out_name"], r["in_name"]) for r in kineto if r["out_corr"] != r["in_corr"])
    assert wrong == [("cudaEventQuery", "k3"), ("cudaLaunchKernel", "k1")]  # what check reported as misbound
    ours = tp.query(binary, str(out), FLOW_SQL.format(cat=FLOW_CATEGORY), timeout=120)
    assert sorted(r["out_corr"] for r in ours) == ["1", "4"]
    assert all(r["out_corr"] == r["in_corr"] for r in ours)


@pytest.mark.parametrize("seed", range(6))
def test_spills_of_a_thread_walked_in_runs_equal_the_whole_walk(seed):
    """Only runs of overlapping slices are walked; the result is the walk of every slice."""
    rng = random.Random(seed)
    n = 3000
    start = np.array(sorted(rng.randrange(0, 40 * n) for _ in range(n)), np.int64)
    if seed % 2:  # out of order, as a GPU thread's ops and annotations are in the columns
        start = start[np.array(rng.sample(range(n), n))]
    dur = np.array([rng.choice([0, 0, 1, 5, 20, 40, 200, 2000]) for _ in range(n)], np.int64)
    end = start + dur
    ordinal = np.arange(n, dtype=np.int64)[::-1].copy() if seed % 3 == 0 else np.arange(n, dtype=np.int64)
    whole = SpillWalk(1)(np.zeros(n, np.int64), start, end, ordinal)
    assert 0 < whole.sum() < n // 2
    assert np.array_equal(spilled_on_thread(start, end, ordinal), whole)


@pytest.mark.parametrize("name", sorted(TRACES))
def test_no_arrow_of_annotate_all_binds_to_another_slice(name, tmp_path, binary):  # noqa: F811
    """trace_processor on ``annotate --all`` of each shared trace: every launch-delay arrow goes from
    its own launch call to its own GPU op (the same args.correlation at both ends), and check
    predicts no arrow bound under a spill beyond the input's own."""
    src, out = TRACES[name], tmp_path / "out.json"
    r = run_cli("annotate", str(src), "--all", "-o", str(out))
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    drawn = sum(e["ph"] == "s" for e in _arrows(out))
    ours = tp.query(binary, str(out), FLOW_SQL.format(cat=FLOW_CATEGORY), timeout=120)
    assert len(ours) == drawn  # each arrow bound at both ends
    wrong = [r for r in ours if r["out_corr"] == "[NULL]" or r["out_corr"] != r["in_corr"]]
    assert not wrong, (len(wrong), wrong[:3])
    assert check_trace(str(out)).stats.get(MISBOUND, 0) == check_trace(str(src)).stats.get(MISBOUND, 0)
