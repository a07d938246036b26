"""Big arrays in maps of temporary files, whose resident pages can be handed back at any time.

A column of millions of GPU ops is read by one analysis, then waits while the others run.
In an anonymous map its pages stay resident all along. In a shared map of a temporary file
(deleted at once: nothing is left behind, even after a kill) the pages can be dropped from
this process (``madvise(MADV_DONTNEED)``): the data stays in the system's page cache, or on
disk once written out, and faults back in when next read. ``page_out`` drops the pages of
every such map: the scan calls it as it reads (with the heap trim, ``io.heap``) and annotate
between analyses, so resident memory holds what the running analysis reads, not every column.

Only maps of ``PAGED_BYTES`` or more are file-backed (a 10 GB trace's columns are 16-33 MB
each; a 2 GB trace's stay anonymous and cost nothing more). The files go in the temporary
directory (``$TMPDIR``): where that is a RAM file system, the pages leave this process's
resident memory but not the machine's, as every spill file of traceforge's.
"""

from __future__ import annotations

import errno
import mmap
import os
import tempfile
import threading
import weakref
from typing import BinaryIO

import numpy as np

PAGED_BYTES = 8 << 20  # a map at least this big is file-backed and paged out

_DONTNEED = getattr(mmap, "MADV_DONTNEED", None)  # where the platform has madvise (not Windows)


class _FileMap(mmap.mmap):
    """A shared map of a deleted temporary file (its pages may be dropped at any time)."""

    file: BinaryIO  # kept open to reserve the file's blocks as the map grows (``resize``)


_live: weakref.WeakSet[_FileMap] = weakref.WeakSet()
_live_lock = threading.Lock()  # the scan's reader thread pages out while the scan makes maps


def is_paged(nbytes: int) -> bool:
    """Whether a map of ``nbytes`` is file-backed (``new_map``)."""
    return _DONTNEED is not None and nbytes >= PAGED_BYTES


def is_file_map(m: mmap.mmap | None) -> bool:
    return isinstance(m, _FileMap)


def in_file_map(array: np.ndarray) -> bool:
    """Whether ``array``'s memory is (a view of) a file map made here."""
    base: object = array
    while isinstance(base, np.ndarray):
        base = base.base
    return is_file_map(base.obj if isinstance(base, memoryview) else base)  # type: ignore[arg-type]


def new_map(nbytes: int) -> mmap.mmap:
    """A zero-filled writable map of ``nbytes`` (at least 1): of a temporary file where
    ``is_paged`` (its pages then go with ``page_out``), else anonymous. Either grows in place
    with ``resize`` where the system can remap (Linux)."""
    nbytes = max(nbytes, 1)
    if not is_paged(nbytes):
        return mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    file = tempfile.TemporaryFile(prefix="traceforge-columns-")
    try:
        _reserve(file, nbytes)
        m = _FileMap(file.fileno(), nbytes, flags=mmap.MAP_SHARED)
    except BaseException:
        file.close()
        raise
    m.file = file
    with _live_lock:
        _live.add(m)
    return m


def resize(m: mmap.mmap, nbytes: int) -> None:
    """Resize a map made by ``new_map`` in place (``mremap``); SystemError where the system
    cannot remap (macOS): the caller then copies into a new map."""
    if isinstance(m, _FileMap):
        _reserve(m.file, nbytes)
    m.resize(nbytes)


def _reserve(file: BinaryIO, nbytes: int) -> None:
    """Give the file ``nbytes`` with its blocks allocated now: a full disk is an OSError
    (ENOSPC) here, not a SIGBUS when a page of the map is first written."""
    try:
        os.posix_fallocate(file.fileno(), 0, nbytes)
    except AttributeError:  # no posix_fallocate (macOS): the file is sparse
        file.truncate(nbytes)
    except OSError as e:
        if e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
            raise
        file.truncate(nbytes)  # a file system that cannot allocate ahead (EINVAL, EOPNOTSUPP)


def empty(n: int, dtype: np.dtype | type) -> np.ndarray:
    """An array of ``n`` ``dtype``s (zero-filled where in a file map, else uninitialised):
    in its own file map where big (``is_paged``), else on the heap."""
    dtype = np.dtype(dtype)
    if not is_paged(n * dtype.itemsize):
        return np.empty(n, dtype)
    return np.frombuffer(new_map(n * dtype.itemsize), dtype, count=n)


def page_out() -> None:
    """Drop every live file map's pages from this process's resident memory (their data
    stays, and faults back in when read). Safe at any time, from any thread."""
    with _live_lock:
        maps = list(_live)
    for m in maps:
        try:
            m.madvise(_DONTNEED)
        except (ValueError, OSError):  # closed meanwhile
            pass
