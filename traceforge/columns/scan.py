"""One pass over the events into compact numpy columns, keyed by event ordinal.

Analyses read these columns and never touch JSON. Both Kineto vocabularies are
understood: new (``kernel``, ``gpu_memcpy``, ``cuda_runtime``, ``cpu_op``, ...) and 2021
(``Kernel``, ``Memcpy``, ``Runtime``, ``Operator``, string tids like ``"stream 7"``).
Times are integer ns (see ``exacttime``).

The reader's C scanner gives one int64 row per event (``io.read.rows``); this module turns
batches of rows into columns with numpy, decoding each distinct string or (pid, tid)
once. Rows the scanner flags as odd are recomputed from the parsed event.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import orjson

from .. import _native
from ..io.memory.background import prefetched
from ..io.read import rows as R
from ..io.read.reader import EventBatch, TraceReader
from ..io.write.placed_patch import EventPlaces
from ..util.distinct import factorized, unique
from ..util.exacttime import to_ns
from .names import NameIds, names_at
from .phases import FLOW, METADATA, OTHER, SLICE, earliest_ts, phase_code
from .table import GrowingColumns, SpilledColumns, Table, time_span

# Event kinds, by category (both vocabularies; matched case-insensitively).
KERNEL, MEMCPY, MEMSET = 0, 1, 2
GPU_KIND_NAMES = ("kernel", "memcpy", "memset")
_GPU_CATS = {"kernel": KERNEL, "gpu_memcpy": MEMCPY, "memcpy": MEMCPY, "gpu_memset": MEMSET, "memset": MEMSET}
_LAUNCH_CATS = {"cuda_runtime", "cuda_driver", "runtime", "driver"}
_CPU_CATS = {"cpu_op", "operator", "user_annotation", "python_function"}
_RANGE_CATS = {"cuda_profiler_range"}

_GPU, _LAUNCH, _CPU, _RANGE = "gpu", "launch", "cpu", "range"
STEP_PREFIX = "ProfilerStep#"  # the CPU ranges torch.profiler marks each step with
GPU_ANNOTATION_CAT = "gpu_user_annotation"  # a user annotation's range on a GPU stream (ph X)
MEMORY_EVENT = "[memory]"  # Kineto's allocator instants (profile_memory=True), kept by scan(memory=True)
MEMORY_ARGS = ("Device Type", "Device Id", "Bytes", "Total Allocated", "Total Reserved")
# A CPU op's shapes (record_shapes=True), and a collective's size (record_param_comms).
SHAPE_ARGS = ("Input Dims", "Input type", "Concrete Inputs", "In msg nelems", "dtype", "Collective name")
_NO_SHAPES = (None,) * len(SHAPE_ARGS)
_SEEN_SHAPES_MAX = 1 << 16
COPY_RATE_ARG = "memory bandwidth (GB/s)"  # Kineto's rate of a copy, from its duration in ns
RATE_SCALE = 1_000_000  # copy rates are integers of 1e-6 GB/s (bytes per ns)
_SLICE_FIELDS = "ordinal:n4 ts dur:n4 track:i4 name:i4"
_ANNOTATION_FIELDS = _SLICE_FIELDS + " device:n4 stream:n4"
_MEMORY_FIELDS = "ordinal:n4 ts track:i4 device_type:i1 device:n4 bytes allocated reserved"
# The scanner's fields of a [memory] instant's args (MEMORY_ARGS), and the flags saying each is an int.
_MEMORY_ROW_FIELDS = (R.FLAGS, R.TS, R.TRACK, R.DEVICE_TYPE, R.DEVICE, R.BYTES, R.ALLOCATED, R.RESERVED)
_MEMORY_FLAGS = R.F_DEVICE_TYPE | R.F_DEVICE | R.F_BYTES | R.F_ALLOCATED | R.F_RESERVED
_COPY_RATE_FIELDS = "ordinal:n4 rate"
# Kineto's CUDA synchronisation events (cat "cuda_sync", on a GPU stream track), by kind (their name).
SYNC_CAT = "cuda_sync"
SYNC_KINDS = ("Stream Sync", "Context Sync", "Event Sync", "Stream Wait Event")
SYNC_ARGS = ("wait_on_stream", "wait_on_cuda_event_record_corr_id")  # the stream and record an event wait names
_SYNC_FIELDS = "ordinal:n4 ts dur:n4 device:n4 stream:n4 correlation:n4 kind:i1 wait_stream:n4 record_correlation:n4"
# Kineto's forward-to-backward flows (cat "fwdbwd": "s" on a forward operator, "f" on its backward).
FWDBWD_CAT = "fwdbwd"
_FWDBWD_FIELDS = "ordinal:n4 ts track:i4 id is_end:i1"
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


def _usable_id(value: object) -> object:
    """A pid or tid as written, or None for a list or object (which Perfetto reads as absent)."""
    return None if isinstance(value, (list, dict)) else value


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


@dataclass
class TraceColumns:
    """Everything analyses need from a trace, without the trace."""

    path: str
    # With scan(op_args=True) the first three have external_id too, and gpu shared_memory.
    gpu: Table  # ordinal kind ts dur device stream track correlation name bytes dims
    launches: Table  # ordinal ts dur track correlation name cat kernel (args "kernel" name id, -1 none)
    cpu_ops: Table  # ordinal ts dur track name cat
    ranges: Table  # ordinal ts dur track name
    range_args: list[dict]
    names: Sequence[str]  # by name id: a ``Names`` (read from the scanner's strings) or a list
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
    # With scan(op_shapes=...): cpu_ops.shape id -> the op's SHAPE_ARGS values (None where absent).
    op_shapes: list[tuple] = field(default_factory=list)
    places: SpilledColumns | None = None  # per GPU op (if asked for): offset length args_at args_empty
    # With scan(spill_cpu_ops=True): the CPU ops, on disk until a caller selects some into cpu_ops.
    spilled_cpu_ops: SpilledColumns | None = None
    spilled_launches: SpilledColumns | None = None  # likewise, those scan(spill_launch=...) picks
    dropped_cpu_ops: int = 0  # CPU ops in the trace that a caller did not select
    # The profiler steps (CPU ops named STEP_PREFIX + N), whatever CPU ops a scan keeps.
    steps: Table = field(default_factory=lambda: GrowingColumns(_SLICE_FIELDS).table())
    # The gpu_user_annotation ranges, always (a few per step): device and stream are the pid and tid.
    gpu_annotations: Table = field(default_factory=lambda: GrowingColumns(_ANNOTATION_FIELDS).table())
    # With scan(memory=True): the [memory] instants, args MEMORY_ARGS (device_type 0 CPU, 1 CUDA).
    memory: Table = field(default_factory=lambda: GrowingColumns(_MEMORY_FIELDS).table())
    # Kineto's COPY_RATE_ARG (in RATE_SCALE units) of the copies whose dur is a whole µs (see memcpy_bw).
    copy_rates: Table = field(default_factory=lambda: GrowingColumns(_COPY_RATE_FIELDS).table())
    trace_start_ns: int | None = None  # the earliest ts >= 0 of any event but metadata (as ``trim`` has it)
    layout: str = "object"  # the top level: "object" ({"traceEvents": [...], ...}) or "array" (bare events)
    # The cuda_sync events, always (a few per step): kind is the index in SYNC_KINDS (-1 another),
    # wait_stream and record_correlation their SYNC_ARGS (-1 where absent).
    syncs: Table = field(default_factory=lambda: GrowingColumns(_SYNC_FIELDS).table())
    # With scan(memory=True, spill_memory=True): the [memory] instants on disk (``memory`` stays empty).
    spilled_memory: SpilledColumns | None = None
    # The fwdbwd flow events with an id, always (one pair per autograd op): is_end 1 for "f".
    fwdbwd: Table = field(default_factory=lambda: GrowingColumns(_FWDBWD_FIELDS).table())

    def with_cpu_ops(self, keep: Callable[[Table], np.ndarray]) -> TraceColumns:
        """These columns with the spilled CPU ops that ``keep`` picks (a mask per chunk) read back."""
        spilled = self.spilled_cpu_ops
        cpu_ops = spilled.select(keep)
        return replace(self, cpu_ops=cpu_ops, spilled_cpu_ops=None, dropped_cpu_ops=spilled.size - len(cpu_ops))

    @property
    def memory_events(self) -> int:
        """How many ``[memory]`` instants were kept, in memory or on disk."""
        return len(self.memory) + (0 if self.spilled_memory is None else self.spilled_memory.size)

    @property
    def all_launches(self) -> tuple[Table | SpilledColumns, ...]:
        """The launch calls: those in memory, and those on disk if some were spilled."""
        return (self.launches,) if self.spilled_launches is None else (self.launches, self.spilled_launches)

    @property
    def all_cpu_ops(self) -> tuple[Table | SpilledColumns, ...]:
        """The CPU ops: those in memory, and those on disk if they were spilled."""
        return (self.cpu_ops,) if self.spilled_cpu_ops is None else (self.cpu_ops, self.spilled_cpu_ops)

    def time_span(self) -> tuple[int, int] | None:
        """(first start, last end) in ns over every scanned event (``time_span``), None for none."""
        return time_span((self.gpu, *self.all_launches, *self.all_cpu_ops, self.ranges))

    @property
    def base_time_ns(self) -> int | None:
        value = self.metadata.get("baseTimeNanoseconds")
        return value if type(value) is int else None

    def gpu_places(self) -> EventPlaces | None:
        """Where the GPU ops are in the decompressed input (for patching without parsing), if scanned;
        read back from disk, once."""
        return None if self.places is None else load_places(self.gpu.ordinal, self.places)

    def name_of(self, ids: np.ndarray) -> list[str]:
        return names_at(self.names, np.asarray(ids, np.int64)).tolist()

    def gpu_pid(self, device: int) -> object:
        """The pid of the process that shows ``device``'s streams (where its tracks go)."""
        rows = np.flatnonzero(self.gpu.device == device)
        if len(rows):
            return self.tracks[int(self.gpu.track[rows[0]])][0]
        return device


