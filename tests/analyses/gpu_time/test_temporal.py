"""``analyses.temporal`` (stats table ``temporal``): against a brute-force sweep over the parsed
events (exact ns), hand-made cases, and numbers recorded from HTA 0.5.0."""

from __future__ import annotations

import pytest

import traceforge
from tests.analyses.gpu_time.test_comm_overlap import NCCL, Op, gpu_ops, read_events, sweep, whole, write_trace
from tests.conftest import TRACES, run_cli
from traceforge.analyses.gpu_time.comm_overlap import WHOLE_TRACE
from traceforge.analyses.gpu_time.temporal import temporal_breakdown
from traceforge.columns.scan import scan


def brute_temporal(ops: list[Op]) -> dict[int, tuple[int, int, int, int]]:
    """step (-1 whole trace) -> (GPU ops, span, busy, compute) in ns, summed over devices, each
    step over its own ops."""
    rows: dict[int, list[int]] = {WHOLE_TRACE: [0, 0, 0, 0]}
    for op in ops:
        if op.step != -1:
            rows.setdefault(op.step, [0, 0, 0, 0])
    for device in {op.device for op in ops}:
        for step in rows:
            mine = [op for op in ops if op.device == device and (step == WHOLE_TRACE or op.step == step)]
            if not mine:
                continue
            found = sweep(all=mine, comp=[op for op in mine if op.type == "compute"], comm=[])
            rows[step][0] += len(mine)
            rows[step][1] += max(op.end for op in mine) - min(op.start for op in mine)
            rows[step][2] += found["all"]
            rows[step][3] += found["comp"]
    return {step: tuple(v) for step, v in rows.items()}


def assert_temporal_matches(cols, ops: list[Op]) -> None:
    table = temporal_breakdown(cols)
    truth = brute_temporal(ops)
    assert table["step"].tolist() == sorted(truth)
    for row in table.itertuples():
        n, span, busy, compute = truth[row.step]
        assert (row.gpu_ops, row.span_ns, row.idle_ns, row.compute_ns, row.non_compute_ns) == (
            n, span, span - busy, compute, busy - compute), row
        assert row.idle_ns + row.compute_ns + row.non_compute_ns == row.span_ns
        assert row.compute_pct == pytest.approx(100 * compute / span if span else 0.0)


def test_idle_compute_non_compute(tmp_path):
    # compute [0, 10), NCCL [5, 20) on another stream, a copy [30, 40), a zero-duration kernel at 45.
    path = write_trace(tmp_path / "t.json", [
        ("gemm", 0, 0.01, 1), (NCCL, 0.005, 0.015, 2), ("Memcpy DtoH", 0.03, 0.01, 3, 0, "gpu_memcpy"),
        ("relu", 0.045, 0, 1),
    ])
    cols = scan(path)
    row = whole(temporal_breakdown(cols))
    assert (row["gpu_ops"], row["span_ns"], row["idle_ns"], row["compute_ns"], row["non_compute_ns"]) == (
        4, 45, 15, 10, 20)
    assert (row["idle_pct"], row["compute_pct"]) == pytest.approx((100 * 15 / 45, 100 * 10 / 45))
    assert_temporal_matches(cols, gpu_ops(read_events(path)))


def test_two_devices_add_up_and_empty_trace(tmp_path):
    path = write_trace(tmp_path / "t.json", [("gemm", 0, 1, 1), ("gemm", 3, 1, 1), (NCCL, 100, 2, 1, 1)])
    row = whole(temporal_breakdown(scan(path)))
    assert (row["span_ns"], row["idle_ns"], row["compute_ns"], row["non_compute_ns"]) == (6000, 2000, 2000, 2000)
    empty = temporal_breakdown(scan(write_trace(tmp_path / "e.json", [])))
    assert empty.to_dict("records") == [{"step": -1, "gpu_ops": 0, "span_ns": 0, "idle_ns": 0, "compute_ns": 0,
                                         "non_compute_ns": 0, "idle_pct": 0.0, "compute_pct": 0.0,
                                         "non_compute_pct": 0.0}]


