"""Call stacks: the nesting walk, and those from a trace's stack CPU ops only (``stacks.stack_ops``)
equal those from all of them."""

from __future__ import annotations

import random
from types import SimpleNamespace

import numpy as np
import orjson
import pytest

import traceforge
from tests.conftest import SAMPLE, TRACES
from traceforge.analyses.patterns.by_op import find_patterns
from traceforge.analyses.structure import export_tables
from traceforge.analyses.structure.stacks import build_stacks, nest_calls
from traceforge.columns import windows
from traceforge.columns.scan import TraceColumns, scan
from traceforge.columns.table import Table
from traceforge.plan.reads import export_columns
from traceforge.plan.reads import operator_columns as scan_for_operator
from traceforge.plan.reads import stack_columns as scan_for_stacks


def _ancestors(cols: TraceColumns, rows: np.ndarray, first_op: np.ndarray) -> dict[int, tuple[int, ...]]:
    """Per item ordinal: the ordinals of its enclosing CPU ops, innermost first."""
    parent, ordinal = build_stacks(cols).cpu_parent, cols.cpu_ops.ordinal
    out = {}
    for item, op in zip(rows.tolist(), first_op.tolist()):
        chain = []
        while op >= 0:
            chain.append(int(ordinal[op]))
            op = int(parent[op])
        out[item] = tuple(chain)
    return out


def _launch_ancestors(cols: TraceColumns) -> dict[int, tuple[int, ...]]:
    return _ancestors(cols, cols.launches.ordinal, build_stacks(cols).launch_op)


def _marked_ancestors(cols: TraceColumns, name: str) -> dict[int, tuple[int, ...]]:
    rows = np.flatnonzero(np.array(cols.names, dtype=object)[cols.cpu_ops.name] == name)
    return _ancestors(cols, cols.cpu_ops.ordinal[rows], build_stacks(cols).cpu_parent[rows])


def _tangled_trace(path, seed: int) -> None:
    """CPU ops on two threads that nest, overlap partly, tie and last 0 µs, with launch calls
    among them: the cases where a stack walk depends on which ops it sees."""
    rng = random.Random(seed)
    events, corr = [], 0
    for tid in (1, 2):
        for _ in range(300):
            ts, dur = rng.randrange(0, 400), rng.choice([0, 0, 1, 2, 3, 5, 8, 20, 60, 150])
            if rng.random() < 0.3:  # a launch call; a third of them launch nothing (an event query)
                corr += 1
                launches = rng.random() < 0.67
                events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel" if launches else
                               "cudaEventQuery", "pid": 1, "tid": tid, "ts": ts, "dur": rng.choice([0, 1, 2, 7]),
                               "args": {"correlation": corr}})
                if launches:
                    events.append({"ph": "X", "cat": "kernel", "name": f"k{corr % 7}", "pid": 0, "tid": 7,
                                   "ts": 1000 + corr, "dur": 1,
                                   "args": {"correlation": corr, "device": 0, "stream": 7}})
            else:
                events.append({"ph": "X", "cat": "cpu_op", "name": rng.choice(["a", "b", "mark"]), "pid": 1,
                               "tid": tid, "ts": ts, "dur": dur})
    path.write_bytes(orjson.dumps({"traceEvents": events}))


@pytest.mark.parametrize("seed", range(12))
def test_stack_ops_keep_every_ancestor_of_tangled_ops(tmp_path, seed):
    path = tmp_path / "tangled.json"
    _tangled_trace(path, seed)
    full = scan(str(path))
    kept = scan_for_stacks(str(path))
    assert len(kept.cpu_ops) < len(full.cpu_ops)  # ops holding no launch call went
    assert _launch_ancestors(kept) == _launch_ancestors(full)
    marked = scan_for_stacks(str(path), marked=lambda names: np.array([n == "mark" for n in names]))
    assert _marked_ancestors(marked, "mark") == _marked_ancestors(full, "mark")
    assert _launch_ancestors(marked) == _launch_ancestors(full)
    for_operator = scan_for_operator(str(path), "mark", None)
    assert len(for_operator.launches) < len(full.launches)  # event queries went
    for nested in (False, True):
        want = find_patterns(full, op="mark", nested=nested, min_len=1, top_k=100)
        got = find_patterns(for_operator, op="mark", nested=nested, min_len=1, top_k=100)
        assert (got.note, got.table.to_json(), got.members.tolist()) == (want.note, want.table.to_json(),
                                                                         want.members.tolist())


