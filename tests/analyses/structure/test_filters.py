"""Filters (``--steps``, ``--window``, ``--kernel``, ``--op``): each against a brute force over
the sample's events parsed here with exact decimals; ``stats --steps``/``--window`` against
``stats`` of ``trim``'s output on real traces; ``annotate`` with a filter still copies every
event and Perfetto loses nothing more."""

from __future__ import annotations

import json
import re
from decimal import Decimal

import numpy as np
import pandas as pd
import pytest

import traceforge
from tests.conftest import TRACES, raw_json, run_cli
from traceforge import Filters
from traceforge.analyses.cross_trace.stats import TraceStats
from traceforge.analyses.launches.calls import STREAM_LAUNCH_APIS
from traceforge.analyses.structure.steps import gpu_steps, steps_window
from traceforge.annotator.registry import STATS_TABLES
from traceforge.columns.scan import scan
from traceforge.perfetto import check_trace
from traceforge.plan import reads

GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
LAUNCH_CATS = {"cuda_runtime", "cuda_driver"}
CPU_CATS = {"cpu_op", "user_annotation", "python_function"}


def _ns(value: Decimal | int) -> int:
    ns = Decimal(value) * 1000
    assert ns == ns.to_integral_value()
    return int(ns)


class Events:
    """The sample's X events by kind, with exact ns: (ts, end, name, cat, pid, tid, correlation)."""

    def __init__(self, raw: bytes):
        events = json.loads(raw, parse_float=Decimal)["traceEvents"]
        self.start = min(_ns(Decimal(e["ts"])) for e in events if "ts" in e and e.get("ph") != "M"
                         and Decimal(e["ts"]) >= 0)
        self.x = [dict(ts=_ns(Decimal(e["ts"])), end=_ns(Decimal(e["ts"])) + max(_ns(Decimal(e["dur"])), 0),
                       name=e["name"], cat=e["cat"], thread=(e["pid"], e["tid"]),
                       corr=e.get("args", {}).get("correlation", -1))
                  for e in events if e.get("ph") == "X" and "dur" in e]

    def of(self, cats: set[str]) -> list[dict]:
        return [e for e in self.x if e["cat"] in cats]


def _rows(e: list[dict]) -> list[tuple]:
    return sorted((x["ts"], x["end"] - x["ts"], x["name"]) for x in e)


def _cols_rows(cols, table) -> list[tuple]:
    return sorted(zip(table.ts.tolist(), np.maximum(table.dur, 0).tolist(), cols.name_of(table.name)))


def _check(cols, events: Events, keep) -> None:
    """``cols``' GPU ops, launch calls and CPU ops (in memory or on disk) are the events ``keep`` keeps."""
    assert _cols_rows(cols, cols.gpu) == _rows([e for e in events.of(GPU_CATS) if keep(e)])
    for table, spilled, cats in ((cols.launches, cols.spilled_launches, LAUNCH_CATS),
                                 (cols.cpu_ops, cols.spilled_cpu_ops, CPU_CATS)):
        found = _cols_rows(cols, table) + (_cols_rows(cols, spilled.load()) if spilled is not None else [])
        assert sorted(found) == _rows([e for e in events.of(cats) if keep(e)])


def _in(lo: int, hi: int):
    return lambda e: e["ts"] < hi and (e["end"] > lo or (e["end"] == e["ts"] and e["ts"] >= lo))


@pytest.fixture(scope="module")
def events(sample) -> Events:
    return Events(sample.raw)


@pytest.mark.parametrize("spilled", [False, True])
def test_window_keeps_what_overlaps_it_from_the_trace_start(sample, events, spilled):
    where = Filters(window="1200:2.5ms")
    cols = reads.stats_columns(str(sample.path), where) if spilled else where.apply(scan(str(sample.path)))
    lo, hi = events.start + 1_200_000, events.start + 2_500_000
    assert where.window_ns(scan(str(sample.path), cpu_ops=False)) == (lo, hi)
    _check(cols, events, _in(lo, hi))
    assert 0 < len(cols.gpu) < len(events.of(GPU_CATS))


