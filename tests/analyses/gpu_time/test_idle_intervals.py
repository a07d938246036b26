"""Idle intervals (``stats --table idle_intervals``) and the idle-gap track (``annotate
--idle-gaps``): against a brute force over the parsed JSON events (exact ns from the number's
text), and against numbers recorded from HTA 0.5.0."""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np
import orjson
import pytest

import traceforge
from tests.conftest import SAMPLE, raw_json, run_cli
from traceforge.analyses.gpu_time.busy import KERNEL_WAIT_NS
from traceforge.analyses.gpu_time.idle_intervals import DEFAULT_MIN_GAP_NS, idle_gaps, idle_intervals
from traceforge.analyses.launches.calls import last_step_start
from traceforge.columns.scan import scan
from traceforge.io.read.reader import quote_times
from traceforge.util.exacttime import to_ns

GPU_CATS = {"kernel", "gpu_memcpy", "memcpy", "gpu_memset", "memset"}
LAUNCH_CATS = {"cuda_runtime", "cuda_driver", "runtime", "driver"}


@dataclass
class Parsed:
    """A trace's GPU ops and launch calls, from its JSON text (times exact, from their text)."""

    gpu: list[dict] = field(default_factory=list)  # {ordinal, ts, dur, device, stream, corr, name, cat, bytes}
    launches: list[dict] = field(default_factory=list)  # {ordinal, ts, corr, name}
    steps: list[int] = field(default_factory=list)  # ProfilerStep# starts

    def launch_ts(self) -> dict[int, int]:
        """correlation -> start of its first launch call in the file."""
        out: dict[int, int] = {}
        for c in self.launches:
            out.setdefault(c["corr"], c["ts"])
        return out


def parse(path) -> Parsed:
    events = orjson.loads(quote_times(raw_json(path)))
    events = events["traceEvents"] if isinstance(events, dict) else events
    out = Parsed()
    for ordinal, e in enumerate(events):
        if e.get("ph") != "X":
            continue
        cat, args = str(e.get("cat", "")).lower(), e.get("args") or {}
        if cat in GPU_CATS:
            out.gpu.append({"ordinal": ordinal, "ts": to_ns(e["ts"]), "dur": to_ns(e.get("dur", 0)),
                            "device": int(args.get("device", 0)), "stream": int(args.get("stream", 0)),
                            "corr": int(args.get("correlation", -1)), "name": e["name"], "cat": cat,
                            "bytes": args.get("bytes")})
        elif cat in LAUNCH_CATS and "correlation" in args:
            out.launches.append({"ordinal": ordinal, "ts": to_ns(e["ts"]), "corr": int(args["correlation"]),
                                 "name": e["name"]})
        elif re.fullmatch(r"ProfilerStep#\d+", e.get("name", "")):
            out.steps.append(to_ns(e["ts"]))
    return out


def brute_gaps(p: Parsed, kernel_wait_ns: int = KERNEL_WAIT_NS) -> dict[tuple[int, int], list[tuple]]:
    """Per (device, stream): (start, end, category, next op name) of each gap between merged busy
    intervals, by a plain loop over the docstring's definition."""
    launch_ts = p.launch_ts()
    ops = defaultdict(list)
    for op in p.gpu:
        ops[(op["device"], op["stream"])].append(op)
    out = {}
    for key, items in sorted(ops.items()):
        timed = sorted((o for o in items if o["dur"] > 0), key=lambda o: (o["ts"], o["ordinal"]))
        gaps = []
        reach = None
        for o in timed:
            if reach is not None and o["ts"] > reach:
                launched = launch_ts.get(o["corr"]) if o["corr"] >= 0 else None
                gap = o["ts"] - reach
                category = ("host_wait" if launched is not None and launched > reach
                            else "kernel_wait" if gap < kernel_wait_ns else "other")
                gaps.append((reach, o["ts"], category, o["name"]))
            reach = o["ts"] + o["dur"] if reach is None else max(reach, o["ts"] + o["dur"])
        out[key] = gaps
    return out


def nearest_rank(values: list[int], p: int) -> int:
    ordered = sorted(values)
    k = 0
    while (k + 1) * 100 < p * len(ordered):  # the smallest k+1 with (k+1)/n >= p/100
        k += 1
    return ordered[k]


def brute_table(gaps: dict[tuple[int, int], list[tuple]]) -> list[dict]:
    rows = []
    for (device, stream), items in gaps.items():
        for category in ("host_wait", "kernel_wait", "other"):
            lengths = [e - s for s, e, c, _ in items if c == category]
            if lengths:
                rows.append({"device": device, "stream": stream, "category": category, "count": len(lengths),
                             "total_ns": sum(lengths), "mean_ns": sum(lengths) / len(lengths),
                             "min_ns": min(lengths), "p50_ns": nearest_rank(lengths, 50),
                             "p90_ns": nearest_rank(lengths, 90), "max_ns": max(lengths)})
    return rows