def _exported_holders(path) -> dict[int, str]:
    """Per exported event's ordinal: the op holding it as export writes it (``parent``, ``cpu_op``)."""
    out = {}
    for chunk in export_tables.tables_by_kind(export_columns(str(path))):
        df = chunk.frame()
        if len(df):
            assert (np.diff(df["start"].to_numpy()) >= 0).all()  # each table in start order
        holder = df["parent"] if "parent" in df else df.get("cpu_op")
        if holder is not None:
            # no holder: a missing value (None, a Parquet null), "" as build_stacks has it
            out.update(zip(df["ordinal"].tolist(), ["" if v is None or v != v else v for v in holder.tolist()]))
    return out


def _held_by(path) -> dict[int, str]:
    """``_exported_holders`` from ``build_stacks`` over every CPU op in memory."""
    cols = scan(str(path))
    stacks = build_stacks(cols)
    names = np.asarray([*cols.names, ""], dtype=object)

    def op_names(rows: np.ndarray) -> list[str]:
        ids = np.full(len(rows), -1)
        ids[rows >= 0] = cols.cpu_ops.name[rows[rows >= 0]]
        return names[ids].tolist()
    out = dict(zip(cols.cpu_ops.ordinal.tolist(), op_names(stacks.cpu_parent)))
    out.update(zip(cols.launches.ordinal.tolist(), op_names(stacks.launch_op)))
    out.update(zip(cols.gpu.ordinal.tolist(), op_names(stacks.gpu_op())))
    return out


def _counting_windows(monkeypatch, window_rows: int, block: int) -> list[int]:
    """Make export nest ``window_rows`` at a time over ``block``-row blocks; the list gets a
    1 per window."""
    seen: list[int] = []

    def counted(*args, **kwargs):
        for window in windows.windows_by(*args, **kwargs):
            seen.append(1)
            yield window
    monkeypatch.setattr(export_tables, "WINDOW_ROWS", window_rows)
    monkeypatch.setattr(export_tables, "windows_by", counted)
    monkeypatch.setattr(windows, "BLOCK", block)
    return seen


@pytest.mark.parametrize("seed", range(6))
def test_export_nests_in_windows_as_build_stacks_does(tmp_path, monkeypatch, seed):
    """Each thread's open ops carry from one window of start times to the next: tangled ops
    (ties, zero durations, partial overlaps) get the same parents as all nested at once."""
    path = tmp_path / "tangled.json"
    _tangled_trace(path, seed)
    want = _held_by(path)
    assert _exported_holders(path) == want
    seen = _counting_windows(monkeypatch, 37, 100)
    assert _exported_holders(path) == want
    assert len(seen) > 10


@pytest.mark.parametrize("name, rows, block", [(SAMPLE, 60, 30), ("df_index", 2000, 1000), ("nccl", 2000, 1000)])
def test_export_nests_real_traces_in_windows(name, rows, block, monkeypatch, trace_path):
    seen = _counting_windows(monkeypatch, rows, block)
    assert _exported_holders(trace_path(name)) == _held_by(trace_path(name))
    assert len(seen) > 5


@pytest.mark.parametrize("name", [SAMPLE, "negative_queue", "df_index", "nccl", "trace_diff"])
def test_stack_ops_on_real_traces(name, columns, trace_path):
    full = columns(name)
    kept = scan_for_stacks(str(trace_path(name)))
    assert len(kept.cpu_ops) < (0.9 if name == SAMPLE else 0.65) * len(full.cpu_ops)  # the sample's ops mostly launch
    assert _launch_ancestors(kept) == _launch_ancestors(full)


def test_annotate_reads_stacks_beside_other_launch_calls(tmp_path):
    """Queue length and operator patterns in one run (the stacks' launch calls read back
    beside the stream launches queue length reads): each appends exactly what it does alone."""
    from traceforge.io.read.reader import TraceReader

    path, options = str(TRACES["negative_queue"]), {"op_regex": "aten::(mm|addmm|linear)"}

    def appended(analyses: list[str]) -> list[dict]:
        out = str(tmp_path / f"{'-'.join(analyses)}.json")
        traceforge.annotate(path, out, analyses=analyses, options=options)
        return [e for b in TraceReader(out).batches() for e in b.events][full_events:]

    full_events = sum(len(b.events) for b in TraceReader(path).batches())
    queue, patterns = appended(["queue_length"]), appended(["patterns"])
    assert len(queue) > 10_000 and patterns
    assert appended(["queue_length", "patterns"]) == queue + patterns


