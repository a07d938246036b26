"""Launch delay: the per-launch table against HTA, launch-stats, and annotate --launch-delay
(args on GPU ops, outlier arrows bound as Perfetto binds them, per-stream counters)."""

from __future__ import annotations

import json
from decimal import Decimal

import numpy as np
import orjson
import pandas as pd
import pytest

from tests.conftest import SAMPLE, TRACES, raw_json, run_cli
from traceforge import annotate, launch_stats
from traceforge.analyses.launches.calls import STREAM_LAUNCH_APIS, calls_of, last_step_start
from traceforge.analyses.launches.delay import (
    HTA_LAUNCH_STATS_APIS,
    launch_pairs,
    launch_statistics,
    launch_table,
    launch_table_consuming,
    outliers,
)
from traceforge.annotator.plugins.launch_delay import FLOW_CATEGORY, delay_counters, delay_label
from traceforge.columns.scan import scan
from traceforge.emit.flow_anchors import perfetto_thread
from traceforge.errors import UsageError
from traceforge.io.read.reader import TraceReader
from traceforge.perfetto import check_trace
from traceforge.perfetto.timestamps import perfetto_ns as perfetto_ns_array
from traceforge.perfetto.timestamps import perfetto_ns_of as perfetto_ns
from traceforge.plan.reads import stack_columns as scan_for_stacks
from traceforge.util.durations import parse_duration_ns
from traceforge.util.exacttime import to_ns


# HTA 0.5 (../shared/docs/hta-reference.md): launches, median and p90 of the delay in µs.
# HTA clips the delay at 0, counts cudaLaunchKernel/cudaMemcpyAsync/cudaMemsetAsync only and
# drops the last profiler step, so we compare on the same steps: launches that start
# before the last ProfilerStep# begins. The doc rounds 163,575.5 to 163,576.
@pytest.mark.parametrize("name, launches, median_us, p90_us", [
    ("df_index", 17_832, 2, 2_275),
    ("negative_queue", 5_224, 163_575.5, None),
])
def test_agrees_with_hta_on_the_same_steps(columns, name, launches, median_us, p90_us):
    cols = columns(name)
    table = launch_table(cols, apis=HTA_LAUNCH_STATS_APIS, launched_before_ns=last_step_start(cols))
    assert len(table) == launches
    clipped_us = table["launch_delay"].clip(lower=0) / 1000
    assert clipped_us.median() == median_us
    if p90_us is not None:
        assert clipped_us.quantile(0.9) == p90_us
    # Without the step cut, the last step's launches come back.
    assert len(launch_table(cols, apis=HTA_LAUNCH_STATS_APIS)) > launches


def test_table_is_exact_and_keeps_negative_delays(columns):
    cols = columns("df_index")
    table = launch_table(cols)
    assert (table["launch_delay"] == table["gpu_ts"] - table["launch_ts"] - table["cpu_duration"]).all()
    negative = table[table["negative_delay"]]
    assert len(negative) == 88 and (negative["launch_delay"] < 0).all()
    assert negative["launch_delay"].min() == -17_000
    assert (table["cpu_op"] != "").all()
    # Each row is a real join: the GPU op's and the launch call's correlation agree.
    gpu_corr = dict(zip(cols.gpu.ordinal.tolist(), cols.gpu.correlation.tolist()))
    launch_corr = dict(zip(cols.launches.ordinal.tolist(), cols.launches.correlation.tolist()))
    assert all(gpu_corr[g] == launch_corr[launch] == c for g, launch, c in
               zip(table["gpu_ordinal"], table["launch_ordinal"], table["correlation"]))


def test_graph_launches_cover_each_launched_op(columns):
    table = launch_table(columns("negative_queue"))
    graph = table[table["api"] == "cudaGraphLaunch"]
    assert graph["launch_ordinal"].nunique() == 70  # the trace's 70 graph launches ...
    assert len(graph) == 345  # ... put 345 GPU ops on the stream
    assert set(graph["cpu_op"]) == {"CompiledFunction", "CompiledFunctionBackward"}


