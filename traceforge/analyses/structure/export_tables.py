"""One table per activity kind, for pandas, spreadsheets and Parquet: the per-kind CSVs users
otherwise convert traces into by hand, with exact integer-ns ``start``, ``end``, ``dur``.

``end`` is ``start + dur`` as written in the trace (not clipped). Absent values are -1
(ids, sizes) or the empty string (names). GPU ops carry the launch API and the innermost CPU
op that issued them (``cpu_op``, the top of the operator stack, see ``stacks``); launch calls
the op they ran in; CPU ops their parent op. Each table's rows are in start order (then file
order).

Memory stays bounded by the GPU ops: CPU ops and launch calls (most of a trace) wait on disk
after the scan and are nested a window of start times at a time (``windows.windows_by``),
each thread's open ops carried from one window to the next; tables come out a chunk at a time.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from dataclasses import dataclass, replace

import numpy as np

from ... import _native
from ...columns.scan import KERNEL, MEMCPY, MEMSET, TraceColumns
from ...columns.table import SpilledColumns, Table
from ...columns.windows import windows_by
from ...io.memory.heap import give_back
from ...io.write.jsontext import Texts, join_rows
from ...util.lazy_pandas import pd
from ...util.search import in_sorted
from ..launches.calls import launch_of_gpu
from .activity import GPU_ACTIVITY, cat_kinds
from .stacks import joined_calls

_DIMS = ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z")
CHUNK_ROWS = 1 << 16  # GPU ops of a table handed out at a time
CSV_ROWS = 1 << 14  # rows made CSV text at a time (joining them holds ~100 bytes a row per column)
WINDOW_ROWS = 1 << 18  # CPU ops and launch calls nested at a time
_CALL_FIELDS = "ordinal ts dur track name cat external_id correlation call"


class _Strings:
    """The distinct values that a string column's ids index (id -1: none, a missing value: an
    empty CSV field, which pandas reads as NaN, and a null in Parquet), each made CSV text once,
    not once a row."""

    def __init__(self, values: list[object]):
        self.values = np.empty(len(values) + 1, dtype=object)
        self.values[:-1], self.values[-1] = [_encodable(v) for v in values], None
        self._csv: Texts | None = None

    def csv(self) -> Texts:
        if self._csv is None:
            self._csv = Texts.of([_csv_field(v) for v in self.values[:-1].tolist()] + [b""])
        return self._csv


def _encodable(value: object) -> object:
    """A string that was not UTF-8 in the trace (read with lone surrogates) with those as
    backslash escapes: pandas' string columns, Parquet and UTF-8 files cannot hold them."""
    if type(value) is str and not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-8", "backslashreplace").decode("utf-8")
    return value


def _csv_field(value: object) -> bytes:
    """A value as pandas' CSV writer writes it: None as nothing, quoted where the csv module would."""
    if value is None or value == "":
        return b""
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerow([value])
    return out.getvalue()[:-1].encode("utf-8")


Column = np.ndarray | tuple[np.ndarray, _Strings]  # ints, or string ids and their strings


@dataclass
class TableChunk:
    """Consecutive rows of one kind's table, as columns (string columns as ids)."""

    kind: str
    columns: dict[str, Column]

    def __len__(self) -> int:
        first = next(iter(self.columns.values()))
        return len(first[0] if isinstance(first, tuple) else first)

    def frame(self) -> pd.DataFrame:
        """As a DataFrame, every int column int64 (scan narrows columns to int32 where a trace's
        values fit): the same schema in every chunk and every trace."""
        return pd.DataFrame({k: v[1].values[v[0]] if isinstance(v, tuple) else v.astype(np.int64, copy=False)
                             for k, v in self.columns.items()})

    def csv(self, header: bool) -> Iterator[bytes]:
        """The rows as CSV text, ``CSV_ROWS`` at a time (numbers formatted and rows joined in C)."""
        if header:
            yield ",".join(self.columns).encode() + b"\n"
        for lo in range(0, len(self), CSV_ROWS):
            parts: list[Texts | bytes] = []
            for v in self.columns.values():
                ids_or_values = (v[0] if isinstance(v, tuple) else v)[lo:lo + CSV_ROWS]
                text = v[1].csv().take(ids_or_values) if isinstance(v, tuple) else Texts.numbers(ids_or_values)
                parts += [text, b","]
            parts[-1] = b"\n"
            yield join_rows(parts).blob