def load_places(ordinals: np.ndarray, places: SpilledColumns) -> EventPlaces:
    """``TraceColumns.gpu_places`` from its parts: a caller can free the columns first."""
    p = places.load()
    return EventPlaces(ordinals, p.offset, p.length, p.args_at, p.args_empty)


def scan(
    path: str,
    *,
    cpu_ops: bool = True,
    display_name: str | None = None,
    reader: TraceReader | None = None,
    on_batch: Callable[[EventBatch], None] | None = None,
    places: bool = False,
    keep_launch: Callable[[str], bool] | None = None,
    spill_cpu_ops: bool = False,
    spill_launch: Callable[[str], bool] | None = None,
    op_args: bool = False,
    memory: bool = False,
    spill_memory: bool = False,
    op_shapes: Callable[[str], bool] | None = None,
) -> TraceColumns:
    """Read ``path`` once and return its columns. ``cpu_ops=False`` skips CPU ops (memory).

    ``on_batch`` sees every batch of ``reader`` as it goes by (annotate copies them out
    in the same pass, then uses the reader's head and tail). ``places``: also record where
    each GPU op's bytes are (``TraceColumns.gpu_places``), for patching them on a second read.
    ``keep_launch(name)``: which launch calls to keep (by default all), when the caller
    knows its analyses read only some APIs (half the launch columns on big traces).
    ``spill_cpu_ops``: leave ``cpu_ops`` empty and the CPU ops in ``spilled_cpu_ops``, for a
    caller that keeps only some of them (see ``SpilledColumns``); ``spill_launch(name)``
    likewise puts the launch calls it picks (of those kept) in ``spilled_launches``.
    ``op_args``: also keep args ``External id`` (GPU ops, launch calls, CPU ops) and ``shared
    memory`` (GPU ops) as columns ``external_id`` and ``shared_memory`` (-1 where absent or not
    an int), for export. ``memory``: also keep Kineto's ``[memory]`` instants (``TraceColumns.memory``;
    each is parsed, and traces taken with ``profile_memory=True`` have millions); with ``spill_memory``
    they wait on disk (``spilled_memory``), for a caller that reads them a device at a time.
    ``op_shapes(name)``: the CPU ops whose shapes (``SHAPE_ARGS``) are kept, as column ``shape``
    of ``cpu_ops`` (an id into ``TraceColumns.op_shapes``, -1 for none); those events are parsed.
    """
    reader = reader or TraceReader(path, display_name=display_name)
    builder = _ColumnBuilder(reader.scanner, cpu_ops, places, keep_launch, spill_cpu_ops, spill_launch, op_args,
                             memory, spill_memory, op_shapes)
    # The reader (decompressed data in, C scan) runs a batch or two ahead in its own thread.
    for batch in prefetched(reader.batches(), depth=2):
        if on_batch is not None:
            on_batch(batch)
        builder.add(batch)
    return builder.columns(reader)


