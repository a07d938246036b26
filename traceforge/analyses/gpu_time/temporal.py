"""Temporal breakdown: how a rank's GPU time splits into idle, compute and non-compute.

HTA's ``get_temporal_breakdown``, in exact integer ns, per rank and profiler step. For a set
of GPU ops on one device (HTA's kernel types, ``hta_types``):

- ``span_ns``: from the first op's start to the last op's end (HTA's "kernel time");
- ``idle_ns``: the part of the span no GPU op covers (span less the union of the ops);
- ``compute_ns``: the union of the computation kernels' intervals;
- ``non_compute_ns``: the rest of the union: communication, copies, memsets and HTA's
  "other" kernels when no computation kernel runs;

so ``idle + compute + non_compute == span``, exactly. Percentages are of the span. A rank's
row sums its devices. Rows: ``step`` -1 for the whole trace (every GPU op), then one per
profiler step over that step's GPU ops (a GPU op's step is that of its launch call,
``steps.gpu_steps``), whose span runs from the step's first GPU op to its last.

Where this differs from HTA (docs/hta.md, "Communication overlap and temporal breakdown"):
HTA has no per-step rows, drops the last profiler step and GPU ops without a launch call,
rounds fractional-µs times (start up, end down), and merges the ops of all devices of a
rank. ``hta=True`` makes HTA's first choices (``overlap.op_times``) so the whole-trace row
equals HTA's. Ops with ``dur <= 0`` take no time but do bound the span.
"""

from __future__ import annotations

import numpy as np

from ...columns.scan import TraceColumns
from ...util.distinct import unique
from ...util.lazy_pandas import pd
from ..hta.types import COMPUTATION
from .comm_overlap import WHOLE_TRACE, op_times, pct, step_groups, table_steps, union, union_ns

TEMPORAL_COLUMNS = ["step", "gpu_ops", "span_ns", "idle_ns", "compute_ns", "non_compute_ns", "idle_pct",
                    "compute_pct", "non_compute_pct"]


def temporal_breakdown(cols: TraceColumns, *, gpu_step: np.ndarray | None = None, hta: bool = False
                       ) -> pd.DataFrame:
    """The temporal breakdown table (``TEMPORAL_COLUMNS``): the whole trace (step -1), then
    each profiler step that has a GPU op, summed over devices; see the module docstring."""
    ops = op_times(cols, gpu_step=gpu_step, hta=hta)
    steps = table_steps(ops)
    at = {s: i for i, s in enumerate(steps)}
    n_ops, span, busy, compute = (np.zeros(len(steps), np.int64) for _ in range(4))
    whole = at[WHOLE_TRACE]
    for device in unique(ops.device).tolist():
        mine = ops.device == device  # the whole trace: merged a piece at a time
        n_ops[whole] += int(np.count_nonzero(mine))
        last = np.max(ops.end, where=mine, initial=np.iinfo(np.int64).min)  # no copy of the device's ops
        span[whole] += int(last - np.min(ops.start, where=mine, initial=np.iinfo(np.int64).max))
        busy[whole] += union_ns(ops, mine)
        compute[whole] += union_ns(ops, mine & (ops.type == COMPUTATION))
        for step, group in step_groups(mine, ops.step):  # each step's ops, a step at a time
            i = at[step]
            start, end = ops.start[group], ops.end[group]
            n_ops[i] += len(group)
            span[i] += int(end.max() - start.min())
            merged = union(start, end)
            busy[i] += int((merged[1] - merged[0]).sum())
            comp = ops.type[group] == COMPUTATION
            merged = union(start[comp], end[comp])
            compute[i] += int((merged[1] - merged[0]).sum())
        del mine
    idle, non_compute = span - busy, busy - compute
    return pd.DataFrame({
        "step": np.array(steps, np.int64), "gpu_ops": n_ops, "span_ns": span, "idle_ns": idle, "compute_ns": compute,
        "non_compute_ns": non_compute, "idle_pct": pct(idle, span), "compute_pct": pct(compute, span),
        "non_compute_pct": pct(non_compute, span),
    }, columns=TEMPORAL_COLUMNS)
