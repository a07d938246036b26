"""The analyses of ``annotate --all`` that work a piece of a stream at a time (issue 43 item 3,
10 GB under 500 MB): each checked, with its pieces scaled down so that every stream crosses
piece boundaries, against the whole-stream path (one piece) and a brute force over the
parsed events.

- Idle gaps (``gpu_busy.stream_pieces``): a stream's merged busy intervals and gaps, a chunk
  of the GPU op table at a time, the interval still open carried to the next chunk; streams
  whose ops are not in time order in the file are sorted whole.
- Exposed communication (``overlap.exposed_intervals``): a device's compute and communication
  unions merged the same way (``gpu_busy.merged_pieces``), its runs' kernels counted across pieces.
- Launch delay's arrows: a chunk of outliers a piece (``ARROW_CHUNK``), each piece's arrows on disk meanwhile.
- classify's utilisation shares: a chunk of the device's sample times at a time (``UTILISATION_CHUNK``).
- The memory counters: a device's levels made in place, ``SPILL_CHUNK`` events at a time.
- The args analyses add to existing events wait on disk (``Injections.spill``) until the copy.
- ``series.running_count`` (queue length, utilisation): the sorted times netted ``RUN_CHUNK`` at a time.
- ``stats``' comm overlap and temporal breakdown: a device's whole-trace unions a piece at a time.
"""

from __future__ import annotations

import numpy as np
import orjson
import pytest

from tests.analyses.gpu_time.test_comm_overlap import brute_exposed, gpu_ops, read_events
from tests.analyses.gpu_time.test_idle_intervals import brute_gaps, brute_table, parse
from tests.conftest import SAMPLE, raw_json
from traceforge.analyses.cross_trace.stats import wall_span
from traceforge.analyses.gpu_time import busy as gpu_busy
from traceforge.analyses.gpu_time.busy import busy_idle
from traceforge.analyses.gpu_time.classify import label_ops
from traceforge.analyses.gpu_time.comm_overlap import comm_overlap, exposed_comm, exposed_intervals
from traceforge.analyses.gpu_time.idle_intervals import idle_gaps, idle_intervals, long_gaps
from traceforge.analyses.gpu_time.rules import DEFAULT_RULES, load_rules
from traceforge.analyses.gpu_time.temporal import temporal_breakdown
from traceforge.analyses.hta.types import COMMUNICATION, op_types
from traceforge.analyses.memory import timeline as mt
from traceforge.annotator.plugins import classify as classify_plugin
from traceforge.annotator.plugins import launch_delay as launch_delay_plugin
from traceforge.annotator.run import annotate
from traceforge.columns.scan import scan

CHUNKS = [1, 2, 7, 1 << 18]  # 1 << 18: every stream of these traces in one piece (the whole-array path)


def _unsorted_trace(tmp_path):
    """Two streams; stream 7's ops are not in time order in the file (sorted whole), stream 8's are
    (read a chunk at a time), with overlaps, touching ops and a zero-duration op."""
    ops = [  # (stream, ts µs, dur µs, launch ts µs)
        (7, 300, 50, 160), (7, 100, 10, 50), (7, 115, 5, 60), (8, 100, 10, 40), (7, 200, 10, 150),
        (8, 110, 5, 41), (8, 130, 20, 42), (8, 140, 0, 43), (7, 310, 5, 161), (8, 200, 30, 190), (7, 400, 1, 163),
        (8, 229, 40, 191), (8, 300, 1, 250),
    ]
    events = []
    for i, (stream, ts, dur, launched) in enumerate(ops):
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                       "ts": launched, "dur": 1, "args": {"correlation": i + 1}})
        events.append({"ph": "X", "cat": "kernel", "name": f"k{i}", "pid": 0, "tid": stream, "ts": ts, "dur": dur,
                       "args": {"device": 0, "stream": stream, "correlation": i + 1}})
    path = tmp_path / "t.json"
    path.write_bytes(orjson.dumps({"traceEvents": events}))
    return path


def _gaps_by_stream(cols, chunk, min_gap_ns=0):
    return {(d, s): list(zip(start.tolist(), end.tolist(), code.tolist(), cols.gpu.name[opener].tolist()))
            for d, s, start, end, code, opener in long_gaps(cols, min_gap_ns=min_gap_ns, chunk=chunk)}