def test_triton_cu_launch_kernel(columns):
    table = launch_table(columns("triton"))
    assert len(table) == 1
    row = table.iloc[0]
    assert (row["api"], row["name"]) == ("cuLaunchKernel", "triton_poi_fused_add_cos_sin_0")
    assert row["cpu_op"] == "triton_poi_fused_add_cos_sin_0"
    # kernel ts 2413669097444.592 µs, launch 2413669097399.166 µs + 47.768 µs: exact ns.
    assert (row["gpu_ts"], row["launch_ts"], row["cpu_duration"]) == (2413669097444592, 2413669097399166, 47768)
    assert row["launch_delay"] == -2342 and row["negative_delay"]


def test_statistics_and_outliers(columns):
    table = launch_table(columns("negative_queue"))
    stats = launch_statistics(table)
    delay = stats[(stats["by"] == "all") & (stats["figure"] == "launch_delay")].iloc[0]
    values = np.sort(table["launch_delay"].to_numpy())
    assert delay["count"] == len(values) == 6_875
    assert (delay["min"], delay["max"]) == (values[0], values[-1])
    assert delay["p50"] == values[(len(values) + 1) // 2 - 1]  # nearest rank: an observed delay
    per_stream = stats[(stats["by"] == "stream") & (stats["figure"] == "launch_delay")]
    assert per_stream["count"].sum() == len(table)
    assert set(stats[stats["by"] == "api"]["key"]) == {"cudaLaunchKernel", "cudaMemcpyAsync", "cudaMemsetAsync",
                                                       "cudaGraphLaunch"}
    lists = outliers(table, 50_000, 100_000)
    assert len(lists["long_delay"]) == int((table["launch_delay"] > 100_000).sum()) == 6_686
    assert len(lists["slow_launch"]) == 386
    assert table.iloc[lists["long_delay"]]["launch_delay"].is_monotonic_decreasing
    short = table.iloc[lists["short_gpu"]]
    assert ((short["gpu_duration"] < short["cpu_duration"]) & (short["cpu_duration"] <= 50_000)).all()


def test_durations_parse_exactly():
    assert [parse_duration_ns(t) for t in ("50us", "1.5ms", "2s", "100", "250ns", "0.001ms", "3µs")] == [
        50_000, 1_500_000, 2_000_000_000, 100_000, 250, 1_000, 3_000]
    for bad in ("0.5ns", "abc", "-5us", "1.5x", ""):
        with pytest.raises(UsageError):
            parse_duration_ns(bad)


def test_launch_stats_cli(columns):
    path = str(TRACES["negative_queue"])
    r = run_cli("launch-stats", path, "--top", "2")
    assert r.returncode == 0, r.stderr
    text = r.stdout.decode()
    assert "6,875 GPU ops with a launch call" in text and "35 launch delays are negative" in text
    assert "launch delays above the delay cutoff: 6,686" in text
    assert "cudaGraphLaunch / CompiledFunction / void gemv2T_kernel_val" in text
    r = run_cli("launch-stats", path, "--format", "json", "--delay-cutoff", "0.19s", "--runtime-cutoff", "1.5ms")
    report = orjson.loads(r.stdout)
    assert report["delay_cutoff_ns"] == 190_000_000 and report["runtime_cutoff_ns"] == 1_500_000
    table = launch_table(columns("negative_queue"))
    counts = {k: len(v) for k, v in outliers(table, 1_500_000, 190_000_000).items()}
    assert {k: v["count"] for k, v in report["outliers"].items()} == counts
    assert report["outliers"]["long_delay"]["worst"][0]["launch_delay_ns"] == table["launch_delay"].max()
    r = run_cli("launch-stats", str(TRACES["triton"]), "--format", "csv")
    lines = r.stdout.decode().splitlines()
    assert lines[0] == "by,key,figure,count,mean_ns,min_ns,p50_ns,p90_ns,p99_ns,max_ns"  # ns, as in the JSON
    assert "all,all,launch_delay,1,-2342,-2342,-2342,-2342,-2342,-2342" in lines
    r = run_cli("launch-stats", path, "--delay-cutoff", "1.5x")
    assert r.returncode == 1 and b"not a duration: '1.5x'" in r.stderr


def test_cupti_trace_gives_an_empty_table_and_says_why(tmp_path):
    path = str(TRACES["cupti"])
    df = launch_stats(path)
    assert df.empty and "launch_delay" in df.columns
    assert "no kernel, memcpy or memset events" in df.attrs["message"]
    r = run_cli("launch-stats", path)
    assert r.returncode == 0 and b"CUPTI range-profiler trace records no kernels" in r.stdout
    assert orjson.loads(run_cli("launch-stats", path, "--format", "json").stdout)["launches"] == 0
    out = tmp_path / "out.json"
    result = annotate(path, str(out), analyses=["launch_delay"])
    assert "nothing added" in result.summary[0]
    assert out.read_bytes() == raw_json(path)


# --- annotate --launch-delay, checked on the output as Perfetto reads it ----------------

def _events(path) -> list[tuple[bytes, dict]]:
    """(raw bytes, parsed event) of every event, in file order (index = ordinal)."""
    out = []
    for batch in TraceReader(str(path)).batches():
        out.extend((batch.raw[a:b], e) for (a, b), e in zip(batch.spans, batch.events))
    return out


class PerfettoFlowBinder:
    """Perfetto's v1 binding: ``s`` and ``f``/``bp:e`` go to the slice on top of the
    thread's stack at their ts, i.e. the last slice begun before it (the stack is popped
    only when a new slice begins). We also require that slice to contain the ts."""

    def __init__(self, events: list[dict]):
        slices = []  # (thread, ts ns, dur ns, ordinal)
        for ordinal, e in enumerate(events):
            ph = e.get("ph")
            if ph == "X" and "dur" in e and to_ns(e["dur"]) >= 0:
                dur = to_ns(e["dur"])
            elif ph in ("i", "I") and e.get("s", "t") == "t":
                dur = 0  # a thread-scoped instant is a zero-length slice on the stack
            else:
                continue
            slices.append((perfetto_thread(e.get("pid"), e.get("tid")), to_ns(e["ts"]), dur, ordinal))
        # As Perfetto reads each time (what perfetto_ns does one value at a time), all at once.
        starts = perfetto_ns_array(np.array([s[1] for s in slices], np.int64)).tolist()
        lengths = perfetto_ns_array(np.array([s[2] for s in slices], np.int64)).tolist()
        per_thread: dict[tuple, list] = {}
        for (thread, _, _, ordinal), start, length in zip(slices, starts, lengths):
            per_thread.setdefault(thread, []).append((start, -length, ordinal, start + length))
        self.threads = {}
        for thread, rows in per_thread.items():
            rows.sort()
            self.threads[thread] = (np.array([r[0] for r in rows]), [r[2] for r in rows], [r[3] for r in rows])

    def bind(self, flow: dict) -> int:
        """The ordinal of the slice the flow end binds to (asserting it encloses the ts)."""
        t = perfetto_ns(to_ns(flow["ts"]))
        starts, ordinals, ends = self.threads[perfetto_thread(flow["pid"], flow["tid"])]
        i = int(np.searchsorted(starts, t))
        assert i == len(starts) or starts[i] != t, "flow ts ties with a slice start: binding is order-dependent"
        assert i > 0, "no slice open at the flow's ts"
        assert starts[i - 1] < t < ends[i - 1], "the slice on top of the stack has ended: a silent mis-binding"
        return ordinals[i - 1]


@pytest.mark.parametrize("name, cutoff, most_unplaced", [
    ("negative_queue", None, 5),  # 5 cudaMemsetAsync share their start with a 0-µs cudaPeekAtLastError
    ("ns_resolution", "0us", 11),  # fractional epoch-µs ts: every positive delay gets an arrow but where
    # Perfetto spills the op or its launch (their ends would bind to the slice under it: tests/perfetto/test_flow_binding.py)
    ("nccl", "0us", 0),  # gpu_user_annotation slices enclose kernels on the GPU threads
    (SAMPLE, "0us", 5),  # two GPUs, a graph launch, the driver API; 5 zero-duration memsets have no inside
])
def test_annotate_launch_delay(columns, tmp_path, name, cutoff, most_unplaced, trace_path):
    cols = columns(name)
    out = tmp_path / "out.json"
    options = {} if cutoff is None else {"delay_cutoff": cutoff}
    annotate(str(trace_path(name)), str(out), analyses=["launch_delay"], options=options)
    before, after = _events(trace_path(name)), _events(out)
    n = len(before)
    gpu_rows, launch_rows, delay = launch_pairs(cols)
    expected = {g: (d, c) for g, d, c in zip(cols.gpu.ordinal[gpu_rows].tolist(), delay.tolist(),
                                             cols.launches.dur[launch_rows].tolist())}

    # Args on every launched GPU op, exact; every other event byte-identical.
    for ordinal, ((raw_in, e_in), (raw_out, e_out)) in enumerate(zip(before, after[:n])):
        if ordinal in expected:
            d, c = expected[ordinal]
            added = {k: e_out["args"].pop(k) for k in ("launch_delay_us", "launch_cpu_us")}
            assert (to_ns(added["launch_delay_us"]), to_ns(added["launch_cpu_us"])) == (d, c)
            assert e_out == e_in
        else:
            assert raw_out == raw_in

    # Arrows: unique ids above the trace's, both ends bound to the intended slices.
    new = [e for _, e in after[n:]]
    binder = PerfettoFlowBinder([e for _, e in after])
    flows: dict[int, dict] = {}
    for e in new:
        if e["ph"] in ("s", "f"):
            assert e["cat"] == FLOW_CATEGORY and e["id"] > cols.max_flow_id
            assert e["id"] not in flows or e["ph"] not in flows[e["id"]]
            flows.setdefault(e["id"], {})[e["ph"]] = e
    cutoff_ns = 100_000 if cutoff is None else parse_duration_ns(cutoff)
    intended = {(launch, g): d for g, launch, d in zip(cols.gpu.ordinal[gpu_rows].tolist(),
                                                       cols.launches.ordinal[launch_rows].tolist(),
                                                       delay.tolist()) if d > cutoff_ns}
    bound = set()
    for ends in flows.values():
        assert ends["f"]["bp"] == "e" and ends["s"]["name"] == ends["f"]["name"]
        pair = (binder.bind(ends["s"]), binder.bind(ends["f"]))
        assert pair in intended, pair
        assert ends["s"]["name"] == delay_label(intended[pair])
        bound.add(pair)
    assert len(bound) == len(flows) >= len(intended) - most_unplaced
    assert len(intended) > (150 if name == SAMPLE else 1000)

    # Counters: one key per event, increasing ts per track, the delay of the op starting there.
    counters = [json.loads(raw, parse_float=Decimal) for raw, e in after[n:] if e["ph"] == "C"]
    by_stream = {(int(cols.gpu.device[r]), int(cols.gpu.stream[r]), int(cols.gpu.ts[r])): [] for r in gpu_rows}
    for r, d in zip(gpu_rows.tolist(), delay.tolist()):
        by_stream[(int(cols.gpu.device[r]), int(cols.gpu.stream[r]), int(cols.gpu.ts[r]))].append(d)
    last: dict[tuple, int] = {}
    for c in counters:
        (key, value), = c["args"].items()
        stream = int(key.removeprefix("stream "))
        ts = to_ns(str(c["ts"]))
        assert ts > last.get((c["pid"], key), -1)
        last[(c["pid"], key)] = ts
        assert to_ns(value) == max(by_stream[(c["pid"], stream, ts)])
    assert len(counters) == len(by_stream)
    assert all(e["ph"] in ("s", "f", "C") for e in new)

    # Perfetto's importer loses nothing of ours: the only flow loss left is Kineto's own
    # dangling ac2g ends (an f whose s is nowhere in the trace), and the only arrows bound
    # under a spilled slice are Kineto's own (as many as in the input).
    report = check_trace(str(out))
    assert set(report.stats) <= {"flow_end_without_start", "slice_spill_overlapping_complete_event",
                                 "flow_bound_to_other_slice"}, report.stats
    misbound = "flow_bound_to_other_slice"
    assert report.stats.get(misbound, 0) == check_trace(str(trace_path(name))).stats.get(misbound, 0)
    assert report.stats.get("flow_end_without_start", 0) == report.warnings.get("dangling_flow_end", 0)


def _two_kernels_starting_together(path) -> str:
    """Two launches on one stream whose kernels start at the same ts (delays 85 and 75 us)."""
    def event(cat, name, ts, dur, correlation, tid):
        return {"ph": "X", "cat": cat, "name": name, "pid": 0 if cat == "kernel" else 1, "tid": tid, "ts": ts,
                "dur": dur, "args": {"correlation": correlation, "device": 0, "stream": 7}}
    events = [event("cuda_runtime", "cudaLaunchKernel", 10, 5, 1, 2),
              event("cuda_runtime", "cudaLaunchKernel", 20, 5, 2, 2),
              event("kernel", "k1", 100, 1, 1, 7), event("kernel", "k2", 100, 2, 2, 7)]
    path.write_text(json.dumps({"traceEvents": events}))
    return str(path)


TOGETHER = "two kernels at one ts"


@pytest.mark.parametrize("name", [TOGETHER, SAMPLE, "negative_queue", "df_index", "trace_diff"])
def test_delay_counter_is_the_largest_delay_starting_at_each_ts(columns, name, tmp_path):
    """Brute force per stream: one point per distinct op start, the largest delay among the
    ops starting there (on the real traces no two launched ops of a stream start together)."""
    cols = scan(_two_kernels_starting_together(tmp_path / "t.json")) if name == TOGETHER else columns(name)
    gpu_rows, _, delay = launch_pairs(cols)
    expected: dict[tuple, dict[int, int]] = {}
    for row, d in zip(gpu_rows.tolist(), delay.tolist()):
        points = expected.setdefault((int(cols.gpu.device[row]), int(cols.gpu.stream[row])), {})
        ts = int(cols.gpu.ts[row])
        points[ts] = max(points.get(ts, d), d)
    ties = 0
    for track in delay_counters(cols, gpu_rows, delay):
        stream = int(track.key.split()[-1])
        (device, _), points = next(((dev, st), p) for (dev, st), p in expected.items()
                                   if st == stream and cols.gpu_pid(dev) == track.pid)
        ts = track.ts if isinstance(track.ts, np.ndarray) else np.concatenate(list(track.ts.chunks(1 << 20)))
        assert ts.tolist() == sorted(points)
        assert track.values.tolist() == [points[t] for t in sorted(points)]
        on = (cols.gpu.device[gpu_rows] == device) & (cols.gpu.stream[gpu_rows] == stream)
        ties += int(np.count_nonzero(on)) - len(points)
    assert ties == (name == TOGETHER)


@pytest.mark.parametrize("name, launched", [(SAMPLE, 176), ("negative_queue", 6875)])
def test_consuming_table_equals_the_table(name, launched, trace_path):
    """The table that takes each column out of the trace's columns as it reads them (so the
    two are not held whole at once) is the same table."""
    cols = scan_for_stacks(str(trace_path(name)), keep_launch=calls_of(STREAM_LAUNCH_APIS))
    expected = launch_table(cols)
    got = launch_table_consuming(cols)
    pd.testing.assert_frame_equal(got, expected)
    assert len(got) == launched and "ts" not in cols.gpu.cols and "ts" not in cols.launches.cols
