"""``--idle-gaps``: each stream's idle gaps of at least ``--idle-gaps-min`` as slices, named by
their category, on a track beside the stream.

The gaps and their categories are the ``stats`` streams table's (``gpu_busy.stream_gaps``,
kernel wait below 30 µs): slices ``host wait``, ``kernel wait`` and ``other`` on thread
``Idle gaps (stream N)`` in that GPU's process, each with the GPU op that ends it in its args
(``next_op``). Gaps of one stream never overlap, so each stream needs one lane.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ...analyses.gpu_time.busy import IDLE_CATEGORIES
from ...analyses.gpu_time.idle_intervals import DEFAULT_MIN_GAP_NS, idle_gaps, idle_intervals, long_gaps
from ...columns.scan import TraceColumns
from ...emit.tracks import IndexedTexts, Injections, SliceTrack
from ...io.write.jsontext import json_bytes
from ...util.durations import duration_arg, duration_ns
from ...util.exacttime import ns_to_us_text
from ..plugin import Analysis, AnnotateContext, Column, Figure, Option, Table

LABELS = [name.replace("_", " ") for name in IDLE_CATEGORIES]  # "host wait", "kernel wait", "other"


def _min_gap(options: Mapping[str, Any]) -> int:
    return duration_ns(options["idle_gaps_min"], DEFAULT_MIN_GAP_NS)


def idle_gap_tracks(cols: TraceColumns, ctx: AnnotateContext) -> Injections:
    """One ``SliceTrack`` per (device, stream) with gaps of at least the threshold."""
    min_gap = _min_gap(ctx.options)
    tracks, per_category = [], np.zeros(len(IDLE_CATEGORIES), np.int64)
    for device, stream, start, end, code, opener in long_gaps(cols, min_gap_ns=min_gap):
        args = IndexedTexts.of(cols.gpu.name[opener], lambda n: b'{"next_op":' + json_bytes(cols.names[n]) + b"}")
        del opener
        end -= start  # in place: the durations
        tracks.append(SliceTrack(pid=cols.gpu_pid(device), title=f"Idle gaps (stream {stream})", sort_index=stream,
                                 ts=start, dur=end, labels=LABELS, label=code, args=args, allocator=ctx.allocator))
        per_category += np.bincount(code, minlength=len(IDLE_CATEGORIES))
        del start, end, code, args
    gaps = int(per_category.sum())
    split = ", ".join(f"{label} {n:,}" for label, n in zip(LABELS, per_category.tolist()))
    summary = (f"idle gaps: {gaps:,} slices of at least {ns_to_us_text(min_gap)} us on {len(tracks)} stream "
               f"track{'s' * (len(tracks) != 1)}" + (f" ({split})" if gaps else ""))
    return Injections(tracks, [summary], figures={"idle_gaps": gaps})


ANALYSIS = Analysis(
    "idle_gaps", "idle gaps of each GPU stream (at least --idle-gaps-min) as slices named host wait / kernel wait / "
    "other (the stats streams table's categories) on an 'Idle gaps (stream N)' track",
    idle_gap_tracks, order=80,
    options=(Option("idle_gaps_min", "--idle-gaps draws gaps at least this long (e.g. 50us, 1.5ms; a bare number "
                    f"is us; default {ns_to_us_text(DEFAULT_MIN_GAP_NS)}us)", default=DEFAULT_MIN_GAP_NS,
                    parse=duration_arg, metavar="DURATION"),),
    launch_apis=frozenset(), joined_launches=True,  # host wait reads each GPU op's launch call, whatever its API
    figures=(Figure("idle_gaps", "idle gaps"),),
    table=lambda cols, options: idle_gaps(cols, min_gap_ns=_min_gap(options)),
    tables=(Table("idle_intervals", "Idle gaps per stream and category (between merged busy intervals; percentiles "
                  "nearest-rank)", (
        Column("device", "device", repeat=True), Column("stream", "stream", repeat=True),
        Column("category", "category", left=True, repeat=True),
        Column("count", "count", "count"), Column("total ms", "total_ns", "ms"), Column("mean us", "mean_ns", "us"),
        Column("min us", "min_ns", "us"), Column("p50 us", "p50_ns", "us"), Column("p90 us", "p90_ns", "us"),
        Column("max us", "max_ns", "us"),
    ), lambda cols, ctx: idle_intervals(cols, kernel_wait_ns=ctx.kernel_wait_ns), order=150, aliases=("idle_gaps",)),),
)
