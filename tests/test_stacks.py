"""Call stacks from a trace's stack CPU ops only (``stacks.stack_ops``) equal those from all of them."""

from __future__ import annotations

import random

import numpy as np
import orjson
import pytest

import traceforge

from traceforge.analyses.patterns import find_patterns, scan_for_operator
from traceforge.analyses.stacks import build_stacks, scan_for_stacks
from traceforge.scan import TraceColumns, scan

from .conftest import TRACES


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


@pytest.mark.parametrize("name", ["negative_queue", "df_index", "nccl", "trace_diff"])
def test_stack_ops_on_real_traces(name, columns):
    full = columns(name)
    kept = scan_for_stacks(str(TRACES[name]))
    assert len(kept.cpu_ops) < 0.65 * len(full.cpu_ops)
    assert _launch_ancestors(kept) == _launch_ancestors(full)


def test_annotate_reads_stacks_beside_other_launch_calls(tmp_path):
    """Queue length and operator patterns in one run (the stacks' launch calls read back
    beside the stream launches queue length reads): each appends exactly what it does alone."""
    from traceforge.io.reader import TraceReader

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
