"""The dependency graph of each instance of an annotation (default: each ``ProfilerStep#N``).

An instance is a CPU range [start, end] (end inclusive, as HTA clips). Its graph has a start
and an end node for each of its CPU operators (cat ``cpu_op``/``Operator``) and runtime or
driver calls that start in the window and last more than 0 ns, and for each GPU op whose
launch call is one of those calls. Node times are exact ns. Edges, each with a weight (the
time it puts on a path) and a category (``CATEGORIES``):

- **CPU thread** (a chain per thread): the nodes in nesting order (start before the starts of
  its children, ends innermost first, an end before a start at one time), each linked to the
  next. Weight: the time between them (``CPU``), except 0 into the end of a blocking call
  (``BLOCKING_CALLS``: the thread waits, ``SYNC``) and 0 from the end of a top-level operator
  to the start of the next (the thread is ``IDLE``).
- **GPU op**: start to end, its duration (``COMPUTE``, ``COMMUNICATION`` (``nccl...Kernel``),
  ``MEMORY`` (copies, sets)).
- **What let a GPU op start** (ops of a (device, stream) in start order): the launch call's
  start to the op's start (``LAUNCH``, weight the delay) when the call started after the
  previous op on the stream ended and after the op it waits for (below) ended, no other op
  was queued on the stream when it was called and none was launched on it before the op
  started; else, when there is a previous op that ended after what it waits for, the previous
  op's end to its start (``GPU_GAP``, the gap, 0 where they overlap); else no such edge.
- **Synchronisation** (weight 0, ``SYNC``), from Kineto's ``cuda_sync`` events
  (``TraceColumns.syncs``): ``Stream Sync`` (``cudaStreamSynchronize``): the last op on that
  stream that started by the sync's end, to the end of the call; ``Context Sync``
  (``cudaDeviceSynchronize``): the same from every stream of the device; ``Event Sync``
  (``cudaEventSynchronize``, ``cudaEventQuery``): the recorded op to the end of the call; and
  ``Stream Wait Event`` (``cudaStreamWaitEvent``): the recorded op's end to the start of the op
  of the next launch from the waiting call's thread onto the waiting stream. The recorded op
  is that of the last launch onto the recorded stream (``wait_on_stream``) before the
  ``cudaEventRecord`` call whose correlation is ``wait_on_cuda_event_record_corr_id``.
  A trace without ``cuda_sync`` events (Kineto before PyTorch 2.1, or not asked for) has
  no synchronisation edges: ``Graph.has_syncs`` says so.

- **Between threads** (weight 0, ``IDLE``; not with ``hta=True``): a forward operator's end to
  the start of its backward operator, along Kineto's ``fwdbwd`` flows (``TraceColumns.fwdbwd``);
  and a thread's first event in the instance after the top-level event of another thread that
  ended last by its start (the hand-off: the main thread's last forward op, then the autograd
  thread's first backward op).

The others are HTA 0.5's edges (``CPGraph``), so path lengths compare (``hta=True``); where
they differ, see docs/hta.md "Critical path".
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ...columns.names import names_at
from ...columns.scan import TraceColumns
from ..hta.types import COMMUNICATION as _COMM_TYPE
from ..hta.types import MEMORY as _MEMORY_TYPE
from ..hta.types import op_types
from ..launches.calls import STREAM_LAUNCH_APIS, api_name, is_call_of, launch_of_gpu
from ..structure.stacks import nest_calls
from ..structure.steps import profiler_steps

CPU, LAUNCH, COMPUTE, COMMUNICATION, MEMORY, GPU_GAP, SYNC, IDLE, WAIT = range(9)
# WAIT is not an edge's: the part of a 0-weight IDLE span of a path during which some operator,
# runtime call or GPU op of the trace ran (``critical_path``); what stays IDLE had no work at all.
CATEGORIES = ("cpu", "launch", "compute", "communication", "memory", "gpu_gap", "sync", "idle", "wait")
# Calls that may block the thread until the GPU catches up (HTA 0.5's list).
BLOCKING_CALLS = frozenset({"cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventQuery",
                            "cudaEventSynchronize", "cudaMemcpy", "cudaMemcpyAsync"})
_OPERATOR_CATS = frozenset({"cpu_op", "operator"})
STEP_ANNOTATION = "ProfilerStep"  # the default annotation: every ProfilerStep#N
# What a node is: a CPU operator, a runtime or driver call, a GPU op (the table its row is in).
OP, CALL, GPU = 0, 1, 2
STREAM_SYNC, CONTEXT_SYNC, EVENT_SYNC, STREAM_WAIT = range(4)  # scan.SYNC_KINDS


@dataclass(frozen=True)
class Instances:
    """The instances of an annotation, by start: label, number (N of ProfilerStep#N, else the
    index), window [start, end] in ns."""

    label: list[str]
    number: np.ndarray
    start: np.ndarray
    end: np.ndarray

    def __len__(self) -> int:
        return len(self.number)

    def containing(self, ts: np.ndarray) -> np.ndarray:
        """The index of the latest-starting instance whose window contains each ts, or -1."""
        at = np.searchsorted(self.start, ts, side="right") - 1
        ok = at >= 0
        ok[ok] = ts[ok] <= self.end[at[ok]]
        return np.where(ok, at, -1)


def instances(cols: TraceColumns, annotation: str | None = None) -> Instances:
    """The instances of ``annotation``: None for the profiler steps; a name for the CPU ops and
    ranges whose name contains it (HTA's match), numbered 0.. by start; "" the whole trace."""
    if annotation is None:
        steps = profiler_steps(cols)
        return Instances([f"ProfilerStep#{n}" for n in steps.number.tolist()], steps.number,
                         steps.start, steps.end)
    if annotation == "":
        span = cols.time_span()
        start, end = span if span is not None else (0, 0)
        return Instances(["trace"], np.zeros(1, np.int64), np.array([start], np.int64), np.array([end], np.int64))
    has = np.array([annotation in n for n in cols.names] or [False], bool)
    parts = [(t.ts[has[t.name]], t.dur[has[t.name]], t.name[has[t.name]]) for t in (cols.cpu_ops, cols.ranges)]
    ts = np.concatenate([p[0] for p in parts]).astype(np.int64)
    end = ts + np.maximum(np.concatenate([p[1] for p in parts]), 0)
    name = np.concatenate([p[2] for p in parts])
    order = np.argsort(ts, kind="stable")
    return Instances(names_at(cols.names, name[order]).tolist(), np.arange(len(ts), dtype=np.int64),
                     ts[order], end[order])


@dataclass
class Graph:
    """The graphs of all instances in one node numbering: each instance's nodes are the range
    ``bounds[i]:bounds[i+1]``, its CPU chains then its GPU chains, each chain contiguous.

    ``link[j]``: the weight of the edge from node j-1 to j (-1: none, j starts a chain), its
    category ``link_cat[j]`` and the event it is attributed to (``link_table``, ``link_row``).
    Other edges (``src`` -> ``dst``, sorted by ``dst``): ``weight``, ``cat``, ``table``/``row``.
    Node j is the start (``is_start``) or end of row ``node_row[j]`` of table ``node_table[j]``.
    """

    instances: Instances
    bounds: np.ndarray
    ts: np.ndarray
    node_table: np.ndarray
    node_row: np.ndarray
    is_start: np.ndarray
    link: np.ndarray
    link_cat: np.ndarray
    link_table: np.ndarray
    link_row: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    weight: np.ndarray
    cat: np.ndarray
    edge_row: np.ndarray
    edge_table: np.ndarray
    has_syncs: bool


def build_graph(cols: TraceColumns, inst: Instances, hta: bool = False) -> Graph:
    """The graph of every instance of ``inst`` (module docstring), from the columns in memory;
    ``hta``: HTA 0.5's edges alone (no forward-to-backward edges)."""
    names = cols.names
    # --- CPU nodes: operators and calls in an instance, dur > 0
    cpu, calls = cols.cpu_ops, cols.launches
    is_operator = np.array([c is not None and c.lower() in _OPERATOR_CATS for c in cols.cats] or [False], bool)
    op_rows = np.flatnonzero(is_operator[cpu.cat] & (cpu.dur > 0)) if len(cpu) else np.zeros(0, np.int64)
    call_rows = np.flatnonzero(calls.dur > 0)
    op_inst = inst.containing(cpu.ts[op_rows].astype(np.int64))
    call_inst = inst.containing(calls.ts[call_rows].astype(np.int64))
    op_rows, op_inst = op_rows[op_inst >= 0], op_inst[op_inst >= 0]
    call_rows, call_inst = call_rows[call_inst >= 0], call_inst[call_inst >= 0]
    sub = replace(cols, cpu_ops=cpu.take(op_rows), launches=calls.take(call_rows), spilled_cpu_ops=None,
                  spilled_launches=None)
    op_parent, call_parent = nest_calls(sub)
    op_parent, call_parent = op_parent.astype(np.int64), call_parent.astype(np.int64)
    inst_of_parent = np.append(op_inst, -1)  # at -1 (no parent): -1, also where there is no op
    op_parent[(op_parent >= 0) & (inst_of_parent[op_parent] != op_inst)] = -1
    call_parent[(call_parent >= 0) & (inst_of_parent[call_parent] != call_inst)] = -1
    op_depth = _depths(op_parent)
    m_op, m_call = len(op_rows), len(call_rows)
    ev_table = np.concatenate([np.full(m_op, OP, np.int8), np.full(m_call, CALL, np.int8)])
    ev_row = np.concatenate([op_rows, call_rows])
    ev_inst = np.concatenate([op_inst, call_inst])
    ev_track = np.concatenate([cpu.track[op_rows], calls.track[call_rows]]).astype(np.int64)
    ev_ts = np.concatenate([cpu.ts[op_rows], calls.ts[call_rows]]).astype(np.int64)
    ev_end = ev_ts + np.concatenate([cpu.dur[op_rows], calls.dur[call_rows]])
    ev_parent = np.concatenate([op_parent, call_parent])  # an op row (= its event index)
    ev_depth = np.concatenate([op_depth, np.where(call_parent >= 0, op_depth[np.maximum(call_parent, 0)] + 1, 0)
                               if m_op else np.zeros(m_call, np.int64)])
    blocking = is_call_of([api_name(n) for n in names], BLOCKING_CALLS)
    ev_blocking = np.concatenate([np.zeros(m_op, bool), blocking[calls.name[call_rows]]])
    m = m_op + m_call
    # Nodes 2e (start) and 2e+1 (end) of event e, in chain order.
    c_ts = np.empty(2 * m, np.int64)
    c_ts[0::2], c_ts[1::2] = ev_ts, ev_end
    c_start = np.tile(np.array([True, False]), m)
    c_ev = np.repeat(np.arange(m), 2)
    depth_key = np.where(c_start, ev_depth[c_ev], -ev_depth[c_ev])
    order = np.lexsort((depth_key, c_start, c_ts, ev_track[c_ev], ev_inst[c_ev]))
    c_ts, c_start, c_ev = c_ts[order], c_start[order], c_ev[order]
    cpu_node_of = np.empty(2 * m, np.int64)  # node 2e / 2e+1 -> place in the CPU order
    cpu_node_of[order] = np.arange(2 * m)
    del order, depth_key
    c_inst = ev_inst[c_ev]
    new_chain = np.ones(2 * m, bool)
    new_chain[1:] = (c_inst[1:] != c_inst[:-1]) | (ev_track[c_ev[1:]] != ev_track[c_ev[:-1]])
    c_link = np.full(2 * m, -1, np.int64)
    c_link[1:] = c_ts[1:] - c_ts[:-1]
    c_cat = np.full(2 * m, CPU, np.int8)
    prev_start = np.concatenate([[False], c_start[:-1]])
    prev_ev = np.concatenate([[0], c_ev[:-1]]) if m else np.zeros(0, np.int64)
    gap = ~prev_start & c_start & (ev_depth[prev_ev] == 0)
    gap &= ~new_chain
    into_blocking = ~c_start & ev_blocking[c_ev]
    c_cat[into_blocking], c_cat[gap] = SYNC, IDLE
    c_link[into_blocking | gap] = 0
    c_link[new_chain] = -1
    # Attribution: start->start and start->end: the source; end->end: the destination;
    # end->start: the source's parent.
    attributed = np.where(prev_start, prev_ev, np.where(~c_start, c_ev, ev_parent[prev_ev]))
    c_ltable = np.where(attributed >= 0, ev_table[np.maximum(attributed, 0)], -1).astype(np.int8)
    c_lrow = np.where(attributed >= 0, ev_row[np.maximum(attributed, 0)], -1)
    # --- GPU nodes: ops whose launch call is a node
    gpu = cols.gpu
    call_event = np.full(len(calls), -1, np.int64)  # launch row -> event index
    call_event[call_rows] = np.arange(m_op, m)
    launch_of = launch_of_gpu(cols)
    g_event = np.where(launch_of >= 0, call_event[np.maximum(launch_of, 0)], -1)
    g_rows = np.flatnonzero(g_event >= 0)
    g_event = g_event[g_rows]
    g_inst = ev_inst[g_event]
    g_dev, g_stream = gpu.device[g_rows].astype(np.int64), gpu.stream[g_rows].astype(np.int64)
    g_ts = gpu.ts[g_rows].astype(np.int64)
    order = np.lexsort((gpu.ordinal[g_rows], g_ts, g_stream, g_dev, g_inst))
    g_rows, g_event, g_inst, g_dev, g_stream, g_ts = (a[order] for a in (g_rows, g_event, g_inst, g_dev, g_stream, g_ts))
    g_end = g_ts + np.maximum(gpu.dur[g_rows], 0)
    k = len(g_rows)
    first = np.ones(k, bool)
    first[1:] = (g_inst[1:] != g_inst[:-1]) | (g_dev[1:] != g_dev[:-1]) | (g_stream[1:] != g_stream[:-1])
    launch_ts = ev_ts[g_event]
    queued_ok = _alone_in_queue(cols, launch_of, g_rows, launch_ts, g_ts)
    # What each op waits for (Stream Wait Event), and the sync edges into CPU calls.
    row_of_gpu = np.full(len(gpu), -1, np.int64)  # gpu row -> place among the graph's ops
    row_of_gpu[g_rows] = np.arange(k)
    waits_for, cpu_sync_src, cpu_sync_call = _syncs(cols, launch_of, row_of_gpu, g_inst, g_dev, g_stream, g_ts,
                                                    call_event, ev_inst)
    group = np.cumsum(first) - 1  # the (instance, device, stream) of each op
    prev_end = _previous_end(g_end, group)  # the latest end of the stream's earlier ops (-1: none)
    has_wait = waits_for >= 0
    wait_end = np.where(has_wait, g_end[np.maximum(waits_for, 0)], 0)
    launch_edge = queued_ok & (first | (prev_end < launch_ts)) & (~has_wait | (wait_end < launch_ts))
    gap_edge = ~launch_edge & ~first & (~has_wait | (wait_end < prev_end))
    types = op_types(cols)[g_rows]
    span_cat = np.where(types == _COMM_TYPE, COMMUNICATION, np.where(
        (types == _MEMORY_TYPE) & (gpu.kind[g_rows] != 0) | (gpu.kind[g_rows] != 0), MEMORY, COMPUTE)).astype(np.int8)
    g_chain, g_link, g_cat, g_lrow = _stream_chains(g_ts, g_end, group, gap_edge, span_cat, g_rows)
    g_op = g_chain >> 1  # the op of each GPU node in chain order, and whether it is its start
    g_start = (g_chain & 1) == 0
    g_ltable = np.full(2 * k, GPU, np.int8)
    g_node_ts = np.where(g_start, g_ts[g_op], g_end[g_op])
    # --- one numbering: by instance, CPU nodes first
    n_inst = len(inst)
    node_inst = np.concatenate([c_inst, g_inst[g_op]])
    part = np.concatenate([np.zeros(2 * m, np.int8), np.ones(2 * k, np.int8)])
    order = np.lexsort((part, node_inst))  # stable within each part: chains stay in order
    place = np.empty(len(order), np.int64)
    place[order] = np.arange(len(order))
    node_inst = node_inst[order]
    bounds = np.searchsorted(node_inst, np.arange(n_inst + 1))
    ts = np.concatenate([c_ts, g_node_ts])[order]
    node_table = np.concatenate([ev_table[c_ev], np.full(2 * k, GPU, np.int8)])[order]
    node_row = np.concatenate([ev_row[c_ev], g_rows[g_op]])[order]
    is_start = np.concatenate([c_start, g_start])[order]
    link = np.concatenate([c_link, g_link])[order]
    link[bounds[:-1][bounds[:-1] < len(link)]] = -1
    link_cat = np.concatenate([c_cat, g_cat])[order]
    link_table = np.concatenate([c_ltable, g_ltable])[order]
    link_row = np.concatenate([c_lrow, g_lrow])[order]
    cpu_place = place[:2 * m][cpu_node_of]  # CPU node 2e / 2e+1 -> its number
    gpu_place = np.empty(2 * k, np.int64)  # GPU node 2i / 2i+1 (start / end of op i) -> its number
    gpu_place[g_chain] = place[2 * m:]
    # Cross edges: launches, GPU->GPU waits, GPU->CPU syncs.
    launched = np.flatnonzero(launch_edge)
    waited = np.flatnonzero(has_wait)
    src = np.concatenate([cpu_place[2 * g_event[launched]], gpu_place[2 * waits_for[waited] + 1],
                          gpu_place[2 * cpu_sync_src + 1]])
    dst = np.concatenate([gpu_place[2 * launched], gpu_place[2 * waited], cpu_place[2 * cpu_sync_call + 1]])
    weight = np.concatenate([np.maximum(g_ts[launched] - launch_ts[launched], 0), np.zeros(len(waited) + len(cpu_sync_src), np.int64)])
    cat = np.concatenate([np.full(len(launched), LAUNCH, np.int8), np.full(len(waited) + len(cpu_sync_src), SYNC, np.int8)])
    edge_table = np.concatenate([np.full(len(launched), CALL, np.int8), np.full(len(waited) + len(cpu_sync_src), GPU, np.int8)])
    edge_row = np.concatenate([ev_row[g_event[launched]], g_rows[waits_for[waited]], g_rows[cpu_sync_src]])
    if not hta:  # what the trace says of the order between threads: forward op -> its backward op
        fwd, bwd = _forward_backward(cols, ev_table, ev_track, ev_ts, ev_end, ev_depth, ev_inst)
        before, first = _hand_offs(ev_track, ev_ts, ev_end, ev_depth, ev_inst)
        fwd, bwd = np.concatenate([fwd, before]), np.concatenate([bwd, first])
        src = np.concatenate([src, cpu_place[2 * fwd + 1]])
        dst = np.concatenate([dst, cpu_place[2 * bwd]])
        weight = np.concatenate([weight, np.zeros(len(fwd), np.int64)])
        cat = np.concatenate([cat, np.full(len(fwd), IDLE, np.int8)])
        edge_table = np.concatenate([edge_table, np.full(len(fwd), OP, np.int8)])
        edge_row = np.concatenate([edge_row, ev_row[bwd]])
    by_dst = np.argsort(dst, kind="stable")
    return Graph(inst, bounds, ts, node_table, node_row, is_start, link, link_cat, link_table, link_row,
                 src[by_dst], dst[by_dst], weight[by_dst], cat[by_dst], edge_row[by_dst], edge_table[by_dst],
                 has_syncs=len(cols.syncs) > 0)


def _forward_backward(cols: TraceColumns, ev_table: np.ndarray, ev_track: np.ndarray, ev_ts: np.ndarray,
                      ev_end: np.ndarray, ev_depth: np.ndarray, ev_inst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(forward, backward) event pairs of the graph's operators that a ``fwdbwd`` flow links:
    each end of the flow goes to the outermost operator of its thread starting at the flow's
    ts (Kineto writes it at the operator's start; the backward needs all of the forward op
    done); pairs in one instance, the backward starting at or after the forward's end."""
    flows = cols.fwdbwd
    none = np.zeros(0, np.int64)
    ops = np.flatnonzero(ev_table == OP)
    if not len(flows) or not len(ops):
        return none, none
    by_depth = ops[np.argsort(-ev_depth[ops], kind="stable")]  # the outermost last among equal (track, ts)
    at = _nearest(ev_track[by_depth], ev_ts[by_depth], flows.track.astype(np.int64), flows.ts.astype(np.int64) + 1,
                  before=True)
    event = np.where(at >= 0, by_depth[np.maximum(at, 0)], -1)
    event[(event >= 0) & (ev_ts[np.maximum(event, 0)] != flows.ts)] = -1
    ends = []
    for is_end in (0, 1):
        mine = np.flatnonzero((flows.is_end == is_end) & (event >= 0))
        ids, first = np.unique(flows.id[mine], return_index=True)
        ends.append((ids, event[mine[first]]))
    (s_id, fwd), (f_id, bwd) = ends
    common, a, b = np.intersect1d(s_id, f_id, return_indices=True)
    fwd, bwd = fwd[a], bwd[b]
    ok = (ev_inst[fwd] == ev_inst[bwd]) & (ev_end[fwd] <= ev_ts[bwd])
    return fwd[ok].astype(np.int64), bwd[ok].astype(np.int64)


def _hand_offs(ev_track: np.ndarray, ev_ts: np.ndarray, ev_end: np.ndarray, ev_depth: np.ndarray,
               ev_inst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(before, first) event pairs: the first event of each thread in an instance, and the
    top-level event of another thread of the instance that ended last at or before it started
    (the thread that handed the work over: the main thread's last forward op before the
    autograd thread's first backward op)."""
    none = np.zeros(0, np.int64)
    if not len(ev_ts):
        return none, none
    order = np.lexsort((ev_ts, ev_track, ev_inst))
    starts = np.r_[True, (ev_inst[order][1:] != ev_inst[order][:-1]) | (ev_track[order][1:] != ev_track[order][:-1])]
    first = order[starts]
    top = np.flatnonzero(ev_depth == 0)
    at = _nearest(ev_inst[top], ev_end[top], ev_inst[first], ev_ts[first] + 1, before=True)
    ok = at >= 0
    return top[at[ok]].astype(np.int64), first[ok].astype(np.int64)


def _previous_end(end: np.ndarray, group: np.ndarray) -> np.ndarray:
    """The latest end among the earlier ops of each op's group (ops by group, then start), -1 for none."""
    if not len(end):
        return end.copy()
    low = int(min(end.min(), 0)) - 1
    shifted = np.concatenate([[low], end[:-1]])
    shifted[np.r_[True, group[1:] != group[:-1]]] = low
    out = _segmented_max(shifted, group)
    return np.where(out == low, -1, out)


def _segmented_max(values: np.ndarray, group: np.ndarray) -> np.ndarray:
    """Running maximum of ``values`` restarting where ``group`` (non-decreasing) changes."""
    out = values.copy()
    starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    lo, span = int(values.min()), int(values.max()) - int(values.min()) + 1
    if int(group[-1]) * span < (1 << 62):
        key = group.astype(np.int64) * span + (values - lo)
        return np.maximum.accumulate(key) - group.astype(np.int64) * span + lo
    for a, b in zip(starts.tolist(), [*starts[1:].tolist(), len(values)]):
        out[a:b] = np.maximum.accumulate(values[a:b])
    return out


def _stream_chains(g_ts: np.ndarray, g_end: np.ndarray, group: np.ndarray, gap_edge: np.ndarray,
                   span_cat: np.ndarray, g_rows: np.ndarray) -> tuple[np.ndarray, ...]:
    """Each stream's chain: the starts and ends of its ops (by group, then start) in time order
    (an end before a start at one time, except an op's own end when it lasts 0 ns), each node
    linked to the next by the time between them. While an op runs, the link is that op's
    (its category; the op whose end the link reaches, else the one of those started that
    ends last); while none runs, it is the
    gap to the next op's start (``GPU_GAP``, the op that ended last), or no link where that
    op has no gap edge (``gap_edge``: it waits for its launch or for another stream). So a
    stream's ops that overlap (a helper kernel beside a cuDNN kernel) count their union once.
    Returns, in chain order: the node (2i start, 2i+1 end of op i), its link (-1 none), the
    link's category and attributed GPU row."""
    k = len(g_ts)
    node = np.arange(2 * k)
    op, start = node >> 1, (node & 1) == 0
    ts = np.where(start, g_ts[op], g_end[op])
    tie = np.where(start, 1, np.where(g_end[op] == g_ts[op], 2, 0))
    chain = np.lexsort((node, tie, ts, group[op]))
    op, start, ts = op[chain], start[chain], ts[chain]
    grp = group[op]
    # The latest end among the ops started up to each node, and which op has it.
    none = int(min(g_ts.min(), 0)) - 1 if k else -1
    reach = np.where(start, g_end[op], none)
    key = reach.astype(np.int64)
    running = _segmented_max(key, grp) if k else key
    holder = np.full(2 * k, -1, np.int64)
    at = np.flatnonzero(start & (reach == running))  # an op that reaches the running end, for each node
    holder[at] = op[at]
    holder = np.maximum.accumulate(np.where(holder >= 0, np.arange(2 * k), -1)) if k else holder
    holder = np.where(holder >= 0, op[np.maximum(holder, 0)], -1)
    link = np.full(2 * k, -1, np.int64)
    cat = np.full(2 * k, GPU_GAP, np.int8)
    row = np.full(2 * k, -1, np.int64)
    if k > 1:
        same = grp[1:] == grp[:-1]
        busy = running[:-1] > ts[:-1]
        prev_op = np.where(busy & ~start[1:], op[1:], holder[:-1])  # busy into an op's end: that op's
        step = ts[1:] - ts[:-1]
        ok = same & (busy | ~start[1:] | gap_edge[op[1:]])
        link[1:] = np.where(ok, step, -1)
        cat[1:] = np.where(busy, span_cat[prev_op], GPU_GAP)
        row[1:] = np.where(same, g_rows[prev_op], -1)
    return chain, link, cat, row


def _depths(parent: np.ndarray) -> np.ndarray:
    """Nesting depth of each row from its parent row (-1 root): one step per level."""
    depth = np.zeros(len(parent), np.int64)
    up = parent.copy()
    while True:
        has = up >= 0
        if not has.any():
            return depth
        depth += has
        up[has] = parent[up[has]]


def _alone_in_queue(cols: TraceColumns, launch_of: np.ndarray, g_rows: np.ndarray, launch_ts: np.ndarray,
                    g_ts: np.ndarray) -> np.ndarray:
    """Per graph op: was it the only op queued on its stream when its launch call started, and
    none when it started? (launches onto a stream: every op with its launch call, whole trace)"""
    gpu = cols.gpu
    is_stream = is_call_of(cols.names, STREAM_LAUNCH_APIS)
    has = launch_of >= 0
    has[has] = is_stream[cols.launches.name[launch_of[has]]]
    out = np.zeros(len(g_rows), bool)
    dev, stream = gpu.device[g_rows], gpu.stream[g_rows]
    for d, s in {(int(a), int(b)) for a, b in zip(*np.unique(np.stack([dev, stream]), axis=1))}:
        mine = has & (gpu.device == d) & (gpu.stream == s)
        called = np.sort(cols.launches.ts[launch_of[mine]].astype(np.int64))
        started = np.sort(gpu.ts[mine].astype(np.int64))
        at = np.flatnonzero((dev == d) & (stream == s))
        lt, st = launch_ts[at], g_ts[at]
        queued_then = np.searchsorted(called, lt, "right") - np.searchsorted(started, lt, "right")
        queued_after = np.searchsorted(called, st, "right") - np.searchsorted(started, st, "right")
        out[at] = (queued_then == 1) & (queued_after == 0)
    return out


def _by_correlation(corr: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Row of ``corr`` holding each key (the first), or -1."""
    order = np.argsort(corr, kind="stable")
    at = np.minimum(np.searchsorted(corr[order], keys), max(len(corr) - 1, 0))
    if not len(corr):
        return np.full(len(keys), -1, np.int64)
    found = (corr[order][at] == keys) & (keys >= 0)
    return np.where(found, order[at], -1)


def _groups(*keys: np.ndarray) -> tuple[np.ndarray, ...]:
    """Dense ids of the distinct rows of ``keys`` (one id per distinct tuple), for each of the
    arrays passed, which are read as rows of the same key space one after another."""
    sizes = [len(k) for k in keys[0]]
    stacked = np.stack([np.concatenate(part) for part in keys])
    _, ids = np.unique(stacked, axis=1, return_inverse=True)
    ids = ids.ravel()
    return tuple(np.split(ids, np.cumsum(sizes)[:-1]))


def _nearest(group: np.ndarray, ts: np.ndarray, q_group: np.ndarray, q_ts: np.ndarray, before: bool) -> np.ndarray:
    """For each query: the index of the row of its group with the latest ts < q_ts (``before``),
    or the earliest ts > q_ts; -1 for none. One sort of the rows, one search."""
    if not len(ts) or not len(q_ts):
        return np.full(len(q_ts), -1, np.int64)
    lo = int(min(ts.min(), q_ts.min()))
    shift = max(int(max(ts.max(), q_ts.max()) - lo + 2).bit_length(), 1)
    if int(max(group.max(), q_group.max())) >= 1 << (62 - shift):
        raise ValueError("critical path: too many streams and too long a trace for one key")
    key = (group.astype(np.int64) << shift) + (ts - lo)
    order = np.argsort(key, kind="stable")
    key = key[order]
    q = (q_group.astype(np.int64) << shift) + (q_ts - lo)
    if before:
        at = np.searchsorted(key, q, "left") - 1
        ok = at >= 0
    else:
        at = np.searchsorted(key, q, "right")
        ok = at < len(key)
    at = np.clip(at, 0, len(key) - 1)
    ok &= (key[at] >> shift) == q_group
    return np.where(ok, order[at], -1)


def _syncs(cols: TraceColumns, launch_of: np.ndarray, row_of_gpu: np.ndarray, g_inst: np.ndarray, g_dev: np.ndarray,
           g_stream: np.ndarray, g_ts: np.ndarray, call_event: np.ndarray, ev_inst: np.ndarray
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """From the cuda_sync events: the graph op each graph op waits for (-1 none), and the
    (graph op, call event) pairs of GPU -> CPU sync edges (module docstring)."""
    k = len(g_inst)
    waits_for = np.full(k, -1, np.int64)
    syncs, calls, gpu = cols.syncs, cols.launches, cols.gpu
    none = np.zeros(0, np.int64)
    if not len(syncs) or not k:
        return waits_for, none, none
    s_kind = syncs.kind.astype(np.int64)
    s_dev, s_stream = syncs.device.astype(np.int64), syncs.stream.astype(np.int64)
    call = _by_correlation(calls.correlation, syncs.correlation.astype(np.int64))
    event = np.where(call >= 0, call_event[np.maximum(call, 0)], -1)
    sync_inst = np.where(event >= 0, ev_inst[np.maximum(event, 0)], -1)
    # Launch calls with their ops: the recorded op is the last op of the last launch onto the
    # recorded stream before the record call; the waiting op the first of the next launch.
    has = np.flatnonzero(launch_of >= 0)
    first_op = np.full(len(calls), -1, np.int64)
    first_op[launch_of[has][::-1]] = has[::-1]
    last_op = np.full(len(calls), -1, np.int64)
    last_op[launch_of[has]] = has
    lrows = np.flatnonzero(first_op >= 0)
    l_dev = gpu.device[first_op[lrows]].astype(np.int64)
    l_stream = gpu.stream[first_op[lrows]].astype(np.int64)
    l_ts = calls.ts[lrows].astype(np.int64)
    l_track = calls.track[lrows].astype(np.int64)
    waits = np.flatnonzero(((s_kind == EVENT_SYNC) | (s_kind == STREAM_WAIT)) & (sync_inst >= 0))
    record = _by_correlation(calls.correlation, syncs.record_correlation[waits].astype(np.int64))
    waits, record = waits[record >= 0], record[record >= 0]
    src = np.full(len(waits), -1, np.int64)
    if len(waits):
        lg, qg = _groups((l_dev, s_dev[waits]), (l_stream, syncs.wait_stream[waits].astype(np.int64)))
        at = _nearest(lg, l_ts, qg, calls.ts[record].astype(np.int64), before=True)
        src = np.where(at >= 0, row_of_gpu[last_op[lrows[np.maximum(at, 0)]]], -1)
        src[(src >= 0) & (g_inst[np.maximum(src, 0)] != sync_inst[waits])] = -1
    pairs = []
    is_event = s_kind[waits] == EVENT_SYNC
    ok = is_event & (src >= 0)
    pairs.append((src[ok], event[waits[ok]]))
    wait = ~is_event & (src >= 0)
    if wait.any():
        w, r = waits[wait], call[waits[wait]]
        lg, qg = _groups((l_track, calls.track[r].astype(np.int64)), (l_dev, s_dev[w]), (l_stream, s_stream[w]))
        at = _nearest(lg, l_ts, qg, calls.ts[r].astype(np.int64), before=False)
        dest = np.where(at >= 0, row_of_gpu[first_op[lrows[np.maximum(at, 0)]]], -1)
        s = src[wait]
        keep = (dest >= 0) & (g_inst[np.maximum(dest, 0)] == sync_inst[w])
        dest, s = dest[keep], s[keep]
        order = np.argsort(g_ts[s], kind="stable")  # the latest-starting recorded op wins
        waits_for[dest[order]] = s[order]
    # Stream and context syncs: the last op (of the stream, of each stream) started by the sync's end.
    blocking = np.flatnonzero(((s_kind == STREAM_SYNC) | (s_kind == CONTEXT_SYNC)) & (sync_inst >= 0))
    if len(blocking):
        end = syncs.ts[blocking].astype(np.int64) + np.maximum(syncs.dur[blocking], 0)
        context = s_kind[blocking] == CONTEXT_SYNC
        streams = np.unique(np.stack([g_dev, g_stream]), axis=1).T.tolist()
        for d, st in streams:
            q = np.flatnonzero((s_dev[blocking] == d) & (context | (s_stream[blocking] == st)))
            if not len(q):
                continue
            on = np.flatnonzero((g_dev == d) & (g_stream == st))
            at = _nearest(g_inst[on], g_ts[on], sync_inst[blocking[q]], end[q] + 1, before=True)
            ok = at >= 0
            pairs.append((on[at[ok]], event[blocking[q[ok]]]))
    a = np.concatenate([p[0] for p in pairs]).astype(np.int64)
    b = np.concatenate([p[1] for p in pairs]).astype(np.int64)
    return waits_for, a, b