@pytest.mark.parametrize("name", [SAMPLE, "negative_queue", "trace_diff", "ns_resolution"])
def test_idle_intervals_equal_the_brute_force(name, trace_path):
    path = trace_path(name)
    gaps = brute_gaps(parse(path))
    table = traceforge.stats(str(path), tables=["idle_intervals"]).idle_intervals
    assert table.drop(columns="rank").to_dict("records") == brute_table(gaps)
    assert set(table["category"]) == {"host_wait", "kernel_wait", "other"} or name == "ns_resolution"
    # the same gaps as the streams table's idle breakdown
    streams = traceforge.stats(str(path), tables=["streams"]).streams.set_index(["device", "stream"])
    for (device, stream, category), total in table.groupby(["device", "stream", "category"])["total_ns"].sum().items():
        assert streams.loc[(device, stream), f"{category}_ns"] == total


def test_kernel_wait_threshold_moves_gaps_between_categories(trace_path):
    path = trace_path("trace_diff")
    gaps = brute_gaps(parse(path), kernel_wait_ns=5_000)
    cols = scan(str(path))
    assert idle_intervals(cols, kernel_wait_ns=5_000).to_dict("records") == brute_table(gaps)
    r = run_cli("stats", str(path), "--table", "idle_intervals", "--kernel-wait-us", "5", "--format", "json")
    assert r.returncode == 0, r.stderr
    doc = orjson.loads(r.stdout)["idle_intervals"]
    assert [{k: v for k, v in row.items() if k != "rank"} for row in doc] == brute_table(gaps)


def test_hand_written_gaps_and_percentiles(tmp_path):
    """One stream: a host wait (launched after the previous op ended), kernel waits under 30 µs,
    an other gap, an overlap and a zero-duration op that make no gap."""
    ops = [  # (ts µs, dur µs, launch ts µs)
        (100, 10, 50), (115, 5, 60), (121, 4, 61), (125, 3, 62),  # kernel waits 5, 1; touching: none
        (200, 10, 150),  # host wait 72 (launched at 150 > 128)
        (300, 50, 160), (310, 5, 161), (360, 0, 162),  # other 90; overlap; zero-duration: no gap
        (400, 1, 163),  # other 50
    ]
    events = []
    for i, (ts, dur, launched) in enumerate(ops):
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                       "ts": launched, "dur": 1, "args": {"correlation": i + 1}})
        events.append({"ph": "X", "cat": "kernel", "name": f"k{i}", "pid": 0, "tid": 7, "ts": ts, "dur": dur,
                       "args": {"device": 0, "stream": 7, "correlation": i + 1}})
    path = tmp_path / "t.json"
    path.write_bytes(orjson.dumps({"traceEvents": events}))
    table = idle_intervals(scan(str(path))).set_index("category")
    assert table.loc["kernel_wait", ["count", "total_ns", "min_ns", "p50_ns", "p90_ns", "max_ns"]].tolist() == [
        2, 6_000, 1_000, 1_000, 5_000, 5_000]
    assert table.loc["host_wait", ["count", "total_ns"]].tolist() == [1, 72_000]
    assert table.loc["other", ["count", "total_ns", "min_ns", "p50_ns", "max_ns"]].tolist() == [
        2, 140_000, 50_000, 50_000, 90_000]
    drawn = idle_gaps(scan(str(path)), min_gap_ns=50_000)
    assert drawn[["category", "start_ns", "end_ns", "next_op"]].values.tolist() == [
        ["host_wait", 128_000, 200_000, "k4"], ["other", 210_000, 300_000, "k5"], ["other", 350_000, 400_000, "k8"]]


