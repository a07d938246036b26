"""Injections: what analyses add to a trace (counter tracks, slices, arrows, args), and
their exact JSON text.

Annotate analyses return injections; the writer appends their events inside
``traceEvents``. Rules from Perfetto's JSON importer (docs/perfetto-import.md): one numeric
key per counter event, series separated by name, exact ts text, never NaN/Infinity/null.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import numpy as np

from .. import _native
from ..io.write.jsontext import (
    ArgColumns,
    Block,
    BlockSource,
    EventSource,
    Texts,
    event_blocks,
    event_lines,
    json_bytes,
)
from ..util.distinct import unique

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
        head = b'{"ph":"C","cat":' + json_bytes(self.cat) + b',"name":' + json_bytes(self.name)
        head += b',"pid":' + json_bytes(self.pid) + b',"ts":'
        middle = b',"args":{' + json_bytes(self.key) + b":"
        chunks = self.ts.chunks(_CHUNK) if isinstance(self.ts, PackedTimes) else \
            (self.ts[lo:lo + _CHUNK] for lo in range(0, len(self.ts), _CHUNK))
        for lo, ts in zip(range(0, len(self.ts), _CHUNK), chunks):
            values = np.ascontiguousarray(self.values[lo:lo + _CHUNK], dtype=np.int64)
            text = _native.counter_text.counter_events(head, middle, b"}}", np.ascontiguousarray(ts, dtype=np.int64),
                                                      values, self.decimals)
            yield len(values), text


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
    arg_columns: list[ArgColumns | _ArgsOnDisk] = field(default_factory=list)  # on disk once spilled
    later: Callable[..., Injections] | None = None
    figures: dict[str, int | float | str] = field(default_factory=dict)  # per-trace figures, by key

    def add(self, other: Injections) -> None:
        assert other.later is None, "run the rest of an analysis before adding its injections"
        self.sources.extend(other.sources)
        self.summary.extend(other.summary)
        self.figures.update(other.figures)
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
        """Move the counter tracks, slices and arrows (the bulk: ~50 bytes a GPU op on big traces,
        and a slice's args text) to ``file`` until their events are written: the analyses after and
        the copy run without them. The args for existing events wait there too until the copy
        asks for them (``args``): ~5-12 bytes a GPU op an analysis, held through every analysis after."""
        self.sources = [_OnDisk(file, s) if isinstance(s, (CounterTrack, SliceTrack, FlowArrows)) else s
                        for s in self.sources]
        self.arg_columns = [_ArgsOnDisk(file, c) if isinstance(c, ArgColumns) and len(c) else c
                            for c in self.arg_columns]

    def args(self) -> list[ArgColumns]:
        """``arg_columns``, those waiting on disk read back (once: they stay in memory after)."""
        self.arg_columns = [c.load() if isinstance(c, _ArgsOnDisk) else c for c in self.arg_columns]
        return self.arg_columns  # type: ignore[return-value]


class _OnDisk:
    """A block source pickled into a temporary file, loaded back when its blocks are read.

    A ``TidAllocator`` it refers to stays in memory and is referred to again when it is loaded
    (not a copy): the tracks draw their new thread ids from the one they share."""

    def __init__(self, file: BinaryIO, source: BlockSource | ArgColumns):
        self._file = file
        self._at = file.seek(0, os.SEEK_END)
        self._shared: list[TidAllocator] = []
        pickler = pickle.Pickler(file, protocol=pickle.HIGHEST_PROTOCOL)
        pickler.persistent_id = self._shared_id  # type: ignore[method-assign]
        pickler.dump(source)

    def _shared_id(self, obj: object) -> int | None:
        if isinstance(obj, TidAllocator):
            self._shared.append(obj)
            return len(self._shared) - 1
        return None

    def load(self) -> Any:
        """The source as it was pickled."""
        self._file.seek(self._at)
        unpickler = pickle.Unpickler(self._file)
        unpickler.persistent_load = self._shared.__getitem__  # type: ignore[method-assign]
        return unpickler.load()

    def blocks(self) -> Iterator[Block]:
        yield from self.load().blocks()


class _ArgsOnDisk(_OnDisk):
    """``ArgColumns`` pickled into a temporary file until the copy reads them (``Injections.args``)."""

    def __init__(self, file: BinaryIO, columns: ArgColumns):
        super().__init__(file, columns)
        self._len = len(columns)

    def __len__(self) -> int:
        return self._len


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
    head = b'{"ph":"M","pid":' + json_bytes(pid) + b',"tid":' + str(tid).encode() + b',"ts":0,'
    return [
        head + b'"name":"thread_name","args":{"name":' + json_bytes(name) + b"}}",
        head + b'"name":"thread_sort_index","args":{"sort_index":' + str(sort_index).encode() + b"}}",
    ]


@dataclass
class IndexedTexts:
    """A column of texts as an index into a few distinct ones: row i is ``distinct[index[i]]``.
    4 bytes a row (int32), not ``Texts``' 16, while a slice track waits to be written."""

    distinct: Texts
    index: np.ndarray  # int32

    @classmethod
    def of(cls, keys: np.ndarray, text: Callable[[int], bytes]) -> IndexedTexts:
        """``text(k)`` for each of ``keys`` (ints; one call per distinct key, found by a sort)."""
        distinct = unique(keys)
        return cls(Texts.of([text(k) for k in distinct.tolist()]), np.searchsorted(distinct, keys).astype(np.int32))

    def __len__(self) -> int:
        return len(self.index)

    def take(self, rows: np.ndarray | slice) -> Texts:
        return self.distinct.take(self.index[rows])


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
    args: Texts | IndexedTexts
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
        head = b'{"ph":"X","cat":' + json_bytes(self.cat) + b',"pid":' + json_bytes(self.pid) + b',"tid":'
        tid_texts = Texts.of([str(tid).encode() for tid in tids])
        labels = Texts.of([b',"name":' + json_bytes(label) for label in self.labels])
        for lo in range(0, len(lanes), _CHUNK):  # the args too a chunk at a time: not a second copy of them all
            part = slice(lo, lo + _CHUNK)
            n = len(lanes[part])
            args = self.args.take(part)
            yield n, event_lines([
                head, tid_texts.take(lanes[part]), b',"ts":', Texts.numbers(self.ts[part], 3), b',"dur":',
                Texts.numbers(self.dur[part], 3), labels.take(self.label[part]),
                Texts.where(b',"args":', args.lengths > 0), args, b"}"], n)


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
        cat = b',"cat":' + json_bytes(self.cat) + b',"name":'
        names = IndexedTexts.of(self.values, lambda v: json_bytes(self.label(v)))
        threads = IndexedTexts.of(np.concatenate((self.start_track, self.end_track)), self._thread)
        for lo in range(0, len(self), _FLOW_CHUNK):
            n = min(_FLOW_CHUNK, len(self) - lo)
            part = slice(lo, lo + n)  # the start tracks; the end tracks follow them
            ident = Texts.numbers(np.arange(self.first_id + lo, self.first_id + lo + n))
            name = names.take(part)
            ends = slice(len(self) + lo, len(self) + lo + n)
            yield 2 * n, event_lines([
                b'{"ph":"s","id":', ident, cat, name, threads.take(part), b',"ts":',
                Texts.numbers(self.start_ts[part], 3), b'},\n{"ph":"f","bp":"e","id":', ident, cat, name,
                threads.take(ends), b',"ts":', Texts.numbers(self.end_ts[part], 3), b"}"], n)

    def _thread(self, track: int) -> bytes:
        pid, tid = self.tracks[track]
        return b',"pid":' + json_bytes(pid) + b',"tid":' + json_bytes(tid)
