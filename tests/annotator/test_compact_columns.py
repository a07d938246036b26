"""What annotate does to hold less memory must not change a number."""

from __future__ import annotations

import importlib
import mmap
import tempfile
from dataclasses import replace

import numpy as np
import orjson
import pytest

from tests.conftest import SAMPLE
from traceforge.analyses.launches.calls import (
    STREAM_LAUNCH_APIS,
    api_name,
    join_gpu_to_launch,
    stream_launch_mask,
    stream_launch_rows,
)
from traceforge.analyses.launches.queue_length import queue_length
from traceforge.annotator.registry import ANALYSES
from traceforge.columns.scan import scan
from traceforge.columns.table import SpilledColumns, _MappedColumn
from traceforge.emit.flow_anchors import LaunchWindows, flow_anchors
from traceforge.emit.tracks import CounterTrack, FlowArrows, Injections, SliceTrack, TidAllocator
from traceforge.io.read.reader import TraceReader
from traceforge.io.write.jsontext import Texts
from traceforge.plan.scan_plan import ScanPlan

scan_module = importlib.import_module("traceforge.columns.scan")


@pytest.mark.parametrize("name", [SAMPLE, "negative_queue", "trace_diff", "amd"])
def test_scanning_only_stream_launches_keeps_queue_lengths(name, trace_path):
    every = scan(str(trace_path(name)), cpu_ops=False)
    some = scan(str(trace_path(name)), cpu_ops=False, keep_launch=lambda n: api_name(n) in STREAM_LAUNCH_APIS)
    assert 0 < len(some.launches) < len(every.launches)  # syncs, event records, ... are not kept
    assert queue_length(some).equals(queue_length(every))


class _MapWithoutRemap(mmap.mmap):
    """A map as on a system without ``mremap`` (macOS): it cannot be resized."""

    def resize(self, newsize):
        raise SystemError("mmap: resizing not available--no mremap()")


@pytest.mark.parametrize("remap", [True, False], ids=["remapped", "copied"])
def test_mapped_column_grows_without_losing_values(remap, monkeypatch):
    if not remap:
        monkeypatch.setattr(mmap, "mmap", _MapWithoutRemap)
    column = _MappedColumn(np.dtype(np.int32))
    expected = []
    for n in (1, 70_000, 3, 200_000, 0, 65_536):  # across several doublings of the map
        values = np.arange(len(expected), len(expected) + n, dtype=np.int32) * 7
        column.extend(values)
        expected.extend(values.tolist())
    assert column.array().tolist() == expected


def test_narrow_column_widens_when_a_value_does_not_fit():
    column = _MappedColumn(np.dtype(np.int32), narrow=True)
    values = [5, -7, 2**31 - 1, 2**40, -(2**45), 3]
    column.extend(np.array(values[:3], np.int64))
    assert column.array().dtype == np.int32
    column.extend(np.array(values[3:], np.int64))
    assert column.array().dtype == np.int64 and column.array().tolist() == values


def test_narrow_column_widens_between_growths():
    column = _MappedColumn(np.dtype(np.int32), narrow=True)
    parts = [np.arange(150_000, dtype=np.int64), np.array([2**40]), np.arange(300_000, dtype=np.int64) - 2**35]
    for part in parts:  # grown twice as int32, widened, grown again as int64
        column.extend(part)
    assert column.array().dtype == np.int64 and column.array().tolist() == np.concatenate(parts).tolist()


@pytest.mark.parametrize("name", [SAMPLE, "negative_queue", "df_index", "ns_resolution", "alexnet", "triton", "amd"])
def test_arrows_anchor_the_same_with_only_the_slices_near_launches(name, trace_path):
    cols = scan(str(trace_path(name)))
    windows = LaunchWindows(cols, stream_launch_mask(cols))
    spilled = scan(str(trace_path(name)), spill_cpu_ops=True)
    assert not len(spilled.cpu_ops)
    near = replace(cols, cpu_ops=spilled.spilled_cpu_ops.select(windows.near),
                   launches=cols.launches.take(np.flatnonzero(windows.near(cols.launches))))
    assert len(near.cpu_ops) < len(cols.cpu_ops)

    def anchors(c):
        gpu_rows, rows = join_gpu_to_launch(c, stream_launch_rows(c))
        assert len(rows)
        start, end = flow_anchors(c, [(c.launches, rows), (c.gpu, gpu_rows)])
        return c.launches.ordinal[rows], start, end

    # The same anchors, but where a CPU op left out (far from every launch) decides that a kept one, which
    # would make a launch call spill, spills itself: the call keeps its arrow with every op, and with those
    # near it only, gets none (never another slice). One such call on negative_queue's merged threads.
    (ordinals, start, end), (ordinals_near, start_near, end_near) = anchors(cols), anchors(near)
    assert np.array_equal(ordinals, ordinals_near) and np.array_equal(end, end_near)
    differ = start != start_near
    assert (start_near[differ] == -1).all() and differ.sum() <= (1 if name == "negative_queue" else 0)


@pytest.mark.parametrize("name", [SAMPLE, "negative_queue", "df_index", "amd"])
def test_arrows_read_back_only_the_other_calls_near_a_stream_launch(name, trace_path):
    path = str(trace_path(name))
    cols = scan(path)
    is_stream = np.array([api_name(n) in STREAM_LAUNCH_APIS for n in cols.names])[cols.launches.name]
    near = LaunchWindows(cols, stream_launch_mask(cols)).near(cols.launches)
    want = cols.launches.take(np.flatnonzero(is_stream | near))
    reads = ScanPlan.of([ANALYSES["launch_delay"]], {})
    got = reads.some_ops_only(reads.scan(path, TraceReader(path))).launches
    assert {f: v.tolist() for f, v in got.cols.items()} == {f: v.tolist() for f, v in want.cols.items()}
    assert len(got) < len(cols.launches)  # syncs, event records, ... far from a launch stay on disk
    spilled = scan(path, spill_launch=lambda n: api_name(n) not in STREAM_LAUNCH_APIS).spilled_launches
    assert spilled.size == np.count_nonzero(~is_stream) > 0