def test_annotate_keeps_the_launch_calls_other_analyses_read(tmp_path):
    """CUPTI range-profiler counters pair with launch calls that no GPU op joins (the trace
    has no kernels): beside operator patterns, which draw nothing there, the output is the
    counters' own, byte for byte."""
    path = str(TRACES["cupti"])
    both, alone = tmp_path / "both.json", tmp_path / "alone.json"
    result = traceforge.annotate(path, str(both), analyses=["counters", "patterns"], options={"op": "aten::conv2d"})
    traceforge.annotate(path, str(alone), analyses=["counters"])
    assert "args on 77 launch events" in result.summary[0]
    assert both.read_bytes() == alone.read_bytes()


def _walked_parents(ts: list[int], dur: list[int], is_call: list[bool], track: list[int]) -> list[int]:
    """The stack walk in plain Python over items sorted by (start, longer first, ops before
    calls, file order) per thread: each item's innermost open op that contains it, or -1."""
    parent = [-1] * len(ts)
    for thread in set(track):
        items = sorted((i for i in range(len(ts)) if track[i] == thread),
                       key=lambda i: (ts[i], -max(dur[i], 0), is_call[i], i))
        stack: list[tuple[int, int]] = []  # (end, item)
        for i in items:
            start, stop = ts[i], ts[i] + max(dur[i], 0)
            while stack and not (start < stack[-1][0] and stop <= stack[-1][0]):
                stack.pop()
            if stack:
                parent[i] = stack[-1][1]
            if not is_call[i] and stop > start:
                stack.append((stop, i))
    return parent


@pytest.mark.parametrize("seed", range(6))
def test_nest_calls_matches_the_walk_over_sorted_items(seed):
    """Ops and calls in any file order (runs in order, shuffled, equal starts and ends, zero and
    negative durations, int32 and int64 durations) nest as the walk in Python does."""
    rng = np.random.default_rng(seed)
    n_ops, n_calls = int(rng.integers(0, 400)), int(rng.integers(0, 300))
    n = n_ops + n_calls
    ts = rng.integers(0, 60, n).astype(np.int64) * 10 + (10**15 if seed % 2 else 0)
    dur = rng.choice([-5, 0, 5, 10, 20, 40, 100, 300], n).astype(np.int64)
    if seed % 3 == 0:  # nearly in order, as in real traces
        order = np.argsort(ts, kind="stable")
        ts, dur = ts[order], dur[order]
    track = rng.integers(0, 3, n).astype(np.int32)
    dur_type = np.int64 if seed % 2 else np.int32
    cpu = Table({"ts": ts[:n_ops], "dur": dur[:n_ops].astype(dur_type), "track": track[:n_ops]})
    launches = Table({"ts": ts[n_ops:], "dur": dur[n_ops:].astype(np.int64), "track": track[n_ops:]})
    cpu_parent, launch_op = nest_calls(SimpleNamespace(cpu_ops=cpu, launches=launches))
    want = _walked_parents(ts.tolist(), dur.tolist(), [i >= n_ops for i in range(n)], track.tolist())
    assert cpu_parent.tolist() + launch_op.tolist() == want
    assert (np.asarray(want) < n_ops).all()  # a call holds nothing


def test_nest_thread_refuses_rows_out_of_range_and_wrong_sizes():
    from traceforge._native._stacks import nest_thread

    ts, dur = np.zeros(3, np.int64), np.ones(3, np.int32)
    parent = np.full(6, -1, np.int32)
    with pytest.raises(IndexError):
        nest_thread(np.array([0, 3], np.int32), np.zeros(0, np.int32), ts, dur, 4, ts, dur, 4, parent)
    with pytest.raises(IndexError):
        nest_thread(np.zeros(0, np.int32), np.array([-1], np.int32), ts, dur, 4, ts, dur, 4, parent)
    with pytest.raises(ValueError):
        nest_thread(np.zeros(0, np.int32), np.zeros(0, np.int32), ts, dur, 4, ts, dur, 4, parent[:5])
    nest_thread(np.array([0, 1], np.int32), np.array([2], np.int32), ts, np.array([5, 1, 1], np.int32), 4, ts, dur, 4,
                parent)
    assert parent.tolist() == [-1, 0, -1, -1, -1, 1]  # op 1 in op 0 (longer, same start); call 2 in op 1
