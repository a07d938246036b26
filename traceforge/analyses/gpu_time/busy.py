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

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

import numpy as np

from ...columns.scan import TraceColumns
from ...columns.table import Table, in_file_order
from ...util.distinct import unique
from ...util.lazy_pandas import pd
from ..launches.calls import launch_of_gpu
from ..launches.calls import launched_before as launched_before_mask
from ..structure.series import stream_groups

KERNEL_WAIT_NS = 30_000
_NO_LAUNCH = np.iinfo(np.int64).min
STREAM_COLUMNS = [
    "device", "stream", "ops", "busy_ns", "idle_ns", "busy_pct", "host_wait_ns", "kernel_wait_ns", "other_ns",
    "before_first_ns", "after_last_ns", "host_wait_gaps", "kernel_wait_gaps", "other_gaps",
]
DEVICE_COLUMNS = ["device", "streams", "ops", "busy_ns", "idle_ns", "busy_pct"]
IDLE_CATEGORIES = ("host_wait", "kernel_wait", "other")  # codes 0, 1, 2 of ``StreamGaps.category``
HOST_WAIT, KERNEL_WAIT, OTHER = range(3)


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


def launched_before(cols: TraceColumns, cut_ns: int) -> TraceColumns:
    """``cols`` with only the GPU ops whose launch call (in the trace) started before ``cut_ns``
    (``launches.launched_before``): HTA's view of a trace, with the last step's start."""
    return replace(cols, gpu=cols.gpu.take(np.flatnonzero(launched_before_mask(cols, cut_ns))))


def _pct(part: int, whole: int) -> float:
    return 100.0 * part / whole if whole > 0 else 0.0


@dataclass(frozen=True)
class StreamGaps:
    """One stream's merged busy intervals and the gaps between them, each with its category.

    Gap i runs from ``ends[i]`` to ``starts[i + 1]``; ``category[i]`` is its code in
    ``IDLE_CATEGORIES``; ``opener[i]`` is the row (in ``cols.gpu``) of the op that ends it.
    """

    device: int
    stream: int
    ops: int  # every op of the stream, timed or not
    starts: np.ndarray
    ends: np.ndarray
    category: np.ndarray  # int8, one per gap
    opener: np.ndarray  # int64 rows, one per gap

    @property
    def gap_start(self) -> np.ndarray:
        return self.ends[:-1]

    @property
    def gap_end(self) -> np.ndarray:
        return self.starts[1:]

    @property
    def gaps(self) -> np.ndarray:
        """Each gap's length in ns (> 0: touching intervals are merged)."""
        return self.starts[1:] - self.ends[:-1]


def stream_gaps(cols: TraceColumns, *, kernel_wait_ns: int = KERNEL_WAIT_NS) -> Iterator[StreamGaps]:
    """The idle gaps of each (device, stream), sorted by device then stream, one stream at a
    time, classified as the module docstring says. The one definition of the categories:
    ``busy_idle``, ``idle_intervals`` and the idle-gap track all read it."""
    for device, stream, ops, pieces in stream_pieces(cols, kernel_wait_ns=kernel_wait_ns):
        starts, ends, _, _, category, opener = concatenated(list(pieces), _EMPTY)
        yield StreamGaps(device, stream, ops, starts, ends, category, opener)


def concatenated(pieces: list[tuple[np.ndarray, ...]], empty: tuple[np.ndarray, ...]) -> list[np.ndarray]:
    """Each column of ``pieces`` (tuples of arrays) concatenated, ``empty`` where there is no piece.
    Consumes ``pieces``: a column's pieces go once it is made (not two copies of every column)."""
    if not pieces:
        return list(empty)
    columns = [list(column) for column in zip(*pieces)]
    pieces.clear()
    out = []
    for column in columns:
        out.append(np.concatenate(column))
        column.clear()
    return out


GAP_CHUNK = 1 << 18  # GPU ops of the table read at a time by ``stream_pieces`` (a chunk's working set, not a stream's)
_EMPTY = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64),
          np.zeros(0, np.int8), np.zeros(0, np.int64))
