"""Operator call stacks from real containment, and the CPU op that issued each launch.

Per (pid, tid) thread, a CPU op's parent is the innermost earlier op that really contains
it: starts at or before it and ends at or after its end. An op that ended before another
starts is not its parent, and a zero-duration op contains nothing (HTA gets both wrong
and hangs thousands of events under a short ``aten::select``). Equal starts: the longer
op is the parent; equal intervals: file order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from ... import _native
from ...columns.scan import TraceColumns
from ...columns.table import Table
from ...util.distinct import unique
from ..launches.calls import gpu_joins, launch_of_gpu


@dataclass
class Stacks:
    """``cpu_parent[i]``: parent row of CPU op i (-1 root); ``launch_op[j]``: innermost
    CPU op row enclosing launch call j (-1 none); ``gpu_launch[k]``: launch row of GPU op k."""

    cpu_parent: np.ndarray
    launch_op: np.ndarray
    gpu_launch: np.ndarray

    def gpu_op(self) -> np.ndarray:
        """Innermost CPU op row that issued each GPU op (-1 when unknown)."""
        op = np.full(len(self.gpu_launch), -1, np.int64)
        has = self.gpu_launch >= 0
        op[has] = self.launch_op[self.gpu_launch[has]]
        return op


def build_stacks(cols: TraceColumns) -> Stacks:
    """Nest CPU ops and launch calls per thread, and join GPU ops to their launch. Each
    table's rows are in file order, as every scan and selection keeps them."""
    cpu_parent, launch_op = nest_calls(cols)
    return Stacks(cpu_parent, launch_op, launch_of_gpu(cols))


def nest_calls(cols: TraceColumns) -> tuple[np.ndarray, np.ndarray]:
    """``Stacks.cpu_parent`` and ``Stacks.launch_op`` without the GPU join (a caller that
    joins GPU ops to their launches itself need not hold it twice). One thread at a time,
    sorted and walked in C (``_stacks.nest_thread``) from the columns as they are."""
    cpu, launches = cols.cpu_ops, cols.launches
    parent = np.full(len(cpu) + len(launches), -1, np.int32)  # rows: 4 bytes each
    for track in np.union1d(cpu.track, launches.track).tolist():
        ops, calls = (np.flatnonzero(t.track == track).astype(np.int32) for t in (cpu, launches))
        _native.stacks.nest_thread(ops, calls, cpu.ts, cpu.dur, cpu.dur.itemsize, launches.ts, launches.dur,
                                   launches.dur.itemsize, parent)
    return parent[:len(cpu)], parent[len(cpu):]


NameMask = Callable[[list[str]], np.ndarray]  # per name id of a trace's names


def stack_ops(cols: TraceColumns, marked: np.ndarray | None = None, also_calls: np.ndarray | None = None) -> TraceColumns:
    """``cols`` with the spilled CPU ops read back that ``stack_keeper`` keeps. With spilled
    launch calls, only those a GPU op joins (or whose name id ``also_calls`` marks) are items,
    and of the rest only those that can pop a kept op are read back: half or less on a big trace.

    A call Z never holds anything, but it pops op X when it starts in X and ends after X
    (see ``stack_keeper``): it can go unless X holds an item, so calls over the end of a
    kept op are kept (a superset).
    """
    spilled_calls = cols.spilled_launches
    joined = None if spilled_calls is None else joined_calls(cols, also_calls)
    keep = stack_keeper(cols, marked, joined)
    cols = cols.with_cpu_ops(keep)
    keep = None  # its items go before the launch calls come back
    if spilled_calls is not None:
        ends = _Ends(cols.cpu_ops)
        cols = replace(cols, spilled_launches=None,
                       launches=spilled_calls.select(lambda chunk: joined(chunk) | ends.inside(chunk)))
    return cols


