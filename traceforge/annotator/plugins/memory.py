"""``--memory``: counter tracks of allocated and reserved memory per device, from Kineto's
``[memory]`` instants (``analyses.memory_timeline`` defines them): ``Memory allocated MB`` and
``Memory reserved MB``, in the GPU's process for a CUDA device and in the host's process for
the CPU, in MB (10^6 bytes) written with six decimals, so every byte count is exact."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...analyses.memory.timeline import (
    CPU_DEVICE_TYPE,
    device_memory,
    device_type_name,
    memory_peaks,
    memory_step_peaks,
    memory_timeline,
)
from ...columns.scan import MEMORY_EVENT, TraceColumns
from ...emit.tracks import CounterTrack, Injections, PackedTimes
from ..plugin import Analysis, AnnotateContext, Column, Table

MB_DECIMALS = 6  # values are bytes; written as MB (10^6 bytes), exactly


def memory_tracks(cols: TraceColumns) -> list[CounterTrack]:
    """Two counter tracks per device: ``Memory allocated MB`` and ``Memory reserved MB``."""
    tracks = []
    for d in device_memory(cols):
        pid = cols.tracks[d.track][0] if d.device_type == CPU_DEVICE_TYPE else cols.gpu_pid(d.device)
        key = "MB" if d.device_type in (CPU_DEVICE_TYPE, 1) else f"{device_type_name(d.device_type)} {d.device} MB"
        ts, allocated, reserved = d.levels(consume=True)
        del d  # its events go before the times are packed
        times = PackedTimes.of(ts)  # once, for both tracks
        del ts
        tracks += [CounterTrack(pid=pid, name="Memory allocated", key=key, ts=times, values=allocated,
                                decimals=MB_DECIMALS),
                   CounterTrack(pid=pid, name="Memory reserved", key=key, ts=times, values=reserved,
                                decimals=MB_DECIMALS)]
    return tracks


def build(cols: TraceColumns, ctx: AnnotateContext) -> Injections:
    tracks = memory_tracks(cols)
    if not tracks:
        return Injections([], [f"memory: no tracks: the trace has no {MEMORY_EVENT} events "
                               "(torch.profiler writes them with profile_memory=True)"])
    points = sum(len(t.ts) for t in tracks)
    return Injections(tracks, [f"memory: {len(tracks)} counter tracks, {points:,} points, "
                               f"from {cols.memory_events:,} {MEMORY_EVENT} events"])


def _table(cols: TraceColumns, options: Mapping[str, Any]):
    return memory_timeline(cols)


ANALYSIS = Analysis(
    "memory", "allocated and reserved memory per device (and host) from the [memory] events: counter tracks in MB",
    build, order=90, launch_apis=frozenset(), memory_events=True, table=_table,
    tables=(
        Table("memory", "Memory per device from the [memory] events (MB = 10^6 bytes; ts in us)", (
            Column("device", "device_type", left=True, repeat=True), Column("id", "device", repeat=True),
            Column("events", "events", "count"),
            Column("peak alloc MB", "peak_allocated", "MB"), Column("at us", "peak_allocated_ts", "ts_us"),
            Column("final alloc MB", "final_allocated", "MB"), Column("peak reserved MB", "peak_reserved", "MB"),
            Column("at us", "peak_reserved_ts", "ts_us"), Column("final reserved MB", "final_reserved", "MB"),
        ), lambda cols, ctx: memory_peaks(cols), order=180, without_gpu=True),
        Table("memory_steps", "Memory per profiler step (level entering the step, peak over it, level at its end; MB)", (
            Column("device", "device_type", left=True, repeat=True), Column("id", "device", repeat=True),
            Column("step", "step", repeat=True),
            Column("events", "events", "count"), Column("start alloc", "start_allocated", "MB"),
            Column("peak alloc", "peak_allocated", "MB"), Column("end alloc", "end_allocated", "MB"),
            Column("peak reserved", "peak_reserved", "MB"),
        ), lambda cols, ctx: memory_step_peaks(cols, ctx.steps), order=190, without_gpu=True),
    ),
)
