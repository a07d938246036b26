"""Event rows from the C scanner (``traceforge/_scanner.c``): one int64 row per event.

A row holds the event's byte span and the fields the scan keys on (see the column
constants below); strings are ids into ``RowScanner.strings`` (the raw JSON text between
the quotes) and a (pid, tid) pair is an id into ``RowScanner.tracks`` (both values' raw
JSON text, joined by a NUL). ``F_ODD`` marks a row whose fields the scanner could not
represent exactly: read that event with a JSON parser (``resolve_odd`` in the scan).

A long run is scanned in parts, one per core (``scan_parts``): each part after the first
starts where an event probably starts ("}, {"), in a helper thread with interners of its
own. A part's rows count only once the part before it ended exactly where it begins, so
the rows are always those of one scan from the start; the helpers' ids are then mapped to
the scanner's.
"""

from __future__ import annotations

import json
import re
import threading
from concurrent.futures import ThreadPoolExecutor, wait
from typing import NamedTuple

import numpy as np
import orjson

from ..inject import json_bytes
from .background import usable_cores

try:
    from .. import _scanner
except ImportError as e:  # a source tree used without building it
    raise ImportError(f"traceforge's C event scanner is not built ({e}): run `pip install -e .` in the "
                      "source tree, or `pip install .` and run outside it") from None
from .._scanner import (  # noqa: F401  (re-exported column and flag names)
    ARGS_AT, BLOCK, BYTES, CAT, CORRELATION, DEVICE, DUR, END, F_ARGS, F_ARGS_EMPTY,
    F_BYTES, F_CORRELATION, F_DEVICE, F_DIMS, F_DUR, F_ID, F_ODD, F_STREAM, F_TS, FLAGS, GRID, ID,
    KERNEL, NAME, NFIELDS, PH, START, STREAM, TRACK, TS,
)

OK, END_OF_ARRAY, INCOMPLETE, STOPPED = _scanner.OK, _scanner.END_OF_ARRAY, _scanner.INCOMPLETE, _scanner.STOPPED


PART_BYTES = 1 << 20  # a run is cut into parts of at least this many bytes
_LIKELY_EVENT = re.compile(rb"\}[ \t\r\n]*,[ \t\r\n]*\{")  # its "{" starts an event, unless nested
_STRING_FIELDS = [PH, CAT, NAME, KERNEL]


scan_threads = min(usable_cores(), 4)  # parts of a run scanned at once (set to 1 where processes share the cores)
_helpers: ThreadPoolExecutor | None = None
_helpers_lock = threading.Lock()


def _helper_threads() -> ThreadPoolExecutor:
    global _helpers
    with _helpers_lock:
        if _helpers is None:
            _helpers = ThreadPoolExecutor(scan_threads - 1, thread_name_prefix="traceforge-scan")
        return _helpers


class ScanResult(NamedTuple):
    status: int  # OK, END_OF_ARRAY, INCOMPLETE or STOPPED
    rows: np.ndarray  # (count, NFIELDS) int64, writable; spans count from ``start``
    stop: int  # where the next run starts (see _scanner.scan)
    error_at: int  # offset of what stopped the run
    message: str | None
    start: int = 0  # where the first event is (a part's); it, stop and error_at count from the run's start


