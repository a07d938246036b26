"""What ``annotate --launch-delay`` writes into the trace, so the delay is seen in Perfetto.

Each launched GPU op gets args ``launch_delay_us`` and ``launch_cpu_us``; each outlier
(delay above the cutoff) gets a flow arrow from its launch call to it, category
``launch_delay``, named with the delay so it can be searched and toggled; each stream gets
a counter track holding the delay of the op that started last.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from ...analyses.launches.calls import STREAM_LAUNCH_APIS
from ...analyses.launches.delay import DEFAULT_DELAY_CUTOFF_NS, launch_pairs, no_launches_reason
from ...analyses.structure.series import stream_groups
from ...columns.scan import TraceColumns
from ...emit.flow_anchors import flow_anchors
from ...emit.tracks import CounterTrack, FlowArrows, Injections
from ...io.write.jsontext import ArgColumns, FixedPoint, compact_ints
from ...util.durations import duration_arg, duration_ns
from ...util.exacttime import ns_to_us_text
from ...util.search import searchsorted
from ..plugin import Analysis, AnnotateContext, Option

FLOW_CATEGORY = "launch_delay"
COUNTER_NAME = "Launch delay (us)"


def launch_delay_marks(cols: TraceColumns, ctx: AnnotateContext) -> Injections:
    """Args on every launched GPU op, outlier arrows and per-stream counters."""
    cutoff = duration_ns(ctx.options["delay_cutoff"], DEFAULT_DELAY_CUTOFF_NS)
    gpu_rows, launch_rows, delay = launch_pairs(cols)
    if not len(gpu_rows):
        return Injections(summary=[f"launch delay: nothing added: {no_launches_reason(cols)}"])
    patches = ArgColumns(compact_ints(cols.gpu.ordinal[gpu_rows]), {
        "launch_delay_us": compact_ints(delay), "launch_cpu_us": compact_ints(cols.launches.dur[launch_rows]),
    }, {"launch_delay_us": FixedPoint(3), "launch_cpu_us": FixedPoint(3)})
    outlier = np.flatnonzero(delay > cutoff)  # the arrows need only these: the pairs are freed early
    # Launch calls by ordinal: the columns ``tracks`` is given may hold more of them (those near
    # launches, picked meanwhile), so rows would move; GPU op rows do not.
    arrows = [compact_ints(gpu_rows[outlier]), cols.launches.ordinal[launch_rows[outlier]], delay[outlier]]
    del launch_rows, outlier
    pairs = [compact_ints(gpu_rows), compact_ints(delay)]  # held until the tracks: 4 bytes each where they fit
    del gpu_rows, delay

    def tracks(cols: TraceColumns) -> Injections:
        """The per-stream counters, then (their rest, once the counters wait on disk) the outliers' arrows."""
        counters = delay_counters(cols, *pairs)
        pairs.clear()
        points = sum(len(c.ts) for c in counters)
        return Injections(list(counters), later=partial(arrow_tracks, counts=(len(counters), points)))

    def arrow_tracks(cols: TraceColumns, counts: tuple[int, int], done: int = 0, unplaced: int = 0) -> Injections:
        """The next ``ARROW_CHUNK`` outliers' arrows; their rest, once these wait on disk, the
        next chunk's; the last chunk's has the summary."""
        gpu_rows, launch_ordinals, outlier_delay = (column[done:done + ARROW_CHUNK] for column in arrows)
        first_id = cols.max_flow_id + 1 + done - unplaced  # the ids run on across chunks
        flows = outlier_flows(cols, gpu_rows, searchsorted(cols.launches.ordinal, launch_ordinals),
                              outlier_delay, first_id)
        done, unplaced = done + len(gpu_rows), unplaced + len(gpu_rows) - len(flows)
        if done < len(arrows[0]):
            return Injections([flows], later=partial(arrow_tracks, counts=counts, done=done, unplaced=unplaced))
        arrows.clear()
        summary = (f"launch delay: args on {args_on:,} GPU ops, {done - unplaced:,} arrows for delays "
                   f"> {ns_to_us_text(cutoff)} us")
        if unplaced:
            summary += (f" ({unplaced:,} outliers without one: no ts inside both slices as Perfetto reads them, "
                        "or Perfetto moves one to an overflow track)")
        summary += f", {counts[0]} counter tracks ({counts[1]:,} points)"
        return Injections([flows], [summary])

    args_on = len(patches)
    return Injections(arg_columns=[patches], later=tracks)