@pytest.mark.parametrize("name", [SAMPLE, "hand", "negative_queue", "trace_diff"])
def test_stream_pieces_equal_the_whole_stream_and_the_brute_force(name, trace_path, tmp_path, monkeypatch):
    path = _unsorted_trace(tmp_path) if name == "hand" else trace_path(name)
    cols = scan(str(path))
    parsed = parse(path)
    truth = {k: v for k, v in brute_gaps(parsed).items() if v}
    categories = ("host_wait", "kernel_wait", "other")
    whole = _gaps_by_stream(cols, 1 << 30)
    assert {k: [(s, e, categories[c], cols.names[n]) for s, e, c, n in v] for k, v in whole.items()} == truth
    streams = None
    for chunk in CHUNKS:
        assert _gaps_by_stream(cols, chunk) == whole, chunk
        assert _gaps_by_stream(cols, chunk, min_gap_ns=10_000) == _gaps_by_stream(cols, 1 << 30, 10_000)
        monkeypatch.setattr(gpu_busy, "GAP_CHUNK", chunk)
        got = [(g.device, g.stream, g.ops, g.starts.tolist(), g.ends.tolist(), g.category.tolist(), g.opener.tolist())
               for g in gpu_busy.stream_gaps(cols)]
        assert streams is None or got == streams, chunk
        streams = got
    if name == "hand":
        assert [s for _, s, *_ in streams] == [7, 8]
        assert not gpu_busy._ts_rise(cols.gpu.ts, cols.gpu.stream == 7, 2)  # stream 7 is sorted whole
        assert gpu_busy._ts_rise(cols.gpu.ts, cols.gpu.stream == 8, 2)


def test_idle_tables_and_track_bytes_do_not_depend_on_the_pieces(sample, tmp_path, monkeypatch):
    cols = scan(str(sample.path))
    table, gaps = idle_intervals(cols), idle_gaps(cols)
    assert table.to_dict("records") == brute_table(brute_gaps(parse(sample.path)))
    outputs = []
    for chunk in (3, 1 << 18):
        monkeypatch.setattr(gpu_busy, "GAP_CHUNK", chunk)
        assert idle_intervals(cols).equals(table) and idle_gaps(cols).equals(gaps)
        out = tmp_path / f"out{chunk}.json"
        annotate(str(sample.path), str(out), idle_gaps=True)
        outputs.append(raw_json(out))
    assert outputs[0] == outputs[1]


@pytest.mark.parametrize("name", [SAMPLE, "nccl", "negative_queue"])
def test_exposed_comm_in_pieces_equals_the_whole_and_the_brute_force(name, trace_path, monkeypatch):
    path = trace_path(name)
    cols = scan(str(path))
    whole = exposed_intervals(cols, chunk=1 << 30)
    truth = brute_exposed(gpu_ops(read_events(path)))
    assert list(zip(whole.device.tolist(), whole.ts.tolist(), whole.dur.tolist())) == truth and truth
    # each interval's run of communication (first kernel, kernels, length), by a loop over the merged kernels
    types = op_types(cols)
    for device, ts in zip(whole.device.tolist(), whole.ts.tolist()):
        kernels = sorted((t, o, r, d) for r, (t, d, o, dev, ty) in enumerate(zip(
            cols.gpu.ts.tolist(), cols.gpu.dur.tolist(), cols.gpu.ordinal.tolist(), cols.gpu.device.tolist(),
            types.tolist())) if dev == device and ty == COMMUNICATION and d > 0)
        runs = []
        for t, _, r, d in kernels:
            if runs and t <= runs[-1][1]:
                runs[-1][1], runs[-1][3] = max(runs[-1][1], t + d), runs[-1][3] + 1
            else:
                runs.append([t, t + d, r, 1])
        run = next(x for x in runs if x[0] <= ts < x[1])
        i = whole.ts.tolist().index(ts)
        assert (int(whole.first_kernel[i]), int(whole.nccl_kernels[i]), int(whole.comm_ns[i])) == (
            run[2], run[3], run[1] - run[0])
        if i > 20:
            break
    table = exposed_comm(cols)
    for chunk in CHUNKS:
        got = exposed_intervals(cols, chunk=chunk)
        for field in ("device", "ts", "dur", "first_kernel", "nccl_kernels", "comm_ns"):
            assert np.array_equal(getattr(got, field), getattr(whole, field)), (chunk, field)
    monkeypatch.setattr(gpu_busy, "GAP_CHUNK", 3)
    assert exposed_comm(cols).equals(table)