_KIND_CODES = {_GPU: 0, _LAUNCH: 1, _CPU: 2, _RANGE: 3}
# The row fields each step reads (gathered in one pass: ``rows.columns``).
_HEAD_FIELDS = (R.PH, R.CAT, R.NAME, R.FLAGS, R.ID, R.TS)
_SLICE_ROW_FIELDS = (R.TS, R.DUR, R.TRACK, R.NAME)
_DIMS_FIELDS = tuple(range(R.GRID, R.GRID + 3)) + tuple(range(R.BLOCK, R.BLOCK + 3))
_TIMES = R.F_TS | R.F_DUR
_SYNC_ROW_FIELDS = _SLICE_ROW_FIELDS + (R.FLAGS, R.DEVICE, R.STREAM, R.CORRELATION)
_OP_ARG_FLAGS = {R.EXTERNAL_ID: R.F_EXTERNAL_ID, R.SHARED_MEMORY: R.F_SHARED_MEMORY}


class _ByString:
    """A value per scanner string id, read in one gather: the last two cells answer ids -2 (a
    value that is not a string) and -1 (absent) with the ``missing`` value."""

    def __init__(self, dtype: type, missing: object) -> None:
        self.values = np.full(2, missing, dtype)

    def extend(self, new: list) -> None:
        self.values = np.concatenate([self.values[:-2], np.array(new, self.values.dtype), self.values[-2:]])

    def __getitem__(self, ids: np.ndarray) -> np.ndarray:
        return self.values[ids]


