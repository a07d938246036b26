"""Which runtime calls put work on a stream, and the join of GPU ops to their launch.

A launch call is the runtime or driver event whose correlation id a GPU op has, whatever it is
called (``stream_launch_mask``): new API versions, suffixes and HIP or driver variants count as
soon as a GPU op joins them. ``STREAM_LAUNCH_APIS`` is what a scan keeps in memory while it reads
(the others wait on disk, and those a GPU op joins come back); the HTA sets below, given as
``apis``, are HTA's choices by name, for comparisons with HTA.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np

from ...columns.scan import STEP_PREFIX, TraceColumns
from ...columns.table import Table
from ...util.distinct import unique
from ...util.search import in_sorted, searchsorted

# Calls that enqueue GPU work on a stream (CUDA, driver API and HIP spellings).
STREAM_LAUNCH_APIS = frozenset({
    "cudaLaunchKernel", "cudaLaunchKernelExC", "cudaLaunchCooperativeKernel",
    "cuLaunchKernel", "cuLaunchKernelEx", "cuLaunchCooperativeKernel",
    "cudaMemcpyAsync", "cudaMemcpy2DAsync", "cudaMemcpy3DAsync", "cudaMemsetAsync", "cudaMemset2DAsync",
    "cudaGraphLaunch", "cuGraphLaunch",
    "hipLaunchKernel", "hipExtLaunchKernel", "hipModuleLaunchKernel", "hipExtModuleLaunchKernel",
    "hipLaunchCooperativeKernel", "hipMemcpyAsync", "hipMemcpyWithStream", "hipMemsetAsync",
    "hipMemsetD8Async", "hipMemsetD32Async", "hipGraphLaunch",
})


# HTA's queue-length launch APIs (``get_runtime_launch_events_query`` in 0.5.0): no graph launches
# (their kernels are left out), cooperative launches or cuLaunchKernelEx; 0.6.1 adds cuLaunchKernelEx.
HTA_QUEUE_APIS = frozenset({
    "cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cudaMemcpyAsync", "cudaMemsetAsync",
    "hipLaunchKernel", "hipExtModuleLaunchKernel", "hipMemcpyAsync", "hipMemsetAsync", "hipMemcpyWithStream",
})
HTA_0_6_QUEUE_APIS = HTA_QUEUE_APIS | {"cuLaunchKernelEx"}


_API_SUFFIX = re.compile(r"(_v\d+|_ptsz|_ptds)+$")


def api_name(name: str) -> str:
    """The API a runtime event calls: CUPTI may add a version or stream suffix
    (``cudaLaunchKernelExC_v11060``, ``cudaMemcpyAsync_ptsz``)."""
    return _API_SUFFIX.sub("", name)


def calls_of(apis: frozenset[str]) -> Callable[[str], bool]:
    """A scan's ``keep_launch``: only the launch calls of ``apis`` (the columns of the rest are not made)."""
    return lambda name: api_name(name) in apis


def is_call_of(names: list[str], apis: frozenset[str]) -> np.ndarray:
    """Per name id: is it a launch call of one of ``apis``? (one entry at least, for empty traces)"""
    return np.array([api_name(name) in apis for name in names] or [False], dtype=bool)


def stream_launch_rows(cols: TraceColumns, apis: frozenset[str] | None = None) -> np.ndarray:
    """Rows of ``cols.launches`` that put work on a stream: see ``stream_launch_mask``."""
    if not len(cols.launches):
        return np.zeros(0, np.int64)
    return np.flatnonzero(stream_launch_mask(cols, apis))


def stream_launch_mask(cols: TraceColumns, apis: frozenset[str] | None = None) -> np.ndarray:
    """Per row of ``cols.launches`` (a byte a call): does it put work on a stream? By default a
    call does when a GPU op has its correlation id, whatever the call's name; with ``apis`` (HTA's
    sets), when it is a call of one of those APIs with a correlation id."""
    if apis is None:
        return gpu_joins(cols)(cols.launches)
    mask = is_call_of(cols.names, apis)[cols.launches.name]
    mask &= cols.launches.correlation >= 0
    return mask