def tables_by_kind(cols: TraceColumns) -> Iterator[TableChunk]:
    """``read_tables`` from columns scanned with ``spill_cpu_ops=True``, every launch call
    spilled and ``op_args=True``. Consumes the spilled tables."""
    names = _Strings(cols.names)
    calls, joined, tracks = _merged_calls(cols)
    give_back()  # the merge's chunks left holes in the heap (~80 MB at 2 GB)
    launch_op = np.full(len(joined), -1, np.int32)  # per joined call: its innermost op's name id
    yield from _nested_calls(calls, joined.ordinal, launch_op, names, cat_kinds(cols), tracks)
    gpu_launch = launch_of_gpu(replace(cols, launches=joined))
    has = gpu_launch >= 0
    launch_name, op_name = np.full(len(cols.gpu), -1, np.int32), np.full(len(cols.gpu), -1, np.int32)
    launch_name[has], op_name[has] = joined.name[gpu_launch[has]], launch_op[gpu_launch[has]]
    del joined, launch_op, gpu_launch, has
    yield from _gpu_tables(cols, names, launch_name, op_name)
    yield from _range_tables(cols, names, tracks)


class _Tracks:
    """Each track's pid and tid, as int64 columns for a kind whose tracks all have int ones
    (Kineto's), else as objects (2021's ``"stream 7"``)."""

    def __init__(self, tracks: list[tuple], used: dict[str, set[int]]):
        self._objects = [_Strings([t[i] for t in tracks]) for i in (0, 1)]
        self._ints = [np.array([t[i] if type(t[i]) is int else 0 for t in tracks] or [0], np.int64) for i in (0, 1)]
        self._int_kinds = [{kind for kind, rows in used.items() if all(type(tracks[r][i]) is int for r in rows)}
                           for i in (0, 1)]

    def columns(self, kind: str, track: np.ndarray) -> dict[str, Column]:
        return {key: self._ints[i][track] if kind in self._int_kinds[i] else (track, self._objects[i])
                for i, key in enumerate(("pid", "tid"))}


def _merged_calls(cols: TraceColumns) -> tuple[SpilledColumns, Table, _Tracks]:
    """CPU ops and launch calls in one spilled table (``call`` 1 for a launch call); the calls
    that GPU ops join, in memory; each kind's pids and tids."""
    merged = SpilledColumns(_CALL_FIELDS)
    kind_of_cat = cat_kinds(cols)
    used = {"cuda_profiler_range": set(np.flatnonzero(np.bincount(cols.ranges.track)).tolist())}
    for spilled, call in ((cols.spilled_cpu_ops, 0), (cols.spilled_launches, 1)):
        for chunk in spilled.chunks():
            correlation = chunk.correlation if call else np.full(len(chunk), -1)
            merged.extend(chunk.ordinal, chunk.ts, chunk.dur, chunk.track, chunk.name, chunk.cat, chunk.external_id,
                          correlation, np.full(len(chunk), call))
            kinds = kind_of_cat[chunk.cat]
            for kind in dict.fromkeys(kinds.tolist()):
                used.setdefault(kind, set()).update(np.flatnonzero(np.bincount(chunk.track[kinds == kind])).tolist())
    # read once more (reading back is cheap): select keeps narrow columns, grown in place
    joined = cols.spilled_launches.select(joined_calls(cols))
    return merged, Table({f: joined.cols[f] for f in ("ordinal", "correlation", "name")}), _Tracks(cols.tracks, used)


def _nested_calls(calls: SpilledColumns, joined_ordinal: np.ndarray, launch_op: np.ndarray, names: _Strings,
                  kind_of_cat: np.ndarray, tracks: _Tracks) -> Iterator[TableChunk]:
    """The CPU op and launch call tables, a window of start times at a time, each row with the
    op holding it; sets ``launch_op`` for the joined calls (ordinals ``joined_ordinal``)."""
    stacks: dict[int, bytes] = {}  # per thread: its open ops after the windows so far
    for window in windows_by(calls, lambda chunk, first: chunk.ts, WINDOW_ROWS, "stacks"):
        holder = _holders(window, stacks)
        joined = (window.call == 1) & in_sorted(joined_ordinal, window.ordinal)
        launch_op[np.searchsorted(joined_ordinal, window.ordinal[joined])] = holder[joined]
        order = np.lexsort((window.ordinal, window.ts))
        kinds = kind_of_cat[window.cat[order]]
        for kind in dict.fromkeys(kinds.tolist()):
            yield _call_chunk(window, order[kinds == kind], holder, kind, names, tracks)
        give_back()  # each window's tables leave the heap with holes the next one does not fit