def _steps_truth(events: Events, first: int, last: int) -> tuple[int, int]:
    steps = [e for e in events.x if re.fullmatch(rf"ProfilerStep#({'|'.join(map(str, range(first, last + 1)))})",
                                                  e["name"])]
    start, cpu_end = min(e["ts"] for e in steps), max(e["end"] for e in steps)
    calls = {e["corr"] for e in events.of(LAUNCH_CATS) if e["name"] in STREAM_LAUNCH_APIS and e["corr"] >= 0
             and start <= e["ts"] < cpu_end}
    return start, max([cpu_end] + [e["end"] for e in events.of(GPU_CATS) if e["corr"] in calls])


@pytest.mark.parametrize("spilled", [False, True])
def test_steps_keep_the_steps_and_the_gpu_work_they_launched(sample, events, spilled):
    lo, hi = _steps_truth(events, 11, 12)
    cols = scan(str(sample.path))
    assert steps_window(cols, 11, 12) == (lo, hi)
    where = Filters(steps="11-12")
    _check(reads.stats_columns(str(sample.path), where) if spilled else where.apply(cols), events, _in(lo, hi))
    # a scan that keeps no launch call still finds the GPU work: the filter reads the calls itself
    assert _cols_rows(cols, reads.gpu_columns(str(sample.path), where).gpu) == \
        _rows([e for e in events.of(GPU_CATS) if _in(lo, hi)(e)])


def test_kernel_keeps_matching_gpu_ops_and_drops_the_launch_calls_of_the_others(sample, events):
    regex = re.compile("sgemm|Memcpy")
    gpu = events.of(GPU_CATS)
    dropped = {e["corr"] for e in gpu if not regex.search(e["name"])} - {e["corr"] for e in gpu if regex.search(e["name"])}

    def keep(e: dict) -> bool:
        if e["cat"] in GPU_CATS:
            return regex.search(e["name"]) is not None
        return e["cat"] not in LAUNCH_CATS or e["corr"] not in dropped

    cols = Filters(kernel="sgemm|Memcpy").apply(scan(str(sample.path)))
    _check(cols, events, keep)
    assert 0 < len(cols.gpu) < len(gpu)


@pytest.mark.parametrize("spilled", [False, True])
def test_op_keeps_the_operators_what_starts_inside_them_and_the_gpu_work_they_launched(sample, events, spilled):
    regex = re.compile(r"aten::(linear|conv2d)$")
    named = [e for e in events.of(CPU_CATS) if regex.search(e["name"])]

    def inside(e: dict) -> bool:
        return any(o["thread"] == e["thread"] and o["ts"] <= e["ts"] < o["end"] for o in named)

    calls = {e["corr"] for e in events.of(LAUNCH_CATS) if inside(e) and e["corr"] >= 0}

    def keep(e: dict) -> bool:
        if e["cat"] in GPU_CATS:
            return e["corr"] in calls
        return inside(e) or (e["cat"] in CPU_CATS and regex.search(e["name"]) is not None)

    where = Filters(op=r"aten::(linear|conv2d)$")
    cols = reads.stats_columns(str(sample.path), where) if spilled else where.apply(scan(str(sample.path)))
    _check(cols, events, keep)
    assert 0 < len(cols.gpu) < len(events.of(GPU_CATS))


def test_filters_given_together_all_apply(sample, events):
    lo, hi = _steps_truth(events, 12, 13)
    start = events.start
    w_lo, w_hi = start + 2_000_000, start + 5_000_000
    cols = Filters(steps="12-13", window="2ms:5ms", kernel="elementwise").apply(scan(str(sample.path)))
    lo, hi = max(lo, w_lo), min(hi, w_hi)
    assert _cols_rows(cols, cols.gpu) == _rows([e for e in events.of(GPU_CATS) if _in(lo, hi)(e)
                                                and "elementwise" in e["name"]])


