"""Injections: what analyses add to a trace, and their exact JSON text.

Analyses return injections; the writer appends their events inside ``traceEvents``.
Rules from Perfetto's JSON importer (docs/perfetto-json.md): one numeric key per counter
event, series separated by name, exact ts text, never NaN/Infinity/null.
"""

from __future__ import annotations

import json
import os
import pickle
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import islice
from dataclasses import dataclass, field
from functools import partial
from typing import BinaryIO, Protocol

import numpy as np
import orjson

from ._counter_text import counter_events, fixed_point_texts
from ._splice import join_rows as _join_rows
from .search import searchsorted


_CHUNK = 65536
_FLOW_CHUNK = 8192  # arrows a block: 16 texts each, their pieces described by 48 bytes a text while joined


class PackedTimes:
    """Strictly increasing ns held as the first and the gaps as uint32: 4 bytes a point,
    not 8, while the tracks wait for the trace to be written."""

    def __init__(self, first: int, gaps: np.ndarray):
        self.first, self.gaps = first, gaps

    @classmethod
    def of(cls, ts: np.ndarray) -> PackedTimes | np.ndarray:
        """``ts`` packed, or as it is when a gap does not fit (or there is nothing to save)."""
        if len(ts) < 2:
            return ts
        gaps = np.diff(ts)
        return cls(int(ts[0]), gaps.astype(np.uint32)) if int(gaps.max()) < 2**32 else ts

    def __len__(self) -> int:
        return len(self.gaps) + 1

    def chunks(self, size: int) -> Iterator[np.ndarray]:
        """The int64 times, ``size`` at a time."""
        last = self.first
        for lo in range(0, len(self), size):
            out = np.empty(min(size, len(self) - lo), np.int64)
            out[0] = last + (int(self.gaps[lo - 1]) if lo else 0)
            np.cumsum(self.gaps[lo:lo + len(out) - 1], dtype=np.int64, out=out[1:])
            out[1:] += out[0]
            last = int(out[-1])
            yield out


@dataclass
class CounterTrack:
    """One Perfetto counter track: ``"<name> <key>"`` in process ``pid``.

    ``values`` are integers scaled by ``10**decimals`` so they are written exactly.
    """

    pid: object
    name: str
    key: str
    ts: np.ndarray | PackedTimes  # int64 ns, strictly increasing (packed when given)
    values: np.ndarray  # integers, scaled by 10**decimals
    decimals: int = 0
    cat: str = "traceforge"

    def __post_init__(self) -> None:
        if isinstance(self.ts, np.ndarray):
            self.ts = PackedTimes.of(self.ts)

    def blocks(self) -> Iterator[Block]:
        head = b'{"ph":"C","cat":' + orjson.dumps(self.cat) + b',"name":' + orjson.dumps(self.name)
        head += b',"pid":' + orjson.dumps(self.pid) + b',"ts":'
        middle = b',"args":{' + orjson.dumps(self.key) + b":"
        chunks = self.ts.chunks(_CHUNK) if isinstance(self.ts, PackedTimes) else \
            (self.ts[lo:lo + _CHUNK] for lo in range(0, len(self.ts), _CHUNK))
        for lo, ts in zip(range(0, len(self.ts), _CHUNK), chunks):
            values = np.ascontiguousarray(self.values[lo:lo + _CHUNK], dtype=np.int64)
            text = counter_events(head, middle, b"}}", np.ascontiguousarray(ts, dtype=np.int64), values, self.decimals)
            yield len(values), text


def fits_int32(values: np.ndarray) -> bool:
    """Whether every one of ``values`` and its negation fit int32."""
    return not len(values) or (values.min() > -2**31 and values.max() < 2**31)


def compact_ints(values: np.ndarray) -> np.ndarray:
    """``values`` as int32 when they fit (``fits_int32``), else as they are: what injections
    and narrow columns hold."""
    return values.astype(np.int32) if fits_int32(values) else values


def _bounds(dtype: np.dtype) -> tuple[int, int]:
    info = np.iinfo(dtype)
    return int(info.min), int(info.max)


