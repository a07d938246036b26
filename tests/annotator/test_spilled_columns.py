"""What keeps ``annotate``'s memory bounded on big traces (issue 43 item 3), each checked to
give what the in-memory path gives: the ``[memory]`` instants wait on disk and are read back a
device at a time (chunks scaled down so that every read crosses chunk boundaries), slice tracks
wait on disk with the thread-id allocator they share, idle gaps reads back only the launch
calls GPU ops join, and the launch columns are emptied in the caller's hands once no analysis
reads them. Brute-force truths come from the parsed events."""

from __future__ import annotations

import gzip
import json
import tempfile
from decimal import Decimal

import numpy as np
import pytest

from tests.analyses.memory.test_timeline import HAND, _levels, _memory_truth, _write
from traceforge.analyses.gpu_time.idle_intervals import idle_gaps
from traceforge.analyses.memory import timeline as mt
from traceforge.annotator import registry, schedule
from traceforge.columns.scan import scan
from traceforge.emit.tracks import Injections, SliceTrack, TidAllocator
from traceforge.io.read.reader import TraceReader
from traceforge.io.write.jsontext import Texts
from traceforge.plan.scan_plan import ScanPlan

GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
CALL_CATS = {"cuda_runtime", "cuda_driver"}


def _plan(*names: str) -> tuple[ScanPlan, list, dict]:
    chosen = [registry.ANALYSES[n] for n in names]
    options = registry.with_defaults(chosen, None)
    return ScanPlan.of(chosen, options), chosen, options


@pytest.mark.parametrize("chunk", [2, 3, 1 << 18])
def test_memory_events_wait_on_disk_and_give_the_same_levels(tmp_path, monkeypatch, chunk):
    monkeypatch.setattr(mt, "SPILL_CHUNK", chunk)
    path = str(_write(tmp_path, HAND))
    plan, _, _ = _plan("memory")
    spilled = plan.scan(path, TraceReader(path))
    assert len(spilled.memory) == 0 and spilled.spilled_memory is not None  # annotate's scan: on disk
    assert spilled.memory_events == spilled.spilled_memory.size == 8
    in_memory = scan(path, memory=True)
    assert spilled.memory_events == len(in_memory.memory)
    line = mt.memory_timeline(spilled)
    assert line.equals(mt.memory_timeline(in_memory))
    events = json.loads((tmp_path / "t.json").read_text(), parse_float=Decimal)["traceEvents"]
    whole = [e for e in events if "Total Allocated" in e.get("args", {}) or e.get("name") != "[memory]"]
    truth = {k: _levels(v) for k, v in _memory_truth(whole).items()}
    got = {}
    for row in line.itertuples():
        got.setdefault(({"cpu": 0, "cuda": 1}[row.device_type], row.device), {})[row.ts] = (row.allocated, row.reserved)
    assert got == truth
    # read back again (a loaded trace's tables each read it): the file stays open
    assert mt.memory_peaks(spilled).equals(mt.memory_peaks(in_memory))


def test_spilled_slice_tracks_share_their_thread_ids(tmp_path):
    def made(spill: bool) -> list:
        allocator = TidAllocator([(0, 7)])
        tracks = [SliceTrack(pid=0, title=f"T{i}", sort_index=i, ts=np.array([1, 2, 9]), dur=np.array([5, 1, 1]),
                             labels=["a"], label=np.zeros(3, np.int64), args=Texts.of([b"", b'{"n":1}', b""]),
                             allocator=allocator) for i in range(3)]
        injections = Injections(tracks)
        if spill:
            injections.spill(tempfile.TemporaryFile())
            assert all(type(s).__name__ == "_OnDisk" for s in injections.sources)
        return [e for _, text in injections.blocks() for e in json.loads(b"[" + text + b"]")]

    events = made(spill=True)
    assert events == made(spill=False)
    lanes = {(e["tid"], e["args"]["name"]) for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert len(lanes) == 6  # two lanes each, every one its own thread (a copied allocator would repeat them)
    assert len({tid for tid, _ in lanes}) == 6


def test_idle_gaps_reads_back_only_the_calls_gpu_ops_join(sample):
    path = str(sample.path)
    plan, chosen, options = _plan("idle_gaps")
    cols = plan.scan(path, TraceReader(path))
    assert len(cols.launches) == 0 and cols.spilled_launches is not None  # every call waits on disk
    picked = schedule.picked(cols, plan, options)
    events = json.loads(gzip.decompress(sample.path.read_bytes()))["traceEvents"]
    joined = {e["args"]["correlation"] for e in events if e.get("cat") in GPU_CATS}
    calls = [e for e in events if e.get("cat") in CALL_CATS]
    truth = sorted(int(Decimal(str(e["ts"])) * 1000) for e in calls if e["args"].get("correlation") in joined)
    assert 0 < len(truth) < len(calls)  # the sample has calls no GPU op joins (syncs, event records)
    assert sorted(picked.launches.ts.tolist()) == truth
    assert np.all(np.diff(picked.launches.ordinal) > 0)
    assert idle_gaps(picked).equals(idle_gaps(scan(path)))  # as with every launch call


def test_launch_columns_go_from_the_callers_hands(sample):
    path = str(sample.path)
    plan, chosen, options = _plan("queue_length", "idle_gaps", "classify")
    cols = plan.scan(path, TraceReader(path))
    schedule.run_analyses(cols, chosen, dict(options, side_by_side=False))
    assert len(cols.launches) == 0  # emptied in place, not only in the analyses' copy of the columns
