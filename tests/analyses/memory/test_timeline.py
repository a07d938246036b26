"""Memory timeline (``[memory]`` instants): the scan, the tables, ``annotate --memory``; each
checked against a brute-force reading of the parsed events (exact ts via Decimal)."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from decimal import Decimal

import orjson
import pytest

from tests.conftest import TRACES, raw_json, run_cli
from traceforge.analyses.memory.timeline import memory_peaks, memory_step_peaks, memory_timeline
from traceforge.annotator.registry import reads_memory
from traceforge.columns.scan import scan
from traceforge.perfetto import check_trace

MB = Decimal(10**6)


def _ns(value) -> int:
    """Exact ns of a µs value as written (int or decimal text)."""
    return int(Decimal(str(value)) * 1000)


def _events(path) -> list[dict]:
    return json.loads(raw_json(path), parse_float=Decimal)["traceEvents"]


def _memory_truth(events: list[dict]) -> dict[tuple[int, int], list[tuple[int, int, int, int]]]:
    """Per (Device Type, Device Id): (ts ns, file position, allocated, reserved) of each event, sorted."""
    out = defaultdict(list)
    for i, e in enumerate(events):
        if e.get("name") == "[memory]" and e.get("ph") == "i":
            a = e["args"]
            out[(a["Device Type"], a["Device Id"])].append((_ns(e["ts"]), i, a["Total Allocated"], a["Total Reserved"]))
    return {k: sorted(v) for k, v in out.items()}


def _levels(points):
    """Brute force: the level from each distinct ts on is the last event's there (by file position)."""
    last = {}
    for ts, _, allocated, reserved in points:
        last[ts] = (allocated, reserved)
    return last


def _step(ph, name, ts, dur=None, pid=1, tid=1, args=None):
    e = {"ph": ph, "cat": "cpu_op" if ph == "X" else "cpu_instant_event", "name": name, "pid": pid, "tid": tid, "ts": ts}
    if dur is not None:
        e["dur"] = dur
    if args is not None:
        e["args"] = args
    return e


def _mem(ts, device_type, device, allocated, reserved, nbytes=8, pid=1, tid=1):
    return _step("i", "[memory]", ts, pid=pid, tid=tid, args={
        "Device Type": device_type, "Device Id": device, "Addr": 1, "Bytes": nbytes, "Total Allocated": allocated,
        "Total Reserved": reserved})


HAND = [
    _step("X", "ProfilerStep#1", 100, 100),
    _step("X", "ProfilerStep#2", 200, 100),
    _mem(50, 1, 0, 10, 100),
    _mem(120, 1, 0, 30, 100),
    _mem("120.5", 1, 0, 40, 200),  # fractional µs: exact ns
    _mem(120.5, 1, 0, 35, 200),  # the same ts: the later one is the level
    _mem(110, 1, 0, 20, 100),  # written after, earlier in time
    _mem(250, 1, 0, 5, 200),
    _mem(130, 0, -1, 8, 0, pid=1),
    _mem(140, 0, -1, 0, 0, pid=1),
    _step("i", "[memory]", 150, args={"Device Type": 1}),  # args missing: skipped
    {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 100, "dur": 5,
     "args": {"device": 0, "stream": 7, "correlation": 1}},
]


def _write(tmp_path, events, name="t.json"):
    path = tmp_path / name
    path.write_text(json.dumps({"traceEvents": events}).replace('"120.5"', "120.5"))
    return path


def test_scan_keeps_memory_only_when_asked(tmp_path):
    path = _write(tmp_path, HAND)
    assert len(scan(str(path)).memory) == 0
    cols = scan(str(path), memory=True)
    assert len(cols.memory) == 8
    assert sum(v for k, v in cols.skipped.items() if "[memory]" in k) == 1
    assert sorted(cols.memory.ts.tolist()) == [50000, 110000, 120000, 120500, 120500, 130000, 140000, 250000]


def test_tables_on_hand_written_events(tmp_path):
    cols = scan(str(_write(tmp_path, HAND)), memory=True)
    line = memory_timeline(cols)
    cuda = line[line.device_type == "cuda"]
    assert cuda.ts.tolist() == [50000, 110000, 120000, 120500, 250000]
    assert cuda.allocated.tolist() == [10, 20, 30, 35, 5]  # at 120.5 µs the later event wins
    assert cuda.reserved.tolist() == [100, 100, 100, 200, 200]
    peaks = memory_peaks(cols).set_index("device_type")
    assert peaks.loc["cuda", "peak_allocated"] == 40 and peaks.loc["cuda", "peak_allocated_ts"] == 120500
    assert peaks.loc["cuda", "final_allocated"] == 5 and peaks.loc["cuda", "events"] == 6
    assert peaks.loc["cpu", "device"] == -1 and peaks.loc["cpu", "peak_allocated"] == 8
    steps = memory_step_peaks(cols)
    s = steps[steps.device_type == "cuda"].set_index("step")
    # step 1 [100, 200) µs: entering level 10 (the event at 50), events 20, 30, 40, 35
    assert s.loc[1, ["events", "start_allocated", "peak_allocated", "peak_allocated_ts", "end_allocated"]].tolist() \
        == [4, 10, 40, 120500, 35]
    # step 2 [200, 300): no event before 250: the entering level 35 is its peak, at the step's start
    assert s.loc[2, ["events", "start_allocated", "peak_allocated", "peak_allocated_ts", "end_allocated"]].tolist() \
        == [1, 35, 35, 200000, 5]
    c = steps[steps.device_type == "cpu"].set_index("step")
    assert c.loc[1, "start_allocated"] == -1 and c.loc[1, "peak_allocated"] == 8


