"""Queue-length and memcpy-bandwidth summaries (``stats --table queue`` / ``--table memcpy``):
against a brute force over the parsed JSON events and against numbers recorded from HTA 0.5.0."""

from __future__ import annotations

import re
from collections import defaultdict

import numpy as np
import orjson
import pytest

import traceforge
from tests.analyses.gpu_time.test_idle_intervals import nearest_rank, parse
from tests.conftest import SAMPLE, run_cli
from traceforge.analyses.launches.calls import HTA_QUEUE_APIS, STREAM_LAUNCH_APIS, last_step_start
from traceforge.analyses.launches.queue_summary import CUDA_LAUNCH_QUEUE_LIMIT, QUARTILES, queue_summary
from traceforge.analyses.memory.memcpy_bw import RATE_SCALE, memcpy_bandwidth
from traceforge.analyses.memory.memcpy_summary import memcpy_summary
from traceforge.columns.scan import scan

SUFFIX = re.compile(r"(_v\d+|_ptsz|_ptds)+$")
DIRECTION = re.compile(r"\b(HtoD|DtoH|DtoD|PtoP|HtoH|DtoA|AtoD|AtoH|HtoA|AtoA)\b")


def brute_queue(path, apis=STREAM_LAUNCH_APIS, limit=CUDA_LAUNCH_QUEUE_LIMIT) -> list[dict]:
    """Per (device, stream): +1 at each launch call of ``apis``, -1 at the start of each GPU op it
    launched, netted per ts; then the summary's definition with plain loops."""
    p = parse(path)
    launch_ts: dict[int, int] = {}
    for c in p.launches:
        if SUFFIX.sub("", c["name"]) in apis and c["corr"] >= 0:
            launch_ts.setdefault(c["corr"], c["ts"])
    change = defaultdict(lambda: defaultdict(int))
    for op in p.gpu:
        if op["corr"] in launch_ts:
            series = change[(op["device"], op["stream"])]
            series[launch_ts[op["corr"]]] += 1
            series[op["ts"]] -= 1
    rows = []
    for key, series in sorted(change.items()):
        times, values, running = sorted(series), [], 0
        for t in times:
            running += series[t]
            values.append(running)
        peak = max(values)
        held = [b - a for a, b in zip(times, times[1:])] + [0]
        row = {"device": key[0], "stream": key[1], "points": len(times), "mean": sum(values) / len(values),
               "p50": nearest_rank(values, 50), "p95": nearest_rank(values, 95), "max": peak,
               "span_ns": times[-1] - times[0]}
        for q in QUARTILES:
            floor = max(1, -(-q * peak // 100))
            row[f"ge_q{q}_ns"] = sum(h for h, v in zip(held, values) if v >= floor)
        row["at_limit_ns"] = sum(h for h, v in zip(held, values) if v >= limit)
        rows.append(row)
    return rows


@pytest.mark.parametrize("name", [SAMPLE, "negative_queue", "trace_diff", "ns_resolution"])
def test_queue_summary_equals_the_brute_force(name, trace_path):
    path = trace_path(name)
    table = traceforge.stats(str(path), tables=["queue"]).queue.drop(columns="rank")
    assert table.to_dict("records") == brute_queue(path)
    cols = scan(str(path))
    assert queue_summary(cols, limit=100).to_dict("records") == brute_queue(path, limit=100)
    assert queue_summary(cols, apis=HTA_QUEUE_APIS).to_dict("records") == brute_queue(path, HTA_QUEUE_APIS)


def test_queue_limit_must_be_positive(columns):
    with pytest.raises(ValueError):
        queue_summary(columns(SAMPLE), limit=0)


# HTA 0.5.0 (pandas 2.3), with a = TraceAnalysis(trace_files={0: PATH}, trace_dir=DIR):
#   s = a.get_queue_length_time_series(ranks=[0])[0]
#   last = s.drop_duplicates(["stream", "ts"], keep="last").groupby("stream")["queue_length"]
#   -> per stream: last.size(), last.mean(), last.max()
# (HTA's get_queue_length_summary describes every row, so a ts where several changes land gives
# several points; the last of each is the netted value we report.)
#   a.get_time_spent_blocked_on_full_queue(a.get_queue_length_time_series(ranks=[0]), max_queue_length=L)
#   -> stream 7's duration_at_max_queue_length (µs), for L = 100, 500, 900 (1024: no stream reaches it)
HTA_QUEUE = {
    "negative_queue": {7: (9576, 654.5797827903091, 946), 25: (56, 1.3571428571428572, 4),
                       27: (589, 3.5857385398981325, 17), 84: (56, 1.4642857142857142, 3), 285: (32, 2.75, 4),
                       363: (32, 2.75, 4)},
    "trace_diff": {7: (15672, 521.6600944359367, 1013), 14: (480, 2.316666666666667, 9), 15: (100, 1.54, 5),
                   16: (240, 10.958333333333334, 23)},
}
HTA_FULL_QUEUE_US = {
    "negative_queue": {100: 1005515, 500: 751369, 900: 30987},
    "trace_diff": {100: 564283, 500: 355919, 900: 26935},
    "ns_resolution": {100: 375824, 500: 314419, 900: 260360},  # HTA rounds ts to whole µs
}


@pytest.mark.parametrize("name", sorted(HTA_FULL_QUEUE_US))
def test_queue_summary_equals_hta_with_its_choices(name, columns):
    cols = columns(name)
    choices = {"launched_before_ns": last_step_start(cols), "apis": HTA_QUEUE_APIS}
    table = queue_summary(cols, **choices).set_index("stream")
    for stream, (points, mean, peak) in HTA_QUEUE.get(name, {}).items():
        assert (table.loc[stream, "points"], table.loc[stream, "max"]) == (points, peak)
        assert table.loc[stream, "mean"] == pytest.approx(mean, rel=1e-12)
    assert (table["at_limit_ns"] == 0).all()  # 1024 is never reached with HTA's choices
    for limit, us in HTA_FULL_QUEUE_US[name].items():
        at_limit = queue_summary(cols, limit=limit, **choices).set_index("stream")["at_limit_ns"]
        assert at_limit[at_limit > 0].index.tolist() == [7]
        if name == "ns_resolution":
            assert abs(at_limit[7] - us * 1000) < 1000
        else:
            assert at_limit[7] == us * 1000


def copy_kind(op: dict) -> str:
    if op["cat"] in ("gpu_memset", "memset"):
        return "Memset"
    m = DIRECTION.search(op["name"])
    return m.group(1) if m else ("Memset" if "memset" in op["name"].lower() else "Other")


def brute_memcpy(path) -> dict[tuple[int, str], dict]:
    """Per (device, kind): copies, bytes, the union of their intervals, bytes / union."""
    groups = defaultdict(list)
    for op in parse(path).gpu:
        if op["cat"] != "kernel" and op["bytes"] is not None and op["dur"] > 0:
            groups[(op["device"], copy_kind(op))].append(op)
    out = {}
    for key, ops in groups.items():
        busy, reach_start, reach_end = 0, None, None
        for s, e in sorted((o["ts"], o["ts"] + o["dur"]) for o in ops):
            if reach_end is None or s > reach_end:
                busy += 0 if reach_end is None else reach_end - reach_start
                reach_start, reach_end = s, e
            else:
                reach_end = max(reach_end, e)
        busy += reach_end - reach_start
        moved = sum(int(o["bytes"]) for o in ops)
        out[key] = {"copies": len(ops), "bytes": moved, "busy_ns": busy, "mean_gbps": moved / busy}
    return out


@pytest.mark.parametrize("name", [SAMPLE, "negative_queue", "trace_diff", "ns_resolution"])
def test_memcpy_summary_equals_the_brute_force(name, trace_path):
    path = trace_path(name)
    table = traceforge.stats(str(path), tables=["memcpy"]).memcpy
    expected = brute_memcpy(path)
    assert len(table) == len(expected) > 0
    steps = memcpy_bandwidth(scan(str(path)))
    for r in table.itertuples():
        assert {k: getattr(r, k) for k in ("copies", "bytes", "busy_ns", "mean_gbps")} == expected[(r.device, r.kind)]
        mine = steps[(steps["device"] == r.device) & (steps["kind"] == r.kind)]["rate_units"]
        assert r.peak_units == mine.max() and r.peak_gbps == r.peak_units / RATE_SCALE  # the track's peak


def test_memcpy_peak_is_the_summed_rate_of_overlapping_copies(tmp_path):
    """Three HtoD copies: 1 GB/s over [0, 4) µs, 2 GB/s over [2, 3) µs, 3 GB/s over [10, 11) µs:
    peak 3, busy 5 µs, mean 9,000 bytes / 5,000 ns = 1.8 GB/s."""
    copies = [(0, 4, 4_000), (2, 1, 2_000), (10, 1, 3_000)]
    events = [{"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pinned -> Device)", "pid": 0, "tid": 7,
               "ts": ts, "dur": dur, "args": {"device": 0, "stream": 7, "correlation": i + 1, "bytes": n}}
              for i, (ts, dur, n) in enumerate(copies)]
    path = tmp_path / "t.json"
    path.write_bytes(orjson.dumps({"traceEvents": events}))
    row = memcpy_summary(scan(str(path))).iloc[0]
    assert (row["kind"], row["copies"], row["bytes"], row["busy_ns"]) == ("HtoD", 3, 9_000, 5_000)
    assert row["mean_gbps"] == 1.8 and row["peak_units"] == 3 * RATE_SCALE


# HTA 0.5.0: TraceAnalysis(trace_files={0: PATH}, trace_dir=DIR).get_memory_bw_summary(ranks=[0])
# -> memory_bw_gbps "max" per name, on the ns-resolution trace (where bytes / dur is Kineto's own
# rate): Memcpy DtoD 405.7052297939778, Memset 904.638036809816.
HTA_PEAK_GBPS = {"DtoD": 405.7052297939778, "Memset": 904.638036809816}


def test_memcpy_peak_equals_hta_on_a_ns_resolution_trace(columns):
    cols = columns("ns_resolution")
    table = memcpy_summary(cols, launched_before_ns=last_step_start(cols)).set_index("kind")
    assert sorted(table.index) == sorted(HTA_PEAK_GBPS)
    for kind, gbps in HTA_PEAK_GBPS.items():
        assert abs(table.loc[kind, "peak_gbps"] - gbps) <= 1 / RATE_SCALE  # our integer units of 1e-6 GB/s


def test_stats_cli_prints_the_summaries(sample):
    r = run_cli("stats", str(sample.path), "--table", "queue", "--table", "memcpy", "--table", "idle_intervals")
    assert r.returncode == 0, r.stderr
    text = r.stdout.decode()
    for title in ("Idle gaps per stream and category", "Queue length per stream", "Memcpy/memset bandwidth"):
        assert title in text
    assert "at limit" not in text  # the sample's queues stay far below CUDA's limit
    r = run_cli("stats", str(sample.path), "--table", "queue", "--format", "json")
    rows = orjson.loads(r.stdout)["queue"]
    assert [row["max"] for row in rows] == [row["max"] for row in brute_queue(sample.path)]
    made = traceforge.load(str(sample.path)).stats(tables=["memcpy"])
    assert len(made.memcpy) and not len(made.queue)
    assert np.array_equal(made.memcpy["bytes"], traceforge.stats(str(sample.path), tables=["memcpy"]).memcpy["bytes"])