@pytest.mark.parametrize("name", [SAMPLE, "negative_queue"])
def test_launch_delay_arrows_placed_in_chunks_give_the_same_bytes(name, trace_path, tmp_path, monkeypatch):
    """Launch delay's arrows are made ``ARROW_CHUNK`` outliers a piece (ids running on); negative_queue
    has outliers that get no arrow (5), so the ids after them must not move either."""
    path = trace_path(name)
    outputs = []
    for chunk in (1, 3, 1 << 19):
        monkeypatch.setattr(launch_delay_plugin, "ARROW_CHUNK", chunk)
        out = tmp_path / f"out{chunk}.json"
        summary = annotate(str(path), str(out), launch_delay=True).summary
        outputs.append(raw_json(out))
    assert outputs[0] == outputs[1] == outputs[2]
    assert b'"cat":"launch_delay"' in outputs[0] and "without one" in summary[0]


@pytest.mark.parametrize("name", [SAMPLE, "nccl"])
def test_utilisation_in_chunks_of_sample_times_gives_the_same_tracks(name, trace_path, monkeypatch):
    """classify's utilisation shares, ``UTILISATION_CHUNK`` sample times at a time (the step kept
    across chunks), against the whole device at once and a brute force over the ops."""
    cols = scan(str(trace_path(name)))
    labels = label_ops(cols, load_rules(DEFAULT_RULES))

    def tracks():
        return [(d, c, ts.tolist(), p.tolist()) for d, c, ts, p in classify_plugin._utilisation_steps(cols, labels)]

    whole = tracks()
    for chunk in (1, 2, 7):
        monkeypatch.setattr(classify_plugin, "UTILISATION_CHUNK", chunk)
        assert tracks() == whole, chunk
    # brute force: at each point, the share of the device's running ops of that category
    gpu = cols.gpu
    ops = list(zip(gpu.device.tolist(), gpu.ts.tolist(), gpu.dur.tolist(), labels.category.tolist()))
    for d, c, ts, permille in whole[:3]:
        for t, p in list(zip(ts, permille))[:50]:
            running = [cat for dev, s, dur, cat in ops if dev == d and s <= t < s + max(dur, 0)]
            want = (2 * 1000 * running.count(c) + len(running)) // max(2 * len(running), 1)
            assert p == want, (d, c, t)


@pytest.mark.parametrize("chunk", [1, 2, 1 << 18])
def test_memory_levels_made_in_place_equal_the_copies(chunk, monkeypatch):
    """``DeviceMemory.levels(consume=True)`` moves the kept points to the front of the device's
    arrays ``SPILL_CHUNK`` at a time; it must give what the copying ``levels()`` gives."""
    monkeypatch.setattr(mt, "SPILL_CHUNK", chunk)
    ts = np.array([5, 5, 6, 7, 7, 7, 9, 12, 12], np.int64)
    alloc, reserved = np.arange(9, dtype=np.int64) * 10, np.arange(9, dtype=np.int64) * 100
    d = mt.DeviceMemory(1, 0, 0, ts.copy(), alloc.copy(), reserved.copy())
    want = d.levels()
    assert [w.tolist() for w in want] == [[5, 6, 7, 9, 12], [10, 20, 50, 60, 80], [100, 200, 500, 600, 800]]
    got = d.levels(consume=True)
    assert all(np.array_equal(g, w) for g, w in zip(got, want))
    distinct = mt.DeviceMemory(1, 0, 0, np.arange(4, dtype=np.int64), alloc[:4].copy(), reserved[:4].copy())
    assert distinct.levels(consume=True)[0] is distinct.ts  # nothing to drop: the arrays as they are


def test_args_for_existing_events_wait_on_disk_until_the_copy(tmp_path):
    """``Injections.spill`` moves ``ArgColumns`` to the file too; ``args()`` reads them back whole."""
    import tempfile
    from functools import partial

    from traceforge.emit.tracks import Injections
    from traceforge.io.write.jsontext import ArgColumns, FixedPoint

    labels = np.asarray(["gemm", "nccl"], dtype=object)
    columns = ArgColumns(np.array([3, 5, 9], np.int64), {"category": np.array([1, 0, 1], np.int8),
                                                        "delay_us": np.array([1500, -2, 7], np.int32)},
                         {"category": partial(np.take, labels), "delay_us": FixedPoint(3)})
    want = list(columns.rows(0, 10))
    injections = Injections(arg_columns=[columns, ArgColumns(np.zeros(0, np.int64), {})])
    with tempfile.TemporaryFile() as file:
        injections.spill(file)
        assert not isinstance(injections.arg_columns[0], ArgColumns) and len(injections.arg_columns[0]) == 3
        assert injections.patches_args()
        back = injections.args()
        assert isinstance(back[0], ArgColumns) and list(back[0].rows(0, 10)) == want
        assert injections.args()[0] is back[0]  # read once
    assert [o for o, _ in want] == [3, 5, 9]


