"""What ``annotate --exposed-comm`` writes: where communication costs time, seen in Perfetto.

On each device, an "Exposed communication" track holds a slice for each interval in which
an NCCL (communication) kernel runs and no computation kernel runs on any stream of the
device (``analyses.overlap.exposed_comm``). A slice is named by the first NCCL kernel of the
run of communication it lies in; its args give that run's kernels and length.
"""

from __future__ import annotations

import numpy as np

from ...analyses.overlap import exposed_comm
from ...columns.scan import TraceColumns
from ...emit.tracks import Injections, SliceTrack
from ...io.jsontext import Texts, join_rows
from ...util.exacttime import ns_to_us_text
from ..plugin import Analysis, AnnotateContext, Figure

TITLE = "Exposed communication"
SORT_INDEX = 0  # above the streams of the device


def build(cols: TraceColumns, ctx: AnnotateContext) -> Injections:
    """One slice track per device with exposed communication, and the exposed ms as a figure."""
    table = exposed_comm(cols)
    total = int(table["dur"].sum())
    figures = {"exposed_comm_ms": total / 1e6}
    if not len(table):
        return Injections([], ["exposed comm: none (no NCCL kernel runs without a compute kernel)"], figures=figures)
    labels, label = np.unique(table["kernel"].to_numpy(dtype=object).astype(str), return_inverse=True)
    args = join_rows([b'{"nccl_kernels":', Texts.numbers(table["nccl_kernels"].to_numpy()), b',"comm_us":',
                      Texts.numbers(table["comm_ns"].to_numpy(), 3), b"}"])
    device = table["device"].to_numpy()
    tracks = []
    for d in np.unique(device).tolist():
        rows = np.flatnonzero(device == d)
        tracks.append(SliceTrack(
            pid=cols.gpu_pid(d), title=TITLE, sort_index=SORT_INDEX, ts=table["ts"].to_numpy()[rows],
            dur=table["dur"].to_numpy()[rows], labels=labels.tolist(), label=label[rows], args=args.take(rows),
            allocator=ctx.allocator,
        ))
    summary = (f"exposed comm: {len(table):,} slices on {len(tracks)} device track{'s' * (len(tracks) != 1)}, "
               f"{ns_to_us_text(total)} us of NCCL time with no compute kernel running")
    return Injections(tracks, [summary], figures=figures)


ANALYSIS = Analysis(
    "exposed_comm", "exposed communication: on each device, a slice wherever an NCCL kernel runs with no compute "
    "kernel on any stream of the device (an 'Exposed communication' track)",
    build, order=70, launch_apis=frozenset(),
    figures=(Figure("exposed_comm_ms", "exposed comm ms"),),
    table=lambda cols, options: exposed_comm(cols),
)