Piece = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def stream_pieces(cols: TraceColumns, *, kernel_wait_ns: int = KERNEL_WAIT_NS, chunk: int | None = None
                  ) -> Iterator[tuple[int, int, int, Iterator[Piece]]]:
    """``stream_gaps`` a piece at a time: per (device, stream), sorted, (device, stream, ops, pieces),
    each piece (busy starts, busy ends, gap starts, gap ends, category, opener) of the merged
    intervals closed within ``chunk`` rows of the GPU op table (with the interval still open
    carried to the next piece), in time order: concatenated, they are the stream's ``StreamGaps``.
    ``chunk`` defaults to ``GAP_CHUNK`` (read when called).

    A stream's ops are read a chunk of the table at a time where they are already in (ts, file
    order) order in the table (Kineto writes them so), and sorted whole otherwise: the working
    set is a chunk's, beside one int64 per GPU op (its launch call's start) and a byte per op."""
    gpu = cols.gpu
    chunk = GAP_CHUNK if chunk is None else chunk
    launched = launch_start(cols)
    ordered = in_file_order(gpu)
    everything = np.ones(len(gpu), bool)
    for device, stream, mine in stream_groups(gpu.device, gpu.stream, everything):
        ops = int(np.count_nonzero(mine))
        mine &= gpu.dur > 0
        yield device, stream, ops, _pieces(merged_pieces(gpu, mine, chunk, ordered), launched, kernel_wait_ns)
        del mine


