"""Memcpy/memset bandwidth summary per (device, copy kind).

Over the copies ``memcpy_bw.copy_rows`` keeps (bytes known, positive duration), grouped by
device and ``copy_kind`` (HtoD, DtoH, DtoD, ..., Memset):

- ``copies``, ``bytes`` (summed), ``busy_ns``: the union of the copies' ``[ts, ts + dur)``
  intervals (overlapping copies count once);
- ``mean_gbps``: bytes / busy ns (bytes per ns = GB/s), the rate while any copy of the kind runs;
- ``peak_gbps``: the largest summed rate of the copies active at one moment, the maximum of
  ``memcpy_bw.bandwidth_steps`` (its exact integer units, ``peak_units``, divided by
  ``RATE_SCALE``). Per-copy rates come from there, so a change to how they are computed
  shows here too.
"""

from __future__ import annotations

import numpy as np

from ...columns.scan import TraceColumns
from ...util.lazy_pandas import pd
from ..gpu_time.busy import launched_before, merge_intervals
from .memcpy_bw import RATE_SCALE, bandwidth_steps, copy_rows

COLUMNS = ["device", "kind", "copies", "bytes", "busy_ns", "mean_gbps", "peak_gbps", "peak_units"]


def memcpy_summary(cols: TraceColumns, *, launched_before_ns: int | None = None) -> pd.DataFrame:
    """One row per (device, kind) with copies, in ``bandwidth_steps``' order (device, then kind
    as first met); see the module docstring. ``launched_before_ns`` keeps only the copies whose
    launch call started before it (HTA's choice with ``launches.last_step_start``)."""
    if launched_before_ns is not None:
        cols = launched_before(cols, launched_before_ns)
    rows, kinds = copy_rows(cols)
    gpu = cols.gpu
    device = gpu.device[rows]
    out = []
    for d, kind, _, units in bandwidth_steps(cols):
        mine = rows[(device == d) & (kinds == kind)]
        order = np.argsort(gpu.ts[mine], kind="stable")
        ts = gpu.ts[mine][order]
        starts, ends, _ = merge_intervals(ts, ts + gpu.dur[mine][order])
        busy = int((ends - starts).sum())
        moved = int(gpu.bytes[mine].astype(np.int64).sum())
        peak = int(units.max()) if len(units) else 0
        out.append({"device": d, "kind": kind, "copies": len(mine), "bytes": moved, "busy_ns": busy,
                    "mean_gbps": moved / busy if busy else 0.0, "peak_gbps": peak / RATE_SCALE, "peak_units": peak})
    return pd.DataFrame(out, columns=COLUMNS)
