"""GPU busy and idle time per device and per stream, with HTA's idle-time breakdown.

Busy time is the union of the GPU ops' intervals ``[ts, ts + dur)`` (kernels, copies,
memsets; ops with ``dur <= 0`` take no time), in exact ns; idle time is the rest of the
rank's wall span, so busy + idle == span. Overlapping ops (several streams of a device, or
one stream) count once.

Idle breakdown of a stream (HTA's ``get_idle_time_breakdown``, on merged intervals). Each
gap between two busy intervals goes, whole, to one category, decided by the op that ends it
(the first op, by start then file order, of the next busy interval):

- ``host_wait``: that op's launch call started after the gap began: the CPU had not issued
  it yet, so the stream starved.
- ``kernel_wait``: otherwise, the gap is shorter than ``kernel_wait_ns``: the overhead of
  back-to-back ops already queued. Default 30 µs: HTA's ``consecutive_kernel_delay=30`` is
  documented as ns but compared with its µs timestamps, so it acts as 30 µs.
- ``other``: the op was already queued and the stream still waited (e.g. for an event
  recorded on another stream, or a synchronous copy).
- ``before_first`` / ``after_last``: the span before the stream's first op and after its
  last (HTA leaves both out, so its idle times do not add up to anything).

Ops whose launch call is not in the trace are never host wait, as in HTA. Unlike HTA, gaps
come from merged intervals, so overlapping ops never give negative idle time.
"""

from __future__ import annotations

import numpy as np

from ..columns.scan import TraceColumns
from ..util.lazy_pandas import pd
from .launches import launch_of_gpu

KERNEL_WAIT_NS = 30_000
_NO_LAUNCH = np.iinfo(np.int64).min
STREAM_COLUMNS = [
    "device", "stream", "ops", "busy_ns", "idle_ns", "busy_pct", "host_wait_ns", "kernel_wait_ns", "other_ns",
    "before_first_ns", "after_last_ns", "host_wait_gaps", "kernel_wait_gaps", "other_gaps",
]
DEVICE_COLUMNS = ["device", "streams", "ops", "busy_ns", "idle_ns", "busy_pct"]


def merge_intervals(ts: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Union of intervals sorted by start: (starts, ends, index of the first interval of each).

    Touching intervals merge (``[a, b)`` and ``[b, c)`` give ``[a, c)``).
    """
    if len(ts) == 0:
        return ts[:0], end[:0], np.zeros(0, np.int64)
    reach = np.maximum.accumulate(end)
    first = np.flatnonzero(np.concatenate([[True], ts[1:] > reach[:-1]]))
    last = np.concatenate([first[1:] - 1, [len(ts) - 1]])
    return ts[first], reach[last], first


def launch_start(cols: TraceColumns) -> np.ndarray:
    """Start (ns) of the launch call of each GPU op, joined on correlation; ``_NO_LAUNCH`` if none."""
    out = np.full(len(cols.gpu), _NO_LAUNCH, np.int64)
    launch_of = launch_of_gpu(cols)
    joined = launch_of >= 0
    out[joined] = cols.launches.ts[launch_of[joined]]
    return out


def _pct(part: int, whole: int) -> float:
    return 100.0 * part / whole if whole > 0 else 0.0


def busy_idle(
    cols: TraceColumns, span: tuple[int, int], *, kernel_wait_ns: int = KERNEL_WAIT_NS
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per device, per stream) busy/idle tables over ``span`` = (first start, last end) in ns."""
    gpu = cols.gpu
    span_ns = span[1] - span[0]
    timed = gpu.dur > 0
    launched = launch_start(cols)

    def timeline(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``merge_intervals`` of the rows with a positive duration (ends made per group: one
        stream can hold nearly every op of a big trace)."""
        ts = gpu.ts[rows]
        return merge_intervals(ts, ts + gpu.dur[rows])

    streams = []
    order = np.lexsort((gpu.ordinal, gpu.ts, gpu.stream, gpu.device))
    for rows in _groups(order, gpu.device, gpu.stream):
        rows_t = rows[timed[rows]]
        starts, ends, first = timeline(rows_t)
        row = {"device": int(gpu.device[rows[0]]), "stream": int(gpu.stream[rows[0]]), "ops": len(rows)}
        row.update(_idle_breakdown(starts, ends, launched[rows_t[first]], span, kernel_wait_ns))
        streams.append(row)

    devices = []
    order = np.lexsort((gpu.ordinal, gpu.ts, gpu.device))
    for rows in _groups(order, gpu.device):
        rows_t = rows[timed[rows]]
        starts, ends, _ = timeline(rows_t)
        busy = int((ends - starts).sum())
        devices.append({
            "device": int(gpu.device[rows[0]]), "streams": len(np.unique(gpu.stream[rows])), "ops": len(rows),
            "busy_ns": busy, "idle_ns": _idle(starts, ends, span), "busy_pct": _pct(busy, span_ns),
        })
    return pd.DataFrame(devices, columns=DEVICE_COLUMNS), pd.DataFrame(streams, columns=STREAM_COLUMNS)


def _groups(order: np.ndarray, *keys: np.ndarray) -> list[np.ndarray]:
    """Split ``order`` (sorted by ``keys`` first) into runs of equal keys."""
    if len(order) == 0:
        return []
    change = np.zeros(len(order) - 1, bool)
    for k in keys:
        ks = k[order]
        change |= ks[1:] != ks[:-1]
    return np.split(order, np.flatnonzero(change) + 1)


def _idle(starts: np.ndarray, ends: np.ndarray, span: tuple[int, int]) -> int:
    """Idle ns of a merged timeline over ``span``, summed from its gaps (not ``span - busy``)."""
    if len(starts) == 0:
        return span[1] - span[0]
    return int(starts[0] - span[0]) + int((starts[1:] - ends[:-1]).sum()) + int(span[1] - ends[-1])


def _idle_breakdown(
    starts: np.ndarray, ends: np.ndarray, opener_launch: np.ndarray, span: tuple[int, int], kernel_wait_ns: int
) -> dict[str, int | float]:
    span_ns = span[1] - span[0]
    busy = int((ends - starts).sum())
    if len(starts) == 0:
        before, after = span_ns, 0
        gap = np.zeros(0, np.int64)
        host = kernel = np.zeros(0, bool)
    else:
        before, after = int(starts[0] - span[0]), int(span[1] - ends[-1])
        gap = starts[1:] - ends[:-1]
        host = opener_launch[1:] > ends[:-1]
        kernel = ~host & (gap < kernel_wait_ns)
    other = ~host & ~kernel
    return {
        "busy_ns": busy,
        "idle_ns": _idle(starts, ends, span),
        "busy_pct": _pct(busy, span_ns),
        "host_wait_ns": int(gap[host].sum()),
        "kernel_wait_ns": int(gap[kernel].sum()),
        "other_ns": int(gap[other].sum()),
        "before_first_ns": before,
        "after_last_ns": after,
        "host_wait_gaps": int(host.sum()),
        "kernel_wait_gaps": int(kernel.sum()),
        "other_gaps": int(other.sum()),
    }