def _stats_equal(a: TraceStats, b: TraceStats) -> None:
    for name, df in a.tables().items():
        other = b.tables()[name]
        if name == "summary":
            df, other = df.drop(columns="trace"), other.drop(columns="trace")
        pd.testing.assert_frame_equal(df.reset_index(drop=True), other.reset_index(drop=True), check_exact=True,
                                      obj=name)


def _trimmed_stats_equal(path, tmp_path, steps: str | None = None, window: str | None = None) -> TraceStats:
    """``stats`` with the filter against ``stats`` of ``trim``'s output, every table."""
    out = tmp_path / "trimmed.json.gz"
    trim_window = None if window is None else ":".join(f"+{side}" if side else "" for side in window.split(":"))
    traceforge.trim(str(path), str(out), steps=steps, window=trim_window)
    tables = tuple(STATS_TABLES)
    filtered = traceforge.stats(str(path), tables=tables, where=Filters(steps=steps, window=window))
    _stats_equal(filtered, traceforge.stats(str(out), tables=tables))
    assert traceforge.load(str(path)).stats(tables=tables, where=Filters(steps=steps, window=window)) is not None
    return filtered


def test_stats_with_steps_or_window_equal_stats_of_the_trimmed_sample(sample, tmp_path):
    filtered = _trimmed_stats_equal(sample.path, tmp_path, steps="11-12")
    assert 0 < filtered.summary["gpu_ops"].iloc[0] < traceforge.stats(str(sample.path)).summary["gpu_ops"].iloc[0]
    _trimmed_stats_equal(sample.path, tmp_path, window="1500:3ms")


@pytest.mark.parametrize("name,steps,window", [("negative_queue", "551-552", "150ms:300ms"),
                                               ("nccl", "5-6", "20ms:45ms"),
                                               ("trace_diff", "1010-1011", None)])
def test_stats_with_steps_or_window_equal_stats_of_the_trimmed_trace(name, steps, window, tmp_path):
    path = TRACES[name]
    filtered = _trimmed_stats_equal(path, tmp_path, steps=steps)
    assert len(filtered.top_kernels) and len(filtered.streams)
    if window is not None:
        _trimmed_stats_equal(path, tmp_path, window=window)


def test_every_analysis_command_takes_the_filters(sample, tmp_path):
    path = str(sample.path)
    for command in (["stats"], ["classify"], ["launch-stats"], ["patterns"], ["counters"], ["diff", path],
                    ["export", "--csv", str(tmp_path / "csv")]):
        whole = run_cli(command[0], path, *command[1:])
        part = run_cli(command[0], path, *command[1:], "--steps", "11-12", "--kernel", "sgemm|elementwise")
        assert whole.returncode == 0 and part.returncode == 0, (command, part.stderr)
        if command[0] not in ("export", "counters"):
            assert part.stdout != whole.stdout, command
    help_text = " ".join(run_cli("stats", "--help").stdout.decode().split())
    assert "trim --window A:B" in help_text and "--steps" in help_text
    # patterns' own --op (an operator's sequences) keeps its meaning
    assert run_cli("patterns", path, "--op", "aten::linear", "--window", "1ms:4ms").returncode == 0


@pytest.mark.parametrize("args,says", [
    (["--steps", "40-41"], "--steps 40-41: the trace has steps 10-14"),
    (["--steps", "3-x"], "--steps '3-x'"),
    (["--window", "5ms:5ms"], "--window '5ms:5ms': START must be before END"),
    (["--window", "900ms:1s"], "--window 900ms:1s: no event of the trace is in it"),
    (["--kernel", "gemm("], "--kernel gemm(: not a regular expression"),
    (["--op", "*"], "--op *: not a regular expression"),
])
def test_bad_filters_are_one_line_errors_naming_the_option(sample, args, says):
    r = run_cli("stats", str(sample.path), *args)
    err = r.stderr.decode()
    assert r.returncode == 1 and says in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err