def json_bytes(value: object) -> bytes:
    """Compact JSON of ``value`` (orjson's text; the stdlib for what orjson refuses)."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode(
            "utf-8", "surrogateescape")


Block = tuple[int, bytes]  # (n, n events joined by ",\n")


@dataclass
class Texts:
    """A column of short byte strings (JSON texts) as slices of one buffer: row i is
    ``blob[starts[i]:starts[i] + lengths[i]]``, empty where it has none. No bytes object
    per row: args for a million GPU ops are made and spliced a chunk at a time."""

    blob: bytes
    starts: np.ndarray  # int64
    lengths: np.ndarray  # int64

    @classmethod
    def of(cls, texts: Sequence[bytes]) -> Texts:
        lengths = np.fromiter(map(len, texts), np.int64, len(texts))
        return cls(b"".join(texts), np.cumsum(lengths) - lengths, lengths)

    @classmethod
    def where(cls, text: bytes, present: np.ndarray) -> Texts:
        """``text`` on the rows where ``present``, nothing on the others."""
        return cls(text, np.zeros(len(present), np.int64), present.astype(np.int64) * len(text))

    @classmethod
    def numbers(cls, values: np.ndarray, decimals: int = 0, prefix: bytes = b"", real: bool = False) -> Texts:
        """Integers as exact decimal text of ``value / 10**decimals`` (``1500, 3`` -> ``1.5``),
        each after ``prefix``; ``real``: whole ones end in ``.0``, as floats print."""
        blob, ends = fixed_point_texts(np.ascontiguousarray(values, dtype=np.int64), decimals, prefix, real)
        ends = np.frombuffer(ends, np.int64)
        starts = np.concatenate(([0], ends))[:-1]
        return cls(blob, starts, ends - starts)

    def __len__(self) -> int:
        return len(self.lengths)

    def __getitem__(self, i: int) -> bytes:
        start = int(self.starts[i])
        return self.blob[start:start + int(self.lengths[i])]

    def take(self, rows: np.ndarray) -> Texts:
        """The rows ``rows`` (indexes or a mask)."""
        return Texts(self.blob, self.starts[rows], self.lengths[rows])

    def only(self, present: np.ndarray) -> Texts:
        """These texts on the rows where ``present``; nothing on the others."""
        return Texts(self.blob, self.starts, np.where(present, self.lengths, 0))

    def spread(self, present: np.ndarray) -> Texts:
        """These texts, in order, on the rows where ``present``; nothing on the others."""
        starts, lengths = np.zeros(len(present), np.int64), np.zeros(len(present), np.int64)
        starts[present], lengths[present] = self.starts, self.lengths
        return Texts(self.blob, starts, lengths)


def join_rows(parts: Sequence[Texts | bytes], sep: bytes = b"") -> Texts:
    """Row by row, the non-empty texts of ``parts`` (a ``bytes`` part: that text on every
    row) joined by ``sep``: one copy in C, read from the parts' own columns."""
    rows = next(len(p) for p in parts if isinstance(p, Texts))
    ints = partial(np.ascontiguousarray, dtype=np.int64)
    blob, lengths = _join_rows([p.blob if isinstance(p, Texts) else p for p in parts],
                               [(ints(p.starts), ints(p.lengths)) if isinstance(p, Texts) else None for p in parts],
                               rows, sep)
    row_lengths = np.frombuffer(lengths, np.int64)
    return Texts(blob, np.cumsum(row_lengths) - row_lengths, row_lengths)


def event_lines(parts: Sequence[Texts | bytes], rows: int) -> bytes:
    """A block of appended events: each of ``rows`` rows its parts joined, rows apart by ",\n"."""
    return join_rows([*parts, Texts.where(b",\n", np.arange(rows) < rows - 1)]).blob


class EventSource(Protocol):
    def events(self) -> Iterator[bytes]: ...


class BlockSource(Protocol):
    def blocks(self) -> Iterator[Block]: ...


def event_blocks(events: Iterable[bytes], size: int = 8192) -> Iterator[Block]:
    """Events as blocks of ``size``: one join and one compressor call per block, not per event."""
    it = iter(events)
    while chunk := list(islice(it, size)):
        yield len(chunk), b",\n".join(chunk)


@dataclass(frozen=True)
class FixedPoint:
    """An ``ArgColumns`` decode: ints to the reals ``value / 10**decimals`` (ns to µs: 3),
    whose args are written from the ints, exactly (whole ones as ``4.0``, typed as reals)."""

    decimals: int

    def __call__(self, column: np.ndarray) -> np.ndarray:
        return column / 10**self.decimals