@pytest.mark.parametrize("multiplier", [scan_module._ROW_HASH, 0])  # 0: every row collides
def test_kernel_dims_ids_are_exact_across_batches_even_when_hashes_collide(multiplier, monkeypatch):
    monkeypatch.setattr(scan_module, "_ROW_HASH", multiplier)
    rng = np.random.default_rng(7)
    dims, want = scan_module._KernelDims(), {}
    for size in (3000, 1, 2500, 4000):  # later batches meet old pairs and new ones
        six = rng.integers(-2, 3, size=(size, 6))
        ids = dims.ids(six)
        for pair in sorted({tuple(row) for row in six.tolist()}):  # new pairs: ids in sorted order
            want.setdefault((pair[:3], pair[3:]), len(want))
        assert ids.tolist() == [want[(tuple(row[:3]), tuple(row[3:]))] for row in six.tolist()]
    assert dims.values == list(want)


def test_spilled_columns_read_back_exactly_at_their_widths():
    spilled = SpilledColumns("ordinal:n4 ts length:n4 flag:i1")
    ordinal = np.arange(300_000)
    ts = ordinal * 1_000_003 + 2**40
    length = ordinal % 7
    length[299_997] = 2**33  # one kept value that does not fit int32: that column comes back int64
    for lo in range(0, len(ordinal), 70_000):
        hi = lo + 70_000
        spilled.extend(ordinal[lo:hi], ts[lo:hi], length[lo:hi], (ordinal[lo:hi] % 2).astype(np.int8))
    kept = spilled.select(lambda chunk: chunk.ordinal % 3 == 0, chunk=80_000)  # read into one buffer; the last part-full
    want = ordinal % 3 == 0
    assert kept.ordinal.dtype == np.int32 and kept.ts.dtype == np.int64 and kept.flag.dtype == np.int8
    assert kept.length.dtype == np.int64 and kept.length[-1] == 2**33
    assert kept.ordinal.tolist() == ordinal[want].tolist() and kept.ts.tolist() == ts[want].tolist()
    assert kept.length.tolist() == length[want].tolist() and kept.flag.tolist() == (ordinal[want] % 2).tolist()


def test_slice_track_text_from_columns():
    """Slices written from columns: each is the JSON of its fields, on its lane's thread, with
    args only where its text is not empty; the lanes are named first; a slice after the others
    goes back to the first lane."""
    ts, dur = np.array([5, 6, 100]), np.array([10, 1, 3])
    slices = SliceTrack(pid="gpu 0", title="P", sort_index=1, ts=ts, dur=dur, labels=["x", "ä \"y\""],
                        label=np.array([1, 0, 1]), args=Texts.of([b'{"a":1}', b"", b'{"k":["z"]}']),
                        allocator=TidAllocator([("gpu 0", 1_000_000_000)]))
    events = [orjson.loads(e) for _, block in slices.blocks() for e in block.split(b",\n")]
    lane_one, lane_two = 1_000_000_001, 1_000_000_002  # the first new tid is taken by the trace
    assert [(e["tid"], e["args"]) for e in events[:4]] == [
        (lane_one, {"name": "P"}), (lane_one, {"sort_index": 1}), (lane_two, {"name": "P (lane 2)"}),
        (lane_two, {"sort_index": 2})]
    assert events[4:] == [
        {"ph": "X", "cat": "traceforge", "pid": "gpu 0", "tid": lane_one, "ts": 0.005, "dur": 0.01, "name": 'ä "y"',
         "args": {"a": 1}},
        {"ph": "X", "cat": "traceforge", "pid": "gpu 0", "tid": lane_two, "ts": 0.006, "dur": 0.001, "name": "x"},
        {"ph": "X", "cat": "traceforge", "pid": "gpu 0", "tid": lane_one, "ts": 0.1, "dur": 0.003, "name": 'ä "y"',
         "args": {"k": ["z"]}},
    ]


def test_spilled_tracks_write_the_same_events():
    ts = np.cumsum(np.arange(1, 200_001, dtype=np.int64)) + 2**50  # gaps past uint32: kept int64
    tracks = [
        CounterTrack(pid=0, name="queue length", key="stream 7", ts=ts, values=np.arange(len(ts)) % 9),
        CounterTrack(pid="gpu", name="bw", key="HtoD", ts=np.arange(5) * 3, values=np.arange(5) * 7, decimals=3),
        FlowArrows(cat="traceforge", first_id=10, tracks=[(1, 2), (0, 7)], start_track=np.zeros(3, np.int32),
                   start_ts=np.array([5, 6, 7]), end_track=np.ones(3, np.int32), end_ts=np.array([8, 9, 10]),
                   values=np.array([1, 2, 3]), label=str),
    ]

    def text(spill: bool) -> list:
        slices = SliceTrack(pid=0, title="Patterns", sort_index=3, ts=np.array([1, 4]), dur=np.array([2, 2]),
                            labels=["a", "b"], label=np.array([0, 1]), args=Texts.of([b"", b'{"n":1}']),
                            allocator=TidAllocator([(0, 7)]))
        injections = Injections([*tracks[:2], slices, tracks[2]])
        if spill:
            injections.spill(tempfile.TemporaryFile())
            assert sum(type(s).__name__ == "_OnDisk" for s in injections.sources) == 4  # slices too
        return list(injections.blocks())

    assert text(spill=True) == text(spill=False)
