"""``--memcpy-bw``: one counter track per (GPU, copy kind), the summed rate of the copies
active at each moment in GB/s (``analyses.memcpy_bw`` defines it)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...analyses.memory.memcpy_bw import bandwidth_steps, left_out_note, memcpy_bandwidth
from ...analyses.memory.memcpy_summary import memcpy_summary
from ...columns.scan import TraceColumns
from ...emit.tracks import CounterTrack, Injections
from ..plugin import Analysis, AnnotateContext, Column, Table, counter_tracks_build


def memcpy_bw_tracks(cols: TraceColumns) -> list[CounterTrack]:
    """One counter track per (device, kind): ``Memcpy HtoD GB/s``, ``Memset GB/s``."""
    return [
        CounterTrack(pid=cols.gpu_pid(device), name="Memset" if kind == "Memset" else f"Memcpy {kind}", key="GB/s",
                     ts=ts, values=units, decimals=6)
        for device, kind, ts, units in sorted(bandwidth_steps(cols), key=lambda g: (g[0], g[1]))
    ]


_tracks_build = counter_tracks_build("memcpy bandwidth", memcpy_bw_tracks)


def build(cols: TraceColumns, ctx: AnnotateContext) -> Injections:
    """The tracks, and a summary that says why copies without ``bytes`` (ROCm) have none."""
    injections = _tracks_build(cols, ctx)
    note = left_out_note(cols)
    if note is not None:
        injections.summary[-1] += f"; {note}"
    return injections


def _table(cols: TraceColumns, options: Mapping[str, Any]):
    return memcpy_bandwidth(cols)


ANALYSIS = Analysis(
    "memcpy_bw", "memcpy/memset bandwidth in GB/s: one counter track per (GPU, copy kind)",
    build, order=20, launch_apis=frozenset(),
    table=_table, api="memcpy_bandwidth",
    tables=(Table("memcpy", "Memcpy/memset bandwidth per device and kind (busy: union of the copies; mean: bytes / "
                  "busy)", (
        Column("device", "device"), Column("kind", "kind", left=True), Column("copies", "copies", "count"),
        Column("MB", "bytes", "MB.3"), Column("busy ms", "busy_ns", "ms"), Column("mean GB/s", "mean_gbps", "GB/s"),
        Column("peak GB/s", "peak_gbps", "GB/s"),
    ), lambda cols, ctx: memcpy_summary(cols), order=170, aliases=("memcpy_bw",)),),
)