def stack_keeper(cols: TraceColumns, marked: np.ndarray | None = None,
                 joined: Callable[[Table], np.ndarray] | None = None) -> Callable[[Table], np.ndarray]:
    """Per spilled CPU op (a chunk's rows): can it be on the call stack of a launch call (the
    spilled ones ``joined`` picks, else those in ``cols.launches``) or of an op whose name id
    ``marked`` marks, or is it such an op? Reads the spilled ops once if ``marked``.

    ``build_stacks`` gives every such item the same ancestors as with all CPU ops. Why: op
    X is on the stack when item I comes iff every op or call between them sorts inside X
    (one that does not pops everything above X, which X contains, and X). Take X holding I
    and op Z between them, not inside X: Z starts in X and ends after it, so Z holds I. An
    op that holds no item therefore never decides whether an ancestor of one is on the
    stack, and can go. Kept: ops that hold an item by (start, end) alone (a superset).
    """
    def intervals(table: Table, rows: np.ndarray | slice = slice(None)) -> tuple[np.ndarray, ...]:
        return table.track[rows], table.ts[rows], table.dur[rows]

    if marked is not None and not marked.any():  # no op of a marked name: the spilled ops need no read here
        marked = None

    if joined is None:
        items = [intervals(cols.launches)]
    else:
        items = [intervals(chunk, joined(chunk)) for chunk in cols.spilled_launches.chunks()]
    if marked is not None:
        items += [intervals(chunk, marked[chunk.name]) for chunk in cols.spilled_cpu_ops.chunks()]
    columns = [np.concatenate(c) for c in zip(*items)] or [np.zeros(0, np.int64)] * 3  # no chunk: nothing held
    holders = _Holders(*columns)
    if marked is None:
        return holders.hold
    return lambda chunk: holders.hold(chunk) | marked[chunk.name]


def joined_calls(cols: TraceColumns, also: np.ndarray | None = None) -> Callable[[Table], np.ndarray]:
    """Per launch call (a table's rows): does a GPU op join it on correlation (or ``also`` mark its name)?"""
    joins = gpu_joins(cols)
    if also is None:
        return joins

    def joined(calls: Table) -> np.ndarray:
        return joins(calls) | also[calls.name]
    return joined


class _Ends:
    """The ends of CPU ops by thread: whether one lies strictly inside a call is two bisections."""

    def __init__(self, ops: Table):
        end = ops.ts + np.maximum(ops.dur, 0)
        self._by_track = {t: np.sort(end[ops.track == t]) for t in unique(ops.track).tolist()}

    def inside(self, calls: Table) -> np.ndarray:
        out = np.zeros(len(calls), bool)
        for t in np.intersect1d(calls.track, list(self._by_track)).tolist():
            rows = np.flatnonzero(calls.track == t)
            ends, start = self._by_track[t], calls.ts[rows]
            stop = start + np.maximum(calls.dur[rows], 0)
            out[rows] = np.searchsorted(ends, start, side="right") < np.searchsorted(ends, stop, side="left")
        return out


class _Holders:
    """Items (track, start, duration) by thread: whether an interval holds one is one bisection
    (the items starting in it from its start on, and the earliest end among them)."""

    def __init__(self, track: np.ndarray, ts: np.ndarray, dur: np.ndarray):
        self._by_track: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        for t in unique(track).tolist():
            rows = np.flatnonzero(track == t)
            order = np.argsort(ts[rows], kind="stable")
            start = ts[rows][order].astype(np.int64)
            end = start + np.maximum(dur[rows][order], 0)
            self._by_track[t] = start, np.minimum.accumulate(end[::-1])[::-1]

    def hold(self, ops: Table) -> np.ndarray:
        """Per op: does a (positive-duration) op hold an item from start to end?"""
        out = np.zeros(len(ops), bool)
        end = ops.ts + np.maximum(ops.dur, 0)
        for t in np.intersect1d(ops.track, list(self._by_track)).tolist():
            rows = np.flatnonzero((ops.track == t) & (ops.dur > 0))
            start, earliest_end = self._by_track[t]
            first = np.searchsorted(start, ops.ts[rows], side="left")
            inside = first < len(start)
            out[rows[inside]] = earliest_end[first[inside]] <= end[rows[inside]]
        return out
