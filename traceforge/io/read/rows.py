"""Event rows from the C scanner (``traceforge/_scanner.c``): one int64 row per event.

A row holds the event's byte span and the fields the scan keys on (see the column
constants below); strings are ids into ``RowScanner.strings`` (the raw JSON text between
the quotes) and a (pid, tid) pair is an id into ``RowScanner.tracks`` (both values' raw
JSON text, joined by a NUL). ``F_ODD`` marks a row whose fields the scanner could not
represent exactly: read that event with a JSON parser (``resolve_odd`` in the scan).
"""

from __future__ import annotations

import itertools
import json
import mmap
import operator
import threading
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import NamedTuple, overload

import numpy as np
import orjson

from ... import _native
from ...util.distinct import unique
from ..memory import paged
from ..memory.heap import give_back
from ..write.jsontext import json_bytes, json_int

# the scanner's column and flag names, re-exported: constants, the same in every backend
ALLOCATED = _native.scanner.ALLOCATED
ARGS_AT = _native.scanner.ARGS_AT
BLOCK = _native.scanner.BLOCK
BYTES = _native.scanner.BYTES
CAT = _native.scanner.CAT
CORRELATION = _native.scanner.CORRELATION
DEVICE = _native.scanner.DEVICE
DEVICE_TYPE = _native.scanner.DEVICE_TYPE
DUR = _native.scanner.DUR
END = _native.scanner.END
EXTERNAL_ID = _native.scanner.EXTERNAL_ID
F_ALLOCATED = _native.scanner.F_ALLOCATED
F_ARGS = _native.scanner.F_ARGS
F_ARGS_EMPTY = _native.scanner.F_ARGS_EMPTY
F_ARGS_ONE_NUMBER = _native.scanner.F_ARGS_ONE_NUMBER
F_BP_E = _native.scanner.F_BP_E
F_BYTES = _native.scanner.F_BYTES
F_CORRELATION = _native.scanner.F_CORRELATION
F_DEVICE = _native.scanner.F_DEVICE
F_DEVICE_TYPE = _native.scanner.F_DEVICE_TYPE
F_DIMS = _native.scanner.F_DIMS
F_DUR = _native.scanner.F_DUR
F_DUR_FRAC = _native.scanner.F_DUR_FRAC
F_DUR_KEY = _native.scanner.F_DUR_KEY
F_EXTERNAL_ID = _native.scanner.F_EXTERNAL_ID
F_EXTRA = _native.scanner.F_EXTRA
F_ID = _native.scanner.F_ID
F_ID_KEY = _native.scanner.F_ID_KEY
F_ODD = _native.scanner.F_ODD
F_RESERVED = _native.scanner.F_RESERVED
F_SCOPE_T = _native.scanner.F_SCOPE_T
F_SHARED_MEMORY = _native.scanner.F_SHARED_MEMORY
F_STREAM = _native.scanner.F_STREAM
F_TS = _native.scanner.F_TS
F_TS_FRAC = _native.scanner.F_TS_FRAC
FLAGS = _native.scanner.FLAGS
GRID = _native.scanner.GRID
ID = _native.scanner.ID
KERNEL = _native.scanner.KERNEL
NAME = _native.scanner.NAME
NFIELDS = _native.scanner.NFIELDS
PH = _native.scanner.PH
RESERVED = _native.scanner.RESERVED
SHARED_MEMORY = _native.scanner.SHARED_MEMORY
START = _native.scanner.START
STREAM = _native.scanner.STREAM
TRACK = _native.scanner.TRACK
TS = _native.scanner.TS
TS_AT = _native.scanner.TS_AT
TS_END = _native.scanner.TS_END

TOO_DEEP = "nesting too deep"  # the scanner's message for an event nested deeper than MAX_DEPTH levels
MAX_DEPTH = _native.scanner.MAX_DEPTH
SCANNED_DEPTH = 8  # no field the scan reads is nested deeper (args.grid: 3 levels)
OK, END_OF_ARRAY, INCOMPLETE, STOPPED = (_native.scanner.OK, _native.scanner.END_OF_ARRAY, _native.scanner.INCOMPLETE,
                                         _native.scanner.STOPPED)


class ScanResult(NamedTuple):
    status: int  # OK, END_OF_ARRAY, INCOMPLETE or STOPPED
    rows: np.ndarray  # (count, NFIELDS) int64
    stop: int  # where the next run starts (see _scanner.scan)
    error_at: int  # offset of what stopped the run
    message: str | None