def joinable_rows(cols: TraceColumns, apis: frozenset[str] | None = None) -> np.ndarray:
    """Rows of ``cols.launches`` a GPU op may join: every call with a correlation id (the join
    pairs only those a GPU op has), or the stream launch calls of ``apis``. Cheaper than
    ``stream_launch_rows`` where only the join is wanted (no sort of the GPU ops)."""
    if apis is not None:
        return stream_launch_rows(cols, apis)
    return np.flatnonzero(cols.launches.correlation >= 0)


def gpu_joins(cols: TraceColumns) -> Callable[[Table], np.ndarray]:
    """Per launch call of a table of the trace's (a chunk's rows): does a GPU op of ``cols`` have its
    correlation id?"""
    launched = np.sort(cols.gpu.correlation)  # in_sorted needs no dedup (numpy 2.4's unique hashes: slower)

    def joined(calls: Table) -> np.ndarray:
        hit = in_sorted(launched, calls.correlation)
        hit &= calls.correlation >= 0
        return hit
    return joined


def last_step_start(cols: TraceColumns) -> int | None:
    """HTA's last-step cut (ns): HTA's ``TraceAnalysis`` keeps only the CPU events that start
    before it, and the GPU ops launched by those, so it leaves the last profiler step out of
    everything. The cut is the latest start of any ``ProfilerStep#N`` event: the CPU range,
    or the GPU-side copy torch 2.x writes on the step's stream (a ``gpu_user_annotation``
    without a correlation, which HTA counts among the CPU events). None where the trace names
    fewer than two steps: HTA then keeps every event."""
    annotations = cols.gpu_annotations
    on_gpu = np.zeros(0, bool)
    if len(annotations):
        names = unique(annotations.name)
        is_step = np.zeros(len(cols.names), bool)
        is_step[names] = [cols.names[i].startswith(STEP_PREFIX) for i in names.tolist()]
        on_gpu = is_step[annotations.name]
    step_names = np.union1d(cols.steps.name, annotations.name[on_gpu])
    if len(step_names) < 2:
        return None
    return int(max(cols.steps.ts.max(initial=np.iinfo(np.int64).min),
                   annotations.ts[on_gpu].max(initial=np.iinfo(np.int64).min)))


def join_gpu_to_launch(cols: TraceColumns, launch_rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pairs (gpu row, launch row) joined on correlation, for the given launch rows.

    A graph launch pairs with each of its N GPU ops. GPU ops whose launch is not among
    ``launch_rows`` (outside the window, or another API) are left out.
    """
    launch_of = launch_of_gpu(cols, launch_rows)
    gpu_rows = np.flatnonzero(launch_of >= 0)
    return gpu_rows, launch_of[gpu_rows]


def launch_of_gpu(cols: TraceColumns, launch_rows: np.ndarray | None = None) -> np.ndarray:
    """For every row of ``cols.gpu``: the row of ``cols.launches`` (among ``launch_rows``, by
    default all, the first on equal correlations) that launched it, or -1.

    One int64 per GPU op and no pair arrays: the join of the largest traces stays small.
    """
    corr = cols.launches.correlation if launch_rows is None else cols.launches.correlation[launch_rows]
    order = np.argsort(corr, kind="stable")
    sorted_corr = corr[order]
    del corr
    sorted_rows = order if launch_rows is None else launch_rows[order]  # all rows: no range to hold and gather
    del order
    gpu_corr = cols.gpu.correlation
    out = searchsorted(sorted_corr, gpu_corr)
    if not len(sorted_corr):
        out[:] = -1
        return out
    missing = out == len(sorted_corr)
    np.minimum(out, len(sorted_corr) - 1, out=out)
    missing |= sorted_corr[out] != gpu_corr
    missing |= gpu_corr < 0
    del sorted_corr
    np.take(sorted_rows, out, out=out, mode="clip")  # in bounds already; "raise" would buffer a copy of out
    out[missing] = -1
    return out


def launched_before(cols: TraceColumns, cut_ns: int) -> np.ndarray:
    """Which GPU ops (a mask of ``cols.gpu`` rows) have a launch call in ``cols.launches`` that
    starts before ``cut_ns``: HTA's view of a trace with ``cut_ns`` the last step's start."""
    launch_of = launch_of_gpu(cols)
    keep = launch_of >= 0
    keep[keep] = cols.launches.ts[launch_of[keep]] < cut_ns
    return keep