# HTA 0.5.0, pandas 2.3, on the shared traces:
#   TraceAnalysis(trace_files={0: PATH}, trace_dir=DIR).get_idle_time_breakdown(
#       ranks=[0], visualize=False, show_idle_interval_stats=True)[1]
# -> per (stream, idle_category): count, mean, min, max in µs (mean rounded to 2 decimals).
# Only the streams where no op overlaps or touches the busy interval before it and none has a
# zero duration: there HTA's unmerged gaps are our merged ones. HTA also keeps only GPU ops whose
# launch call started before the last profiler step (our ``launched_before_ns``).
HTA_IDLE = {
    "negative_queue": {
        (25, "host_wait"): (11, 57145.27, 19, 212248), (25, "kernel_wait"): (16, 5.31, 4, 6),
        (84, "host_wait"): (7, 8985.86, 5790, 13057), (84, "kernel_wait"): (3, 4.0, 3, 5),
        (84, "other"): (17, 39128.94, 54, 129678), (285, "other"): (15, 45020.33, 38, 182448),
        (363, "kernel_wait"): (6, 12.5, 5, 21), (363, "other"): (9, 74798.0, 33, 183801),
        # stream 7 has touching ops: HTA counts a 0 µs kernel wait more (4,904); its other gaps agree
        (7, "other"): (211, 3275.98, 35, 64325),
    },
    "trace_diff": {
        (14, "host_wait"): (66, 7890.82, 10, 83815), (14, "kernel_wait"): (160, 6.79, 1, 27),
        (14, "other"): (13, 1118.15, 35, 8563), (15, "host_wait"): (22, 15840.14, 112, 66303),
        (15, "kernel_wait"): (19, 7.26, 2, 17), (15, "other"): (8, 4867.0, 253, 12907),
        (16, "host_wait"): (4, 105731.25, 69937, 155437), (16, "kernel_wait"): (115, 7.21, 3, 19),
        # stream 7 has overlapping ops (HTA: 12,068 kernel waits down to -13 µs); host wait and other agree
        (7, "host_wait"): (14, 211.43, 11, 1512), (7, "other"): (22, 1898.0, 30, 5701),
    },
}


@pytest.mark.parametrize("name", sorted(HTA_IDLE))
def test_idle_intervals_equal_hta_with_its_choices(name, columns):
    cols = columns(name)
    table = idle_intervals(cols, launched_before_ns=last_step_start(cols)).set_index(["stream", "category"])
    for key, (count, mean_us, min_us, max_us) in HTA_IDLE[name].items():
        r = table.loc[key]
        assert (r["count"], round(r["mean_ns"] / 1000, 2), r["min_ns"], r["max_ns"]) == (
            count, mean_us, min_us * 1000, max_us * 1000), key


def _appended(src: bytes, out: bytes) -> list[dict]:
    """The events ``out`` inserts into ``src`` as one run of bytes (the rest kept byte for byte)."""
    a, b = np.frombuffer(src, np.uint8), np.frombuffer(out[:len(src)], np.uint8)
    differ = np.flatnonzero(a != b)
    at = int(differ[0]) if len(differ) else len(src)
    assert out.endswith(src[at:]), "the trace's own bytes changed"
    return orjson.loads(quote_times(b"[" + out[at:len(out) - (len(src) - at)].strip(b", \n\r\t") + b"]"))


@pytest.mark.parametrize("name", ["trace_diff", "ns_resolution"])
def test_annotate_idle_gaps_draws_each_gap_at_its_exact_time(name, trace_path, tmp_path):
    from traceforge.perfetto import check_trace

    src, out = trace_path(name), tmp_path / "out.json"
    r = run_cli("annotate", str(src), "--idle-gaps", "--idle-gaps-min", "5us", "-o", str(out))
    assert r.returncode == 0, r.stderr
    new = _appended(raw_json(src), out.read_bytes())
    thread = {(e["pid"], e["tid"]): e["args"]["name"] for e in new if e["ph"] == "M" and e["name"] == "thread_name"}
    drawn = defaultdict(list)
    for e in new:
        if e["ph"] == "X":
            stream = int(re.fullmatch(r"Idle gaps \(stream (\d+)\)", thread[(e["pid"], e["tid"])]).group(1))
            drawn[stream].append((to_ns(e["ts"]), to_ns(e["ts"]) + to_ns(e["dur"]), e["name"].replace(" ", "_"),
                                  e["args"]["next_op"]))
    expected = {stream: [g for g in gaps if g[1] - g[0] >= 5_000]
                for (_, stream), gaps in brute_gaps(parse(src)).items()}
    assert {s: sorted(g) for s, g in drawn.items()} == {s: g for s, g in expected.items() if g}
    assert f"idle gaps: {sum(map(len, drawn.values())):,} slices of at least 5 us".encode() in r.stderr
    assert check_trace(str(out)).stats == check_trace(str(src)).stats  # no new loss in Perfetto


def test_idle_gaps_option_default_table_and_api(sample, tmp_path):
    trace = traceforge.load(str(sample.path))
    table = trace.table("idle_gaps")
    cols = scan(str(sample.path))
    assert table.equals(idle_gaps(cols, min_gap_ns=DEFAULT_MIN_GAP_NS))
    assert (table["dur_ns"] >= DEFAULT_MIN_GAP_NS).all() and len(table)
    out = tmp_path / "all.json"
    r = run_cli("annotate", str(sample.path), "--all", "-o", str(out))
    assert r.returncode == 0 and b"idle gaps:" in r.stderr, r.stderr
    r = run_cli("annotate", str(sample.path), "--idle-gaps", "--idle-gaps-min", "-3us", "-o", str(out))
    assert r.returncode != 0 and b"Traceback" not in r.stderr
