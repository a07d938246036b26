"""HTA's choices, made where a user asks for HTA's numbers (``--hta``, ``hta=True``), so that
traceforge's figures can be set side by side with HTA's (0.5.0 and 0.6.1 make the same).

Before any analysis HTA's ``TraceAnalysis`` reads a trace this way (``hta_view``):

- **Rounding.** Fractional-µs times become whole µs, each start rounded up and each end down
  (``hta_types.up_to_us``, ``down_to_us``), for GPU ops and launch calls alike; whole-µs
  traces are unchanged. An op shorter than a µs can get a negative duration, as in HTA.
- **The last step.** Only the CPU events that start before the last-step cut
  (``launches.last_step_start``: the latest start of any ``ProfilerStep#N`` event, its GPU-side
  copy included; both times rounded first) are kept, with the GPU ops they launched. A GPU op
  whose launch call is not in the trace is dropped. With fewer than two steps nothing is cut.

Then each analysis has its own choices: HTA's launch APIs (``launch_delay.HTA_LAUNCH_STATS_APIS``
for launch statistics, ``queue_apis`` for queue lengths: the one place 0.5.0 and 0.6.1 differ),
launch delays clipped at 0, and the kernel breakdown's ``duration_ratio`` of 0.8
(``HTA_DURATION_RATIO``). docs/hta.md ("Side by side: --hta") says where HTA's numbers still
differ, and why.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ...columns.scan import TraceColumns
from ...columns.table import Table
from ...errors import UsageError
from ...util.lazy_pandas import pd
from ..launches.calls import HTA_0_6_QUEUE_APIS, HTA_QUEUE_APIS, last_step_start, launched_before
from ..launches.delay import HTA_LAUNCH_STATS_APIS, launch_table_consuming
from ..memory.memcpy_bw import copy_rates, copy_rows
from .types import down_to_us, up_to_us

HTA_VERSIONS = ("0.5.0", "0.6.1")  # the versions whose choices ``--hta-version VERSION`` makes
LATEST_HTA = HTA_VERSIONS[-1]  # what a bare ``--hta`` (``hta=True``) makes

HTA_DURATION_RATIO = 0.8  # get_gpu_kernel_breakdown's default


def hta_version(hta: bool | str | None) -> str | None:
    """The HTA version whose choices ``hta`` asks for: a version of ``HTA_VERSIONS``, True for
    the latest, False or None for none."""
    if hta is True:
        return LATEST_HTA
    if not hta:
        return None
    if hta not in HTA_VERSIONS:
        raise UsageError(f"HTA version {hta!r}: the choices known are those of {', '.join(HTA_VERSIONS)}")
    return hta


def queue_apis(version: str) -> frozenset[str]:
    """HTA's queue-length launch APIs in ``version`` (of ``HTA_VERSIONS``)."""
    return HTA_QUEUE_APIS if version == "0.5.0" else HTA_0_6_QUEUE_APIS


def rounded(table: Table) -> Table:
    """``table`` with HTA's whole-µs times: ``ts`` rounded up, ``ts + dur`` down, so ``dur``
    can become negative (HTA's own durations do; analyses count a negative one as 0)."""
    if not len(table):
        return table
    ts = table.ts.astype(np.int64)
    start = up_to_us(ts)
    return Table({**table.cols, "ts": start, "dur": down_to_us(ts + table.dur) - start})


def hta_view(cols: TraceColumns) -> TraceColumns:
    """``cols`` as HTA's ``TraceAnalysis`` holds the trace (module docstring): the GPU ops and
    launch calls (and the GPU annotations, CPU events to HTA) rounded to whole µs and cut at
    the last step. The launch calls must be in
    memory (``cols.launches``)."""
    cut = last_step_start(cols)
    rows, _ = copy_rows(cols)  # each copy's rate as at its exact duration: Kineto's arg, which HTA reads
    rates = Table({"ordinal": cols.gpu.ordinal[rows], "rate": copy_rates(cols, rows)})
    view = replace(cols, gpu=rounded(cols.gpu), launches=rounded(cols.launches),
                   gpu_annotations=rounded(cols.gpu_annotations), copy_rates=rates)
    if cut is None:
        return view
    cut = up_to_us(cut)  # HTA compares rounded starts
    before = view.gpu_annotations.ts < cut  # HTA counts them among the CPU events
    return replace(view, gpu=view.gpu.take(np.flatnonzero(launched_before(view, cut))),
                   launches=view.launches.take(np.flatnonzero(view.launches.ts < cut)),
                   gpu_annotations=view.gpu_annotations.take(np.flatnonzero(before)))


def keeps_hta_launch(name: str) -> bool:
    """A scan's ``keep_launch`` for HTA's launch statistics: HTA matches its API names exactly."""
    return name in HTA_LAUNCH_STATS_APIS


def hta_launch_table(cols: TraceColumns) -> pd.DataFrame:
    """``launch_delay.launch_table_consuming`` as HTA's ``get_cuda_kernel_launch_stats``: HTA's
    view (``hta_view``), its launch APIs, and delays clipped at 0 (``negative_delay`` still
    flags the clipped ones). Consumes ``cols``."""
    table = launch_table_consuming(hta_view(cols), apis=HTA_LAUNCH_STATS_APIS)
    table["launch_delay"] = table["launch_delay"].clip(lower=0)
    return table