def merged_pieces(gpu: Table, mine: np.ndarray, chunk: int | None = None, ordered: bool | None = None
                  ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """``merge_intervals`` of the GPU ops where ``mine`` (each with ``dur > 0``), in (ts, file
    order) order, a piece at a time: (starts, ends, first row, ops) of the merged intervals closed
    within ``chunk`` rows of the table (default ``GAP_CHUNK``), the last one at the end; ``ops``
    counts each interval's ops. The ops are read a chunk of the table at a time where they are
    in time order in the table, and sorted whole otherwise. ``ordered``: whether the table is in
    file order (``in_file_order``; found where not given)."""
    chunk = GAP_CHUNK if chunk is None else chunk
    if ordered is None:
        ordered = in_file_order(gpu)

    def times(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ts = gpu.ts[rows].astype(np.int64, copy=False)
        return ts, ts + gpu.dur[rows]

    return _merged(_row_chunks(gpu.ts, mine, chunk, gpu.ordinal if not ordered else None), times)


def merged_times(start: np.ndarray, end: np.ndarray, mine: np.ndarray, chunk: int | None = None
                 ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """``merged_pieces`` of intervals given as times (int64 ``[start, end)`` per row, e.g. HTA's
    rounded ones), of the rows where ``mine`` and ``end > start``; rows that start together in
    row order."""
    mine = mine & (end > start)
    return _merged(_row_chunks(start, mine, GAP_CHUNK if chunk is None else chunk),
                   lambda rows: (start[rows], end[rows]))


def union_of(pieces: Iterator[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """The merged intervals of ``merged_pieces`` or ``merged_times`` whole: (starts, ends)."""
    starts, ends = concatenated([piece[:2] for piece in pieces], _EMPTY[:2])
    return starts, ends


def _row_chunks(ts: np.ndarray, mine: np.ndarray, chunk: int, ordinal: np.ndarray | None = None
                ) -> Iterator[np.ndarray]:
    """The rows where ``mine`` in (ts, ordinal) order (``ordinal`` None: the rows are in
    ordinal order), about ``chunk`` at a time: read in place where they are in that order."""
    if ordinal is None and _ts_rise(ts, mine, chunk):
        for lo in range(0, len(mine), chunk):
            rows = np.flatnonzero(mine[lo:lo + chunk])
            if len(rows):
                rows += lo
                yield rows
        return
    rows = np.flatnonzero(mine)
    rows = rows[np.argsort(ts[rows], kind="stable") if ordinal is None else np.lexsort((ordinal[rows], ts[rows]))]
    for lo in range(0, len(rows), chunk):
        yield rows[lo:lo + chunk]


def _ts_rise(ts: np.ndarray, mine: np.ndarray, chunk: int) -> bool:
    """Whether ``ts`` never falls along the rows where ``mine`` (read ``chunk`` rows at a time)."""
    last = None
    for lo in range(0, len(mine), chunk):
        t = ts[lo:lo + chunk][mine[lo:lo + chunk]]
        if not len(t):
            continue
        if (last is not None and t[0] < last) or bool(np.any(t[1:] < t[:-1])):
            return False
        last = t[-1]
    return True


def _merged(row_chunks: Iterator[np.ndarray], times: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]
            ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """``merge_intervals`` of the ops of ``row_chunks`` (in time order; ``times(rows)``: their
    int64 starts and ends, fresh arrays), a chunk at a time: (starts, ends, first row, ops) of
    the intervals each chunk closes, the last one at the end. The interval still open at a
    chunk's end goes in front of the next chunk (as one op that stands for its ``ops``)."""
    carry: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None
    for rows in row_chunks:
        ts, reach = times(rows)
        if carry is not None:
            ts, reach, rows = (np.concatenate((c, a)) for c, a in zip(carry, (ts, reach, rows)))
        np.maximum.accumulate(reach, out=reach)
        new = np.ones(len(ts), bool)
        np.greater(ts[1:], reach[:-1], out=new[1:])
        first = np.flatnonzero(new)
        del new
        ops = np.diff(first, append=len(ts))
        if carry is not None:
            ops[0] += int(carry[3][0]) - 1
        starts, ends, firsts = ts[first], reach[np.append(first[1:] - 1, len(ts) - 1)], rows[first]
        del ts, reach, rows, first
        carry = (starts[-1:], ends[-1:], firsts[-1:], ops[-1:])
        if len(starts) > 1:
            yield starts[:-1], ends[:-1], firsts[:-1], ops[:-1]
    if carry is not None:
        yield carry


def _pieces(merged: Iterator[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]], launched: np.ndarray,
            kernel_wait_ns: int) -> Iterator[Piece]:
    """Each chunk of merged intervals with the gaps before them (the first interval has none)."""
    before = None  # the end of the last interval so far
    for starts, ends, firsts, _ in merged:
        if before is None:
            gap_start, gap_end, opener = ends[:-1], starts[1:], firsts[1:]
        else:
            gap_start, gap_end, opener = np.concatenate((before, ends[:-1])), starts, firsts
        before = ends[-1:]
        host = launched[opener] > gap_start
        category = np.full(len(opener), OTHER, np.int8)
        category[~host & (gap_end - gap_start < kernel_wait_ns)] = KERNEL_WAIT
        category[host] = HOST_WAIT
        yield starts, ends, gap_start, gap_end, category, opener


def busy_idle(
    cols: TraceColumns, span: tuple[int, int], *, kernel_wait_ns: int = KERNEL_WAIT_NS
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per device, per stream) busy/idle tables over ``span`` = (first start, last end) in ns."""
    gpu = cols.gpu
    span_ns = span[1] - span[0]

    streams = []
    for g in stream_gaps(cols, kernel_wait_ns=kernel_wait_ns):
        row = {"device": g.device, "stream": g.stream, "ops": g.ops}
        row.update(_idle_breakdown(g, span))
        streams.append(row)

    devices = []
    ordered = in_file_order(gpu)
    for device in unique(gpu.device).tolist():  # a device's intervals merged a piece at a time
        mine = gpu.device == device
        ops, streams_on = int(np.count_nonzero(mine)), len(unique(gpu.stream[mine]))
        mine &= gpu.dur > 0
        starts, ends = union_of(merged_pieces(gpu, mine, ordered=ordered))
        del mine
        busy = int((ends - starts).sum())
        devices.append({
            "device": device, "streams": streams_on, "ops": ops,
            "busy_ns": busy, "idle_ns": _idle(starts, ends, span), "busy_pct": _pct(busy, span_ns),
        })
    return pd.DataFrame(devices, columns=DEVICE_COLUMNS), pd.DataFrame(streams, columns=STREAM_COLUMNS)


def _idle(starts: np.ndarray, ends: np.ndarray, span: tuple[int, int]) -> int:
    """Idle ns of a merged timeline over ``span``, summed from its gaps (not ``span - busy``)."""
    if len(starts) == 0:
        return span[1] - span[0]
    return int(starts[0] - span[0]) + int((starts[1:] - ends[:-1]).sum()) + int(span[1] - ends[-1])


def _idle_breakdown(g: StreamGaps, span: tuple[int, int]) -> dict[str, int | float]:
    span_ns = span[1] - span[0]
    busy = int((g.ends - g.starts).sum())
    if len(g.starts) == 0:
        before, after = span_ns, 0
    else:
        before, after = int(g.starts[0] - span[0]), int(span[1] - g.ends[-1])
    gaps = g.gaps
    row: dict[str, int | float] = {"busy_ns": busy, "idle_ns": _idle(g.starts, g.ends, span),
                                   "busy_pct": _pct(busy, span_ns)}
    for code, name in enumerate(IDLE_CATEGORIES):
        row[f"{name}_ns"] = int(gaps[g.category == code].sum())
    row.update({"before_first_ns": before, "after_last_ns": after})
    for code, name in enumerate(IDLE_CATEGORIES):
        row[f"{name}_gaps"] = int(np.count_nonzero(g.category == code))
    return row
