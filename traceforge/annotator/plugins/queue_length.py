"""``--queue-length``: one counter track per (GPU, stream), the number of GPU ops launched
and not yet started (``analyses.queue_length`` defines it)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...analyses.launches import STREAM_LAUNCH_APIS
from ...analyses.queue_length import queue_length, queue_steps
from ...columns.scan import TraceColumns
from ...emit.tracks import CounterTrack
from ..plugin import Analysis, counter_tracks_build


def queue_length_tracks(cols: TraceColumns) -> list[CounterTrack]:
    """One counter track per (device, stream): ``Queue length stream 7`` in the GPU's process."""
    return [
        CounterTrack(pid=cols.gpu_pid(device), name="Queue length", key=f"stream {stream}", ts=ts, values=value)
        for device, stream, ts, value in queue_steps(cols)
    ]


def _table(cols: TraceColumns, options: Mapping[str, Any]):
    return queue_length(cols)


ANALYSIS = Analysis(
    "queue_length", "CUDA stream queue length: one counter track per (GPU, stream)",
    counter_tracks_build("queue length", queue_length_tracks), order=10, launch_apis=STREAM_LAUNCH_APIS,
    joined_launches=True,
    table=_table,
)
