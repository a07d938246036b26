"""Handing memory back to the system while a trace is read and between steps of work.

While one thread decompresses, one scans and one compresses (ISA-L) the copy, the C heap
is left with free holes that later buffers do not fit: without a trim, resident memory grows
with the bytes read (tens of MB per GB) while the memory in use stays flat. glibc's
``malloc_trim`` gives those free pages back; called every ``TRIM_EVERY`` bytes read (in every
arena, whichever thread calls it), resident memory stays flat at the cost of pages that
buffers reuse faulting in again (within the noise of a run's time). Without ``malloc_trim``
(macOS, musl), nothing. ``give_back`` also drops the pages of the big columns
(``paged.page_out``): the scan calls it with the trim, the analyses between their steps.

``hold_freed`` is the other way round, for a command that makes and drops the same large
buffers batch after batch (``merge``: every event edited): glibc's default hands a large
freed block straight back (unmapped, or trimmed off the top of the heap) and the next batch's
faults the same pages in again; held, they are reused. The periodic trim above still bounds
what is held.
"""

from __future__ import annotations

import ctypes
from functools import cache

from .paged import page_out

TRIM_EVERY = 512 << 20  # bytes read between trims
HOLD_BELOW = 64 << 20  # hold_freed: blocks below this come from (and go back to) the heap
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters


@cache
def _malloc_trim():
    try:
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError, TypeError):  # no such symbol; Windows takes no None
        return None


@cache
def _mallopt():
    try:
        return ctypes.CDLL(None).mallopt
    except (OSError, AttributeError, TypeError):
        return None


def hold_freed(below: int = HOLD_BELOW) -> bool:
    """For the rest of the process, blocks below ``below`` bytes are taken from the heap and
    freed into it (not mapped and unmapped each time), and up to ``2 * below`` free bytes at
    its top are kept; False where there is no glibc ``mallopt``."""
    opt = _mallopt()
    if opt is None:
        return False
    return bool(opt(_M_MMAP_THRESHOLD, below)) & bool(opt(_M_TRIM_THRESHOLD, 2 * below))


def trim_heap() -> None:
    """Give the free pages of every malloc arena back to the system (where glibc's there)."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


def give_back() -> None:
    """Between steps of work: the free pages of the heap, and the pages of the big columns
    (``paged.page_out``: they fault back in where read next), go back to the system."""
    trim_heap()
    page_out()


class HeapTrimmer:
    """Counts bytes read; every ``TRIM_EVERY`` of them, frees the unused pages of every malloc
    arena and drops the pages of the columns grown so far (``paged.page_out``)."""

    def __init__(self) -> None:
        self._since = 0

    def count(self, n: int) -> None:
        self._since += n
        if self._since >= TRIM_EVERY:
            self._since = 0
            give_back()