def delay_label(ns: int) -> str:
    """``launch delay 1.84 ms`` (ms to 2 decimals from 1 ms up, else µs to 1 decimal)."""
    if ns >= 1_000_000:
        hundredths = (ns + 5_000) // 10_000
        return f"launch delay {hundredths // 100}.{hundredths % 100:02d} ms"
    tenths = (ns + 50) // 100
    return f"launch delay {tenths // 10}.{tenths % 10} us"


ARROW_CHUNK = 1 << 19  # outliers whose arrows are made at a time (``flow_anchors``' working set is ~60 bytes each)


def outlier_flows(cols: TraceColumns, gpu_rows: np.ndarray, launch_rows: np.ndarray, delay: np.ndarray,
                  first_id: int) -> FlowArrows:
    """An arrow from each launch call to its GPU op, ids from ``first_id`` up, for the outliers
    whose ends can be placed (a ts binds to both slices; not, e.g., for a zero-duration op, or
    one Perfetto spills: see ``flow_anchors``)."""
    start_ts, end_ts = flow_anchors(cols, [(cols.launches, launch_rows), (cols.gpu, gpu_rows)])
    ok = np.flatnonzero((start_ts >= 0) & (end_ts >= 0))
    return FlowArrows(
        cat=FLOW_CATEGORY, first_id=first_id, tracks=cols.tracks,
        start_track=cols.launches.track[launch_rows[ok]], start_ts=start_ts[ok],
        end_track=cols.gpu.track[gpu_rows[ok]], end_ts=end_ts[ok], values=delay[ok], label=delay_label,
    )


def delay_counters(cols: TraceColumns, gpu_rows: np.ndarray, delay: np.ndarray) -> list[CounterTrack]:
    """Per (device, stream): the delay at each GPU op start (the largest where ops start together)."""
    gpu = cols.gpu
    launched = np.zeros(len(gpu), bool)
    launched[gpu_rows] = True
    tracks = []
    for device, stream, mine in stream_groups(gpu.device, gpu.stream, launched):
        pick = mine[gpu_rows]
        ts, value = gpu.ts[gpu_rows[pick]], compact_ints(delay[pick])
        if len(ts) > 1 and not bool(np.all(ts[1:] >= ts[:-1])):  # in file order, a stream's ops are mostly in time order
            order = np.argsort(ts, kind="stable")
            ts = ts[order]  # one at a time: the stream's largest temporaries (4 arrays of it, not 5)
            value = value[order]
            del order
        first = np.ones(len(ts), bool)
        first[1:] = ts[1:] != ts[:-1]
        largest = np.maximum.reduceat(value, np.flatnonzero(first)) if len(ts) else value
        tracks.append(CounterTrack(pid=cols.gpu_pid(device), name=COUNTER_NAME, key=f"stream {stream}",
                                   ts=ts[first], values=largest, decimals=3))  # compact as the delays were
        del mine, pick, ts, value, first, largest  # not held while the next stream is done
    return tracks


ANALYSIS = Analysis(
    "launch_delay", "launch delay: args launch_delay_us/launch_cpu_us on each GPU op, an arrow "
    "from the launch call for each delay above --delay-cutoff, one counter track per stream",
    launch_delay_marks, order=30,
    options=(Option("delay_cutoff", "--launch-delay draws an arrow for delays above this (e.g. 100us, 1.5ms; "
                    "default 100us)", default=DEFAULT_DELAY_CUTOFF_NS, parse=duration_arg, metavar="DURATION"),),
    patches_args=True, launch_apis=STREAM_LAUNCH_APIS, joined_launches=True, arrows_from_launches=True,
    args_without_cpu_ops=lambda cols, options: True,
)
