"""One pass over the events into compact numpy columns, keyed by event ordinal.

Analyses read these columns and never touch JSON. Both Kineto vocabularies are
understood: new (``kernel``, ``gpu_memcpy``, ``cuda_runtime``, ``cpu_op``, ...) and 2021
(``Kernel``, ``Memcpy``, ``Runtime``, ``Operator``, string tids like ``"stream 7"``).
Times are integer ns (see ``exacttime``).
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .exacttime import to_ns
from .io.reader import EventBatch, TraceReader

# Event kinds, by category (both vocabularies; matched case-insensitively).
KERNEL, MEMCPY, MEMSET = 0, 1, 2
GPU_KIND_NAMES = ("kernel", "memcpy", "memset")
_GPU_CATS = {"kernel": KERNEL, "gpu_memcpy": MEMCPY, "memcpy": MEMCPY, "gpu_memset": MEMSET, "memset": MEMSET}
_LAUNCH_CATS = {"cuda_runtime", "cuda_driver", "runtime", "driver"}
_CPU_CATS = {"cpu_op", "operator", "user_annotation", "python_function"}
_RANGE_CATS = {"cuda_profiler_range"}

_GPU, _LAUNCH, _CPU, _RANGE = "gpu", "launch", "cpu", "range"
_KIND_BY_CAT: dict[str, str] = {}
for _cats, _kind in ((_GPU_CATS, _GPU), (_LAUNCH_CATS, _LAUNCH), (_CPU_CATS, _CPU), (_RANGE_CATS, _RANGE)):
    for _c in _cats:
        _KIND_BY_CAT[_c] = _kind


def _kind_of(cat: object) -> str | None:
    if type(cat) is not str:
        return None
    kind = _KIND_BY_CAT.get(cat)
    if kind is None:
        kind = _KIND_BY_CAT.get(cat.lower())
        if kind is not None:
            _KIND_BY_CAT[cat] = kind  # remember the spelling (e.g. 2021's "Kernel")
    return kind


class _Interner:
    """Strings (or pid/tid pairs) to dense ids, in first-seen order."""

    def __init__(self) -> None:
        self.ids: dict = {}
        self.values: list = []

    def __call__(self, value) -> int:
        i = self.ids.get(value)
        if i is None:
            i = self.ids[value] = len(self.values)
            self.values.append(value)
        return i


def _int_or(value: object, default: int) -> int:
    if type(value) is int:
        return value
    if isinstance(value, str):
        text = value.strip()
        try:
            return int(text, 16) if text.lower().startswith("0x") else int(text.rsplit(" ", 1)[-1])
        except ValueError:
            return default
    return default


class _Rows:
    """Rows of int64 fields: tuples per batch, packed into growing int64 buffers per field.

    The buffers live outside Python's small-object heap: millions of small long-lived
    objects between the freed event dicts would pin that heap's memory for good.
    """

    def __init__(self, fields: str):
        """``fields``: names, ``:i4`` after a name for ids that fit 32 bits (half the memory)."""
        specs = [f.partition(":") for f in fields.split()]
        self.fields = [name for name, _, _ in specs]
        self._dtypes = [np.dtype(np.int32 if kind == "i4" else np.int64) for _, _, kind in specs]
        self.pending: list[tuple] = []
        self._columns = [array("i" if d == np.int32 else "q") for d in self._dtypes]

    def flush(self) -> None:
        if self.pending:
            packed = np.array(self.pending, dtype=np.int64)
            for i, (column, dtype) in enumerate(zip(self._columns, self._dtypes)):
                column.frombytes(packed[:, i].astype(dtype).tobytes())
            self.pending.clear()

    def table(self) -> Table:
        self.flush()
        return Table({f: np.frombuffer(c, dtype=d) if len(c) else np.zeros(0, d)
                      for f, c, d in zip(self.fields, self._columns, self._dtypes)})


@dataclass
class Table:
    """Named equal-length integer columns (int64; int32 for ids, see ``_Rows``)."""

    cols: dict[str, np.ndarray]

    def __getattr__(self, name: str) -> np.ndarray:
        try:
            return self.__dict__["cols"][name]
        except KeyError:
            raise AttributeError(name) from None

    def __len__(self) -> int:
        return len(next(iter(self.cols.values()))) if self.cols else 0


@dataclass
class TraceColumns:
    """Everything analyses need from a trace, without the trace."""

    path: str
    gpu: Table  # ordinal kind ts dur device stream track correlation name bytes dims
    launches: Table  # ordinal ts dur track correlation name cat kernel (args "kernel" name id, -1 none)
    cpu_ops: Table  # ordinal ts dur track name cat
    ranges: Table  # ordinal ts dur track name
    range_args: list[dict]
    names: list[str]
    tracks: list[tuple]  # (pid, tid) as written in the trace
    cats: list[str]
    metadata: dict
    phase_cat_counts: Counter
    track_names: dict[tuple, str] = field(default_factory=dict)  # thread_name M events
    process_names: dict[object, str] = field(default_factory=dict)
    max_flow_id: int = -1
    event_count: int = 0
    skipped: Counter = field(default_factory=Counter)  # events of known kinds we could not use
    kernel_dims: list[tuple] = field(default_factory=list)  # gpu.dims id -> ((grid xyz), (block xyz))

    @property
    def base_time_ns(self) -> int | None:
        value = self.metadata.get("baseTimeNanoseconds")
        return value if type(value) is int else None

    def name_of(self, ids: np.ndarray) -> list[str]:
        return [self.names[i] for i in ids]

    def gpu_pid(self, device: int) -> object:
        """The pid of the process that shows ``device``'s streams (where its tracks go)."""
        rows = np.flatnonzero(self.gpu.device == device)
        if len(rows):
            return self.tracks[int(self.gpu.track[rows[0]])][0]
        return device