def test_steps_and_htas_choices(tmp_path):
    # Steps 1 [0, 10 µs) and 2 [10, 20 µs); HTA keeps only the ops launched in step 1.
    path = write_trace(tmp_path / "t.json", [
        ("gemm", 2.5, 2, 1, 0, "kernel", 1), (NCCL, 6, 3, 2, 0, "kernel", 2), ("gemm", 12, 4, 1, 0, "kernel", 3),
    ], steps=[(1, 0, 10), (2, 10, 10)], launches=[(1, 1), (2, 2), (3, 11)])
    cols = scan(path)
    table = temporal_breakdown(cols).set_index("step")
    assert table.loc[1, ["gpu_ops", "span_ns", "idle_ns", "compute_ns", "non_compute_ns"]].tolist() == [
        2, 6500, 1500, 2000, 3000]
    assert table.loc[2, ["gpu_ops", "span_ns", "idle_ns", "compute_ns"]].tolist() == [1, 4000, 0, 4000]
    assert_temporal_matches(cols, gpu_ops(read_events(path)))
    hta = temporal_breakdown(cols, hta=True).set_index("step")
    assert hta.index.tolist() == [-1, 1]
    # starts rounded up to 3 µs: [3, 4.5 -> 4) and [6, 9)
    assert hta.loc[-1, ["gpu_ops", "span_ns", "idle_ns", "compute_ns", "non_compute_ns"]].tolist() == [
        2, 6000, 2000, 1000, 3000]


def test_sample_against_brute_force(sample):
    assert_temporal_matches(scan(str(sample.path)), gpu_ops(read_events(sample.path)))


@pytest.mark.parametrize("name", ["nccl", "negative_queue"])
def test_real_traces_against_brute_force(columns, name):
    assert_temporal_matches(columns(name), gpu_ops(read_events(TRACES[name])))


# HTA 0.5.0, on the directory of each trace (/tmp/htaenv, pandas 2.3):
#   TraceAnalysis(trace_dir=DIR).get_temporal_breakdown(visualize=False)
#   -> idle_time(us), compute_time(us), non_compute_time(us), kernel_time(us), idle/compute/non_compute_time_pctg
HTA_TEMPORAL = [
    ("nccl", 338_781, 75_169, 21_636, 435_586, 77.78, 17.26, 4.97),
    ("negative_queue", 705_853, 143_836, 166_865, 1_016_554, 69.44, 14.15, 16.41),
    ("df_index", 643_612, 496_485, 256_572, 1_396_669, 46.08, 35.55, 18.37),
]
# With TraceAnalysis(trace_dir=DIR, include_last_profiler_step=True) (still without GPU ops whose launch
# call is missing, and at whole µs): nccl 506,512 / 113,012 / 41,026 / 660,550 µs (76.68 / 17.11 / 6.21 %),
# negative_queue 848,216 / 179,676 / 201,180 / 1,229,072 (69.01 / 14.62 / 16.37 %),
# df_index 732,352 / 620,516 / 380,097 / 1,732,965 (42.26 / 35.81 / 21.93 %).


@pytest.mark.parametrize("name, idle, compute, non_compute, span, idle_pct, compute_pct, non_compute_pct",
                         HTA_TEMPORAL)
def test_equals_hta_under_htas_choices(columns, name, idle, compute, non_compute, span, idle_pct, compute_pct,
                                       non_compute_pct):
    row = whole(temporal_breakdown(columns(name), hta=True))
    assert [row["idle_ns"], row["compute_ns"], row["non_compute_ns"], row["span_ns"]] == [
        1000 * v for v in (idle, compute, non_compute, span)]
    assert [round(row[k], 2) for k in ("idle_pct", "compute_pct", "non_compute_pct")] == [
        idle_pct, compute_pct, non_compute_pct]


def test_df_index_with_the_last_step_equals_hta_including_it(columns):
    """df_index has whole-µs times and every GPU op has its launch call: with the last step
    kept, ours equals HTA's include_last_profiler_step=True (recorded above)."""
    row = whole(temporal_breakdown(columns("df_index")))
    assert [row["idle_ns"], row["compute_ns"], row["non_compute_ns"], row["span_ns"]] == [
        1000 * v for v in (732_352, 620_516, 380_097, 1_732_965)]


def test_stats_table_cli_and_api(sample):
    path = str(sample.path)
    result = traceforge.stats(path, tables=["temporal"])
    assert result.temporal.drop(columns="rank").equals(temporal_breakdown(traceforge.load(path).columns))
    done = run_cli("stats", path, "--table", "temporal")
    assert done.returncode == 0, done.stderr
    assert "Temporal breakdown" in done.stdout.decode()
