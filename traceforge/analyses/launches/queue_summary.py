"""Queue-length summary per (device, stream): the change points, and the time spent near full.

From the queue-length series of ``queue_length.queue_steps`` (one point per distinct ts at
which a stream's queue changes; a point holds until the next one, the last holds 0 ns):

- over the points, as HTA's ``get_queue_length_summary`` (pandas ``describe`` of its change
  points): ``points``, ``mean`` (float), ``p50``, ``p95`` (nearest-rank, so always a queue
  length that occurred) and ``max``;
- over time: ``span_ns`` (first point to last), and for each quartile q of the stream's max
  (25, 50, 75, 100 %) ``ge_q{q}_ns``, the ns with the queue at or above
  ``max(1, ceil(q * max / 100))`` (an empty queue never counts);
- ``at_limit_ns``: the ns with the queue at or above ``limit``, CUDA's launch-queue depth
  per stream (HTA's ``get_time_spent_blocked_on_full_queue``, same ``>=``). While it is
  reached, the next launch call blocks the CPU thread.

``CUDA_LAUNCH_QUEUE_LIMIT`` = 1024: NVIDIA does not document the depth; HTA takes 1024
(``hta.common.constants.CUDA_MAX_LAUNCH_QUEUE_PER_STREAM``, after NVIDIA developer forum
thread 255260, "Maximum number of operations in a stream"), where launches are seen to block
from 1022-1024 outstanding operations.
"""

from __future__ import annotations

import numpy as np

from ...columns.scan import TraceColumns
from ...util.lazy_pandas import pd
from ...util.percentiles import nearest_rank
from .queue_length import queue_steps

CUDA_LAUNCH_QUEUE_LIMIT = 1024
QUARTILES = (25, 50, 75, 100)
COLUMNS = ["device", "stream", "points", "mean", "p50", "p95", "max", "span_ns",
           *[f"ge_q{q}_ns" for q in QUARTILES], "at_limit_ns"]


def queue_summary(cols: TraceColumns, *, launched_before_ns: int | None = None,
                  apis: frozenset[str] | None = None, limit: int = CUDA_LAUNCH_QUEUE_LIMIT) -> pd.DataFrame:
    """One row per (device, stream) with launches, sorted: see the module docstring.
    ``launched_before_ns`` and ``apis`` as in ``queue_length`` (HTA's choices:
    ``launches.last_step_start(cols)`` and ``launches.HTA_QUEUE_APIS``)."""
    if limit < 1:
        raise ValueError(f"queue limit must be at least 1, not {limit}")
    rows = []
    for device, stream, ts, value in queue_steps(cols, launched_before_ns, apis):
        value = value.astype(np.int64)
        held = np.zeros(len(ts), np.int64)
        held[:-1] = np.diff(ts)
        peak = int(value.max())
        ordered = np.sort(value)
        row = {"device": device, "stream": stream, "points": len(ts), "mean": float(value.mean()),
               "p50": nearest_rank(ordered, 50), "p95": nearest_rank(ordered, 95), "max": peak,
               "span_ns": int(ts[-1] - ts[0])}
        for q in QUARTILES:
            floor = max(1, -(-q * peak // 100))
            row[f"ge_q{q}_ns"] = int(held[value >= floor].sum())
        row["at_limit_ns"] = int(held[value >= limit].sum())
        rows.append(row)
    return pd.DataFrame(rows, columns=COLUMNS)
