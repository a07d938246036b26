"""Every command and analysis on the synthetic trace of ``scripts/make_sample.py`` (the unit
tier): the generator recorded every event's exact ns, so each result is checked against
values computed here from that record, not against traceforge's own reading of the file."""

from __future__ import annotations

import copy
import csv
import io
import json
import re
from collections import Counter, defaultdict
from dataclasses import dataclass
from decimal import Decimal

import orjson
import pytest

import traceforge
from tests.conftest import ROOT, raw_json, run_cli
from tests.support import make_sample as make_sample_module

GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
CALL_CATS = ("cuda_runtime", "cuda_driver")
OP_CATS = ("cpu_op", "user_annotation")


@dataclass
class Truth:
    """What make_sample recorded, by ordinal (an event's place in the file's event list)."""

    events: list  # make_sample Spans and Flows, in file order (then come the metadata events)
    gpu: list  # (ordinal, Span) of the GPU ops
    calls: dict  # correlation -> (ordinal, Span) of the launch (runtime/driver) call
    ops: list  # (ordinal, Span) of the CPU ops and user annotations

    @classmethod
    def of(cls, rec) -> Truth:
        events = rec.cpu_side + rec.gpu_side
        spans = [(i, e) for i, e in enumerate(events) if hasattr(e, "dur")]
        return cls(events, [(i, e) for i, e in spans if e.cat in GPU_CATS],
                   {e.args["correlation"]: (i, e) for i, e in spans if e.cat in CALL_CATS},
                   [(i, e) for i, e in spans if e.cat in OP_CATS])

    def launch_of(self, op) -> object:
        return self.calls[op.args["correlation"]][1]

    def delay(self, op) -> int:
        call = self.launch_of(op)
        return op.ts - (call.ts + call.dur)

    def op_named(self, external_id: int) -> str:
        return next(e.name for _, e in self.ops if e.args["External id"] == external_id)


@pytest.fixture(scope="module")
def truth(sample) -> Truth:
    return Truth.of(sample.rec)


@pytest.fixture(scope="module")
def ms():
    """The make_sample module (its kernel constants name the sample's GPU ops)."""
    return make_sample_module


def _us(ns: int) -> str:
    return f"{ns // 1000}.{ns % 1000:03d}"


def _ns(us) -> int:
    """Exact ns of a µs value parsed as Decimal (or written as text)."""
    return int(Decimal(str(us)) * 1000)


def _doc(data: bytes) -> dict:
    return json.loads(data, parse_float=Decimal)


def _appended(src: bytes, out: bytes) -> list[dict]:
    """The events annotate added after the input's own."""
    n = len(json.loads(src)["traceEvents"])
    return _doc(out)["traceEvents"][n:]


def _union(intervals) -> int:
    total, reach = 0, None
    for s, e in sorted(intervals):
        if reach is None or s > reach:
            total, reach = total + e - s, e
        elif e > reach:
            total, reach = total + e - reach, e
    return total