class RowScanner:
    """The scanner and its interners; one per trace, so ids stay valid across batches.

    Thread-safe: the C scan looks strings up without the GIL, so scans and interning take
    turns under a lock (the scan can run in a reader thread while the scan's columns are
    built, and odd rows interned, in the main thread). ``strings`` and ``tracks`` only grow.
    """

    def __init__(self) -> None:
        self.strings: list[bytes] = []
        self.tracks: list[bytes] = []
        self._strings = _scanner.Interner(self.strings)
        self._tracks = _scanner.Interner(self.tracks)
        self._lock = threading.Lock()
        self._parts: list[_Part] = []  # the helpers' interners, one per part after the first

    def scan(self, data: bytes | bytearray, limit: int, start: int = 0) -> ScanResult:
        """Scan events from ``data[start]`` on (offsets relative to ``start``), up to about ``limit`` bytes."""
        with self._lock:
            return _result(_scanner.scan(data, start, limit, self._strings, self._tracks))

    def scan_parts(self, data: bytes | bytearray, limit: int, start: int = 0) -> list[ScanResult]:
        """``scan``, in parts scanned at once where the run is long: consecutive results, each
        ``stop`` where the next one's ``start`` is; the last says how the run ended."""
        cuts = _cuts(data, start, min(start + limit, len(data)))
        if len(cuts) == 1:
            return [self.scan(data, limit, start)]
        while len(self._parts) < len(cuts) - 1:
            self._parts.append(_Part())
        ends = [*cuts[1:], start + limit]
        helpers = _helper_threads()
        later = [helpers.submit(part.scan, data, at, end - at) for part, at, end in zip(self._parts, cuts[1:], ends[1:])]
        try:
            results = [self.scan(data, ends[0] - start, start)]
        finally:
            wait(later)  # a helper's interners serve one scan at a time
        for part, at, future in zip(self._parts, cuts[1:], later):
            if results[-1].status != OK or results[-1].stop != at - start:  # the guess was no event start
                break
            result = future.result()
            with self._lock:
                part.adopt(result.rows, self._strings, self._tracks)
            shift = at - start
            results.append(result._replace(start=shift, stop=result.stop + shift, error_at=result.error_at + shift))
        return results

    def rows_of(self, events: list) -> np.ndarray:
        """Rows for parsed events (spans then refer to their re-serialised text, not the input)."""
        text = b",".join(map(json_bytes, events)) + b"]"
        result = self.scan(text, len(text))
        if len(result.rows) != len(events):
            raise ValueError(f"re-serialised events do not scan: {result.message}")
        return result.rows

    def intern_string(self, value: object) -> int:
        """A string's id (-2 for a value that is not a string, as the scanner does)."""
        if type(value) is not str:
            return -2
        with self._lock:
            return _scanner.intern(self._strings, json_bytes(value)[1:-1])

    def intern_track(self, pid: object, tid: object, has_pid: bool, has_tid: bool) -> int:
        key = (json_bytes(pid) if has_pid else b"") + b"\0" + (json_bytes(tid) if has_tid else b"")
        with self._lock:
            return _scanner.intern(self._tracks, key)


class _Part:
    """A helper thread's interners, and what their ids are in the scanner's."""

    def __init__(self) -> None:
        self.strings: list[bytes] = []
        self.tracks: list[bytes] = []
        self._strings = _scanner.Interner(self.strings)
        self._tracks = _scanner.Interner(self.tracks)
        self._string_ids = np.array([-2, -1], np.int64)  # at id + 2: -2 (not a string) and -1 (absent) stay
        self._track_ids = np.zeros(0, np.int64)

    def scan(self, data: bytes | bytearray, start: int, limit: int) -> ScanResult:
        return _result(_scanner.scan(data, start, limit, self._strings, self._tracks))

    def adopt(self, rows: np.ndarray, strings: object, tracks: object) -> None:
        """Turn ``rows``' ids into the scanner's (whose interners are ``strings`` and ``tracks``).
        Every string of the helper's is interned there, those of a scan thrown away too: they
        are strings of the trace all the same."""
        self._string_ids = _mapped(self._string_ids, self.strings[len(self._string_ids) - 2:], strings)
        self._track_ids = _mapped(self._track_ids, self.tracks[len(self._track_ids):], tracks)
        rows[:, _STRING_FIELDS] = self._string_ids[rows[:, _STRING_FIELDS] + 2]
        rows[:, TRACK] = self._track_ids[rows[:, TRACK]]


def _mapped(ids: np.ndarray, new: list[bytes], interner: object) -> np.ndarray:
    if not new:
        return ids
    return np.concatenate([ids, np.fromiter((_scanner.intern(interner, v) for v in new), np.int64, len(new))])


def _cuts(data: bytes | bytearray, start: int, end: int) -> list[int]:
    """Where the parts of ``data[start:end]`` start: ``start``, then a likely event start
    about every ``(end - start) / scan_threads`` bytes (none in a run under 2 ``PART_BYTES``)."""
    parts = min(scan_threads, (end - start) // PART_BYTES)
    cuts = [start]
    for k in range(1, parts):
        m = _LIKELY_EVENT.search(data, max(start + (end - start) * k // parts, cuts[-1]), end)
        if m is None:
            break
        cuts.append(m.end() - 1)
    return cuts


def _result(scanned: tuple) -> ScanResult:
    status, count, stop, error_at, message, rows = scanned
    return ScanResult(status, np.frombuffer(rows, np.int64).reshape(count, NFIELDS), stop, error_at, message)


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
        return json.loads(raw.decode("utf-8", "surrogateescape"))