def test_trace_methods_equal_the_path_level_functions_with_filters(sample):
    path = str(sample.path)
    trace = traceforge.load(path)
    where = Filters(steps="11-13", op="aten::linear")
    pd.testing.assert_frame_equal(trace.classify(where=where), traceforge.classify(path, where=where))
    pd.testing.assert_frame_equal(trace.launch_stats(where=where), traceforge.launch_stats(path, where=where))
    pd.testing.assert_frame_equal(trace.queue_length(where=where), traceforge.queue_length(path, where=where))
    whole = trace.classify()
    assert trace.classify(where=where)["instances"].sum() < whole["instances"].sum()


def _annotated_filtered(path, out, steps: str, window: tuple[int, int]):
    r = run_cli("annotate", str(path), "--queue-length", "--steps", steps, "-o", str(out))
    assert r.returncode == 0, r.stderr
    doc = json.loads(raw_json(out), parse_float=Decimal)
    before = json.loads(raw_json(path), parse_float=Decimal)["traceEvents"]
    events = doc["traceEvents"]
    assert events[:len(before)] == before  # every original event, unchanged
    points = [_ns(e["ts"]) for e in events[len(before):] if e.get("ph") == "C"]
    assert points and all(window[0] <= ts <= window[1] for ts in points)  # the last: when the last op ends
    assert check_trace(str(out)).losses == check_trace(str(path)).losses


def test_annotate_with_steps_adds_tracks_of_those_steps_only(sample, events, tmp_path):
    _annotated_filtered(sample.path, tmp_path / "out.json.gz", "11-12", _steps_truth(events, 11, 12))
    out = tmp_path / "bytes.json"
    assert run_cli("annotate", str(sample.path), "--queue-length", "--steps", "11-12", "-o", str(out)).returncode == 0
    raw = raw_json(sample.path)
    assert out.read_bytes().startswith(raw[:raw.rindex(b"]")].rstrip())  # the events' bytes, verbatim


def test_annotate_with_steps_on_a_real_trace(tmp_path):
    path = TRACES["negative_queue"]
    _annotated_filtered(path, tmp_path / "out.json.gz", "551-552", steps_window(scan(str(path)), 551, 552))


def test_kernel_names_in_steps_equal_htas_filters():
    # HTA 0.5.0 (pandas 2.3), rank 0 of hta/negative_queue_length_values_check:
    #   t = TraceAnalysis(trace_dir=...).t; gpu = t.get_trace(0); gpu = gpu[gpu["stream"] >= 0]
    #   NameFilter("void at::native", symbol_table=t.symbol_table)(IterationFilter([551, 552])(gpu))
    #     -> 1,886 rows, dur sum 12,375 µs;  NameFilter("ampere", ...) -> 2 rows, 199 µs
    #   IterationFilter([551, 552])(gpu) -> 2,750 rows, 158,062 µs
    # HTA's NameFilter is re.match (anchored), ours re.search: hence the ^.
    cols = scan(str(TRACES["negative_queue"]))
    in_steps = np.isin(gpu_steps(cols), [551, 552])
    assert (int(in_steps.sum()), int(cols.gpu.dur[in_steps].sum())) == (2750, 158_062_000)
    for regex, count, dur_us in (("^void at::native", 1886, 12_375), ("^ampere", 2, 199)):
        kept = Filters(kernel=regex).apply(cols)
        mine = np.isin(gpu_steps(kept), [551, 552])
        assert (int(mine.sum()), int(kept.gpu.dur[mine].sum())) == (count, dur_us * 1000)
    # --steps keeps those steps' GPU ops, HTA's IterationFilter (not the ops of steps 550 and 553 overlapping them)
    window = Filters(steps="551-552").apply(cols)
    assert (len(window.gpu), int(window.gpu.dur.sum())) == (2750, 158_062_000)
