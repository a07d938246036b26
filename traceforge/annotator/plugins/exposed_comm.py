"""What ``annotate --exposed-comm`` writes: where communication costs time, seen in Perfetto.

On each device, an "Exposed communication" track holds a slice for each interval in which
an NCCL (communication) kernel runs and no computation kernel runs on any stream of the
device (``analyses.overlap.exposed_comm``). A slice is named by the first NCCL kernel of the
run of communication it lies in; its args give that run's kernels and length.
"""

from __future__ import annotations

import numpy as np

from ...analyses.gpu_time.comm_overlap import exposed_comm, exposed_intervals
from ...columns.scan import TraceColumns
from ...emit.tracks import Injections, SliceTrack
from ...io.write.jsontext import Texts, join_rows
from ...util.distinct import unique
from ..plugin import Analysis, AnnotateContext, Figure

TITLE = "Exposed communication"
SORT_INDEX = 0  # above the streams of the device


def build(cols: TraceColumns, ctx: AnnotateContext) -> Injections:
    """One slice track per device with exposed communication, and the exposed ms as a figure."""
    found = exposed_intervals(cols)
    total = int(found.dur.sum())
    figures = {"exposed_comm_ms": total / 1e6}
    if not len(found):
        return Injections([], ["exposed comm: none (no NCCL kernel runs without a compute kernel)"], figures=figures)
    names, label = np.unique(cols.gpu.name[found.first_kernel], return_inverse=True)
    args = join_rows([b'{"nccl_kernels":', Texts.numbers(found.nccl_kernels), b',"comm_us":',
                      Texts.numbers(found.comm_ns, 3), b"}"])
    tracks = []
    for d in unique(found.device).tolist():
        rows = np.flatnonzero(found.device == d)
        tracks.append(SliceTrack(
            pid=cols.gpu_pid(d), title=TITLE, sort_index=SORT_INDEX, ts=found.ts[rows], dur=found.dur[rows],
            labels=cols.name_of(names), label=label[rows], args=args.take(rows), allocator=ctx.allocator,
        ))
    summary = (f"exposed comm: {len(found):,} slices on {len(tracks)} device track{'s' * (len(tracks) != 1)}, "
               f"{total / 1e6:,.3f} ms of NCCL time with no compute kernel running")
    return Injections(tracks, [summary], figures=figures)


ANALYSIS = Analysis(
    "exposed_comm", "exposed communication: on each device, a slice wherever an NCCL kernel runs with no compute "
    "kernel on any stream of the device (an 'Exposed communication' track)",
    build, order=70, launch_apis=frozenset(),
    figures=(Figure("exposed_comm_ms", "exposed comm ms"),),
    table=lambda cols, options: exposed_comm(cols),
)
