"""Activity kinds: one name per kind of timed event, whatever the Kineto vocabulary.

The names are the new vocabulary's categories (``kernel``, ``gpu_memcpy``, ``gpu_memset``,
``cuda_runtime``, ``cuda_driver``, ``cpu_op``, ``user_annotation``, ``python_function``,
``cuda_profiler_range``); 2021 traces say ``Kernel``, ``Memcpy``, ``Runtime``, ``Operator``.
Stats and export both group events by these, so their tables line up.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...columns.scan import KERNEL, MEMCPY, MEMSET, TraceColumns
from ...columns.table import Table

GPU_ACTIVITY = {KERNEL: "kernel", MEMCPY: "gpu_memcpy", MEMSET: "gpu_memset"}
# The CUPTI activity kinds a notebook user shares time over: not CPU operators, user
# annotations, Python functions or profiler ranges, which nest around them.
CUPTI_KINDS = ("kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "cuda_driver")
_CANONICAL = {"runtime": "cuda_runtime", "driver": "cuda_driver", "operator": "cpu_op"}


def canonical_kind(cat: str) -> str:
    """``Runtime`` -> ``cuda_runtime``, ``Operator`` -> ``cpu_op``, ``cpu_op`` -> ``cpu_op``."""
    low = cat.lower()
    return _CANONICAL.get(low, low)


@dataclass
class Activity:
    """The rows of one ``cols`` table (``gpu``, ``launches``, ``cpu_ops``, ``ranges``) of one kind."""

    kind: str
    table: str
    rows: np.ndarray

    def of(self, cols: TraceColumns) -> Table:
        return getattr(cols, self.table)


def cat_kinds(cols: TraceColumns) -> np.ndarray:
    """The activity kind of each interned category id (``cols.cats``), as an object array."""
    return np.array([canonical_kind(c) for c in cols.cats] or [""], dtype=object)


def activities(cols: TraceColumns) -> list[Activity]:
    """Every scanned event, grouped by activity kind: GPU ops, launch calls, CPU ops, ranges."""
    out = [Activity(name, "gpu", np.flatnonzero(cols.gpu.kind == code)) for code, name in GPU_ACTIVITY.items()]
    kind_of_cat = cat_kinds(cols)
    for table in ("launches", "cpu_ops"):
        if len(getattr(cols, table)):
            kinds = kind_of_cat[getattr(cols, table).cat]
            for kind in dict.fromkeys(kinds.tolist()):
                out.append(Activity(kind, table, np.flatnonzero(kinds == kind)))
    out.append(Activity("cuda_profiler_range", "ranges", np.arange(len(cols.ranges))))
    return [a for a in out if len(a.rows)]


def durations_by_kind(cols: TraceColumns) -> list[tuple[str, np.ndarray]]:
    """Each activity kind's durations (a negative dur as 0), kinds in ``activities``' order.
    Launch calls and CPU ops (the most numerous, on disk if the scan spilled them) are read
    a chunk at a time, keeping only their durations."""
    out = [(a.kind, np.maximum(a.of(cols).dur[a.rows], 0)) for a in activities(cols) if a.table == "gpu"]
    kind_of_cat = cat_kinds(cols)
    for parts in (cols.all_launches, cols.all_cpu_ops):
        by_kind: dict[str, list[np.ndarray]] = {}
        for table in parts:
            for chunk in table.chunks():
                kinds = kind_of_cat[chunk.cat]
                for kind in dict.fromkeys(kinds.tolist()):
                    by_kind.setdefault(kind, []).append(np.maximum(chunk.dur[kinds == kind], 0))
        out += [(kind, np.concatenate(durations)) for kind, durations in by_kind.items()]
    if len(cols.ranges):
        out.append(("cuda_profiler_range", np.maximum(cols.ranges.dur, 0)))
    return out
