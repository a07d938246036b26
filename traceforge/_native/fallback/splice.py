"""Byte strings made of slices of a few buffers, substring tests over many spans, and
buffers to fill: the fallback of ``_splice.c``.

Slices are copied by one gather per call (``_buffers.gather``); a span holds a needle when
the needle's first occurrence at or after the span's start ends by the span's stop, found
by a search of the needle's sorted occurrences.
"""

from __future__ import annotations

import re
import sys

import numpy as np

from ._buffers import as_index, as_list, contiguous, gather, items, sequence_of_buffers

_FIND_LIMIT = 1 << 12  # occurrences found one ``find`` at a time before switching to numpy


def uninitialized(n: object) -> bytearray:
    """A bytearray of ``n`` bytes, to be filled (zeroed here: Python has no other kind)."""
    if not isinstance(n, int):
        raise TypeError("an integer is required")
    if n > sys.maxsize or n < -sys.maxsize - 1:
        raise OverflowError("Python int too large to convert to C ssize_t")
    if n < 0:
        raise ValueError("negative size")
    return bytearray(n)


# -- join_rows -------------------------------------------------------------------------------


def _columns(columns: object, blobs: list[memoryview], rows: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Each part's (starts, lengths) per row, int64: a whole-buffer part's spelled out."""
    entries = as_list(columns, "columns: a sequence of (starts, lengths) or None per part")
    if len(entries) != len(blobs):
        raise ValueError("one columns entry per part")
    out = []
    for blob, entry in zip(blobs, entries):
        if entry is None:
            out.append((np.zeros(max(rows, 0), np.int64), np.full(max(rows, 0), len(blob), np.int64)))
            continue
        if not isinstance(entry, tuple) or len(entry) != 2:
            raise TypeError("columns: a (starts, lengths) tuple or None per part")
        pair = []
        for column in entry:
            view = contiguous(column)
            if len(view) != rows * 8:
                raise ValueError("starts and lengths must be int64 arrays of one length a row")
            pair.append(items(view, np.int64))
        out.append((pair[0], pair[1]))
    return out


def _check_bounds(starts: np.ndarray, lengths: np.ndarray, sizes: np.ndarray) -> None:
    """IndexError for the first (row, part), row by row, whose slice is not inside its part."""
    with np.errstate(over="ignore"):
        bad = (starts < 0) | (lengths < 0) | (starts > sizes) | (lengths > sizes - starts)
    if bad.any():
        r, p = np.unravel_index(int(np.argmax(bad)), bad.shape)
        raise IndexError(f"row {r} of part {p} (start {starts[r, p]}, length {lengths[r, p]}) is out of bounds")


def _pooled(blobs: list[memoryview], starts: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The bytes of each part that the slices read, one after another (uint8), and where each
    part's slice offsets land in them (one base per part)."""
    pieces, bases, at = [], [], 0
    for p, blob in enumerate(blobs):
        used = lengths[:, p] > 0
        lo = int(starts[used, p].min()) if used.any() else 0
        hi = int((starts[used, p] + lengths[used, p]).max()) if used.any() else 0
        pieces.append(np.frombuffer(blob, np.uint8)[lo:hi])
        bases.append(at - lo)
        at += hi - lo
    pool = np.concatenate(pieces) if pieces else np.zeros(0, np.uint8)
    return pool, np.array(bases, np.int64)


def join_rows(blobs: object, columns: object, rows: object, sep: object) -> tuple[bytes, bytes]:
    """Per row, the non-empty texts of the parts joined by ``sep``, and each row's length (int64
    bytes). Part p is ``blobs[p][starts[r]:][:lengths[r]]`` where ``columns[p]`` is (starts,
    lengths), or all of ``blobs[p]`` where it is None."""
    rows = as_index(rows)
    sep_view = contiguous(sep)
    views = sequence_of_buffers(blobs)
    parts = _columns(columns, views, rows)
    if rows < 0:
        raise SystemError("Negative size passed to PyBytes_FromStringAndSize")
    n = len(views)
    if not n:
        return b"", np.zeros(rows, np.int64).tobytes()
    starts = np.stack([s for s, _ in parts], axis=1)
    lengths = np.stack([length for _, length in parts], axis=1)
    _check_bounds(starts, lengths, np.array([len(v) for v in views], np.int64))
    present = lengths > 0
    after_first = (np.cumsum(present, axis=1) - present) > 0  # a non-empty text comes before it
    sep_lengths = np.where(present & after_first, len(sep_view), 0)
    row_lengths = (lengths + sep_lengths).sum(axis=1, dtype=np.int64)
    pool, bases = _pooled(views, starts, lengths)
    pool = np.concatenate([pool, np.frombuffer(sep_view, np.uint8)])
    sep_at = len(pool) - len(sep_view)
    # pieces in output order: per row, per part, its separator then its text
    piece_starts = np.stack([np.full_like(starts, sep_at), starts + bases], axis=2).reshape(-1)
    piece_lengths = np.stack([sep_lengths, lengths], axis=2).reshape(-1)
    return gather(pool, piece_starts, piece_lengths), row_lengths.tobytes()


# -- spans_containing ------------------------------------------------------------------------


def _occurrences(text: bytes, needle: bytes) -> np.ndarray:
    """Where ``needle`` (non-empty) begins in ``text``, overlapping ones too, ascending (int64)."""
    found = []
    at = text.find(needle)
    while at >= 0 and len(found) < _FIND_LIMIT:
        found.append(at)
        at = text.find(needle, at + 1)
    if at < 0:
        return np.array(found, np.int64)
    hay = np.frombuffer(text, np.uint8)  # a common needle: every place its first byte is, then the rest
    candidates = np.flatnonzero(hay[:max(0, len(hay) - len(needle) + 1)] == needle[0])
    for k in range(1, len(needle)):
        candidates = candidates[hay[candidates + k] == needle[k]]
    return candidates.astype(np.int64)


def _contains(data: memoryview, starts: np.ndarray, stops: np.ndarray, needles: list[memoryview]) -> np.ndarray:
    """Whether one of ``needles`` occurs wholly inside ``data[starts[i]:stops[i]]`` (in bounds)."""
    found = np.zeros(len(starts), bool)
    if not len(starts) or not needles:
        return found
    lo, hi = int(starts.min()), int(stops.max())
    text = bytes(data[lo:hi])
    for needle in map(bytes, needles):
        if not needle:  # memmem finds an empty needle in any span, an empty one too
            found[:] = True
            break
        at = _occurrences(text, needle) + lo
        first = np.searchsorted(at, starts)  # the first occurrence from each span's start
        has = first < len(at)
        found[has] |= at[first[has]] + len(needle) <= stops[has]
    return found


def spans_containing(data: object, starts: object, stops: object, needles: object) -> bytes:
    """One byte per span, 1 where one of ``needles`` occurs wholly inside ``data[starts[i]:stops[i]]``."""
    data_view, starts_view, stops_view = contiguous(data), contiguous(starts), contiguous(stops)
    if len(starts_view) % 8 or len(stops_view) != len(starts_view):
        raise ValueError("starts and stops must be int64 arrays of one length")
    needle_views = sequence_of_buffers(needles)
    a, b = items(starts_view, np.int64), items(stops_view, np.int64)
    bad = (a < 0) | (a > b) | (b > len(data_view))
    if bad.any():
        i = int(np.argmax(bad))
        raise IndexError(f"span {i} [{a[i]}, {b[i]}) is out of bounds")
    return _contains(data_view, a, b, needle_views).astype(np.uint8).tobytes()


# -- key_values ------------------------------------------------------------------------------

_INT64_MAX = (1 << 63) - 1


def key_values(data: object, keys: object) -> tuple[bytes, bytes, bytes, bytes, int]:
    """Every match, left to right, of ``"(key|...)"\\s*:\\s*(-?\\d+|"(?:[^"\\\\]|\\\\.)*"|\\{)`` in
    ``data``: the key's index in ``keys`` (int8), its value's start and stop and the value as an
    int64 where it is a number, else 0 (int64 arrays as bytes); the count of numbers beyond int64."""
    view = contiguous(data)
    names = [bytes(k) for k in sequence_of_buffers(keys)]
    if len(names) > 127:
        raise ValueError("at most 127 keys")
    if not names:
        return b"", b"", b"", b"", 0
    pattern = re.compile(b'"(' + b"|".join(re.escape(k) for k in names) + rb')"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*"|\{)')
    index = {k: i for i, k in enumerate(names)}
    codes, starts, stops, ints = [], [], [], []
    overflow = 0
    for m in pattern.finditer(bytes(view)):
        value = m.group(2)
        number = 0
        if value[:1] not in (b'"', b"{"):
            number = int(value)
            if not -_INT64_MAX - 1 <= number <= _INT64_MAX:
                number = 0
                overflow += 1
        codes.append(index[m.group(1)])
        starts.append(m.start(2))
        stops.append(m.end(2))
        ints.append(number)
    return (np.array(codes, np.int8).tobytes(), np.array(starts, np.int64).tobytes(),
            np.array(stops, np.int64).tobytes(), np.array(ints, np.int64).tobytes(), overflow)


# -- insert_members --------------------------------------------------------------------------


def _first_stop(s: np.ndarray, a: np.ndarray, bs: np.ndarray, bl: np.ndarray, events: np.ndarray,
                data_len: int, blob_len: int) -> tuple[str, int] | None:
    """The first event with a body, in order, that stops the common path: ("none", i) where its
    args' place is unknown, ("error", i) where it is out of order or bounds; None if no event does."""
    previous = np.concatenate(([0], a[:-1]))  # where the event before it inserts
    unknown = a < 0
    with np.errstate(over="ignore"):
        error = ((s < previous) | (a < s) | (a > data_len) | (bs < 0) | (bl < 0) | (bs > blob_len)
                 | (bl > blob_len - bs))
    stops = unknown | error
    if not stops.any():
        return None
    j = int(np.argmax(stops))
    return ("none" if unknown[j] else "error"), int(events[j])


def insert_members(data: object, starts: object, at: object, empty: object, blob: object, body_starts: object,
                   body_lengths: object, needles: object) -> bytes | None:
    """``data`` with, for each event i that has a body (in order), ``", "`` (none where
    ``empty[i]``) and ``blob[body_starts[i]:][:body_lengths[i]]`` inserted at ``at[i]``; None
    if such an event has ``at[i] < 0`` or one of ``needles`` in ``data[starts[i]:at[i]]`` that
    its body adds (the needle followed by ``:`` in it, after JSON whitespace)."""
    views = [contiguous(x) for x in (data, starts, at, empty, blob, body_starts, body_lengths)]
    data_view, starts_view, at_view, empty_view, blob_view, bs_view, bl_view = views
    n = len(starts_view) // 8
    if (len(starts_view) % 8 or len(at_view) != len(starts_view) or len(bs_view) != len(starts_view)
            or len(bl_view) != len(starts_view) or len(empty_view) != n):
        raise ValueError("starts, at, body_starts, body_lengths (int64) and empty (bool) must have one length")
    needle_views = sequence_of_buffers(needles)
    events = np.flatnonzero(items(bl_view, np.int64))
    s, a, bs, bl = (items(v, np.int64)[events] for v in (starts_view, at_view, bs_view, bl_view))
    stop = _first_stop(s, a, bs, bl, events, len(data_view), len(blob_view))
    if stop is not None:
        kind, i = stop
        if kind == "none":
            return None
        raise IndexError(f"event {i} (start {items(starts_view, np.int64)[i]}, args at "
                         f"{items(at_view, np.int64)[i]}) is out of order or bounds")
    for i in np.flatnonzero(_contains(data_view, s, a, needle_views)).tolist():
        span, body = bytes(data_view[s[i]:a[i]]), bytes(blob_view[bs[i]:bs[i] + bl[i]])
        if any(_adds(body, k) and k in span for k in map(bytes, needle_views)):
            return None
    comma = np.frombuffer(empty_view, np.uint8)[events] == 0
    return _inserted(data_view, blob_view, a, comma, bs, bl)


def _adds(body: bytes, needle: bytes) -> bool:
    """Whether ``body`` (members ``"k":v,...``) has ``needle`` followed by ``:`` (after JSON whitespace)."""
    at = body.find(needle)
    while at >= 0:
        if body[at + len(needle):].lstrip(b" \t\n\r")[:1] == b":":
            return True
        at = body.find(needle, at + 1)
    return False


def _inserted(data: memoryview, blob: memoryview, at: np.ndarray, comma: np.ndarray, bs: np.ndarray,
              bl: np.ndarray) -> bytes:
    """``data`` with ``", "`` (where ``comma``) and ``blob[bs:][:bl]`` inserted at each ``at`` (ascending)."""
    pieces: list[memoryview | bytes] = []
    pos = 0
    for place, with_comma, start, length in zip(at.tolist(), comma.tolist(), bs.tolist(), bl.tolist()):
        pieces.append(data[pos:place])
        if with_comma:
            pieces.append(b", ")
        pieces.append(blob[start:start + length])
        pos = place
    pieces.append(data[pos:])
    return b"".join(pieces)


# -- the AVX2 switch -------------------------------------------------------------------------


def set_avx2(enabled: object) -> bool:
    """Whether the AVX2 key search was on before (never, here); ``enabled`` is only read."""
    bool(enabled)
    return False


def avx2_supported() -> bool:
    """Whether ``set_avx2(True)`` can turn an AVX2 search on: never, in Python."""
    return False