class _ColumnBuilder:
    """Rows in, columns out; each distinct string and track is decoded once."""

    def __init__(self, scanner: R.RowScanner, cpu_ops: bool, places: bool,
                 keep_launch: Callable[[str], bool] | None = None, spill_cpu_ops: bool = False,
                 spill_launch: Callable[[str], bool] | None = None, op_args: bool = False, memory: bool = False,
                 spill_memory: bool = False, op_shapes: Callable[[str], bool] | None = None):
        self.scanner = scanner
        self.op_shapes = op_shapes
        self._shape_name = _ByString(bool, False)
        self.shapes = _Interner()
        self._seen_shapes: dict[bytes, int] = {}  # an op's text less its per-event fields -> its shapes' id
        self.op_args = op_args
        self.cpu_ops = cpu_ops
        self.keep_launch = keep_launch
        self.spill_launch = spill_launch
        self.names = NameIds(scanner.strings)
        self.tracks, self.cats, self.dims = _Interner(), _Interner(), _KernelDims()
        # Per scanner string id: what it means as a ph and as a cat, and its ids once used.
        self._ph_code = _ByString(np.int8, 0)
        self._kind = _ByString(np.int8, -1)
        self._gpu_kind = np.zeros(0, np.int8)
        self._cat_id = np.zeros(0, np.int32)
        self._kept_launch = _ByString(bool, False)
        self._spilled_launch = _ByString(bool, spill_launch("") if spill_launch is not None else False)
        self._known = 0  # scanner strings learnt (``_learn``)
        # Per scanner track id: the track's id, and its pid and tid as ints (defaults of device, stream).
        self._track_id = np.zeros(0, np.int32)
        self._pid_int = np.zeros(0, np.int64)
        self._tid_int = np.zeros(0, np.int64)
        ext = " external_id:n4" if op_args else ""
        self.gpu = GrowingColumns("ordinal:n4 kind:i1 ts dur:n4 device:n4 stream:n4 track:i4 correlation:n4 name:i4 "
                            "bytes:n4 dims:i4" + (ext + " shared_memory:n4" if op_args else ""))
        self.places = SpilledColumns("offset length:n4 args_at:n4 args_empty:i1") if places else None
        launch_fields = "ordinal:n4 ts dur:n4 track:i4 correlation:n4 name:i4 cat:i4 kernel:i4" + ext
        self.launch = GrowingColumns(launch_fields)
        self.spilled_launch = SpilledColumns(launch_fields) if spill_launch is not None else None
        cpu_fields = "ordinal:n4 ts dur:n4 track:i4 name:i4 cat:i4" + ext + (" shape:i4" if op_shapes else "")
        self.cpu = GrowingColumns(cpu_fields)
        self.spilled_cpu = SpilledColumns(cpu_fields) if spill_cpu_ops else None
        self.ranges = GrowingColumns(_SLICE_FIELDS)
        self.steps = GrowingColumns(_SLICE_FIELDS)
        self._step_name = _ByString(bool, False)
        self.gpu_annotations = GrowingColumns(_ANNOTATION_FIELDS)
        self._annotation_cat = _ByString(bool, False)
        self.syncs = GrowingColumns(_SYNC_FIELDS)
        self._sync_cat = _ByString(bool, False)
        self.fwdbwd = GrowingColumns(_FWDBWD_FIELDS)
        self._fwdbwd_cat = _ByString(bool, False)
        self._flow_end = _ByString(bool, False)
        self.memory: GrowingColumns | SpilledColumns | None = None
        if memory:
            self.memory = SpilledColumns(_MEMORY_FIELDS) if spill_memory else GrowingColumns(_MEMORY_FIELDS)
        self._memory_name = _ByString(bool, False)
        self.copy_rates = GrowingColumns(_COPY_RATE_FIELDS)
        self.range_args: list[dict] = []
        self.counts: Counter = Counter()
        self.skipped: Counter = Counter()
        self.track_names: dict[tuple, str] = {}
        self.process_names: dict[object, str] = {}
        self.max_flow_id = -1
        self.trace_start_ns: int | None = None
        # Per kind, the row fields its columns are made of (args and places only when asked for).
        base = _SLICE_ROW_FIELDS + (R.FLAGS,)
        self._fields = {
            _KIND_CODES[_GPU]: base + (R.CAT, R.DEVICE, R.STREAM, R.CORRELATION, R.BYTES) + _DIMS_FIELDS
            + ((R.EXTERNAL_ID, R.SHARED_MEMORY) if op_args else ()) + ((R.START, R.END, R.ARGS_AT) if places else ()),
            _KIND_CODES[_LAUNCH]: base + (R.CAT, R.CORRELATION, R.KERNEL) + ((R.EXTERNAL_ID,) if op_args else ()),
            _KIND_CODES[_CPU]: base + (R.CAT,) + ((R.EXTERNAL_ID,) if op_args else ()),
            _KIND_CODES[_RANGE]: base,
        }

    def add(self, batch: EventBatch) -> None:
        rows = batch.rows
        head = R.columns(rows, None, _HEAD_FIELDS)
        odd = np.flatnonzero(head[R.FLAGS] & R.F_ODD)
        if len(odd):
            rows = rows.copy()
            for i in odd.tolist():
                _resolve_odd(rows[i], batch.event(i), self.scanner)
            head = R.columns(rows, None, _HEAD_FIELDS)
        self._learn()
        ph_code = self._ph_code[head[R.PH]]
        self._count(head[R.PH], head[R.CAT])
        for i in np.flatnonzero(ph_code == METADATA).tolist():
            _note_metadata(batch.event(i), self.track_names, self.process_names)
        flags = head[R.FLAGS]
        low = earliest_ts(head[R.TS], flags & R.F_TS != 0, ph_code)
        if low is not None and (self.trace_start_ns is None or low < self.trace_start_ns):
            self.trace_start_ns = low
        flows = (ph_code == FLOW) & (flags & R.F_ID != 0)
        if flows.any():
            self.max_flow_id = max(self.max_flow_id, int(head[R.ID][flows].max()))
            links = np.flatnonzero(flows & (flags & R.F_TS != 0) & self._fwdbwd_cat[head[R.CAT]])
            if len(links):
                track = R.columns(rows, links, (R.TRACK,))[R.TRACK]
                self.fwdbwd.extend(links + batch.first, head[R.TS][links], self._track_id[track], head[R.ID][links],
                                   self._flow_end[head[R.PH][links]].astype(np.int8))
        kind = self._kind[head[R.CAT]]
        kind[ph_code != SLICE] = -1
        timed = (flags & _TIMES) == _TIMES
        steps = np.flatnonzero((kind == _KIND_CODES[_CPU]) & timed & self._step_name[head[R.NAME]])
        if len(steps):
            self.steps.extend(*self._slice_fields(batch, R.columns(rows, steps, _SLICE_ROW_FIELDS), steps))
        annotations = np.flatnonzero((ph_code == SLICE) & timed & self._annotation_cat[head[R.CAT]])
        if len(annotations):
            self._add_gpu_annotations(batch, rows, annotations)
        syncs = np.flatnonzero((ph_code == SLICE) & timed & self._sync_cat[head[R.CAT]])
        if len(syncs):
            self._add_syncs(batch, rows, syncs)
        if self.memory is not None:
            memory = np.flatnonzero((ph_code == OTHER) & (flags & R.F_TS != 0) & self._memory_name[head[R.NAME]])
            if len(memory):
                self._add_memory(batch, rows, memory)
        if not self.cpu_ops:
            kind[kind == _KIND_CODES[_CPU]] = -1
        if self.keep_launch is not None:
            kind[(kind == _KIND_CODES[_LAUNCH]) & ~self._kept_launch[head[R.NAME]]] = -1
        for name, code in _KIND_CODES.items():
            mine = kind == code
            if not mine.any():
                continue
            bad = int(np.count_nonzero(mine & ~timed))
            if bad:
                self.skipped[f"{name} event without a numeric ts/dur"] += bad
            self._add_kind(code, batch, rows, np.flatnonzero(mine & timed))

    def _add_gpu_annotations(self, batch: EventBatch, rows: np.ndarray, at: np.ndarray) -> None:
        r = R.columns(rows, at, _SLICE_ROW_FIELDS)
        track = r[R.TRACK]
        self.gpu_annotations.extend(*self._slice_fields(batch, r, at), self._pid_int[track], self._tid_int[track])

    def _add_syncs(self, batch: EventBatch, rows: np.ndarray, at: np.ndarray) -> None:
        """The cuda_sync events ``at``: device, stream and correlation from the rows, the wait
        args (``SYNC_ARGS``) from the parsed events (a few per step)."""
        r = R.columns(rows, at, _SYNC_ROW_FIELDS)
        flags, track = r[R.FLAGS], r[R.TRACK]
        names = [self._text(i) if i >= 0 else "" for i in r[R.NAME].tolist()]
        kind = np.array([SYNC_KINDS.index(n) if n in SYNC_KINDS else -1 for n in names], np.int8)
        waits = [[_int64_or(_args_of(e).get(k), -1) for k in SYNC_ARGS] for e in _events_at(batch, at)]
        wait = np.array(waits, np.int64).reshape(-1, 2)
        self.syncs.extend(at + batch.first, r[R.TS], r[R.DUR],
                          np.where(flags & R.F_DEVICE, r[R.DEVICE], self._pid_int[track]),
                          np.where(flags & R.F_STREAM, r[R.STREAM], self._tid_int[track]),
                          np.where(flags & R.F_CORRELATION, r[R.CORRELATION], -1), kind, wait[:, 0], wait[:, 1])

    def _add_memory(self, batch: EventBatch, rows: np.ndarray, at: np.ndarray) -> None:
        """The ``[memory]`` instants ``at`` (their args ``MEMORY_ARGS`` are in the rows); one
        without an int for each is skipped."""
        r = R.columns(rows, at, _MEMORY_ROW_FIELDS)
        whole = (r[R.FLAGS] & _MEMORY_FLAGS) == _MEMORY_FLAGS
        if not whole.all():
            self.skipped[f"{MEMORY_EVENT} event without int args {', '.join(MEMORY_ARGS)}"] += int((~whole).sum())
        self.memory.extend(at[whole] + batch.first, r[R.TS][whole], self._track_id[r[R.TRACK][whole]],
                           *(r[f][whole] for f in (R.DEVICE_TYPE, R.DEVICE, R.BYTES, R.ALLOCATED, R.RESERVED)))

    def _add_copy_rates(self, batch: EventBatch, at: np.ndarray, ordinal: np.ndarray) -> None:
        """Kineto's ``COPY_RATE_ARG`` of the copies ``at`` (rows of ``batch``), where it is a number."""
        rates = [_args_of(e).get(COPY_RATE_ARG) for e in _events_at(batch, at)]
        has = np.array([type(x) in (int, float) and math.isfinite(x) and x >= 0 for x in rates], bool)
        units = np.array([round(x * RATE_SCALE) for x, ok in zip(rates, has) if ok], np.int64)
        self.copy_rates.extend(ordinal[has], units)

    def _slice_fields(self, batch: EventBatch, r: dict[int, np.ndarray], at: np.ndarray) -> tuple[np.ndarray, ...]:
        """Ordinal, ts, dur, track id and name id of the rows ``at`` of ``batch`` (``r``: their columns)."""
        return at + batch.first, r[R.TS], r[R.DUR], self._track_id[r[R.TRACK]], self._name_ids(r[R.NAME])

    def _add_kind(self, code: int, batch: EventBatch, rows: np.ndarray, at: np.ndarray) -> None:
        if not len(at):
            return
        r = R.columns(rows, at, self._fields[code])
        flags = r[R.FLAGS]
        ordinal, ts, dur, track, name = self._slice_fields(batch, r, at)
        if code == _KIND_CODES[_GPU]:
            self.gpu.extend(
                ordinal, self._gpu_kind[r[R.CAT]], ts, dur,
                np.where(flags & R.F_DEVICE, r[R.DEVICE], self._pid_int[r[R.TRACK]]),
                np.where(flags & R.F_STREAM, r[R.STREAM], self._tid_int[r[R.TRACK]]),
                track, np.where(flags & R.F_CORRELATION, r[R.CORRELATION], -1), name,
                np.where(flags & R.F_BYTES, r[R.BYTES], -1), self._dim_ids(r),
                *self._op_args(r, R.EXTERNAL_ID, R.SHARED_MEMORY),
            )
            if self.places is not None:
                self.places.extend(*_places(batch, r))
            # Older Kineto truncates a copy's dur to whole µs; its rate arg comes from the ns duration.
            copies = (self._gpu_kind[r[R.CAT]] != KERNEL) & (flags & R.F_BYTES != 0)
            whole_us = np.flatnonzero(copies & (dur > 0) & (dur % 1000 == 0))
            if len(whole_us):
                self._add_copy_rates(batch, at[whole_us], ordinal[whole_us])
        elif code == _KIND_CODES[_LAUNCH]:
            kernel = r[R.KERNEL]
            kernel_id = np.full(len(kernel), -1, np.int32)
            kernel_id[kernel >= 0] = self._name_ids(kernel[kernel >= 0])
            values = (ordinal, ts, dur, track, np.where(flags & R.F_CORRELATION, r[R.CORRELATION], -1),
                      name, self._cat_ids(r[R.CAT]), kernel_id, *self._op_args(r, R.EXTERNAL_ID))
            if self.spill_launch is None:
                self.launch.extend(*values)
            else:
                spill = self._spilled_launch[r[R.NAME]]
                kept = np.flatnonzero(~spill)  # indices, not masks: each column is one gather
                self.launch.extend(*(v[kept] for v in values))
                if len(kept) < len(spill):
                    spilled = np.flatnonzero(spill)
                    self.spilled_launch.extend(*(v[spilled] for v in values))
        elif code == _KIND_CODES[_CPU]:
            cpu = self.cpu if self.spilled_cpu is None else self.spilled_cpu
            cpu.extend(ordinal, ts, dur, track, name, self._cat_ids(r[R.CAT]), *self._op_args(r, R.EXTERNAL_ID),
                       *([self._shape_ids(batch, at, r[R.NAME])] if self.op_shapes is not None else []))
        else:
            self.ranges.extend(ordinal, ts, dur, track, name)
            for i in at.tolist():
                args = batch.event(i).get("args")
                self.range_args.append(args if type(args) is dict else {})

    def _shape_ids(self, batch: EventBatch, at: np.ndarray, names: np.ndarray) -> np.ndarray:
        """Per CPU op ``at``: the id of its shapes (``SHAPE_ARGS``), for those ``op_shapes`` picks by
        name; -1 for the others and for ops without any of those args. Each distinct shape is kept once.

        Most ops repeat an earlier one but for their times and ids: each op's args less their
        per-event members (the scanner's ``shape_keys``, without a parse) is looked up first, and
        only the events whose key is new are parsed."""
        out = np.full(len(at), -1, np.int32)
        picked = np.flatnonzero(self._shape_name[names])
        if not len(picked):
            return out
        if batch.raw_rows is None:
            out[picked] = [self._shape_id(e) for e in _events_at(batch, at[picked])]
            return out
        seen = self._seen_shapes
        if len(seen) > _SEEN_SHAPES_MAX:  # keys that never repeat (members the scanner does not know): start again
            seen.clear()
        ids = np.empty(len(picked), np.int32)
        new = _native.scanner.shape_keys(batch.view, np.ascontiguousarray(batch.spans[at[picked]], np.int64), seen,
                                         ids)
        if new:
            for (i, key), e in zip(new, _events_at(batch, at[picked][[i for i, _ in new]])):
                ids[i] = self._shape_id(e)
                if key is not None:  # None: an event the scanner leaves to the parser, never looked up
                    seen[key] = int(ids[i])
        out[picked] = ids
        return out

    def _shape_id(self, e: dict) -> int:
        """The id of event ``e``'s shapes (-1 for none)."""
        values = tuple(_args_of(e).get(k) for k in SHAPE_ARGS)
        if values == _NO_SHAPES:
            return -1
        try:
            key = orjson.dumps(values)
        except TypeError:  # a string that was not UTF-8: no shapes read from it
            return -1
        i = self.shapes.ids.get(key)
        if i is None:
            i = self.shapes.ids[key] = len(self.shapes.values)
            self.shapes.values.append(values)
        return i

    def _op_args(self, r: dict[int, np.ndarray], *fields: int) -> list[np.ndarray]:
        """With ``op_args``, these args columns of rows ``r`` (-1 where absent); else none."""
        if not self.op_args:
            return []
        return [np.where(r[R.FLAGS] & _OP_ARG_FLAGS[f], r[f], -1) for f in fields]

    def _count(self, ph: np.ndarray, cat: np.ndarray) -> None:
        key = (ph + 2) << 32 | (cat + 2)
        codes, first = factorized(key)  # a few distinct pairs: only they are sorted (the counts' order)
        distinct, counts = key[first], np.bincount(codes)
        order = np.argsort(distinct)
        for k, n in zip(distinct[order].tolist(), counts[order].tolist()):
            ph, cat = int(k >> 32) - 2, int(k & 0xFFFFFFFF) - 2
            self.counts[(self._text(ph) if ph >= 0 else None, self._text(cat) if cat >= 0 else None)] += int(n)

    def _learn(self) -> None:
        """Decode the strings and tracks the scanner met since the last batch."""
        new = self.scanner.strings[self._known:]
        if new:
            self._known += len(new)
            self.names.learn(new)
            texts = [R.decode_string(raw) for raw in new]
            kinds = [_kind_of(t) for t in texts]
            self._ph_code.extend([phase_code(t) for t in texts])
            self._kind.extend([_KIND_CODES.get(k, -1) for k in kinds])
            self._gpu_kind = np.append(self._gpu_kind, np.array(
                [_GPU_CATS[t.lower()] if k == _GPU else -1 for t, k in zip(texts, kinds)], np.int8))
            self._step_name.extend([t.startswith(STEP_PREFIX) for t in texts])
            self._annotation_cat.extend([t == GPU_ANNOTATION_CAT for t in texts])
            self._sync_cat.extend([t == SYNC_CAT for t in texts])
            self._fwdbwd_cat.extend([t == FWDBWD_CAT for t in texts])
            self._flow_end.extend([t == "f" for t in texts])
            self._memory_name.extend([t == MEMORY_EVENT for t in texts])
            self._cat_id = np.append(self._cat_id, np.full(len(new), -1, np.int32))
            if self.keep_launch is not None:
                self._kept_launch.extend([self.keep_launch(t) for t in texts])
            if self.op_shapes is not None:
                self._shape_name.extend([self.op_shapes(t) for t in texts])
            if self.spill_launch is not None:
                self._spilled_launch.extend([self.spill_launch(t) for t in texts])
        new = self.scanner.tracks[len(self._track_id):]
        if new:
            decoded = [tuple(map(_usable_id, R.decode_track(raw))) for raw in new]
            self._track_id = np.append(self._track_id, np.array([self.tracks(t) for t in decoded], np.int32))
            self._pid_int = np.append(self._pid_int, np.array([_int64_or(p, -1) for p, _ in decoded], np.int64))
            self._tid_int = np.append(self._tid_int, np.array([_int64_or(t, -1) for _, t in decoded], np.int64))

    def _text(self, i: int) -> str:
        """The str of scanner string ``i``."""
        return R.decode_string(self.scanner.strings[i])

    def _name_ids(self, ids: np.ndarray) -> np.ndarray:
        """Name ids of string ids; "" for a missing name or one that is not a string."""
        return self.names.of(ids)

    def _cat_ids(self, ids: np.ndarray) -> np.ndarray:
        return self._assign(self._cat_id, ids, self.cats, None)

    def _assign(self, table: np.ndarray, ids: np.ndarray, interner: _Interner, missing: object) -> np.ndarray:
        if (ids < 0).any():
            fill = interner(missing)
            out = np.full(len(ids), fill, np.int32)
            known = ids >= 0
            out[known] = self._assign(table, ids[known], interner, missing)
            return out
        out = table[ids]
        if (out < 0).any():
            for i in unique(ids[out < 0]).tolist():
                table[i] = interner(self._text(i))
            out = table[ids]
        return out

    def _dim_ids(self, r: dict[int, np.ndarray]) -> np.ndarray:
        """Ids of (grid, block) pairs; -1 unless both are three ints."""
        flags = r[R.FLAGS]
        out = np.full(len(flags), -1, np.int32)
        has = np.flatnonzero(flags & R.F_DIMS)
        if len(has):
            out[has] = self.dims.ids(np.stack([r[f][has] for f in _DIMS_FIELDS], axis=1))
        return out

    def columns(self, reader: TraceReader) -> TraceColumns:
        return TraceColumns(
            path=reader.name,
            gpu=self.gpu.table(),
            places=self.places,
            launches=self.launch.table(),
            cpu_ops=self.cpu.table(),
            ranges=self.ranges.table(),
            steps=self.steps.table(),
            gpu_annotations=self.gpu_annotations.table(),
            syncs=self.syncs.table(),
            fwdbwd=self.fwdbwd.table(),
            copy_rates=self.copy_rates.table(),
            **({"memory": self.memory.table()} if isinstance(self.memory, GrowingColumns) else
               {"spilled_memory": self.memory}),
            range_args=self.range_args,
            names=self.names.names(),
            tracks=self.tracks.values,
            cats=self.cats.values,
            metadata=reader.metadata(),
            phase_cat_counts=self.counts,
            track_names=self.track_names,
            process_names=self.process_names,
            max_flow_id=self.max_flow_id,
            event_count=reader.event_count,
            skipped=self.skipped,
            kernel_dims=self.dims.values,
            op_shapes=self.shapes.values,
            spilled_cpu_ops=self.spilled_cpu,
            spilled_launches=self.spilled_launch,
            trace_start_ns=self.trace_start_ns,
            layout=reader.layout,
        )


