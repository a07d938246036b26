"""Handing memory back to the system while a trace is read and between steps of work.

While one thread decompresses, one scans and one compresses (ISA-L) the copy, the C heap
is left with free holes that later buffers do not fit: without a trim, resident memory grows
with the bytes read (tens of MB per GB) while the memory in use stays flat. glibc's
``malloc_trim`` gives those free pages back; called every ``TRIM_EVERY`` bytes read (in every
arena, whichever thread calls it), resident memory stays flat at the cost of pages that
buffers reuse faulting in again (within the noise of a run's time). Without ``malloc_trim``
(macOS, musl), nothing. ``give_back`` also drops the pages of the big columns
(``paged.page_out``): the scan calls it with the trim, the analyses between their steps.
"""

from __future__ import annotations

import ctypes
from functools import cache

from .paged import page_out

TRIM_EVERY = 512 << 20  # bytes read between trims


@cache
def _malloc_trim():
    try:
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError, TypeError):  # no such symbol; Windows takes no None
        return None


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
