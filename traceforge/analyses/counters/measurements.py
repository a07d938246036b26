"""What both counter sources produce: measurements tied (or not) to trace events, and problems."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...columns.scan import KERNEL, TraceColumns
from ...util.lazy_pandas import pd
from ...util.short_names import shorten_distinct
from ..structure.stacks import Stacks

# Columns every source fills, before its counter columns.
ID_COLUMNS = ("source", "source_index", "kernel", "status", "device", "stream", "gpu_row", "launch_row")
PROBLEM_COLUMNS = ("source", "problem", "index", "kernel", "detail")


@dataclass
class Measurements:
    """``rows``: one per measured kernel (``ID_COLUMNS`` + ``counters``); ``gpu_row`` /
    ``launch_row`` index ``cols.gpu`` / ``cols.launches`` (-1 when not tied to one).
    ``problems``: every mismatch or unmatched item (``PROBLEM_COLUMNS``; ``index`` is the
    trace event's ordinal, or the ncu ID for an ncu row, -1 for a whole-device problem)."""

    rows: pd.DataFrame
    counters: list[str]
    problems: pd.DataFrame
    summary: list[str] = field(default_factory=list)


def problems_frame(items: list[tuple]) -> pd.DataFrame:
    """A problems table from ``(source, problem, index, kernel, detail)`` tuples."""
    return pd.DataFrame(items, columns=list(PROBLEM_COLUMNS)).astype({"index": "int64"})


def examples(values: list[str], limit: int = 3, width: int = 60) -> str:
    """``a, b, c (+N more)`` with long names cut, for one-line summaries."""
    shown = shorten_distinct(values[:limit], width)
    more = f" (+{len(values) - limit} more)" if len(values) > limit else ""
    return ", ".join(shown) + more


def kernel_launch_order(cols: TraceColumns, stacks: Stacks) -> np.ndarray:
    """Kernel rows of ``cols.gpu`` in the order they were launched (by their launch call's
    time; a kernel without one by its own start), the order profilers measure them in."""
    gpu, launches = cols.gpu, cols.launches
    kern = np.flatnonzero(gpu.kind == KERNEL)
    launch = stacks.gpu_launch[kern]
    issued = gpu.ts[kern].copy()
    has = launch >= 0
    issued[has] = launches.ts[launch[has]]
    return kern[np.lexsort((gpu.ordinal[kern], gpu.ts[kern], issued))]
