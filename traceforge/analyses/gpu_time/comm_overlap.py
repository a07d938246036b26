"""Communication/computation overlap: how much of the NCCL time runs under compute kernels.

HTA's ``get_comm_comp_overlap``, in exact integer ns, per device, rank and profiler step.
Kernel types are HTA's (``hta_types``): communication is ``nccl...Kernel``, computation
any kernel that is not communication, memory (copies, memsets) or HTA's "other" (names with
``Sync``). On each device:

- ``comm_ns``: the length of the union of the communication kernels' intervals
  ``[ts, ts + dur)`` (two NCCL kernels running at once count once);
- ``compute_ns``: the length of the union of the computation kernels' intervals, on every
  stream of the device;
- ``overlapped_ns``: the length of the intersection of the two unions: communication time
  during which some compute kernel runs on the device;
- ``exposed_ns = comm_ns - overlapped_ns``: communication time with no compute kernel
  running, which the step waits for;
- ``overlap_pct = 100 * overlapped_ns / comm_ns`` (0 where there is no communication).

A rank's row sums its devices. Rows: ``step`` -1 for the whole trace (every GPU op, also
those in no profiler step), then one per profiler step: that step's communication kernels
(a GPU op's step is that of its launch call, ``steps.gpu_steps``) against the compute of
the whole device (a step's NCCL kernel overlapped by the next step's compute counts as
overlapped, as it does in the whole-trace row).

Where this differs from HTA (docs/hta.md, "Communication overlap and temporal breakdown"):
HTA drops the last profiler step and every GPU op whose launch call is not in the trace,
rounds fractional-µs times to whole µs (start up, end down), and takes one union over all
devices of a rank; here every op counts, at its exact ns, per device. ``hta=True`` makes
HTA's first two choices (``steps.hta_ops``, ``hta_types.hta_times``).
Ops with ``dur <= 0`` take no time. Intervals that touch merge; a tie (a compute kernel
ending where an NCCL kernel starts) overlaps nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from ...columns.names import names_at
from ...columns.scan import TraceColumns
from ...columns.table import in_file_order
from ...util.distinct import unique
from ...util.lazy_pandas import pd
from ..hta.types import COMMUNICATION, COMPUTATION, hta_times, op_types
from ..structure.steps import NO_STEP, gpu_steps, hta_ops
from .busy import concatenated, merge_intervals, merged_pieces, merged_times, union_of

WHOLE_TRACE = -1  # the ``step`` of the row over the whole trace
OVERLAP_COLUMNS = ["step", "comm_kernels", "comm_ns", "overlapped_ns", "exposed_ns", "overlap_pct"]


@dataclass(frozen=True)
class OpTimes:
    """The GPU ops an overlap analysis reads, in ``cols.gpu`` order: their [start, end) in ns,
    kernel type, step and device (of every op, the table's own columns where no copy is needed;
    with ``hta``, of those HTA keeps)."""

    start: np.ndarray
    end: np.ndarray
    type: np.ndarray
    step: np.ndarray
    device: np.ndarray


def op_times(cols: TraceColumns, *, gpu_step: np.ndarray | None = None, hta: bool = False) -> OpTimes:
    """Every GPU op (with ``hta``: those HTA keeps, at HTA's rounded times), see the module
    docstring. ``gpu_step``: each op's step if already known (``steps.gpu_steps``)."""
    gpu = cols.gpu
    step = gpu_steps(cols) if gpu_step is None else gpu_step
    types = op_types(cols)
    if not hta:
        start = gpu.ts.astype(np.int64, copy=False)
        return OpTimes(start, start + np.maximum(gpu.dur, 0), types, step, gpu.device)
    rows = np.flatnonzero(hta_ops(cols))
    start = gpu.ts[rows].astype(np.int64)
    start, end = hta_times(start, start + np.maximum(gpu.dur[rows], 0))
    return OpTimes(start, end, types[rows], step[rows], gpu.device[rows])


def union_ns(ops: OpTimes, mine: np.ndarray) -> int:
    """The length of the union of the intervals of the ops where ``mine``, merged a piece at
    a time (``gpu_busy.merged_times``): no sorted copies of every op's times."""
    return sum(int((ends - starts).sum()) for starts, ends, _, _ in merged_times(ops.start, ops.end, mine))


def union(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of intervals ``[start, end)`` (any order) as sorted disjoint intervals;
    empty ones are left out and touching ones merge."""
    keep = end > start
    start, end = start[keep], end[keep]
    order = np.argsort(start, kind="stable")
    merged_start, merged_end, _ = merge_intervals(start[order], end[order])
    return merged_start, merged_end


def intersect(a_start: np.ndarray, a_end: np.ndarray, b_start: np.ndarray, b_end: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The non-empty pieces of ``A ∩ B`` for two lists of sorted disjoint intervals: (starts,
    ends, index into A of each piece's interval), in time order. O((|A| + |B|) log |B|)."""
    lo = np.searchsorted(b_end, a_start, side="right")  # first B interval ending after A's start
    hi = np.searchsorted(b_start, a_end, side="left")  # B intervals starting before A's end
    count = np.maximum(hi - lo, 0)
    owner = np.repeat(np.arange(len(a_start)), count)
    b = np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count) + lo[owner]
    start = np.maximum(a_start[owner], b_start[b])
    end = np.minimum(a_end[owner], b_end[b])
    keep = end > start
    return start[keep], end[keep], owner[keep]


def complement(start: np.ndarray, end: np.ndarray, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """The gaps of sorted disjoint intervals within ``[lo, hi)`` (empty gaps left out)."""
    gap_start = np.concatenate([[lo], end]).astype(np.int64)
    gap_end = np.concatenate([start, [hi]]).astype(np.int64)
    keep = gap_end > gap_start
    return gap_start[keep], gap_end[keep]


def _length(start: np.ndarray, end: np.ndarray) -> int:
    return int((end - start).sum())


def step_groups(mine: np.ndarray, step: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
    """(step, its rows) per profiler step, by step, of the rows where ``mine`` (``step``: each
    row's step; rows in no step are left out). Rows are sorted by step only where they are not
    in step order already (ops in file order mostly are)."""
    rows = np.flatnonzero(mine & (step != NO_STEP))
    of_rows = step[rows]
    if len(rows) > 1 and not bool(np.all(of_rows[1:] >= of_rows[:-1])):
        order = np.argsort(of_rows, kind="stable")
        rows = rows[order]
        of_rows = of_rows[order]
        del order
    bounds = np.flatnonzero(np.r_[True, of_rows[1:] != of_rows[:-1], True]) if len(rows) else np.zeros(1, np.int64)
    firsts = of_rows[bounds[:-1]].tolist()
    del of_rows
    for a, b, s in zip(bounds[:-1].tolist(), bounds[1:].tolist(), firsts):
        yield int(s), rows[a:b]


def table_steps(ops: OpTimes) -> list[int]:
    """The rows of a per-step table: the whole trace, then each step that has a GPU op."""
    return [WHOLE_TRACE] + [s for s in unique(ops.step).tolist() if s != NO_STEP]


def comm_overlap(cols: TraceColumns, *, gpu_step: np.ndarray | None = None, hta: bool = False) -> pd.DataFrame:
    """The overlap table (``OVERLAP_COLUMNS``): the whole trace (step -1), then each profiler
    step that has a GPU op, summed over devices; see the module docstring."""
    ops = op_times(cols, gpu_step=gpu_step, hta=hta)
    steps = table_steps(ops)
    at = {s: i for i, s in enumerate(steps)}
    kernels, comm_ns, overlapped = (np.zeros(len(steps), np.int64) for _ in range(3))
    for device in unique(ops.device).tolist():
        mine = ops.device == device
        is_comm = mine & (ops.type == COMMUNICATION)
        mine &= ops.type == COMPUTATION
        comp = union_of(merged_times(ops.start, ops.end, mine))
        del mine
        groups = [(WHOLE_TRACE, np.flatnonzero(is_comm)), *step_groups(is_comm, ops.step)]
        del is_comm
        for step, rows in groups:
            comm = union(ops.start[rows], ops.end[rows])
            under = intersect(*comm, *comp)
            kernels[at[step]] += len(rows)
            comm_ns[at[step]] += _length(*comm)
            overlapped[at[step]] += _length(under[0], under[1])
    exposed = comm_ns - overlapped
    return pd.DataFrame({
        "step": np.array(steps, np.int64), "comm_kernels": kernels, "comm_ns": comm_ns, "overlapped_ns": overlapped,
        "exposed_ns": exposed, "overlap_pct": pct(overlapped, comm_ns),
    }, columns=OVERLAP_COLUMNS)


def pct(part: np.ndarray, whole: np.ndarray) -> np.ndarray:
    """100 * part / whole per row (float, for printing), 0 where whole is 0."""
    return np.where(whole > 0, 100.0 * part / np.maximum(whole, 1), 0.0)


EXPOSED_COLUMNS = ["device", "ts", "dur", "kernel", "nccl_kernels", "comm_ns"]


@dataclass(frozen=True)
class Exposed:
    """Exposed communication intervals (``exposed_intervals``), by device then time."""

    device: np.ndarray
    ts: np.ndarray  # int64 ns
    dur: np.ndarray  # int64 ns
    first_kernel: np.ndarray  # row in ``cols.gpu`` of the first kernel of the run it lies in
    nccl_kernels: np.ndarray  # kernels in that run
    comm_ns: np.ndarray  # length of that run

    def __len__(self) -> int:
        return len(self.ts)


def exposed_intervals(cols: TraceColumns, *, chunk: int | None = None) -> Exposed:
    """The exposed communication of each device: the maximal intervals in which a
    communication kernel runs and no computation kernel runs on any stream of the device.

    Each lies in one run of communication (communication kernels whose intervals overlap or
    touch): its first kernel (by start, then file order), its kernels and its length come
    with it. The ``dur`` of a device add up to its ``exposed_ns`` in ``comm_overlap``.
    The unions are merged a piece of the GPU op table at a time (``gpu_busy.merged_pieces``,
    ``chunk`` rows): a byte per GPU op and the unions are held, not the ops' times.
    """
    gpu = cols.gpu
    types = op_types(cols)
    ordered = in_file_order(gpu)
    empty = (np.zeros(0, np.int64),) * 4
    parts = []
    for device in unique(gpu.device).tolist():
        mine = gpu.device == device
        mine &= gpu.dur > 0
        comm = mine & (types == COMMUNICATION)
        if not comm.any():
            continue
        mine &= types == COMPUTATION
        comp = union_of(merged_pieces(gpu, mine, chunk, ordered))
        del mine
        run_start, run_end, first, kernels = concatenated(list(merged_pieces(gpu, comm, chunk, ordered)), empty)
        del comm
        start, end, run = intersect(run_start, run_end, *complement(*comp, int(run_start[0]), int(run_end[-1])))
        del comp
        parts.append((np.full(len(start), device, np.int64), start, end - start, first[run], kernels[run],
                      (run_end - run_start)[run]))
    if not parts:
        return Exposed(*(np.zeros(0, np.int64) for _ in range(6)))
    return Exposed(*(np.concatenate(column).astype(np.int64) for column in zip(*parts)))


def exposed_comm(cols: TraceColumns) -> pd.DataFrame:
    """``exposed_intervals`` as a table (``EXPOSED_COLUMNS``): ``kernel`` is the name of the
    first kernel of the run of communication."""
    found = exposed_intervals(cols)
    return pd.DataFrame({"device": found.device, "ts": found.ts, "dur": found.dur,
                         "kernel": names_at(cols.names, cols.gpu.name[found.first_kernel]), "nccl_kernels": found.nccl_kernels,
                         "comm_ns": found.comm_ns}, columns=EXPOSED_COLUMNS)
