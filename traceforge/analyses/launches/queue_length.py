"""CUDA stream queue length: launched but not yet started GPU ops, per (device, stream).

HTA's definition, so numbers compare: +1 at the start of the launch call, -1 at the
start of the GPU op with the same correlation (a graph launch adds one per GPU op it
launched). Only launches whose GPU op is in the trace count. Every change at one
timestamp is netted into one point, at the exact ns.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from ...columns.scan import TraceColumns
from ...util.lazy_pandas import pd
from ..structure.series import running_count, stream_groups
from .calls import joinable_rows, launch_of_gpu


def queue_length(
    cols: TraceColumns,
    *,
    launched_before_ns: int | None = None,
    apis: frozenset[str] | None = None,
) -> pd.DataFrame:
    """One row per change point: device, stream, ts (ns), queue_length.

    ``launched_before_ns`` keeps only launches that start before it (HTA drops the last
    profiler step this way; see ``launches.last_step_start``); ``apis=HTA_QUEUE_APIS``
    leaves graph launches out as HTA does.
    """
    groups = list(queue_steps(cols, launched_before_ns, apis))
    sizes = [len(ts) for _, _, ts, _ in groups]
    values = np.concatenate([v for _, _, _, v in groups]).astype(np.int64) if groups else np.zeros(0, np.int32)
    return pd.DataFrame({
        "device": np.repeat(np.array([d for d, _, _, _ in groups], cols.gpu.device.dtype), sizes),
        "stream": np.repeat(np.array([s for _, s, _, _ in groups], np.int64), sizes),
        "ts": np.concatenate([ts for _, _, ts, _ in groups] or [np.zeros(0, np.int64)]),
        "queue_length": values,
    })


def queue_steps(
    cols: TraceColumns, launched_before_ns: int | None = None, apis: frozenset[str] | None = None,
) -> Iterator[tuple[int, int, np.ndarray, np.ndarray]]:
    """(device, stream, ts, queue length) per stream, sorted by device then stream.

    One stream at a time, its launch and GPU op starts in one sort buffer: the working
    set is that stream's, not every launch's.
    """
    rows = joinable_rows(cols, apis)
    if launched_before_ns is not None:
        rows = rows[cols.launches.ts[rows] < launched_before_ns]
    launch_of = launch_of_gpu(cols, rows)
    del rows
    gpu = cols.gpu
    for device, stream, mine in stream_groups(gpu.device, gpu.stream, launch_of >= 0):
        n = int(np.count_nonzero(mine))
        times = np.empty(2 * n, np.int64)
        np.take(cols.launches.ts, launch_of[mine], out=times[:n])
        times[n:] = gpu.ts[mine]
        del mine
        ts, value = running_count(times, n)
        del times  # not held while the caller has the group
        yield device, stream, ts, value

