"""``--memcpy-bw``: one counter track per (GPU, copy kind), the summed rate of the copies
active at each moment in GB/s (``analyses.memcpy_bw`` defines it)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...analyses.memcpy_bw import bandwidth_steps, memcpy_bandwidth
from ...columns.scan import TraceColumns
from ...emit.tracks import CounterTrack
from ..plugin import Analysis, counter_tracks_build


def memcpy_bw_tracks(cols: TraceColumns) -> list[CounterTrack]:
    """One counter track per (device, kind): ``Memcpy HtoD GB/s``, ``Memset GB/s``."""
    return [
        CounterTrack(pid=cols.gpu_pid(device), name="Memset" if kind == "Memset" else f"Memcpy {kind}", key="GB/s",
                     ts=ts, values=units, decimals=6)
        for device, kind, ts, units in sorted(bandwidth_steps(cols), key=lambda g: (g[0], g[1]))
    ]


def _table(cols: TraceColumns, options: Mapping[str, Any]):
    return memcpy_bandwidth(cols)


ANALYSIS = Analysis(
    "memcpy_bw", "memcpy/memset bandwidth in GB/s: one counter track per (GPU, copy kind)",
    counter_tracks_build("memcpy bandwidth", memcpy_bw_tracks), order=20, launch_apis=frozenset(),
    table=_table,
)
