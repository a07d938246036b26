"""The critical path of each instance of an annotation: the longest path through its graph.

The graph (``critical_graph``) is a DAG whose nodes are points in time. A path's *length*
is the sum of its edges' weights: the time it spends running a CPU operator, launching, on
GPU ops and between GPU ops on a stream; waiting (a blocking call, a synchronisation) and
a thread's idle time between operators weigh 0. The critical path is a path of greatest
length (HTA 0.5's ``critical_path_analysis``; a path may start and end at any node).

Drawn in time, the path runs from the instance's start to the end of its last event: before
its first node and after its last, and on every 0-weight edge, the time is ``idle`` or
``sync``, so the segments tile [start, end] and the breakdown sums to the span exactly.

Longest path in time linear in the instance's events: every chain (a CPU thread, a GPU
stream) is solved at once with prefix sums (the best distance into node i of a chain is
C[i] + max over j <= i of (input[j] - C[j]), C the chain's prefix sum of link weights and
input[j] the best of the edges from other chains into j, and 0), and the chains exchange
their inputs until nothing changes (once per hop between CPU and GPU along the path).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...columns.scan import TraceColumns
from ...errors import UsageError
from ...util.lazy_pandas import pd
from ..structure.filters import trace_start
from .graph import (
    _OPERATOR_CATS,
    CALL,
    CATEGORIES,
    GPU,
    IDLE,
    OP,
    WAIT,
    Graph,
    Instances,
    build_graph,
    instances,
)

# The summary's time columns: each category's ns on the path (they sum to span_ns).
CATEGORY_COLUMNS = tuple(f"{c}_ns" for c in CATEGORIES)
# HTA 0.5's bound_by of each category (0-weight ones have none).
HTA_BOUND_BY = {"cpu": "cpu_bound", "launch": "gpu_kernel_launch_overhead", "compute": "gpu_compute_bound",
                "memory": "gpu_compute_bound", "communication": "gpu_communication_bound",
                "gpu_gap": "gpu_kernel_kernel_overhead"}


@dataclass
class CriticalPath:
    """``summary``: a row per instance (see ``summary_columns``); ``segments``: the path's
    segments in time order, tiling each instance: instance, start, end (ns), category, weight
    (ns on the path's length), the event it is attributed to (table ``event`` in
    OP/CALL/GPU or -1, row ``event_row``, ``name``), and the edge's ends (``from_table``/
    ``from_row``/``from_start``, ``to_*``; ``cross``: they are on different tracks, i.e. threads, streams or devices)."""

    summary: pd.DataFrame
    segments: pd.DataFrame
    has_syncs: bool
    metadata: dict = field(default_factory=dict)  # the trace's top-level keys (its rank)
    trace_start_ns: int | None = None  # the trace start (``filters.trace_start``: Perfetto's time 0)


def summary_columns() -> list[str]:
    return ["instance", "label", "number", "start", "end", "span_ns", "length_ns", *CATEGORY_COLUMNS, "note"]


NO_WORK = "no work: no CPU operator, runtime call or GPU op of over 0 ns in it"  # the note of such an instance


def critical_path(cols: TraceColumns, annotation: str | None = None, step: int | None = None, *,
                  segments: bool = True, hta: bool = False) -> CriticalPath:
    """The critical path of each instance of ``annotation`` (None: each ProfilerStep#N; a
    name: CPU ops and ranges whose name contains it; "": the whole trace), or of the one
    numbered ``step`` (N of ProfilerStep#N, else the index from 0). Reads the columns in memory.
    ``segments=False`` leaves the segments table empty (the summary alone: a 2 GB trace's paths
    have millions of segments). Instances are solved a batch at a time (``_batches``), so the
    graph in memory is a batch's."""
    if cols.spilled_cpu_ops is not None:  # the graph reads the operators: bring them back
        cols = cols.with_cpu_ops(lambda chunk: chunk.dur > 0)
    inst = instances(cols, annotation)
    if step is not None:
        keep = np.flatnonzero(inst.number == step)
        if not len(keep):
            have = f"{inst.number.min()}-{inst.number.max()}" if len(inst) else "none"
            raise UsageError(f"critical-path: no instance {step} of {annotation or 'ProfilerStep'} (the trace has {have})")
        inst = Instances([inst.label[i] for i in keep.tolist()], inst.number[keep], inst.start[keep], inst.end[keep])
    if not len(inst):
        raise UsageError(f"critical-path: the trace has no {annotation or 'ProfilerStep#N'} range"
                         + ("" if annotation else " (name one with --annotation)"))
    rows, parts = [], []
    busy = work_spans(cols)
    for first, batch in _batches(cols, inst):
        graph = build_graph(cols, batch, hta)
        for i in range(len(batch)):
            row, seg = _instance_path(graph, i, busy)
            row[0] = first + i
            seg["instance"][:] = first + i
            rows.append(row)
            if segments:
                parts.append(seg)
        del graph  # not held while the next batch's is built
    if not segments:
        parts = [{k: v[:0] for k, v in seg.items()}]
    table = pd.DataFrame({k: np.concatenate([p[k] for p in parts]) for k in parts[0]})
    table["category"] = np.array(CATEGORIES, object)[table["category"].to_numpy()]
    name = event_column(cols, table["event"].to_numpy(), table["event_row"].to_numpy(), "name")
    table["name"] = np.array([*cols.names, ""], object)[np.where(name >= 0, name, len(cols.names))]
    from_track = event_column(cols, table["from_table"].to_numpy(), table["from_row"].to_numpy(), "track")
    to_track = event_column(cols, table["to_table"].to_numpy(), table["to_row"].to_numpy(), "track")
    table["cross"] = (from_track >= 0) & (to_track >= 0) & (from_track != to_track)
    summary = pd.DataFrame(rows, columns=summary_columns())
    return CriticalPath(summary, table, len(cols.syncs) > 0, cols.metadata, trace_start(cols))


BATCH_EVENTS = 1 << 19  # CPU operators and calls per graph held at once (~0.3 GB of graph at most)


def _batches(cols: TraceColumns, inst: Instances) -> list[tuple[int, Instances]]:
    """(index of the first, the instances) of consecutive batches of ``inst`` holding about
    ``BATCH_EVENTS`` CPU events each. Instances that overlap (nested annotations) each get a
    batch of their own, as HTA builds a graph per instance: one graph would give each event to
    one instance only."""
    def part(a: int, b: int) -> Instances:
        return Instances(inst.label[a:b], inst.number[a:b], inst.start[a:b], inst.end[a:b])

    n = len(inst)
    if n > 1 and bool((inst.start[1:] <= np.maximum.accumulate(inst.end[:-1])).any()):
        return [(i, part(i, i + 1)) for i in range(n)]
    events = np.zeros(n, np.int64)
    for table in (cols.cpu_ops, cols.launches):
        at = inst.containing(table.ts.astype(np.int64))
        events += np.bincount(at[at >= 0], minlength=n)
    cut = [0]
    total = 0
    for i, count in enumerate(events.tolist()):
        if total and total + count > BATCH_EVENTS:
            cut.append(i)
            total = 0
        total += count
    cut.append(n)
    return [(a, part(a, b)) for a, b in zip(cut[:-1], cut[1:])]


def event_column(cols: TraceColumns, table: np.ndarray, row: np.ndarray, column: str) -> np.ndarray:
    """Column ``column`` (``track``, ``name``, ``ordinal``, ...) of each event given as (table
    OP/CALL/GPU, row), -1 where there is none."""
    out = np.full(len(table), -1, np.int64)
    for code, t in ((OP, cols.cpu_ops), (CALL, cols.launches), (GPU, cols.gpu)):
        at = np.flatnonzero(table == code)
        if len(at):
            out[at] = getattr(t, column)[row[at]]
    return out


def _segmented_cummax(values: np.ndarray, seg: np.ndarray) -> np.ndarray:
    """Running maximum of ``values`` restarting where ``seg`` (non-decreasing ids) changes."""
    if not len(values):
        return values
    lo = int(values.min())
    span = int(values.max()) - lo + 1
    if int(seg[-1]) * span < (1 << 62):
        key = seg * span + (values - lo)
        return np.maximum.accumulate(key) - seg * span + lo
    out = np.empty_like(values)
    starts = np.flatnonzero(np.r_[True, seg[1:] != seg[:-1]])
    for a, b in zip(starts.tolist(), [*starts[1:].tolist(), len(values)]):
        out[a:b] = np.maximum.accumulate(values[a:b])
    return out


def longest_distances(link: np.ndarray, src: np.ndarray, dst: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """The greatest path length into each node of one instance (nodes 0..n-1: ``link`` as in
    ``Graph``, other edges ``src``/``dst``/``weight`` local to it), paths starting anywhere."""
    n = len(link)
    chain = link >= 0
    seg = np.cumsum(~chain) - 1
    c = np.cumsum(np.where(chain, link, 0))
    into = np.zeros(n, np.int64)
    dist = c + _segmented_cummax(into - c, seg)
    while len(src):
        into2 = np.zeros(n, np.int64)
        np.maximum.at(into2, dst, dist[src] + weight)
        if np.array_equal(into2, into):
            return dist
        into = into2
        dist = c + _segmented_cummax(into - c, seg)
    return dist


def work_spans(cols: TraceColumns) -> tuple[np.ndarray, np.ndarray]:
    """The times anything ran: the union of the trace's operators, runtime calls and GPU ops
    (of over 0 ns) as disjoint [start, end) spans, by start."""
    is_op = np.array([c is not None and c.lower() in _OPERATOR_CATS for c in cols.cats] or [False], bool)
    cpu, calls, gpu = cols.cpu_ops, cols.launches, cols.gpu
    ops = is_op[cpu.cat] if len(cpu) else np.zeros(0, bool)
    start = np.concatenate([cpu.ts[ops], calls.ts, gpu.ts]).astype(np.int64)
    end = start + np.maximum(np.concatenate([cpu.dur[ops], calls.dur, gpu.dur]).astype(np.int64), 0)
    some = end > start
    start, end = start[some], end[some]
    if not len(start):
        return start, end
    order = np.argsort(start, kind="stable")
    start, end = start[order], end[order]
    reach = np.maximum.accumulate(end)
    new = np.r_[True, start[1:] > reach[:-1]]
    last = np.r_[np.flatnonzero(new)[1:] - 1, len(start) - 1]
    return start[new], reach[last]


def _split_idle(seg_start: np.ndarray, seg_end: np.ndarray, cats: np.ndarray,
                busy: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each IDLE segment cut where work ran (``work_spans``): WAIT pieces there, IDLE between.
    Returns the pieces' segment (index), start, end and category, in time order."""
    S, E = busy
    idle = (cats == IDLE) & (seg_end > seg_start)
    j0 = np.searchsorted(E, seg_start, "right")
    k = np.where(idle, np.maximum(np.searchsorted(S, seg_end, "left") - j0, 0), 0)
    n = 2 * k + 2  # boundaries of the 2k+1 pieces
    seg = np.repeat(np.arange(len(cats)), n)
    pos = np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)
    a, b, kk = seg_start[seg], seg_end[seg], k[seg]
    j = np.clip(j0[seg] + (pos - 1) // 2, 0, max(len(S) - 1, 0))
    inner = (pos > 0) & (pos < 2 * kk + 1)
    mid = np.where((pos - 1) % 2 == 0, np.maximum(S[j], a), np.minimum(E[j], b)) if len(S) else a
    bound = np.where(pos == 0, a, np.where(inner, mid, b))
    piece = pos < 2 * kk + 1  # a boundary that starts a piece
    at = np.flatnonzero(piece)
    p_seg, p_start, p_end = seg[at], bound[at], bound[at + 1]
    p_cat = np.where(pos[at] % 2 == 1, WAIT, cats[p_seg]).astype(np.int8)
    return p_seg, p_start, p_end, p_cat


def _instance_path(g: Graph, i: int, busy: tuple[np.ndarray, np.ndarray]) -> tuple[list, dict[str, np.ndarray]]:
    lo, hi = int(g.bounds[i]), int(g.bounds[i + 1])
    e_lo, e_hi = np.searchsorted(g.dst, [lo, hi])
    src, dst, weight = g.src[e_lo:e_hi] - lo, g.dst[e_lo:e_hi] - lo, g.weight[e_lo:e_hi]
    link, ts = g.link[lo:hi], g.ts[lo:hi]
    start, window_end = int(g.instances.start[i]), int(g.instances.end[i])
    end = max(window_end, int(ts.max())) if hi > lo else window_end
    dist = longest_distances(link, src, dst, weight) if hi > lo else np.zeros(0, np.int64)
    # Back from the farthest node: along a chain while its link gives the distance, else
    # across the edge that does, else the path starts there.
    pieces: list[tuple[str, object]] = []
    if hi > lo:
        n = hi - lo
        chain_ok = np.zeros(n, bool)
        chain_ok[1:] = (link[1:] >= 0) & (dist[:-1] + link[1:] == dist[1:])
        run_start = np.maximum.accumulate(np.where(chain_ok, 0, np.arange(n)))
        j = int(np.argmax(dist))
        while True:
            r = int(run_start[j])
            if j > r:
                pieces.append(("links", np.arange(r + 1, j + 1)))
            a, b = np.searchsorted(dst, [r, r + 1])
            cand = np.flatnonzero(dist[src[a:b]] + weight[a:b] == dist[r])
            if not len(cand):
                break
            e = a + int(cand[0])
            pieces.append(("edge", e))
            j = int(src[e])
        pieces.reverse()
    # Each piece as rows: from node, to node, weight, category, attributed event.
    f_node, t_node, w, cat, ev_t, ev_r = [], [], [], [], [], []
    for kind, what in pieces:
        if kind == "links":
            nodes = what
            f_node.append(nodes - 1)
            t_node.append(nodes)
            w.append(link[nodes])
            cat.append(g.link_cat[lo + nodes])
            ev_t.append(g.link_table[lo + nodes])
            ev_r.append(g.link_row[lo + nodes])
        else:
            e = int(what)
            f_node.append(np.array([src[e]]))
            t_node.append(np.array([dst[e]]))
            w.append(np.array([weight[e]]))
            cat.append(np.array([g.cat[e_lo + e]]))
            ev_t.append(np.array([g.edge_table[e_lo + e]]))
            ev_r.append(np.array([g.edge_row[e_lo + e]]))
    cat_of = [np.concatenate(x) if x else np.zeros(0, np.int64) for x in (f_node, t_node, w, cat, ev_t, ev_r)]
    f_node, t_node, w, cat, ev_t, ev_r = (a.astype(np.int64) for a in cat_of)
    # Tile [start, end]: idle before the first node, each edge up to its end (never back in
    # time), idle after the last node. A 0-weight edge that is not a thread's idle is a sync.
    first_ts = int(ts[f_node[0]]) if len(f_node) else end
    edge_end = np.maximum.accumulate(np.maximum(ts[t_node], first_ts)) if len(t_node) else np.zeros(0, np.int64)
    seg_start = np.concatenate([[start, max(start, first_ts)], np.maximum(edge_end[:-1], first_ts)]) \
        if len(t_node) else np.array([start])
    seg_end = np.concatenate([[max(start, first_ts)], edge_end]) if len(t_node) else np.array([start])
    seg_start = seg_start[:len(seg_end)]
    seg_start = np.concatenate([seg_start, [seg_end[-1]]])
    seg_end = np.concatenate([seg_end, [max(end, int(seg_end[-1]))]])
    none = np.array([-1])
    cats = np.concatenate([[IDLE], cat, [IDLE]]).astype(np.int8)
    weights = np.concatenate([[0], w, [0]])
    nodes_f = np.concatenate([none, f_node, none])
    nodes_t = np.concatenate([none, t_node, none])
    table = np.concatenate([none, ev_t, none])
    row = np.concatenate([none, ev_r, none])
    piece, seg_start, seg_end, cats = _split_idle(seg_start, seg_end, cats, busy)
    first_piece = np.r_[True, piece[1:] != piece[:-1]]
    weights = np.where(first_piece, weights[piece], 0)
    nodes_f, nodes_t, table, row = nodes_f[piece], nodes_t[piece], table[piece], row[piece]
    keep = seg_end > seg_start
    keep |= (weights > 0)
    per_cat = np.bincount(cats[keep], weights=(seg_end - seg_start)[keep], minlength=len(CATEGORIES))
    length = int(w.sum())
    summary = [i, g.instances.label[i], int(g.instances.number[i]), start, end, end - start, length,
               *(int(x) for x in per_cat), "" if hi > lo else NO_WORK]

    def ends(nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        ok = nodes >= 0
        at = np.where(ok, lo + nodes, 0)  # an instance without nodes has only the none (-1) ends
        if not ok.any():
            return np.full(len(nodes), -1, np.int8), np.full(len(nodes), -1, np.int64), np.zeros(len(nodes), bool)
        return (np.where(ok, g.node_table[at], -1), np.where(ok, g.node_row[at], -1),
                np.where(ok, g.is_start[at], False))

    ft, fr, fs = ends(nodes_f[keep])
    tt, tr, tstart = ends(nodes_t[keep])
    seg = {"instance": np.full(int(keep.sum()), i, np.int64), "start": seg_start[keep], "end": seg_end[keep],
           "category": cats[keep], "weight": weights[keep], "event": table[keep], "event_row": row[keep],
           "from_table": ft, "from_row": fr, "from_start": fs, "to_table": tt, "to_row": tr, "to_start": tstart}
    return summary, seg