@pytest.mark.parametrize("rising", [True, False])
def test_merged_by_ordinal_places_rows_by_search_as_the_sort_does(rising):
    from traceforge.columns.table import Table, merged_by_ordinal

    rng = np.random.default_rng(0)
    ordinals = rng.permutation(200)[:120].astype(np.int32)
    a_ord, b_ord = np.sort(ordinals[:70]), np.sort(ordinals[70:])
    if not rising:
        b_ord = b_ord[::-1].copy()

    def table(o):
        return Table({"ordinal": o.copy(), "ts": o.astype(np.int64) * 1000 + 7, "dur": (o % 5).astype(np.int32)})

    got = merged_by_ordinal(table(a_ord), table(b_ord))
    both = np.concatenate([a_ord, b_ord])
    want = table(both).take(np.argsort(both, kind="stable"))
    assert all(np.array_equal(got.cols[f], want.cols[f]) and got.cols[f].dtype == want.cols[f].dtype for f in want.cols)
    assert merged_by_ordinal(table(a_ord[:0]), table(b_ord)).ordinal.tolist() == sorted(b_ord.tolist())


@pytest.mark.parametrize("chunk", [1, 2, 3, 1 << 20])
def test_running_count_in_chunks_equals_net_steps_and_a_loop(chunk, monkeypatch):
    """``series.running_count`` nets the sorted times ``RUN_CHUNK`` at a time (the total carried, a
    ts's last point found across chunk ends); against ``net_steps`` and a plain loop."""
    from traceforge.analyses.structure import series

    monkeypatch.setattr(series, "RUN_CHUNK", chunk)
    rng = np.random.default_rng(1)
    ups = rng.integers(0, 40, 60).astype(np.int64) + 10**15
    downs = ups[:45] + rng.integers(0, 5, 45)
    times = np.concatenate([ups, downs])
    ts, value = series.running_count(times.copy(), len(ups))
    _, want_ts, want_value = series.net_steps([], times, np.repeat(np.array([1, -1], np.int32), [60, 45]))
    assert ts.tolist() == want_ts.tolist() and value.tolist() == want_value.tolist()
    loop = {}
    for t in sorted(set(times.tolist())):
        loop[t] = int(np.sum(ups <= t)) - int(np.sum(downs <= t))
    assert dict(zip(ts.tolist(), value.tolist())) == loop and value.dtype == np.int32


@pytest.mark.parametrize("name", [SAMPLE, "nccl", "df_index", "unsorted"])
def test_device_unions_in_pieces_equal_one_piece(name, trace_path, tmp_path, monkeypatch):
    """The whole-trace rows of ``comm_overlap`` and ``temporal_breakdown``, and ``busy_idle``'s
    devices, merge a device's intervals a piece at a time (``gpu_busy.merged_times`` /
    ``merged_pieces``, ``GAP_CHUNK`` rows): the same tables at any piece size, with HTA's times
    too (their brute force: tests/analyses/gpu_time/test_comm_overlap.py, tests/analyses/gpu_time/test_temporal.py, tests/analyses/cross_trace/test_stats.py);
    "unsorted" has a stream whose ops are not in time order."""
    cols = scan(str(_unsorted_trace(tmp_path) if name == "unsorted" else trace_path(name)))
    span = wall_span(cols)
    tables = {hta: (comm_overlap(cols, hta=hta), temporal_breakdown(cols, hta=hta)) for hta in (False, True)}
    devices = busy_idle(cols, span)[0]
    for chunk in (1, 2, 7):
        monkeypatch.setattr(gpu_busy, "GAP_CHUNK", chunk)
        for hta, (overlap, temporal) in tables.items():
            assert comm_overlap(cols, hta=hta).equals(overlap), (chunk, hta)
            assert temporal_breakdown(cols, hta=hta).equals(temporal), (chunk, hta)
        assert busy_idle(cols, span)[0].equals(devices), chunk
