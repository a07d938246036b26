"""Counter events and fixed-point numbers as JSON text: the fallback of ``_counter_text.c``.

A number is an int64 ``v`` written as ``v / 10**decimals`` exactly, trailing fraction zeros
dropped (``1500, 3`` -> ``1.5``). The numbers of a chunk are laid out as a byte matrix, a row
per number and a column per place (sign, whole digits, point, fraction digits), with a mask
of the places each number uses; rows of text are those matrices side by side, and the text
is the masked bytes in row order.
"""

from __future__ import annotations

import numpy as np

from ._buffers import as_c_int, contiguous, items

_CHUNK = 1 << 16  # numbers per matrix
_POW10 = np.array([10**k for k in range(20)], np.uint64)
_ZERO = ord("0")

Places = tuple[np.ndarray, np.ndarray]  # (bytes, keep): uint8 and bool matrices of one shape


def _decimals(value: object) -> int:
    """``decimals`` as the C reads it (0..18 checked by the caller, with its message)."""
    return as_c_int(value)


def _digits(magnitudes: np.ndarray, width: int) -> np.ndarray:
    """The last ``width`` decimal digits of uint64 ``magnitudes``, most significant first (uint8)."""
    out = np.empty((len(magnitudes), width), np.uint8)
    rest = magnitudes.copy()
    ten = np.uint64(10)
    for place in range(width - 1, -1, -1):
        out[:, place] = rest % ten
        rest //= ten
    return out


def _fixed_point(values: np.ndarray, decimals: int) -> Places:
    """The places of ``values / 10**decimals`` (int64): sign, whole digits, then '.' and the
    fraction's digits up to its last non-zero one (none for a whole number)."""
    n = len(values)
    negative = values < 0
    raw = values.view(np.uint64)
    magnitude = np.where(negative, np.uint64(0) - raw, raw)  # |INT64_MIN| = 2**63 fits
    scale = _POW10[decimals]
    whole, frac = magnitude // scale, magnitude % scale
    count = 1 + (whole[:, None] >= _POW10[1:]).sum(axis=1)  # digits of the whole part
    width = int(count.max()) if n else 1
    blocks = [np.full((n, 1), ord("-"), np.uint8), _digits(whole, width) + np.uint8(_ZERO)]
    keeps = [negative[:, None], np.arange(width) >= (width - count)[:, None]]
    if decimals:
        fraction = _digits(frac, decimals)
        nonzero = fraction != 0
        last = decimals - 1 - np.argmax(nonzero[:, ::-1], axis=1)  # the last non-zero digit
        has_frac = (frac != 0)[:, None]
        blocks += [np.full((n, 1), ord("."), np.uint8), fraction + np.uint8(_ZERO)]
        keeps += [has_frac, has_frac & (np.arange(decimals) <= last[:, None])]
    return np.hstack(blocks), np.hstack(keeps)


def _constant(text: bytes, n: int, present: np.ndarray | None = None) -> Places:
    """``text`` on each of ``n`` rows (where ``present``, if given)."""
    block = np.broadcast_to(np.frombuffer(text, np.uint8), (n, len(text)))
    keep = np.ones((n, len(text)), bool) if present is None else np.repeat(present[:, None], len(text), axis=1)
    return block, keep


def _text(places: list[Places]) -> tuple[bytes, np.ndarray]:
    """The rows of ``places`` side by side, as one text, and each row's length."""
    block = np.hstack([b for b, _ in places])
    keep = np.hstack([k for _, k in places])
    return block[keep].tobytes(), keep.sum(axis=1)


def counter_events(head: object, middle: object, tail: object, ts_ns: object, values: object,
                   decimals: object) -> bytes:
    """``head + ts (ns as exact us) + middle + value / 10**decimals + tail`` per point, joined by ``,\\n``."""
    head_b, middle_b, tail_b = (bytes(contiguous(x)) for x in (head, middle, tail))
    ts_view, values_view = contiguous(ts_ns), contiguous(values)
    decimals = _decimals(decimals)
    if len(ts_view) % 8 or len(values_view) != len(ts_view) or not 0 <= decimals <= 18:
        raise ValueError("ts and values must be int64 arrays of one length; decimals 0..18")
    ts, vals = items(ts_view, np.int64), items(values_view, np.int64)
    chunks = []
    for a in range(0, len(ts), _CHUNK):
        n = min(_CHUNK, len(ts) - a)
        separator = np.arange(a, a + n) > 0
        text, _ = _text([_constant(b",\n", n, separator), _constant(head_b, n), _fixed_point(ts[a:a + n], 3),
                         _constant(middle_b, n), _fixed_point(vals[a:a + n], decimals), _constant(tail_b, n)])
        chunks.append(text)
    return b"".join(chunks)


def fixed_point_texts(values: object, decimals: object, prefix: object = b"",
                      real: object = False) -> tuple[bytes, bytes]:
    """The texts of ``values / 10**decimals`` joined, each after ``prefix`` and, with ``real``,
    whole ones ending in ``.0`` (as a float prints); and their end offsets as int64 bytes."""
    view = contiguous(values)
    decimals = _decimals(decimals)
    prefix_b = bytes(contiguous(prefix))
    real = bool(real)
    if len(view) % 8 or not 0 <= decimals <= 18:
        raise ValueError("values must be an int64 array; decimals 0..18")
    vals = items(view, np.int64)
    texts, lengths = [], []
    for a in range(0, len(vals), _CHUNK):
        chunk = vals[a:a + _CHUNK]
        n = len(chunk)
        places = [_constant(prefix_b, n), _fixed_point(chunk, decimals)]
        if real:
            whole = chunk % np.int64(10**decimals) == 0
            places.append(_constant(b".0", n, whole))
        text, length = _text(places)
        texts.append(text)
        lengths.append(length)
    ends = np.cumsum(np.concatenate(lengths) if lengths else np.zeros(0, np.int64), dtype=np.int64)
    return b"".join(texts), ends.tobytes()