class _KernelDims:
    """(grid, block) pairs to dense ids; ``values`` are the pairs (two int triples) by id.

    A trace has a few hundred distinct pairs among millions of kernels: each batch's rows are
    told apart by a 64-bit hash (checked exactly), and only pairs not met in an earlier batch
    reach the Python dict. New pairs get ids in sorted order, batch by batch.
    """

    def __init__(self) -> None:
        self._interner = _Interner()
        self.values = self._interner.values
        self._hashes = np.zeros(0, np.int64)  # sorted: the hashes of pairs met so far
        self._hash_ids = np.zeros(0, np.int32)
        self._pairs = np.zeros((0, 6), np.int64)  # by id

    def ids(self, six: np.ndarray) -> np.ndarray:
        """The ids of rows of six ints (grid, then block)."""
        h = _row_hashes(six)
        codes, first = factorized(h)
        distinct, hashes = six[first], h[first]
        if not np.array_equal(distinct[codes], six):  # two pairs with one hash in this batch
            distinct, codes = np.unique(six, axis=0, return_inverse=True)
            hashes, codes = _row_hashes(distinct), codes.ravel()
        at = np.minimum(np.searchsorted(self._hashes, hashes), max(len(self._hashes) - 1, 0))
        ids = np.full(len(distinct), -1, np.int32)
        if len(self._hashes):
            met = self._hashes[at] == hashes
            met[met] = (self._pairs[self._hash_ids[at[met]]] == distinct[met]).all(axis=1)
            ids[met] = self._hash_ids[at[met]]
        new = np.flatnonzero(ids < 0)
        if len(new):
            new = new[np.lexsort(distinct[new].T[::-1])]
            ids[new] = [self._interner((tuple(p[:3]), tuple(p[3:]))) for p in distinct[new].tolist()]
            self._learn(hashes[new], ids[new])
        return ids[codes]

    def _learn(self, hashes: np.ndarray, ids: np.ndarray) -> None:
        """Index these pairs' hashes (a hash met before keeps its pair: the others go by the dict)."""
        self._pairs = np.array([[*g, *b] for g, b in self.values], np.int64).reshape(-1, 6)
        fresh = ~np.isin(hashes, self._hashes)
        hashes, first = np.unique(hashes[fresh], return_index=True)
        merged = np.concatenate([self._hashes, hashes])
        order = np.argsort(merged, kind="stable")
        self._hashes, self._hash_ids = merged[order], np.concatenate([self._hash_ids, ids[fresh][first]])[order]