@dataclass
class ArgColumns:
    """The same arg keys added to many events, held as columns.

    A dict per event costs hundreds of bytes; on a trace with a million kernels the
    columns cost a few bytes per value. ``values[key][i]`` goes on event ``ordinals[i]``
    (no arg where it is None). A key in ``decode`` holds a compact form (label codes,
    int32 ns) that ``decode[key]`` turns into the values a batch at a time as it is
    written: a byte or four per op rather than a pointer or a float.
    """

    ordinals: np.ndarray
    values: dict[str, np.ndarray]
    decode: dict[str, Callable[[np.ndarray], np.ndarray]] = field(default_factory=dict)
    _codes: dict[str, tuple[np.ndarray, Texts]] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.values = {k: np.asarray(v) for k, v in self.values.items()}
        if bool((self.ordinals[1:] < self.ordinals[:-1]).any()):  # sorted already: no copies
            order = np.argsort(self.ordinals, kind="stable")
            self.ordinals = self.ordinals[order]
            self.values = {k: v[order] for k, v in self.values.items()}

    def __len__(self) -> int:
        return len(self.ordinals)

    def rows(self, first: int, stop: int) -> Iterator[tuple[int, dict]]:
        """(ordinal, args) for the events with ordinals in ``[first, stop)``."""
        lo, hi = self._range(first, stop)
        if lo == hi:
            return
        columns = {k: (self.decode[k](v[lo:hi]) if k in self.decode else v[lo:hi]).tolist()
                   for k, v in self.values.items()}
        for i, ordinal in enumerate(self.ordinals[lo:hi].tolist()):
            yield ordinal, {k: v[i] for k, v in columns.items() if v[i] is not None}

    def member_texts(self, ordinals: np.ndarray) -> list[Texts]:
        """Per key, the members (``"key":value``) of the events ``ordinals``, a row each; empty
        where an event has none: the text ``rows`` would serialise to. ``ordinals`` (sorted)
        must hold every ordinal of this column between their first and last."""
        lo, hi = self._range(int(ordinals[0]), int(ordinals[-1]) + 1) if len(ordinals) else (0, 0)
        if hi - lo == len(ordinals):  # these are all of ``ordinals`` (args on every GPU op): as they are
            return [self._member_texts(k, v[lo:hi]) for k, v in self.values.items()]
        present = in_sorted(self.ordinals[lo:hi], ordinals)
        return [self._member_texts(k, v[lo:hi]).spread(present) for k, v in self.values.items()]

    def _range(self, first: int, stop: int) -> tuple[int, int]:
        bounds = np.array([first, stop]).clip(*(_bounds(self.ordinals.dtype))).astype(self.ordinals.dtype)
        lo, hi = np.searchsorted(self.ordinals, bounds)  # same dtype: no conversion of the column
        return int(lo), int(hi)

    def _member_texts(self, key: str, column: np.ndarray) -> Texts:
        if column.dtype.kind in "iu" and column.dtype.itemsize <= 2:  # codes
            codes, texts = self._code_texts(key)
            return texts.take(np.searchsorted(codes, column))
        prefix = json_bytes(key) + b":"
        decode = self.decode.get(key)
        if isinstance(decode, FixedPoint):  # written from the ints: exact, no float
            return Texts.numbers(column, decode.decimals, prefix, real=True)
        values = decode(column) if decode is not None else column
        if values.dtype.kind in "iuf" and len(values):  # numbers: one serialisation, a prefix at each comma
            numbers = orjson.dumps(values.tolist())[1:-1]
            commas = np.flatnonzero(np.frombuffer(numbers, np.uint8) == ord(","))
            starts = np.concatenate(([0], commas + 1))
            lengths = np.concatenate((commas, [len(numbers)])) - starts + len(prefix)
            return Texts(prefix + numbers.replace(b",", b"," + prefix), starts + np.arange(len(starts)) * len(prefix),
                         lengths)
        return Texts.of([b"" if v is None else prefix + json_bytes(v) for v in values.tolist()])

    def _code_texts(self, key: str) -> tuple[np.ndarray, Texts]:
        """The distinct codes of column ``key`` and their members, made once for all chunks."""
        if key not in self._codes:
            codes = np.unique(self.values[key])
            prefix = json_bytes(key) + b":"
            decoded = (self.decode[key](codes) if key in self.decode else codes).tolist()
            self._codes[key] = codes, Texts.of([b"" if v is None else prefix + json_bytes(v) for v in decoded])
        return self._codes[key]


