"""CUDA stream queue length: launched but not yet started GPU ops, per (device, stream).

HTA's definition, so numbers compare: +1 at the start of the launch call, -1 at the
start of the GPU op with the same correlation (a graph launch adds one per GPU op it
launched). Only launches whose GPU op is in the trace count. Every change at one
timestamp is netted into one point, at the exact ns.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..inject import CounterTrack
from ..scan import TraceColumns
from .launches import STREAM_LAUNCH_APIS, join_gpu_to_launch, stream_launch_rows
from .series import net_steps


def queue_length(
    cols: TraceColumns,
    *,
    launched_before_ns: int | None = None,
    apis: frozenset[str] = STREAM_LAUNCH_APIS,
) -> pd.DataFrame:
    """One row per change point: device, stream, ts (ns), queue_length.

    ``launched_before_ns`` keeps only launches that start before it (HTA drops the last
    profiler step this way; see ``launches.last_step_start``); ``apis=HTA_QUEUE_APIS``
    leaves graph launches out as HTA does.
    """
    (device, stream), ts, value = _queue_steps(cols, launched_before_ns, apis)
    return pd.DataFrame({"device": device, "stream": stream, "ts": ts, "queue_length": value})


def _queue_steps(
    cols: TraceColumns, launched_before_ns: int | None = None, apis: frozenset[str] = STREAM_LAUNCH_APIS,
) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    rows = stream_launch_rows(cols, apis)
    if launched_before_ns is not None:
        rows = rows[cols.launches.ts[rows] < launched_before_ns]
    gpu_rows, launch_rows = join_gpu_to_launch(cols, rows)
    # One int key per (device, stream), and no names kept here: net_steps can free each
    # input as it reorders it (this is the memory peak of annotate on big traces).
    devices, device_code = np.unique(cols.gpu.device[gpu_rows], return_inverse=True)
    streams, stream_code = np.unique(cols.gpu.stream[gpu_rows], return_inverse=True)
    pairs, code = np.unique(device_code.ravel() * len(streams) + stream_code.ravel(), return_inverse=True)
    del device_code, stream_code
    (code,), ts, value = net_steps(
        [np.tile(code.ravel().astype(np.int32), 2)],
        np.concatenate([cols.launches.ts[launch_rows], cols.gpu.ts[gpu_rows]]),
        np.repeat(np.array([1, -1], np.int32), len(gpu_rows)),
    )
    pair = pairs[code]
    return [devices[pair // len(streams)], streams[pair % len(streams)]], ts, value


def queue_length_tracks(cols: TraceColumns) -> list[CounterTrack]:
    """One counter track per (device, stream): ``Queue length stream 7`` in the GPU's process."""
    (device, stream), ts, value = _queue_steps(cols)
    if not len(ts):
        return []
    bounds = np.flatnonzero(np.diff(device) | np.diff(stream)) + 1
    tracks = []
    for lo, hi in zip([0, *bounds.tolist()], [*bounds.tolist(), len(ts)]):
        tracks.append(CounterTrack(
            pid=cols.gpu_pid(int(device[lo])), name="Queue length", key=f"stream {stream[lo]}",
            ts=ts[lo:hi], values=value[lo:hi],
        ))
    return tracks
