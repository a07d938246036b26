"""Handing freed heap memory back to the system while a trace is read.

While one thread decompresses, one scans and one compresses (ISA-L) the copy, the C heap
is left with free holes that later buffers do not fit: resident memory grew by ~23 MB per
GB read, though the memory in use stayed flat (decompressing and re-compressing a 5 GB
trace alone: 81 -> 153 MB; the core tracks on a trace of 200 k GPU ops padded with CPU ops
from 0.5 to 5 GB: 126 -> 217 MB peak). glibc's ``malloc_trim`` gives those free pages
back; called every ``TRIM_EVERY`` bytes read (in every arena, whichever thread calls it),
the same runs stay flat (81 MB; 123 -> 137 MB). The cost: pages that buffers reuse fault
in again (`--all` at 2 GB: ~250 k -> ~330 k faults, within the noise of its time); every
1 GB, no more faults but 16 MB more at 5 GB. Without ``malloc_trim`` (macOS, musl), nothing.
"""

from __future__ import annotations

import ctypes
from functools import cache

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


class HeapTrimmer:
    """Counts bytes read; every ``TRIM_EVERY`` of them, frees the unused pages of every malloc arena."""

    def __init__(self) -> None:
        self._since = 0

    def count(self, n: int) -> None:
        self._since += n
        if self._since >= TRIM_EVERY:
            self._since = 0
            trim_heap()