def _row_hashes(rows: np.ndarray) -> np.ndarray:
    """A 64-bit hash of each row of ints (as int64)."""
    h = np.zeros(len(rows), np.uint64)
    for column in rows.T:
        h ^= column.astype(np.uint64)
        h *= np.uint64(_ROW_HASH)
    return h.view(np.int64)


_ROW_HASH = 0x100000001B3  # FNV-1a's 64-bit prime


def _places(batch: EventBatch, r: dict[int, np.ndarray]) -> tuple[np.ndarray, ...]:
    """Absolute offset, length, where args members go (relative; -1 unknown) and whether args
    is empty, of rows (offset -1 for rows not read from the input's bytes)."""
    start, flags = r[R.START], r[R.FLAGS]
    if batch.raw_rows is None:
        n = len(start)
        return np.full(n, -1), np.zeros(n, np.int32), np.full(n, -1), np.zeros(n, bool)
    at = np.where(flags & R.F_ARGS, r[R.ARGS_AT] - start, -1)
    return start + batch.offset, r[R.END] - start, at, (flags & R.F_ARGS_EMPTY) != 0


_INT64 = (-(2**63), 2**63 - 1)


def _int64_or(value: object, default: int) -> int:
    v = _int_or(value, default)
    return v if _INT64[0] <= v <= _INT64[1] else default