def scan(
    path: str,
    *,
    cpu_ops: bool = True,
    display_name: str | None = None,
    reader: TraceReader | None = None,
    on_batch: Callable[[EventBatch], None] | None = None,
) -> TraceColumns:
    """Read ``path`` once and return its columns. ``cpu_ops=False`` skips CPU ops (memory).

    ``on_batch`` sees every batch of ``reader`` as it goes by (annotate copies them out
    in the same pass, then uses the reader's head and tail).
    """
    reader = reader or TraceReader(path, display_name=display_name)
    names, tracks, cats, dims = _Interner(), _Interner(), _Interner(), _Interner()
    gpu = _Rows("ordinal kind:i4 ts dur device:i4 stream track:i4 correlation name:i4 bytes dims:i4")
    launch = _Rows("ordinal ts dur track:i4 correlation name:i4 cat:i4 kernel:i4")
    cpu = _Rows("ordinal ts dur track:i4 name:i4 cat:i4")
    ranges = _Rows("ordinal ts dur track:i4 name:i4")
    range_args: list[dict] = []
    counts: Counter = Counter()
    skipped: Counter = Counter()
    track_names: dict[tuple, str] = {}
    process_names: dict[object, str] = {}
    max_flow_id = -1
    gpu_add, launch_add, cpu_add, range_add = gpu.pending.append, launch.pending.append, cpu.pending.append, ranges.pending.append
    name_ids, track_ids, cat_ids = names.ids, tracks.ids, cats.ids  # direct lookups: the call is the slow path

    for batch in reader.batches():
        if on_batch is not None:
            on_batch(batch)
        ordinal = batch.first - 1
        for e in batch.events:
            ordinal += 1
            ph = e.get("ph")
            cat = e.get("cat")
            counts[(ph, cat)] += 1
            if ph != "X":
                if ph == "M":
                    _note_metadata(e, track_names, process_names)
                elif ph == "s" or ph == "f" or ph == "t":
                    fid = e.get("id")
                    if type(fid) is int and fid > max_flow_id:
                        max_flow_id = fid
                continue
            kind = _KIND_BY_CAT.get(cat) if type(cat) is str else None
            if kind is None:
                kind = _kind_of(cat)
                if kind is None:
                    continue
            if kind == _CPU and not cpu_ops:
                continue
            ts, dur = e.get("ts"), e.get("dur")
            try:
                ts = ts * 1000 if type(ts) is int else to_ns(ts)
                dur = dur * 1000 if type(dur) is int else to_ns(dur)
            except (ValueError, TypeError):
                skipped[f"{kind} event without a numeric ts/dur"] += 1
                continue
            pid, tid = e.get("pid"), e.get("tid")
            track = track_ids.get((pid, tid))
            if track is None:
                track = tracks((pid, tid))
            args = e.get("args")
            if type(args) is not dict:
                args = _NO_ARGS
            name = name_ids.get(e.get("name"))
            if name is None:
                name = e.get("name")
                name = names(name if type(name) is str else "")
            corr = args.get("correlation", -1)
            if type(corr) is not int:
                corr = _int_or(corr, -1)
            cat_id = cat_ids.get(cat)
            if cat_id is None:
                cat_id = cats(cat)
            if kind == _GPU:
                device, stream, nbytes = args.get("device", pid), args.get("stream", tid), args.get("bytes", -1)
                if type(device) is not int or type(stream) is not int or type(nbytes) is not int:
                    device, stream, nbytes = _int_or(device, -1), _int_or(stream, -1), _int_or(nbytes, -1)
                grid, block = args.get("grid"), args.get("block")
                gpu_add((
                    ordinal, _GPU_CATS[cat.lower()], ts, dur, device, stream, track, corr, name, nbytes,
                    _launch_dims(grid, block, dims) if grid is not None else -1,
                ))
            elif kind == _LAUNCH:
                kernel = args.get("kernel")
                launch_add((ordinal, ts, dur, track, corr, name, cat_id, names(kernel) if type(kernel) is str else -1))
            elif kind == _CPU:
                cpu_add((ordinal, ts, dur, track, name, cat_id))
            else:
                range_add((ordinal, ts, dur, track, name))
                range_args.append(args)
        for rows in (gpu, launch, cpu, ranges):
            rows.flush()

    return TraceColumns(
        path=reader.name,
        gpu=gpu.table(),
        launches=launch.table(),
        cpu_ops=cpu.table(),
        ranges=ranges.table(),
        range_args=range_args,
        names=names.values,
        tracks=tracks.values,
        cats=cats.values,
        metadata=reader.metadata(),
        phase_cat_counts=counts,
        track_names=track_names,
        process_names=process_names,
        max_flow_id=max_flow_id,
        event_count=reader.event_count,
        skipped=skipped,
        kernel_dims=dims.values,
    )


_NO_ARGS: dict = {}


def _launch_dims(grid: object, block: object, dims: _Interner) -> int:
    """Id of a kernel's ``(grid, block)`` (each an (x, y, z) tuple of ints); -1 unless both are there."""
    if type(grid) is not list or type(block) is not list or len(grid) != 3 or len(block) != 3:
        return -1
    if not all(type(v) is int for v in grid) or not all(type(v) is int for v in block):
        return -1
    key = (tuple(grid), tuple(block))
    found = dims.ids.get(key)
    return dims(key) if found is None else found


def _note_metadata(e: dict, track_names: dict, process_names: dict) -> None:
    args = e.get("args")
    if type(args) is not dict:
        return
    name = args.get("name")
    if type(name) is not str:
        return
    if e.get("name") == "thread_name":
        track_names[(e.get("pid"), e.get("tid"))] = name
    elif e.get("name") == "process_name":
        process_names[e.get("pid")] = name