GIVE_BACK_CHUNKS = 8  # interned text chunks made between two ``give_back`` calls


_chunks_made = itertools.count(1)


def _text_chunk(nbytes: int) -> mmap.mmap:
    """A buffer for an interner's text past its first chunk (``io.memory.paged``: a file map
    where it can be); every ``GIVE_BACK_CHUNKS`` of them, the resident pages of every file map
    are handed back (``heap.give_back``), so that a trace of millions of distinct names holds
    in memory the names being read, not all."""
    if next(_chunks_made) % GIVE_BACK_CHUNKS == 0:
        give_back()
    return paged.new_map(nbytes)


class InternedStrings(Sequence[bytes]):
    """A scanner interner's strings, by id, as bytes (made on each read: the interner keeps
    them compact, see ``_scanner.c``); a slice is a list. Only grows."""

    def __init__(self, kernel: ModuleType, interner: object) -> None:
        self._kernel, self._interner = kernel, interner

    def __len__(self) -> int:
        return self._kernel.count(self._interner)

    @overload
    def __getitem__(self, i: int) -> bytes: ...
    @overload
    def __getitem__(self, i: slice) -> list[bytes]: ...

    def __getitem__(self, i: int | slice) -> bytes | list[bytes]:
        if isinstance(i, slice):
            first, stop, step = i.indices(len(self))
            if step != 1:
                return [self[j] for j in range(first, stop, step)]
            return self._kernel.strings(self._interner, first, max(stop, first))
        i = operator.index(i)
        if i < 0:
            i += len(self)
        got = self._kernel.strings(self._interner, i, i + 1) if i >= 0 else None
        if not got:
            raise IndexError(f"no string {i} of {len(self)}")
        return got[0]

    def find(self, text: bytes) -> int:
        """The id of ``text``, or -1 where it was not met (nothing is added)."""
        return self._kernel.find(self._interner, text)


class RowScanner:
    """The scanner and its interners; one per trace, so ids stay valid across batches.

    Thread-safe: the C scan looks strings up without the GIL, so scans and interning take
    turns under a lock (the scan can run in a reader thread while the scan's columns are
    built, and odd rows interned, in the main thread). ``strings`` and ``tracks`` only grow.
    """

    def __init__(self) -> None:
        self._kernel = _native.scanner  # the interners belong to the backend that made them
        self._strings = self._kernel.Interner(_text_chunk)
        self._tracks = self._kernel.Interner(_text_chunk)
        self.strings = InternedStrings(self._kernel, self._strings)
        self.tracks = InternedStrings(self._kernel, self._tracks)
        self._lock = threading.Lock()

    def scan(self, data: bytes, limit: int, start: int = 0) -> ScanResult:
        """Scan events from ``data[start]`` on (offsets relative to ``start``), up to about ``limit`` bytes."""
        with self._lock:
            status, count, stop, error_at, message, rows = self._kernel.scan(data, start, limit, self._strings,
                                                                             self._tracks)
        return ScanResult(status, np.frombuffer(rows, np.int64).reshape(count, NFIELDS), stop, error_at, message)

    def rows_of(self, events: list) -> np.ndarray:
        """Rows for parsed events (spans then refer to their re-serialised text, not the input)."""
        text = b",".join(map(_scannable_json, events)) + b"]"
        result = self.scan(text, len(text))
        if len(result.rows) != len(events) and result.message == TOO_DEEP:
            text = b",".join(json_bytes(within_depth(e, SCANNED_DEPTH)) for e in events) + b"]"
            result = self.scan(text, len(text))
        if len(result.rows) != len(events):
            raise ValueError(f"re-serialised events do not scan: {result.message}")
        return result.rows

    def intern_string(self, value: object) -> int:
        """A string's id (-2 for a value that is not a string, as the scanner does)."""
        if type(value) is not str:
            return -2
        with self._lock:
            return self._kernel.intern(self._strings, json_bytes(value)[1:-1])

    def intern_track(self, pid: object, tid: object, has_pid: bool, has_tid: bool) -> int:
        key = (json_bytes(pid) if has_pid else b"") + b"\0" + (json_bytes(tid) if has_tid else b"")
        with self._lock:
            return self._kernel.intern(self._tracks, key)