def _resolve_odd(row: np.ndarray, e: dict, scanner: R.RowScanner) -> None:
    """Recompute a row the scanner flagged, from the parsed event, by the scan's rules."""
    row[R.PH], row[R.CAT], row[R.NAME] = (scanner.intern_string(e[k]) if k in e else -1 for k in ("ph", "cat", "name"))
    row[R.TRACK] = scanner.intern_track(e.get("pid"), e.get("tid"), "pid" in e, "tid" in e)
    flags = 0
    for key, column, flag in (("ts", R.TS, R.F_TS), ("dur", R.DUR, R.F_DUR)):
        try:
            ns = to_ns(e.get(key))
        except (ValueError, TypeError):
            continue
        if _INT64[0] <= ns <= _INT64[1]:
            row[column], flags = ns, flags | flag
    fid = e.get("id")
    if type(fid) is int and _INT64[0] <= fid <= _INT64[1]:
        row[R.ID], flags = fid, flags | R.F_ID
    args = e.get("args")
    row[R.KERNEL] = -1
    if type(args) is dict:  # F_ARGS stays off: where its object is in the bytes is not known here
        for key, column, flag in (("correlation", R.CORRELATION, R.F_CORRELATION), ("device", R.DEVICE, R.F_DEVICE),
                                  ("stream", R.STREAM, R.F_STREAM), ("bytes", R.BYTES, R.F_BYTES)):
            if key in args:
                row[column], flags = _int64_or(args[key], -1), flags | flag
        kernel = args.get("kernel")
        if type(kernel) is str:
            row[R.KERNEL] = scanner.intern_string(kernel)
        grid, block = args.get("grid"), args.get("block")
        if all(type(d) is list and len(d) == 3 and all(type(v) is int and _INT64[0] <= v <= _INT64[1] for v in d)
               for d in (grid, block)):
            row[R.GRID:R.GRID + 3], row[R.BLOCK:R.BLOCK + 3], flags = grid, block, flags | R.F_DIMS
        for key, column, flag in _NEVER_ODD_INT_ARGS:
            value = args.get(key)
            if type(value) is int and _INT64[0] <= value <= _INT64[1]:
                row[column], flags = value, flags | flag
    row[R.FLAGS] = flags