def _nearest_rank(values: list[int], p: int) -> int:
    s = sorted(values)
    return s[max(0, -(-p * len(s) // 100) - 1)]


# -- the sample itself -------------------------------------------------------------------------


def test_the_bundled_sample_is_what_make_sample_writes(sample, ms, tmp_path, capsys):
    assert raw_json(ROOT / "samples" / "train_step.json.gz") == sample.raw
    ms.main(["-o", str(tmp_path / "again.json.gz")])
    assert raw_json(tmp_path / "again.json.gz") == sample.raw  # reproducible: no clock, fixed seed
    doc = json.loads(sample.raw)
    assert len(doc["traceEvents"]) == len(Truth.of(sample.rec).events) + 25  # + metadata and the profiler span


def test_info(sample, truth):
    r = run_cli("info", str(sample.path), "--format", "json")
    assert r.returncode == 0, r.stderr
    info = orjson.loads(r.stdout)
    events = json.loads(sample.raw)["traceEvents"]
    assert info["events"] == len(events) and info["codec"] == "gzip" and info["rank"] == 0
    assert {(row["ph"], row["cat"]): row["events"] for row in info["by_phase_and_category"]} == \
        Counter((e["ph"], e.get("cat")) for e in events)
    spans = [e for e in truth.events if hasattr(e, "dur")]
    assert info["time_span"]["first_ts_us"] == _us(min(e.ts for e in spans))
    assert info["time_span"]["last_end_us"] == _us(max(e.ts + e.dur for e in spans))
    assert info["launch_calls"] == len(truth.calls) and info["cpu_ops"] == len(truth.ops)
    streams = defaultdict(list)
    for _, op in truth.gpu:
        streams[(op.pid, op.tid)].append(op)
    assert [(s["device"], s["stream"]) for s in info["gpu_streams"]] == sorted(streams)
    kinds = {"kernel": "kernel", "memcpy": "gpu_memcpy", "memset": "gpu_memset"}
    for s in info["gpu_streams"]:
        ops = streams[(s["device"], s["stream"])]
        assert {k: s[k] for k in kinds} == {k: sum(op.cat == cat for op in ops) for k, cat in kinds.items()}
        assert s["busy_ms"] * 1e6 == pytest.approx(_union((o.ts, o.ts + o.dur) for o in ops), abs=0.5)


# -- annotate, one analysis at a time -------------------------------------------------------------


def _annotate(sample, tmp_path, *flags: str) -> tuple[bytes, str]:
    out = tmp_path / "out.json"
    r = run_cli("annotate", str(sample.path), *flags, "-o", str(out))
    assert r.returncode == 0, r.stderr
    return out.read_bytes(), r.stderr.decode()


def _queue_truth(truth: Truth) -> dict[tuple[int, int], list[tuple[int, int]]]:
    """HTA's queue length by hand: +1 at the launch call's start, -1 at the op's start."""
    steps: dict[tuple[int, int], Counter] = defaultdict(Counter)
    for _, op in truth.gpu:
        steps[(op.pid, op.tid)][truth.launch_of(op).ts] += 1
        steps[(op.pid, op.tid)][op.ts] -= 1
    return _running(steps)


def _running(steps: dict) -> dict:
    """Per key, the running sum of its changes at each distinct timestamp, in time order."""
    series = {}
    for key, net in steps.items():
        level, points = 0, []
        for ts in sorted(net):
            level += net[ts]
            points.append((ts, level))
        series[key] = points
    return series


def test_annotate_queue_length(sample, truth, tmp_path):
    from tests.io.write.test_roundtrip import _assert_input_then_appended

    expected = _queue_truth(truth)
    df = traceforge.queue_length(str(sample.path))
    got = defaultdict(list)
    for d, s, ts, q in zip(df.device.tolist(), df.stream.tolist(), df.ts.tolist(), df.queue_length.tolist()):
        got[(d, s)].append((ts, q))
    assert dict(got) == expected
    assert max(q for _, q in expected[(0, 7)]) == 23  # the step with a burst of launches backs the stream up

    out, err = _annotate(sample, tmp_path, "--queue-length")
    _assert_input_then_appended(sample.raw, out, sample.path)  # the input's bytes, then the tracks, then its tail
    tracks = defaultdict(list)
    for e in _appended(sample.raw, out):
        assert (e["ph"], e["cat"], e["name"]) == ("C", "traceforge", "Queue length")
        ((key, value),) = e["args"].items()
        tracks[(e["pid"], int(key.removeprefix("stream ")))].append((_ns(e["ts"]), value))
    assert dict(tracks) == expected
    assert f"queue length: {len(expected)} counter tracks, {sum(map(len, expected.values()))} points" in err


def _bandwidth_truth(truth: Truth) -> dict[tuple[int, str], list[tuple[int, int]]]:
    """Summed rate of the active copies per (device, kind), in integer 1e-6 GB/s (bytes/ns)."""
    steps: dict[tuple[int, str], Counter] = defaultdict(Counter)
    for _, op in truth.gpu:
        if op.cat == "gpu_memcpy" or op.cat == "gpu_memset":
            if op.dur == 0:
                continue  # moves nothing over time
            kind = "Memset" if op.cat == "gpu_memset" else op.name.split()[1]
            rate = (op.args["bytes"] * 1_000_000 + op.dur // 2) // op.dur
            steps[(op.pid, kind)][op.ts] += rate
            steps[(op.pid, kind)][op.ts + op.dur] -= rate
    return _running(steps)


def test_annotate_memcpy_bandwidth(sample, truth, tmp_path):
    expected = _bandwidth_truth(truth)
    assert {k for _, k in expected} == {"HtoD", "DtoH", "DtoD", "Memset"}
    df = traceforge.memcpy_bandwidth(str(sample.path))
    got = defaultdict(list)
    for d, k, ts, units in zip(df.device.tolist(), df.kind.tolist(), df.ts.tolist(), df.rate_units.tolist()):
        got[(d, k)].append((ts, units))
    assert dict(got) == expected
    assert all(points[-1][1] == 0 for points in expected.values())

    out, _ = _annotate(sample, tmp_path, "--memcpy-bw")
    tracks = defaultdict(list)
    for e in _appended(sample.raw, out):
        assert e["ph"] == "C" and list(e["args"]) == ["GB/s"]
        tracks[(e["pid"], e["name"].removeprefix("Memcpy "))].append((_ns(e["ts"]), int(e["args"]["GB/s"] * 10**6)))
    assert dict(tracks) == expected


def test_annotate_launch_delay_args(sample, truth, tmp_path):
    out, err = _annotate(sample, tmp_path, "--launch-delay")
    events = _doc(out)["traceEvents"]
    for ordinal, op in truth.gpu:
        args = events[ordinal]["args"]
        call = truth.launch_of(op)
        assert (args["launch_delay_us"], args["launch_cpu_us"]) == (Decimal(_us(truth.delay(op))), Decimal(_us(call.dur)))
    assert sum("launch_delay_us" in e.get("args", {}) for e in events) == len(truth.gpu)
    long = sum(truth.delay(op) > 100_000 for _, op in truth.gpu)
    arrows = sum(e["ph"] == "s" and e.get("cat") == "launch_delay" for e in events)
    drawn, missed = map(int, re.search(r"(\d+) arrows for delays > 100 us \((\d+) outliers without", err).groups())
    assert drawn == arrows and drawn + missed == long > 50


def test_launch_stats(sample, truth):
    r = run_cli("launch-stats", str(sample.path), "--format", "json")
    assert r.returncode == 0, r.stderr
    doc = orjson.loads(r.stdout)
    figures = {"cpu_duration": lambda op: truth.launch_of(op).dur, "gpu_duration": lambda op: op.dur,
               "launch_delay": truth.delay}
    groups = {("all", "all"): [op for _, op in truth.gpu]}
    for _, op in truth.gpu:
        groups.setdefault(("stream", f"GPU {op.pid} stream {op.tid}"), []).append(op)
        groups.setdefault(("api", truth.launch_of(op).name), []).append(op)
    assert doc["launches"] == len(truth.gpu) and doc["negative_delays"] == 0
    rows = {(s["by"], s["key"], s["figure"]): s for s in doc["statistics"]}
    assert len(rows) == 5 * len(groups)  # the 3 figures checked here, and queue_wait + launch_overhead
    assert all(rows[(b, k, "launch_delay")]["count"] == rows[(b, k, "queue_wait")]["count"] for b, k in groups)
    for (by, key), ops in groups.items():
        for figure, value in figures.items():
            values = [value(op) for op in ops]
            n = len(values)
            assert rows[(by, key, figure)] == {
                "by": by, "key": key, "figure": figure, "count": n, "mean_ns": (2 * sum(values) + n) // (2 * n),
                "min_ns": min(values), "p50_ns": _nearest_rank(values, 50), "p90_ns": _nearest_rank(values, 90),
                "p99_ns": _nearest_rank(values, 99), "max_ns": max(values)}, (by, key, figure)
    cpu = [truth.launch_of(op).dur for _, op in truth.gpu]
    gpu = [op.dur for _, op in truth.gpu]
    delay = [truth.delay(op) for _, op in truth.gpu]
    counts = {name: entry["count"] for name, entry in doc["outliers"].items()}
    assert counts == {"short_gpu": sum(c <= 50_000 and g < c for c, g in zip(cpu, gpu)),
                      "slow_launch": sum(c > 50_000 for c in cpu), "long_delay": sum(d > 100_000 for d in delay)}
    text = run_cli("launch-stats", str(sample.path), "--delay-cutoff", "200us", "--top", "2")
    assert text.returncode == 0 and b"launch delay" in text.stdout


# The sample's GPU ops by the category the default rules must give them.
def _categories(ms) -> dict[str, str]:
    return {
        ms.CONV_FPROP.name: "conv", ms.CONV_DGRAD.name: "conv", ms.CONV_WGRAD.name: "conv",
        ms.ADD.name: "elementwise", ms.MUL.name: "elementwise", ms.RELU.name: "elementwise",
        ms.RELU_BWD.name: "elementwise", ms.LAYER_NORM.name: "norm", ms.SGEMM.name: "gemm",
        ms.SGEMM_SMALL.name: "gemm", ms.SGEMM_DGRAD.name: "gemm", ms.SGEMM_WGRAD.name: "gemm",
        ms.FLASH.name: "attention", ms.SOFTMAX.name: "softmax", ms.LOG_SOFTMAX.name: "softmax",
        ms.NLL_LOSS.name: "reduction", ms.TRITON_ADD.name: "triton", ms.ALLREDUCE.name: "nccl",
        ms.FOREACH_MUL.name: "optimizer", ms.FOREACH_ADD.name: "optimizer", ms.FOREACH_ADDCDIV.name: "optimizer",
        ms.BATCH_HTOD.name: "memcpy", ms.LOSS_DTOH.name: "memcpy", ms.RESIDUAL_DTOD.name: "memcpy",
        ms.GRAD_MEMSET.name: "memset",
    }


def _owned(ops) -> dict[int, int]:
    """ns of each op not covered by an op that started before it (ties: file order), by sweeping
    the elementary intervals between all starts and ends."""
    bounds = sorted({t for _, op in ops for t in (op.ts, op.ts + op.dur)})
    owned: Counter = Counter()
    for a, b in zip(bounds, bounds[1:]):
        running = [(op.ts, i) for i, op in ops if op.ts <= a and op.ts + op.dur >= b]
        if running:
            owned[min(running)[1]] += b - a
    return owned


def test_classify(sample, truth, ms, tmp_path):
    category = _categories(ms)
    assert {op.name for _, op in truth.gpu} == set(category)
    r = run_cli("classify", str(sample.path), "--format", "json")
    assert r.returncode == 0, r.stderr
    (result,) = orjson.loads(r.stdout)["files"]
    start = min(op.ts for _, op in truth.gpu)
    window = max(op.ts + op.dur for _, op in truth.gpu) - start
    assert result["window_ns"] == window
    rows = {(row["device"], row["category"]): row for row in result["rows"]}
    expected = defaultdict(lambda: {"instances": 0, "duration_ns": 0, "nonoverlapped_ns": 0})
    for device in (0, 1):
        ops = [(i, op) for i, op in truth.gpu if op.pid == device]
        owned = _owned(ops)
        for i, op in ops:
            e = expected[(device, category[op.name])]
            e["instances"] += 1
            e["duration_ns"] += op.dur
            e["nonoverlapped_ns"] += owned[i]
        expected[(device, "non-GPU")]["nonoverlapped_ns"] = window - _union((op.ts, op.ts + op.dur) for _, op in ops)
    for key, e in expected.items():
        got = rows[key]
        if key[1] == "non-GPU":
            assert got["nonoverlapped_ns"] == e["nonoverlapped_ns"], key
        else:
            assert {k: got[k] for k in e} == e, key
    assert set(rows) == set(expected)

    out, err = _annotate(sample, tmp_path, "--classify")
    events = _doc(out)["traceEvents"]
    for ordinal, op in truth.gpu:
        assert events[ordinal]["args"]["category"] == category[op.name]
    assert f"category arg on {len(truth.gpu)} GPU ops" in err
    kernels = run_cli("classify", str(sample.path), "--kernels", "--format", "csv", "--rules", "hta")
    assert kernels.returncode == 0
    table = list(csv.DictReader(io.StringIO(kernels.stdout.decode())))
    assert sum(int(row["instances"]) for row in table) == len(truth.gpu)
    assert {row["category"] for row in table} == {"COMMUNICATION", "MEMORY", "COMPUTATION"}


def test_patterns_of_an_operator(sample, truth, ms, tmp_path):
    """``aten::convolution_backward`` launches a workspace memset, dgrad and wgrad in each of
    the five steps: one pattern, five times, its GPU and CPU time summed from the record."""
    r = run_cli("patterns", str(sample.path), "--op", "aten::convolution_backward", "--format", "json")
    assert r.returncode == 0, r.stderr
    (p,) = orjson.loads(r.stdout)["patterns"]
    backward = [(i, op) for i, op in truth.ops if op.name == "aten::convolution_backward"]
    launched = [op for _, op in truth.gpu if truth.op_named(truth.launch_of(op).args["External id"])
                == "aten::convolution_backward"]
    assert (p["count"], p["length"]) == (5, 3) == (len(backward), len(launched) // 5)
    assert p["kernels"] == ["Memset (Device)", ms.CONV_DGRAD.name, ms.CONV_WGRAD.name]
    assert p["gpu_ns"] == sum(op.dur for op in launched)
    assert p["cpu_ns"] == sum(op.dur for _, op in backward)
    r = run_cli("patterns", str(sample.path), "--op", "aten::cross_entropy_loss", "--min-len", "2", "--format", "csv")
    (row,) = list(csv.DictReader(io.StringIO(r.stdout.decode())))
    assert (row["count"], row["length"]) == ("5", "2") and ms.NLL_LOSS.name in row["kernels"]


def test_mined_patterns_and_their_slices(sample, truth, tmp_path):
    """Mined without an operator: the copy stream's HtoD, HtoD, DtoH of every step is one
    pattern; ``annotate --patterns`` draws each occurrence over exactly its ops."""
    r = run_cli("patterns", str(sample.path), "--format", "json")
    doc = orjson.loads(r.stdout)
    copies = [op for _, op in truth.gpu if op.tid == 13]
    (p,) = [p for p in doc["patterns"] if p["kernels"][0].startswith("Memcpy HtoD")]
    assert (p["count"], p["length"]) == (5, 3) and 3 * 5 == len(copies)
    assert p["gpu_ns"] == sum(op.dur for op in copies)

    out, err = _annotate(sample, tmp_path, "--patterns")
    slices = [e for e in _appended(sample.raw, out) if e["ph"] == "X"]
    assert len(slices) == sum(q["count"] for q in doc["patterns"]) and "patterns mined: 5 drawn" in err
    mine = sorted((_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])) for e in slices if e["args"]["pattern"] == p["pattern"])
    assert mine == [(copies[k].ts, copies[k + 2].ts + copies[k + 2].dur) for k in range(0, 15, 3)]


# -- counters: an ncu CSV made for the sample's kernels, and CUPTI ranges -------------------------


def test_counters_from_an_ncu_csv(sample, tmp_path):
    from tests.analyses.counters.test_counters import DROPPED, METRICS, _launch_order, _ncu_csv

    events = json.loads(sample.raw)["traceEvents"]
    order = _launch_order(events)
    kept = [n for n in range(len(order)) if n not in DROPPED]
    path = tmp_path / "sample.ncu.csv"
    path.write_text(_ncu_csv(events, [(order[n], n) for n in kept]))
    r = run_cli("counters", str(sample.path), "--ncu", str(path), "--format", "json")
    assert r.returncode == 0, r.stderr
    doc = orjson.loads(r.stdout)
    kernels = doc["kernels"]
    assert [k["event"] for k in kernels] == [order[n] for n in kept]
    assert all(k["status"] == "matched" for k in kernels)
    for n, k in zip(kept, kernels):
        assert k["dram__bytes_write.sum"] == METRICS["dram__bytes_write.sum"][2](n)
        assert k["flops"] == 2e6 * (n + 1) + n  # ffma counts twice
        assert k["kernel_dur_ns"] == _ns(events[order[n]]["dur"])
    assert sorted(p["index"] for p in doc["problems"] if p["problem"] == "kernel without ncu row") == \
        sorted(order[n] for n in DROPPED)

    out = tmp_path / "out.json"
    r = run_cli("annotate", str(sample.path), "--counters", "--ncu", str(path), "-o", str(out))
    assert r.returncode == 0, r.stderr
    written = _doc(out.read_bytes())["traceEvents"]
    for n in kept:
        c = written[order[n]]["args"]["counters"]
        assert c["source"] == "ncu" and c["l2_bytes"] == 32 * (100 * (n + 1) + 7)
    assert sum("counters" in e.get("args", {}) for e in written) == len(kept)


def test_counters_from_cupti_ranges(sample, tmp_path):
    """Range-profiler events (on each GPU's process) named after the kernels, in launch order:
    each pairs with its kernel, verified by name; a swapped pair is caught; a kernel left
    without a range is reported."""
    from tests.analyses.counters.test_counters import _launch_order

    doc = json.loads(sample.raw)
    events = doc["traceEvents"]
    order = _launch_order(events)
    names = [events[i]["name"] for i in order[:-1]]  # the last launch gets no range
    names[3], names[4] = names[4], names[3]
    for n, (i, name) in enumerate(zip(order, names)):
        events.append({"ph": "X", "cat": "cuda_profiler_range", "name": name, "pid": events[i]["pid"], "tid": 0,
                       "ts": 1000 + 10 * n, "dur": 10,
                       "args": {"smsp__sass_thread_inst_executed_op_ffma_pred_on.sum": 1000 * (n + 1)}})
    path = tmp_path / "ranges.json"
    path.write_text(json.dumps(doc))
    r = run_cli("counters", str(path), "--format", "json")
    assert r.returncode == 0, r.stderr
    out = orjson.loads(r.stdout)
    flops = {k["event"]: k["flops"] for k in out["kernels"]}
    assert flops == {i: 2000 * (n + 1) for n, i in enumerate(order[:-1])}
    status = {k["event"]: k["status"] for k in out["kernels"]}
    assert {i for i, s in status.items() if s != "verified"} == {order[3], order[4]}
    assert Counter(status.values()) == {"verified": len(order) - 3, "name mismatch": 2}
    assert Counter(p["problem"] for p in out["problems"]) == {"name mismatch": 2, "launch without range": 1}


# -- check, repair, trim -----------------------------------------------------------------------------


def test_check_and_annotate_all(sample, truth, tmp_path):
    r = run_cli("check", str(sample.path), "--format", "json")
    report = orjson.loads(r.stdout)
    zero = sum(op.dur == 0 for _, op in truth.gpu)
    assert r.returncode == 0 and report["stats"] == {} and report["warnings"] == {"gpu_zero_or_negative_duration": zero}
    out, err = _annotate(sample, tmp_path, "--all")
    for analysis in ("queue length", "memcpy bandwidth", "launch delay", "classify", "counters", "patterns"):
        assert f"{analysis}" in err
    r = run_cli("check", str(tmp_path / "out.json"), "--format", "json")
    assert r.returncode == 0 and orjson.loads(r.stdout)["warnings"] == report["warnings"]


def test_repair_rebases_every_ts_exactly(sample, ms, tmp_path):
    out = tmp_path / "rebased.json"
    r = run_cli("repair", str(sample.path), "-o", str(out), "--rebase-time")
    assert r.returncode == 0, r.stderr
    shift_us = ms.START_NS // 1000  # the profiler span and the metadata start the trace
    before, after = _doc(sample.raw), _doc(out.read_bytes())
    assert after.pop("baseTimeNanoseconds") == before.pop("baseTimeNanoseconds") + shift_us * 1000
    events_in, events_out = before.pop("traceEvents"), after.pop("traceEvents")
    assert after == before and len(events_out) == len(events_in)
    for a, b in zip(events_in, events_out):
        if "ts" in a:
            assert b.pop("ts") == a.pop("ts") - shift_us
        assert a == b
    r = run_cli("repair", str(sample.path), "-o", str(tmp_path / "same.json"))
    assert r.returncode == 0 and (tmp_path / "same.json").read_bytes() == sample.raw  # nothing to repair


def test_trim_steps_and_window(sample, truth, tmp_path):
    from tests.rewrite.test_repair_trim import _assert_kept_exactly, _events, _expected_kept

    steps = {e.name: e for _, e in truth.ops if e.name.startswith("ProfilerStep#")}
    first, last = steps["ProfilerStep#11"], steps["ProfilerStep#12"]
    launched = [op for _, op in truth.gpu if first.ts <= truth.launch_of(op).ts < last.ts + last.dur]
    end = max(last.ts + last.dur, *(op.ts + op.dur for op in launched))
    out = tmp_path / "steps.json"
    result = traceforge.trim(str(sample.path), str(out), steps="11-12")
    assert (result.start_ns, result.end_ns) == (first.ts, end)
    _, original = _events(sample.raw)
    kept = _expected_kept(original, Decimal(first.ts) / 1000, Decimal(end) / 1000)
    _assert_kept_exactly(sample.raw, out.read_bytes(), kept)
    assert 300 < len(kept) < len(original) // 2

    r = run_cli("trim", str(sample.path), "-o", str(out), "--window", "+1ms:+2.5ms")
    assert r.returncode == 0, r.stderr
    start = min(e["ts"] for e in original if "ts" in e)
    _assert_kept_exactly(sample.raw, out.read_bytes(), _expected_kept(original, start + 1000, start + 2500))
    r = run_cli("trim", str(sample.path), "-o", str(out), "--steps", "20")
    assert r.returncode == 1 and b"the trace has steps 10-14" in r.stderr


# -- the tables: stats, export, diff ------------------------------------------------------------------


def test_stats(sample, truth):
    st = traceforge.stats(str(sample.path))
    span_start = min(e.ts for e in truth.events if hasattr(e, "dur"))
    span_end = max(e.ts + e.dur for e in truth.events if hasattr(e, "dur"))
    assert st.summary["span_ns"].item() == span_end - span_start
    by_stream = defaultdict(list)
    for _, op in truth.gpu:
        by_stream[(op.pid, op.tid)].append(op)
    for row in st.streams.itertuples():
        ops = by_stream.pop((row.device, row.stream))
        assert row.ops == len(ops)
        assert row.busy_ns == _union((o.ts, o.ts + o.dur) for o in ops if o.dur > 0)
    assert not by_stream
    kernels = Counter(op.name for _, op in truth.gpu if op.cat == "kernel")
    assert dict(zip(st.top_kernels["name"], st.top_kernels["count"])) == kernels
    calls = Counter(call.name for _, call in truth.calls.values())
    assert dict(zip(st.launch_apis["api"], st.launch_apis["calls"])) == calls


def test_export_csv_is_the_record_exactly(sample, truth, tmp_path):
    r = run_cli("export", str(sample.path), "--csv", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert {p.stem for p in tmp_path.glob("*.csv")} == {e.cat for e in truth.events if hasattr(e, "dur")} - {"Trace"}
    rows = list(csv.DictReader((tmp_path / "kernel.csv").open()))
    kernels = [(i, op) for i, op in truth.gpu if op.cat == "kernel"]
    assert len(rows) == len(kernels)
    for row, (ordinal, op) in zip(sorted(rows, key=lambda r: int(r["ordinal"])), kernels):
        call = truth.launch_of(op)
        assert (int(row["ordinal"]), int(row["start"]), int(row["dur"]), int(row["end"]), row["name"]) == \
            (ordinal, op.ts, op.dur, op.ts + op.dur, op.name)
        assert (int(row["device"]), int(row["stream"]), int(row["correlation"])) == (op.pid, op.tid, call.args["correlation"])
        assert [int(row[f"{a}_{x}"]) for a in ("grid", "block") for x in "xyz"] == op.args["grid"] + op.args["block"]
        assert (row["launch"], row["cpu_op"]) == (call.name, truth.op_named(call.args["External id"]))
    ops = list(csv.DictReader((tmp_path / "cpu_op.csv").open()))
    expected = [(i, e.ts, e.dur, e.name) for i, e in truth.ops if e.cat == "cpu_op"]
    assert [(int(o["ordinal"]), int(o["start"]), int(o["dur"]), o["name"]) for o in ops] == expected


def test_diff_finds_the_one_kernel_made_slower(sample, ms, tmp_path):
    """The same steps with every layer norm twice as long: that kernel, and only it, changes,
    by exactly its total time."""
    rec = copy.deepcopy(sample.rec)
    slower = [e for e in rec.gpu_side if getattr(e, "name", None) == ms.LAYER_NORM.name]
    before_ns = sum(e.dur for e in slower)
    for e in slower:
        e.dur *= 2
    after = tmp_path / "after.json"
    after.write_text(ms.Writer(False).document(rec))
    r = run_cli("diff", str(sample.path), str(after), "--format", "json")
    assert r.returncode == 0, r.stderr
    doc = orjson.loads(r.stdout)
    top, *rest = doc["ops"]
    assert (top["name"], top["total_diff_ns"], top["count_diff"]) == (ms.LAYER_NORM.name, before_ns, 0)
    assert all(o["total_diff_ns"] == 0 and o["count_diff"] == 0 for o in rest)
    changed = [c for c in doc["categories"] if c["total_diff_ns"]]
    assert [(c["category"], c["total_diff_ns"]) for c in changed] == [("norm", before_ns)]
