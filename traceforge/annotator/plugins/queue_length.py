"""``--queue-length``: one counter track per (GPU, stream), the number of GPU ops launched
and not yet started (``analyses.queue_length`` defines it). With ``--hta``, HTA's choices for
``generate_trace_with_counters``: its launch APIs and its last-step cut; the points stay at
the events' exact ts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...analyses.hta.choices import hta_version, queue_apis
from ...analyses.launches.calls import STREAM_LAUNCH_APIS, last_step_start
from ...analyses.launches.queue_length import queue_length, queue_steps
from ...analyses.launches.queue_summary import CUDA_LAUNCH_QUEUE_LIMIT, QUARTILES, queue_summary
from ...columns.scan import TraceColumns
from ...emit.tracks import CounterTrack, Injections
from ..plugin import Analysis, AnnotateContext, Column, Table, counter_tracks_build


def choices(cols: TraceColumns, options: Mapping[str, Any]) -> dict[str, Any]:
    """``queue_steps``' launch cut and APIs: HTA's with the ``hta`` option (a version), else none and
    every launch call a GPU op joins."""
    version = hta_version(options.get("hta"))
    if version is None:
        return {"launched_before_ns": None, "apis": None}
    return {"launched_before_ns": last_step_start(cols), "apis": queue_apis(version)}


def queue_length_tracks(cols: TraceColumns, options: Mapping[str, Any]) -> list[CounterTrack]:
    """One counter track per (device, stream): ``Queue length stream 7`` in the GPU's process."""
    return [
        CounterTrack(pid=cols.gpu_pid(device), name="Queue length", key=f"stream {stream}", ts=ts, values=value)
        for device, stream, ts, value in queue_steps(cols, **choices(cols, options))
    ]


def build(cols: TraceColumns, ctx: AnnotateContext) -> Injections:
    return counter_tracks_build("queue length", lambda c: queue_length_tracks(c, ctx.options))(cols, ctx)


def _table(cols: TraceColumns, options: Mapping[str, Any]):
    return queue_length(cols, **choices(cols, options))


ANALYSIS = Analysis(
    "queue_length", "CUDA stream queue length: one counter track per (GPU, stream)",
    build, order=10, launch_apis=STREAM_LAUNCH_APIS, joined_launches=True,
    table=_table,
    tables=(Table("queue", "Queue length per stream (launched, not yet started): change points, and ms at or above "
                  "each quartile of the stream's max", (
        Column("device", "device", repeat=True), Column("stream", "stream", repeat=True),
        Column("points", "points", "count"), Column("mean", "mean", "0.1"), Column("p50", "p50", "count"),
        Column("p95", "p95", "count"), Column("max", "max", "count"), Column("span ms", "span_ns", "ms"),
        *[Column(f">={q}% ms", f"ge_q{q}_ns", "ms") for q in QUARTILES],
        Column(f"at limit {CUDA_LAUNCH_QUEUE_LIMIT} ms", "at_limit_ns", "ms", if_positive=True),
    ), lambda cols, ctx: queue_summary(cols, apis=queue_apis(ctx.hta) if ctx.hta else STREAM_LAUNCH_APIS),
        order=160, aliases=("queue_length",)),),
)
