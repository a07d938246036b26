"""Buffer arguments taken as the C kernels take them, and byte gathers shared by the fallbacks.

The C kernels read their arrays through the buffer protocol, whatever the buffer's dtype:
an int64 argument is the buffer's bytes read as int64. These helpers do the same, so a
fallback accepts and refuses what its C counterpart does.
"""

from __future__ import annotations

import operator
import sys
from collections.abc import Iterable

import numpy as np

_GATHER_CHUNK = 1 << 22  # output bytes per step of ``gather``: bounds its index arrays


def contiguous(obj: object) -> memoryview:
    """``obj``'s bytes, as ``y*`` / ``PyBUF_SIMPLE`` take them: any C-contiguous bytes-like object."""
    view = memoryview(obj)  # TypeError for what is not bytes-like
    if not view.c_contiguous:
        raise ValueError("ndarray is not C-contiguous")
    return view.cast("B") if view.ndim != 1 or view.format != "B" else view


def writable(obj: object, argument: int) -> memoryview:
    """``obj``'s bytes, writable, as ``w*`` takes them (``argument``: its place, for the message)."""
    view = memoryview(obj)
    if view.readonly or not view.c_contiguous:
        raise TypeError(f"argument {argument} must be read-write bytes-like object, not {type(obj).__name__}")
    return view.cast("B") if view.ndim != 1 or view.format != "B" else view


def writable_buffer(obj: object) -> memoryview:
    """``obj``'s bytes, writable, as ``PyObject_GetBuffer(PyBUF_WRITABLE)`` takes them."""
    view = memoryview(obj)
    if view.readonly:
        raise BufferError("Object is not writable.")
    if not view.c_contiguous:
        raise ValueError("ndarray is not C-contiguous")
    return view.cast("B") if view.ndim != 1 or view.format != "B" else view


def items(view: memoryview, dtype: type) -> np.ndarray:
    """The whole items of ``dtype`` in ``view`` (a view, writable where ``view`` is)."""
    itemsize = np.dtype(dtype).itemsize
    return np.frombuffer(view, dtype, count=len(view) // itemsize)


def as_index(value: object) -> int:
    """An ``n`` (Py_ssize_t) argument."""
    n = operator.index(value)
    if not -sys.maxsize - 1 <= n <= sys.maxsize:
        raise OverflowError("Python int too large to convert to C ssize_t")
    return n


def as_c_int(value: object) -> int:
    """An ``i`` (C int) argument."""
    n = operator.index(value)
    if n > 2**31 - 1:
        raise OverflowError("signed integer is greater than maximum")
    if n < -2**31:
        raise OverflowError("signed integer is less than minimum")
    return n


def as_long_long(value: object) -> int:
    """An ``L`` (long long) argument."""
    n = operator.index(value)
    if not -2**63 <= n < 2**63:
        raise OverflowError("int too big to convert")
    return n


def sequence_of_buffers(seq: object, message: str = "expected a sequence of bytes-like objects") -> list[memoryview]:
    """Every item of ``seq`` (any iterable, as ``PySequence_Fast`` takes) as bytes."""
    return [contiguous(item) for item in as_list(seq, message)]


def as_list(seq: object, message: str) -> list:
    """``seq``'s items, as ``PySequence_Fast`` takes them (TypeError ``message`` if not iterable)."""
    if isinstance(seq, (list, tuple)):
        return list(seq)
    if not isinstance(seq, Iterable):
        raise TypeError(message)
    return list(seq)


def gather(source: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> bytes:
    """``source[starts[i]:][:lengths[i]]`` (uint8; int64 starts and lengths, in bounds), concatenated."""
    keep = lengths > 0
    starts, lengths = starts[keep], lengths[keep]
    ends = np.cumsum(lengths)
    if not len(ends):
        return b""
    total = int(ends[-1])
    out = np.empty(total, np.uint8)
    # pieces cut into runs of about _GATHER_CHUNK output bytes: one index array per run
    cuts = np.unique(np.searchsorted(ends, np.arange(_GATHER_CHUNK, total, _GATHER_CHUNK), side="left") + 1)
    bounds = [0, *cuts[cuts < len(ends)].tolist(), len(ends)]
    for a, b in zip(bounds, bounds[1:]):
        first = int(ends[a] - lengths[a])
        if b - a == 1:
            start = int(starts[a])
            out[first:int(ends[a])] = source[start:start + int(lengths[a])]
            continue
        run = lengths[a:b]
        offsets = np.repeat(starts[a:b] - (ends[a:b] - run - first), run)
        out[first:int(ends[b - 1])] = source[offsets + np.arange(len(offsets))]
    return out.tobytes()
