"""Kernel launches issued while the previous launch's kernel was still running.

Definition. On each CPU thread, take the launch calls that launched at least one kernel
(joined on correlation; any API: cudaLaunchKernel, cudaLaunchKernelExC_v11060,
cuLaunchKernel, cudaGraphLaunch, ...), in order of start (then file order). Call i and the
next call i+1 on the same thread form a *pair*; the pair *overlaps* when the kernels of
call i end after call i+1 starts: ``kernel_end[i] > launch_start[i + 1]`` (a graph launch's
kernels end when its last one ends). An overlapping pair means the CPU was ahead: it issued
the next launch while the GPU was still busy with the previous one. Where pairs do not
overlap, the GPU finished each kernel before the CPU launched the next: the launch path,
not the GPU, set the pace.

This is the hand analysis of a user's notebook over CUPTI CSVs (consecutive launches by
correlation id, comparing kernel end with the next runtime call's start), made per thread
so that launches from different threads do not interleave.
"""

from __future__ import annotations

import numpy as np

from ...columns.names import names_at
from ...columns.scan import KERNEL, TraceColumns
from ...util.lazy_pandas import pd
from .calls import launch_of_gpu

COLUMNS = [
    "correlation", "api", "kernel", "launch_start", "launch_end", "kernel_start", "kernel_end",
    "next_correlation", "next_api", "next_launch_start", "overlap_ns",
]


def launch_overlaps(cols: TraceColumns) -> tuple[int, pd.DataFrame]:
    """(number of consecutive launch pairs, one row per overlapping pair; times in ns)."""
    launches = cols.launches
    calls, kernel_start, kernel_end, kernel_name = _calls_by_thread(cols)
    if len(calls) == 0:
        return 0, pd.DataFrame(columns=COLUMNS)
    start = launches.ts[calls]
    same_thread = launches.track[calls]
    same_thread = same_thread[1:] == same_thread[:-1]
    overlap = kernel_end[:-1] - start[1:]
    pairs = int(same_thread.sum())
    hit = np.flatnonzero(same_thread & (overlap > 0))
    del same_thread
    # From here on a row per overlapping pair, not per call: the calls' arrays go as they are read.
    overlap, kernel_start, kernel_end, kernel_name = overlap[hit], kernel_start[hit], kernel_end[hit], kernel_name[hit]
    first, launch_start, second, next_start = calls[hit], start[hit], calls[hit + 1], start[hit + 1]
    del calls, start, hit

    table = pd.DataFrame({
        "correlation": launches.correlation[first],
        "api": names_at(cols.names, launches.name[first]),
        "kernel": names_at(cols.names, kernel_name),
        "launch_start": launch_start,
        "launch_end": launch_start + np.maximum(launches.dur[first], 0),
        "kernel_start": kernel_start,
        "kernel_end": kernel_end,
        "next_correlation": launches.correlation[second],
        "next_api": names_at(cols.names, launches.name[second]),
        "next_launch_start": next_start,
        "overlap_ns": overlap,
    }, columns=COLUMNS, copy=False)  # a block per column: not every int column copied into one
    return pairs, table


def _calls_by_thread(cols: TraceColumns) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The launch calls that launched a kernel, by thread, then start, then file order: each
    call's row, its kernels' first start and last end (a graph launch's span), and the name
    of its first kernel (by start). Each array of a row per kernel goes once used: a big trace
    has millions of kernels, and holding them all at once set stats' peak."""
    gpu, launches = cols.gpu, cols.launches
    launch_of = launch_of_gpu(cols)
    gpu_rows = np.flatnonzero((launch_of >= 0) & (gpu.kind == KERNEL))
    launch_rows = launch_of[gpu_rows]
    del launch_of
    if len(gpu_rows) == 0:
        empty = np.zeros(0, np.int64)
        return empty, empty, empty, empty
    by_launch = np.lexsort((gpu.ordinal[gpu_rows], gpu.ts[gpu_rows], launch_rows))
    gpu_rows, launch_rows = gpu_rows[by_launch], launch_rows[by_launch]
    del by_launch
    first = np.flatnonzero(np.concatenate([[True], launch_rows[1:] != launch_rows[:-1]]))
    calls = launch_rows[first]
    del launch_rows
    kernel_start = gpu.ts[gpu_rows[first]]
    kernel_end = np.maximum.reduceat(gpu.ts[gpu_rows] + np.maximum(gpu.dur[gpu_rows], 0), first)
    kernel_name = gpu.name[gpu_rows[first]]
    del gpu_rows, first
    order = np.lexsort((launches.ordinal[calls], launches.ts[calls], launches.track[calls]))
    return calls[order], kernel_start[order], kernel_end[order], kernel_name[order]