def _holders(window: Table, stacks: dict[int, bytes]) -> np.ndarray:
    """Per row of a window: the name id of the innermost CPU op holding it (-1 none), by the
    nesting order of ``stacks.nest_calls``: per thread by start, longer first, ops before calls,
    file order."""
    n = len(window.ts)
    dur = np.maximum(window.dur, 0)
    order = np.lexsort((window.ordinal, window.call, -dur, window.ts, window.track))
    track, start = window.track[order], window.ts[order]
    stop, opens = start + dur[order], (window.call[order] == 0).astype(np.uint8)
    ids, held = window.name[order].astype(np.int32), np.empty(n, np.int32)
    first = np.flatnonzero(np.r_[True, track[1:] != track[:-1]]) if n else np.zeros(0, np.int64)
    for a, b in zip(first.tolist(), [*first[1:].tolist(), n]):
        t = int(track[a])
        stacks[t] = _native.stacks.nest_sorted(start[a:b], stop[a:b], opens[a:b], ids[a:b], held[a:b],
                                               stacks.get(t, b""))
    holder = np.empty(n, np.int32)
    holder[order] = held
    return holder


def _call_chunk(window: Table, rows: np.ndarray, holder: np.ndarray, kind: str, names: _Strings,
                tracks: _Tracks) -> TableChunk:
    ts, dur = window.ts[rows], window.dur[rows]
    columns = {"ordinal": window.ordinal[rows], "start": ts, "end": ts + dur, "dur": dur,
               "name": (window.name[rows], names), **tracks.columns(kind, window.track[rows])}
    if window.call[rows[0]]:
        columns.update(correlation=window.correlation[rows], external_id=window.external_id[rows],
                       cpu_op=(holder[rows], names))
    else:
        columns.update(external_id=window.external_id[rows], parent=(holder[rows], names))
    return TableChunk(kind, columns)


def _gpu_tables(cols: TraceColumns, names: _Strings, launch_name: np.ndarray, op_name: np.ndarray
                ) -> Iterator[TableChunk]:
    g = cols.gpu
    # scan's interned (grid, block) per kernel, as six columns; the extra last row (-1) is "none"
    dims = np.array([[*grid, *block] for grid, block in cols.kernel_dims] + [[-1] * 6], np.int64).reshape(-1, 6)
    order = np.lexsort((g.ordinal, g.ts))
    for code, kind in GPU_ACTIVITY.items():
        of_kind = order[g.kind[order] == code]
        for lo in range(0, len(of_kind), CHUNK_ROWS):
            rows = of_kind[lo:lo + CHUNK_ROWS]
            ts, dur = g.ts[rows], g.dur[rows]
            columns = {"ordinal": g.ordinal[rows], "start": ts, "end": ts + dur, "dur": dur,
                       "name": (g.name[rows], names), "device": g.device[rows], "stream": g.stream[rows],
                       "correlation": g.correlation[rows], "external_id": g.external_id[rows]}
            if code == KERNEL:
                columns.update(zip(_DIMS, dims[g.dims[rows]].T))
                columns["shared_memory"] = g.shared_memory[rows]
            if code in (MEMCPY, MEMSET):
                columns["bytes"] = g.bytes[rows]
            columns.update(launch=(launch_name[rows], names), cpu_op=(op_name[rows], names))
            yield TableChunk(kind, columns)


def _range_tables(cols: TraceColumns, names: _Strings, tracks: _Tracks) -> Iterator[TableChunk]:
    r = cols.ranges
    if len(r):
        rows = np.lexsort((r.ordinal, r.ts))
        ts, dur = r.ts[rows], r.dur[rows]
        kind = "cuda_profiler_range"
        yield TableChunk(kind, {"ordinal": r.ordinal[rows], "start": ts, "end": ts + dur, "dur": dur,
                                "name": (r.name[rows], names), **tracks.columns(kind, r.track[rows])})
