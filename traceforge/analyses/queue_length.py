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
    rows = stream_launch_rows(cols, apis)
    if launched_before_ns is not None:
        rows = rows[cols.launches.ts[rows] < launched_before_ns]
    gpu_rows, launch_rows = join_gpu_to_launch(cols, rows)
    device = np.concatenate([cols.gpu.device[gpu_rows]] * 2)
    stream = np.concatenate([cols.gpu.stream[gpu_rows]] * 2)
    ts = np.concatenate([cols.launches.ts[launch_rows], cols.gpu.ts[gpu_rows]])
    delta = np.concatenate([np.ones(len(gpu_rows), np.int64), -np.ones(len(gpu_rows), np.int64)])
    (device, stream), ts, value = net_steps([device, stream], ts, delta)
    return pd.DataFrame({"device": device, "stream": stream, "ts": ts, "queue_length": value})


def queue_length_tracks(cols: TraceColumns) -> list[CounterTrack]:
    """One counter track per (device, stream): ``Queue length stream 7`` in the GPU's process."""
    df = queue_length(cols)
    tracks = []
    for (device, stream), g in df.groupby(["device", "stream"], sort=True):
        tracks.append(CounterTrack(
            pid=cols.gpu_pid(int(device)), name="Queue length", key=f"stream {stream}",
            ts=g["ts"].to_numpy(), values=g["queue_length"].to_numpy(),
        ))
    return tracks
