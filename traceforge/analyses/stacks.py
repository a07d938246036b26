"""Operator call stacks from real containment, and the CPU op that issued each launch.

Per (pid, tid) thread, a CPU op's parent is the innermost earlier op that really contains
it: starts at or before it and ends at or after its end. An op that ended before another
starts is not its parent, and a zero-duration op contains nothing (HTA gets both wrong
and hangs thousands of events under a 1 µs ``aten::select``). Equal starts: the longer
op is the parent; equal intervals: file order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..scan import Table, TraceColumns
from .launches import join_gpu_to_launch


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


_CHUNK = 1 << 16


def build_stacks(cols: TraceColumns) -> Stacks:
    """Nest CPU ops and launch calls per thread, and join GPU ops to their launch."""
    cpu, launches = cols.cpu_ops, cols.launches
    n_cpu, n_launch = len(cpu), len(launches)
    parent = np.full(n_cpu + n_launch, -1, np.int32)  # rows: 4 bytes each
    for track in np.union1d(cpu.track, launches.track).tolist():
        _nest_track(np.flatnonzero(cpu.track == track), np.flatnonzero(launches.track == track), cpu, launches, parent)
    gpu_launch = np.full(len(cols.gpu), -1, np.int64)
    gpu_rows, launch_rows = join_gpu_to_launch(cols, np.arange(n_launch))
    gpu_launch[gpu_rows] = launch_rows
    return Stacks(parent[:n_cpu], parent[n_cpu:], gpu_launch)


def _nest_track(ops: np.ndarray, calls: np.ndarray, cpu: Table, launches: Table, parent: np.ndarray) -> None:
    """Fill ``parent`` (CPU op rows, then launch rows after them) for one thread's ``ops`` and
    launch ``calls``: one thread's arrays at a time, not the whole trace's, and no more of
    them than the sort needs (ends held negated, rows looked up a chunk at a time)."""
    ts = np.concatenate([cpu.ts[ops], launches.ts[calls]])
    neg_end = np.concatenate([cpu.dur[ops], launches.dur[calls]]).astype(np.int64)
    np.maximum(neg_end, 0, out=neg_end)
    neg_end += ts
    np.negative(neg_end, out=neg_end)
    # Launch calls are leaves: at equal ts and end, an op sorts before a launch it encloses.
    is_launch = np.concatenate([np.zeros(len(ops), np.int8), np.ones(len(calls), np.int8)])
    order = np.lexsort((np.concatenate([cpu.ordinal[ops], launches.ordinal[calls]]), is_launch, neg_end, ts))
    rows = np.concatenate([ops, calls + len(cpu)])
    stack: list[tuple[int, int]] = []  # (end, row) of the open ops, innermost last
    for lo in range(0, len(order), _CHUNK):  # Python lists a chunk at a time: ~36 bytes per value
        at = order[lo:lo + _CHUNK]
        chunk = zip(rows[at].tolist(), ts[at].tolist(), (-neg_end[at]).tolist(), is_launch[at].tolist())
        for i, start, stop, leaf in chunk:
            # The top contains this one iff it starts inside the top and ends by the top's end.
            while stack and not (start < stack[-1][0] and stop <= stack[-1][0]):
                stack.pop()
            if stack:
                parent[i] = stack[-1][1]
            if not leaf and stop > start:
                stack.append((stop, i))