# Args read as 64-bit ints where they are one (else as absent): export's and a [memory] instant's.
_NEVER_ODD_INT_ARGS = (
    ("External id", R.EXTERNAL_ID, R.F_EXTERNAL_ID), ("shared memory", R.SHARED_MEMORY, R.F_SHARED_MEMORY),
    ("Total Allocated", R.ALLOCATED, R.F_ALLOCATED), ("Total Reserved", R.RESERVED, R.F_RESERVED),
    ("Device Type", R.DEVICE_TYPE, R.F_DEVICE_TYPE), ("Device Id", R.DEVICE, R.F_DEVICE), ("Bytes", R.BYTES, R.F_BYTES),
)


def _event_bytes(batch: EventBatch, at: np.ndarray) -> list[bytes] | None:
    """The bytes of the events ``at`` of ``batch``, where the batch was read from bytes."""
    if batch.raw_rows is None:
        return None
    view = batch.view
    return [view[a:b] for a, b in batch.spans[at].tolist()]


def _events_at(batch: EventBatch, at: np.ndarray) -> list:
    """The events ``at`` of ``batch`` as dicts (times as the parser reads them: use the rows'),
    their bytes parsed in one call rather than one by one."""
    blobs = _event_bytes(batch, at)
    if blobs is not None:
        try:
            return orjson.loads(b"[" + b",".join(blobs) + b"]")
        except orjson.JSONDecodeError:  # ints beyond 64 bits: the events one by one
            pass
    return [batch.event(i) for i in at.tolist()]


def _args_of(e: dict) -> dict:
    args = e.get("args")
    return args if type(args) is dict else {}


def _is_key(value: object) -> bool:
    return value is None or type(value) in (int, str, float, bool)


def _note_metadata(e: dict, track_names: dict, process_names: dict) -> None:
    args = e.get("args")
    if type(args) is not dict:
        return
    name, pid, tid = args.get("name"), e.get("pid"), e.get("tid")
    if type(name) is not str or not (_is_key(pid) and _is_key(tid)):  # a list or object names no track
        return
    if e.get("name") == "thread_name":
        track_names[(e.get("pid"), e.get("tid"))] = name
    elif e.get("name") == "process_name":
        process_names[e.get("pid")] = name