def in_sorted(sorted_values: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Whether each of ``values`` is in ``sorted_values`` (sorted)."""
    if not len(sorted_values):
        return np.zeros(len(values), bool)
    at = np.minimum(searchsorted(sorted_values, values), len(sorted_values) - 1)
    return sorted_values[at] == values


@dataclass
class Injections:
    """What one annotate run adds: new events, args merged into existing events, a summary.

    ``arg_patches`` maps an event ordinal to the keys added to its ``args`` (for a few
    events); ``arg_columns`` adds the same keys to many events. ``later``: the rest of an
    analysis that adds args (its tracks and summary, from the trace's columns), which the
    copy needs only at its end: annotate runs it beside the copy where memory allows.
    """

    sources: list[EventSource | BlockSource] = field(default_factory=list)
    summary: list[str] = field(default_factory=list)
    arg_patches: dict[int, dict] = field(default_factory=dict)
    arg_columns: list[ArgColumns] = field(default_factory=list)
    later: Callable[..., Injections] | None = None

    def add(self, other: Injections) -> None:
        assert other.later is None, "run the rest of an analysis before adding its injections"
        self.sources.extend(other.sources)
        self.summary.extend(other.summary)
        self.arg_columns.extend(other.arg_columns)
        for ordinal, extra in other.arg_patches.items():
            self.arg_patches.setdefault(ordinal, {}).update(extra)

    def patches_args(self) -> bool:
        return bool(self.arg_patches) or any(len(c) for c in self.arg_columns)

    def blocks(self) -> Iterator[Block]:
        """Every source's events, in blocks (see ``Block``)."""
        for source in self.sources:
            yield from source.blocks() if hasattr(source, "blocks") else event_blocks(source.events())

    def spill(self, file: BinaryIO) -> None:
        """Move the counter tracks and arrows (the bulk: ~50 bytes a GPU op on big traces) to
        ``file`` until their events are written: the analyses after and the copy run without them."""
        self.sources = [_OnDisk(file, s) if isinstance(s, (CounterTrack, FlowArrows)) else s for s in self.sources]


class _OnDisk:
    """A block source pickled into a temporary file, loaded back when its blocks are read."""

    def __init__(self, file: BinaryIO, source: BlockSource):
        self._file = file
        self._at = file.seek(0, os.SEEK_END)
        pickle.dump(source, file, protocol=pickle.HIGHEST_PROTOCOL)

    def blocks(self) -> Iterator[Block]:
        self._file.seek(self._at)
        yield from pickle.load(self._file).blocks()


FIRST_NEW_TID = 1_000_000_000  # clear of Kineto's stream ids; positive and below 2**32


class TidAllocator:
    """Fresh thread ids per process, never equal to one the trace (or we) already use."""

    def __init__(self, tracks: list[tuple]):
        self._used = {(pid, tid) for pid, tid in tracks}
        self._next: dict[object, int] = {}

    def new(self, pid: object) -> int:
        tid = self._next.get(pid, FIRST_NEW_TID)
        while (pid, tid) in self._used:
            tid += 1
        self._used.add((pid, tid))
        self._next[pid] = tid + 1
        return tid


def metadata_events(pid: object, tid: int, name: str, sort_index: int) -> list[bytes]:
    """``thread_name`` and ``thread_sort_index`` for a new track (Perfetto reads both)."""
    head = b'{"ph":"M","pid":' + orjson.dumps(pid) + b',"tid":' + str(tid).encode() + b',"ts":0,'
    return [
        head + b'"name":"thread_name","args":{"name":' + orjson.dumps(name) + b"}}",
        head + b'"name":"thread_sort_index","args":{"sort_index":' + str(sort_index).encode() + b"}}",
    ]


@dataclass
class SliceTrack:
    """Complete (``X``) slices drawn in process ``pid`` on as many lanes as they need.

    Lane k is thread ``f"{title}"`` (k = 0) or ``f"{title} (lane k+1)"``; lanes are laid
    out by ``assign_lanes`` so Perfetto never sees two slices partially overlap. Held as
    columns: slice i is named ``labels[label[i]]`` and has the args object whose JSON text is
    ``args[i]`` (none where that is empty).
    """

    pid: object
    title: str
    sort_index: int
    ts: np.ndarray  # int64 ns
    dur: np.ndarray  # int64 ns
    labels: list[str]
    label: np.ndarray
    args: Texts
    allocator: TidAllocator
    cat: str = "traceforge"

    def blocks(self) -> Iterator[Block]:
        """The lanes' names, then the slices, made a chunk at a time from columns of texts."""
        from .lanes import assign_lanes

        lanes = assign_lanes(self.ts, self.dur)
        tids = [self.allocator.new(self.pid) for _ in range(int(lanes.max()) + 1 if len(lanes) else 0)]
        names = [e for k, tid in enumerate(tids) for e in metadata_events(
            self.pid, tid, self.title if k == 0 else f"{self.title} (lane {k + 1})", self.sort_index + k)]
        if names:
            yield len(names), b",\n".join(names)
        head = b'{"ph":"X","cat":' + orjson.dumps(self.cat) + b',"pid":' + orjson.dumps(self.pid) + b',"tid":'
        tid_texts = Texts.of([str(tid).encode() for tid in tids])
        labels = Texts.of([b',"name":' + orjson.dumps(label) for label in self.labels])
        args = join_rows([b',"args":', self.args]).only(self.args.lengths > 0)
        for lo in range(0, len(lanes), _CHUNK):
            part = slice(lo, lo + _CHUNK)
            n = len(lanes[part])
            yield n, event_lines([
                head, tid_texts.take(lanes[part]), b',"ts":', Texts.numbers(self.ts[part], 3), b',"dur":',
                Texts.numbers(self.dur[part], 3), labels.take(self.label[part]), args.take(part), b"}"], n)


@dataclass
class FlowArrows:
    """v1 flow arrows (``s`` then ``f`` with ``bp:"e"``), one key (id, cat, name) each.

    Each end's ts must lie inside the slice it should bind to on its thread (Perfetto
    binds ``s`` to the innermost open slice and ``f``/``bp:e`` to the enclosing one).
    Held as columns (ends as track ids into ``tracks``, names made from ``values`` by
    ``label`` as they are written): a tuple and a string per arrow cost far more.
    """

    cat: str
    first_id: int  # above every flow id already in the trace
    tracks: list[tuple]  # (pid, tid) of each track id
    start_track: np.ndarray
    start_ts: np.ndarray  # int64 ns
    end_track: np.ndarray
    end_ts: np.ndarray
    values: np.ndarray
    label: Callable[[int], str]

    def __len__(self) -> int:
        return len(self.values)

    def blocks(self) -> Iterator[Block]:
        """Each arrow's two events, made a chunk of arrows at a time from columns of texts."""
        cat = b',"cat":' + orjson.dumps(self.cat) + b',"name":'
        names, name_of = self._distinct(self.values, lambda v: orjson.dumps(self.label(v)))
        threads, thread_of = self._distinct(np.concatenate((self.start_track, self.end_track)), self._thread)
        start_thread, end_thread = thread_of[:len(self)], thread_of[len(self):]
        for lo in range(0, len(self), _FLOW_CHUNK):
            part = slice(lo, lo + _FLOW_CHUNK)
            n = len(self.values[part])
            ident = Texts.numbers(np.arange(self.first_id + lo, self.first_id + lo + n))
            name = names.take(name_of[part])
            yield 2 * n, event_lines([
                b'{"ph":"s","id":', ident, cat, name, threads.take(start_thread[part]), b',"ts":',
                Texts.numbers(self.start_ts[part], 3), b'},\n{"ph":"f","bp":"e","id":', ident, cat, name,
                threads.take(end_thread[part]), b',"ts":', Texts.numbers(self.end_ts[part], 3), b"}"], n)

    def _thread(self, track: int) -> bytes:
        pid, tid = self.tracks[track]
        return b',"pid":' + orjson.dumps(pid) + b',"tid":' + orjson.dumps(tid)

    @staticmethod
    def _distinct(values: np.ndarray, text: Callable[[int], bytes]) -> tuple[Texts, np.ndarray]:
        """``text`` of each distinct value (one call each), and which one each value has
        (found by bisection: cheaper than ``np.unique``'s indirect sort)."""
        distinct = np.unique(values)
        return Texts.of([text(v) for v in distinct.tolist()]), np.searchsorted(distinct, values).astype(np.int32)
