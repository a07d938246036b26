"""Profiler steps: the ``ProfilerStep#N`` CPU ranges, and which step each GPU op belongs to.

torch.profiler marks each training step with a CPU range named ``ProfilerStep#N``. The GPU
work of a step runs later than its CPU range, so a GPU op belongs to the step whose CPU range
contains the start of the op's launch call (as HTA assigns ``iteration`` through the
correlation id). An op whose launch call is not in the columns belongs to the step whose
CPU range contains the op's own start, if any. Every other op has step -1.

Unlike HTA, no step is left out. HTA drops the last one, and every GPU op whose launch call is
not in the trace, from all its analyses: ``hta_ops`` is that choice of GPU ops, for the
analyses that offer it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ...columns.scan import TraceColumns
from ...errors import UsageError
from ...util.distinct import unique
from ..launches.calls import STREAM_LAUNCH_APIS, is_call_of, last_step_start, launch_of_gpu, launched_before

STEP_NAME = re.compile(r"ProfilerStep#(\d+)")
NO_STEP = -1


@dataclass(frozen=True)
class Steps:
    """The profiler steps of a trace, by start: number, and CPU range [start, end) in ns."""

    number: np.ndarray  # int64
    start: np.ndarray  # int64
    end: np.ndarray  # int64

    def __len__(self) -> int:
        return len(self.number)

    def containing(self, ts: np.ndarray) -> np.ndarray:
        """The number of the step whose CPU range contains each of ``ts`` (the latest-starting
        one where ranges nest), or ``NO_STEP``."""
        if not len(self):
            return np.full(len(ts), NO_STEP, np.int64)
        at = np.searchsorted(self.start, ts, side="right") - 1
        inside = at >= 0
        inside[inside] = ts[inside] < self.end[at[inside]]
        return np.where(inside, self.number[np.maximum(at, 0)], NO_STEP)


def profiler_steps(cols: TraceColumns) -> Steps:
    """The ``ProfilerStep#N`` ranges of ``cols`` (kept by every scan), sorted by start."""
    ranges = cols.steps
    numbers = np.array([int(m.group(1)) if (m := STEP_NAME.fullmatch(n)) else NO_STEP for n in cols.names] or [0],
                       np.int64)
    number = numbers[ranges.name] if len(ranges) else np.zeros(0, np.int64)
    keep = number != NO_STEP
    ts, end = ranges.ts[keep].astype(np.int64), (ranges.ts[keep] + np.maximum(ranges.dur[keep], 0)).astype(np.int64)
    order = np.lexsort((number[keep], ts))
    return Steps(number[keep][order], ts[order], end[order])


def hta_ops(cols: TraceColumns) -> np.ndarray:
    """The GPU ops HTA's ``TraceAnalysis`` keeps (a mask of ``cols.gpu`` rows): those whose
    launch call (any runtime or driver call in ``cols.launches``, joined on correlation)
    starts before HTA's last-step cut (``launches.last_step_start``); every op where the trace
    names fewer than two steps."""
    cut = last_step_start(cols)
    return np.ones(len(cols.gpu), bool) if cut is None else launched_before(cols, cut)


def gpu_steps(cols: TraceColumns, steps: Steps | None = None) -> np.ndarray:
    """The step of each GPU op (``cols.gpu`` order; ``NO_STEP`` for none), see the module
    docstring. Reads the launch calls in memory (``cols.launches``)."""
    steps = profiler_steps(cols) if steps is None else steps
    gpu = cols.gpu
    if not len(steps):
        return np.full(len(gpu), NO_STEP, np.int64)
    when = gpu.ts.astype(np.int64)
    launch_of = launch_of_gpu(cols)
    joined = launch_of >= 0
    when[joined] = cols.launches.ts[launch_of[joined]]
    return steps.containing(when)


@dataclass(frozen=True)
class StepsCut:
    """ProfilerStep#N .. #M and the GPU work they launched (``steps_cut``): their CPU ranges span
    [start, cpu_end); ``gpu``, a mask of ``cols.gpu``, is their GPU ops (as ``gpu_steps``
    assigns ops to steps); ``end`` is where the last of those ends (at least ``cpu_end``)."""

    start: int
    cpu_end: int
    end: int
    gpu: np.ndarray  # bool per cols.gpu row
    launched: np.ndarray  # int64, the correlations of the stream launch calls in [start, cpu_end)


def steps_cut(cols: TraceColumns, first: int, last: int) -> StepsCut:
    """ProfilerStep#``first`` .. #``last``: from the start of the first step's CPU range to the
    end of the last one's, and the GPU ops of those steps. A GPU op is theirs when a launch call
    that puts work on a stream (``STREAM_LAUNCH_APIS``) with its correlation starts in [start,
    end of the CPU ranges), or, with no such call in the trace, when the op itself starts there
    (``gpu_steps``'s rule): GPU work an earlier step launched and still running, and what a
    later step launches before this work ends, are not theirs. Launch calls may be on disk (read
    a chunk at a time). A UsageError names the steps the trace has when none of these is there."""
    steps = profiler_steps(cols)
    rows = np.flatnonzero((steps.number >= first) & (steps.number <= last))
    if not len(rows):
        found = unique(steps.number)
        have = f"steps {found.min()}-{found.max()}" if len(found) else "no ProfilerStep#N ranges"
        raise UsageError(f"steps {first}-{last}: the trace has {have}")
    start, cpu_end = int(steps.start[rows].min()), int(steps.end[rows].max())
    is_stream_api = is_call_of(cols.names, STREAM_LAUNCH_APIS)
    during, every = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    for part in cols.all_launches:
        for chunk in part.chunks():
            if not len(chunk):
                continue
            calls = is_stream_api[chunk.name] & (chunk.correlation >= 0)
            every.append(chunk.correlation[calls].astype(np.int64))
            during.append(chunk.correlation[calls & (chunk.ts >= start) & (chunk.ts < cpu_end)].astype(np.int64))
    launched, every_call = unique(np.concatenate(during)), unique(np.concatenate(every))
    gpu = cols.gpu
    corr = gpu.correlation.astype(np.int64)
    has_call = (corr >= 0) & np.isin(corr, every_call)
    ts = gpu.ts.astype(np.int64)
    mine = np.where(has_call, np.isin(corr, launched), (ts >= start) & (ts < cpu_end))
    ends = ts[mine] + np.maximum(gpu.dur[mine], 0)
    return StepsCut(start, cpu_end, max(cpu_end, int(ends.max())) if len(ends) else cpu_end, mine, launched)


def steps_window(cols: TraceColumns, first: int, last: int) -> tuple[int, int]:
    """[start, end) in ns of ProfilerStep#``first`` .. #``last`` and the GPU work they launched
    (``steps_cut``'s ``start`` and ``end``)."""
    cut = steps_cut(cols, first, last)
    return cut.start, cut.end