def _scannable_json(event: dict) -> bytes:
    """An event's JSON text, cut to ``SCANNED_DEPTH`` where it is too deep to serialise."""
    try:
        return json_bytes(event)
    except RecursionError:
        return json_bytes(within_depth(event, SCANNED_DEPTH))


def within_depth(value: object, depth: int) -> object:
    """``value`` with what is nested deeper than ``depth`` levels of objects and arrays as null."""
    if type(value) is dict:
        return {k: within_depth(v, depth - 1) for k, v in value.items()} if depth > 0 else None
    if type(value) is list:
        return [within_depth(v, depth - 1) for v in value] if depth > 0 else None
    return value


def columns(rows: np.ndarray, at: np.ndarray | None, fields: tuple[int, ...]) -> dict[int, np.ndarray]:
    """``fields`` of rows ``at`` (None: every row), each a contiguous int64 array, by field.

    One pass over the rows in C: ``rows[at][:, field]`` field by field reads every row's
    cache lines again for each field."""
    at = None if at is None else np.ascontiguousarray(at, np.int64)
    count = len(rows) if at is None else len(at)
    gathered = np.frombuffer(_native.scanner.columns(rows, at, bytes(fields)), np.int64).reshape(len(fields), count)
    return dict(zip(fields, gathered))


def decode_string(raw: bytes) -> str:
    """The str of a string's raw JSON text (between the quotes)."""
    if b"\\" not in raw:
        return raw.decode("utf-8", "surrogateescape")
    return json.loads(b'"' + raw + b'"' if raw.isascii() else ('"' + raw.decode("utf-8", "surrogateescape") + '"'))


def decode_track(raw: bytes) -> tuple:
    """(pid, tid) of a track key; None for a missing value."""
    pid, _, tid = raw.partition(b"\0")
    return (decode_value(pid) if pid else None, decode_value(tid) if tid else None)


def decode_value(raw: bytes) -> object:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:  # ints beyond 64 bits, invalid UTF-8
        return json.loads(raw.decode("utf-8", "surrogateescape"), parse_int=json_int)


class StringPairs:
    """Dense numbers for pairs of strings (a flow's cat and name), in the order first numbered;
    a value missing or not a string counts as "". From a parsed event's values (``of``) or,
    vectorised, from a scanner's string ids (``of_ids``: each id pair decoded once)."""

    def __init__(self, scanner: RowScanner):
        self.scanner = scanner
        self.numbers: dict[tuple[str, str], int] = {}
        self._by_ids: dict[tuple[int, int], int] = {}

    def of(self, a: object, b: object) -> int:
        key = (a if type(a) is str else "", b if type(b) is str else "")
        return self.numbers.setdefault(key, len(self.numbers))

    def of_ids(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if not len(a):
            return np.zeros(0, np.int64)
        pairs, inverse = np.unique(np.stack((a, b), axis=1), axis=0, return_inverse=True)
        return np.array([self._of_id_pair(i, j) for i, j in pairs.tolist()], np.int64)[inverse.ravel()]

    def _of_id_pair(self, i: int, j: int) -> int:
        number = self._by_ids.get((i, j))
        if number is None:
            texts = (decode_string(self.scanner.strings[k]) if k >= 0 else "" for k in (i, j))
            number = self._by_ids[(i, j)] = self.of(*texts)
        return number


class IdTable:
    """Values per scanner id (a string or a track), worked out the first time an id is met.

    ``compute(raw)`` gives a tuple of ints; ``absent`` is the tuple for ids below 0 (the
    field missing, or not a string).
    """

    _UNSET = np.iinfo(np.int64).min

    def __init__(self, texts: list[bytes], compute: Callable[[bytes], tuple], absent: tuple):
        self.texts, self.compute = texts, compute
        self.table = np.array([absent], np.int64)  # row 0: ids < 0; id i at row i + 1
        self.absent = absent

    def __call__(self, ids: np.ndarray) -> tuple[np.ndarray, ...]:
        if len(self.table) < len(self.texts) + 1:  # grown by half at least: a trace of distinct names stays linear
            grown = np.full((max(len(self.texts) + 1, len(self.table) * 3 // 2), len(self.absent)), self._UNSET, np.int64)
            grown[:len(self.table)] = self.table
            self.table = grown
        at = np.maximum(ids + 1, 0)
        for i in unique(at[self.table[at, 0] == self._UNSET]).tolist():
            self.table[i] = self.compute(self.texts[i - 1])
        values = self.table[at]
        return tuple(values[:, j] for j in range(values.shape[1]))