def test_stats_reads_memory_only_for_its_tables(tmp_path):
    assert not reads_memory(None) and not reads_memory(["summary", "gpu_annotations"])
    assert reads_memory(["memory"]) and reads_memory(["memory_steps"])
    path = _write(tmp_path, HAND)
    r = run_cli("stats", str(path), "--table", "memory", "--format", "json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)["memory"]
    assert [(x["device_type"], x["peak_allocated"], x["final_reserved"]) for x in rows] == [("cpu", 8, 0),
                                                                                           ("cuda", 40, 200)]
    text = run_cli("stats", str(path), "--table", "memory", "--table", "memory_steps")
    assert text.returncode == 0 and b"Memory per profiler step" in text.stdout


def test_annotate_memory_without_memory_events_adds_nothing(tmp_path, sample):
    out = tmp_path / "out.json.gz"
    r = run_cli("annotate", str(sample.path), "--memory", "-o", str(out))
    assert r.returncode == 0 and b"no [memory] events" in r.stderr + r.stdout
    assert gzip.decompress(out.read_bytes()) == raw_json(sample.path)


@pytest.mark.integration
def test_memory_tracks_reproduce_every_event_on_df_index(tmp_path):
    """Every [memory] event's Total Allocated and Total Reserved is on its device's track at its
    exact ts (the last event's where several share a ts); the peak is the events' maximum; the
    output loses nothing more in Perfetto than the input does."""
    src = TRACES["df_index"]
    events = _events(src)
    truth = _memory_truth(events)
    assert sum(map(len, truth.values())) == 28_010
    out = tmp_path / "mem.json.gz"
    r = run_cli("annotate", str(src), "--memory", "-o", str(out))
    assert r.returncode == 0, r.stderr
    written = _events(out)
    assert written[:len(events)] == events  # the input's events come out unchanged
    tracks = defaultdict(dict)
    for e in written[len(events):]:
        assert e["ph"] == "C" and e["cat"] == "traceforge"
        (key, value), = e["args"].items()
        assert key == "MB"
        tracks[(e["pid"], e["name"])][_ns(e["ts"])] = Decimal(str(value)) * MB
    gpu_pid = next(e["pid"] for e in events if e.get("cat") == "kernel" and e["args"].get("device") == 1)
    host_pid = next(e["pid"] for e in events if e.get("name") == "[memory]" and e["args"]["Device Type"] == 0)
    pids = {(1, 1): gpu_pid, (0, -1): host_pid}
    assert set(tracks) == {(p, n) for p in pids.values() for n in ("Memory allocated", "Memory reserved")}
    for device, points in truth.items():
        levels = _levels(points)
        allocated, reserved = tracks[(pids[device], "Memory allocated")], tracks[(pids[device], "Memory reserved")]
        assert allocated == {ts: a for ts, (a, _) in levels.items()}
        assert reserved == {ts: r for ts, (_, r) in levels.items()}
        hidden = [p for p in points if levels[p[0]][0] != p[2]]  # an earlier event at a shared ts
        assert len(hidden) < len(points) // 100
    assert check_trace(str(out)).stats == check_trace(str(src)).stats
    peaks = memory_peaks(scan(str(src), memory=True)).set_index("device")
    for (_, device), points in truth.items():
        top = max(p[2] for p in points)
        assert peaks.loc[device, "peak_allocated"] == top
        assert peaks.loc[device, "peak_allocated_ts"] == min(p[0] for p in points if p[2] == top)
        assert peaks.loc[device, "peak_reserved"] == max(p[3] for p in points)
        assert peaks.loc[device, "final_allocated"] == points[-1][2]
        assert peaks.loc[device, "events"] == len(points)
    assert peaks.loc[1, "peak_allocated"] == 6_629_508_096


@pytest.mark.integration
def test_memory_step_peaks_on_df_index():
    """Per step: the peak of the level over the step's CPU range, brute force over the events."""
    src = TRACES["df_index"]
    events = _events(src)
    truth = _memory_truth(events)
    steps = {int(e["name"].split("#")[1]): (_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])) for e in events
             if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")}
    table = memory_step_peaks(scan(str(src), memory=True))
    assert len(table) == len(steps) * len(truth)
    for row in table.itertuples():
        points = truth[(1 if row.device_type == "cuda" else 0, row.device)]
        start, end = steps[row.step]
        before = [p for p in points if p[0] < start]
        inside = [p[2] for p in points if start <= p[0] < end]
        entering = before[-1][2] if before else -1
        assert (row.events, row.start_allocated) == (len(inside), entering)
        assert row.peak_allocated == max([entering, *inside])


def test_memory_args_that_are_not_ints_skip_the_event_in_both_scanners(tmp_path, backend):
    good = {"Device Type": 1, "Device Id": 0, "Bytes": 512, "Total Allocated": 1024, "Total Reserved": 2048}
    partial = {k: v for k, v in good.items() if k != "Total Reserved"}

    def event(ts: int, args: dict) -> dict:
        return {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": ts,
                "args": args}

    path = tmp_path / "m.json"
    path.write_bytes(orjson.dumps({"traceEvents": [
        event(1, good), event(2, {**good, "Bytes": 1.5}), event(3, partial),
        event(4, {**good, "Bytes": -512, "Total Allocated": 512})]}))
    memory = scan(str(path), memory=True).memory
    assert memory.ts.tolist() == [1000, 4000]
    assert memory.bytes.tolist() == [512, -512] and memory.allocated.tolist() == [1024, 512]
    assert memory.reserved.tolist() == [2048, 2048] and memory.device.tolist() == [0, 0]
    assert memory.device_type.tolist() == [1, 1]
