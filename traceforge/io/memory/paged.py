"""Big arrays in maps of temporary files, whose resident pages can be handed back at any time.

A column of millions of GPU ops is read by one analysis, then waits while the others run.
In an anonymous map its pages stay resident all along. In a shared map of a temporary file
(deleted at once: nothing is left behind, even after a kill) the pages can be dropped from
this process (``madvise(MADV_DONTNEED)``): the data stays in the system's page cache, or on
disk once written out, and faults back in when next read. ``page_out`` drops the pages of
every such map: the scan calls it as it reads (with the heap trim, ``io.heap``) and annotate
between analyses, so resident memory holds what the running analysis reads, not every column.

Only maps of ``PAGED_BYTES`` or more are file-backed (a 10 GB trace's columns are 16-33 MB
each), and only where that helps and is safe (``is_paged``): on Linux, with the temporary
directory (``$TMPDIR``) on a disk. On a RAM file system (tmpfs, ramfs) the pages would stay
in the machine's memory, and reserving a map's blocks there takes that memory at once; on
other systems a full disk could not be caught before a write faults. Where the temporary
directory has no room left, a column stays in anonymous memory (one note on stderr).

Paged-out pages are no longer resident but still count in the page cache (and in a memory
cgroup's usage) until the system writes them out: under memory pressure it does, instead of
killing the process. A forked child shares these maps (no copy on write): a worker must not
write into columns its parent made (traceforge's workers read their own traces).
"""

from __future__ import annotations

import errno
import mmap
import os
import sys
import tempfile
import threading
import weakref
from functools import cache
from typing import BinaryIO

import numpy as np

PAGED_BYTES = 8 << 20  # a map at least this big is file-backed and paged out
_RAM_FILE_SYSTEMS = {"tmpfs", "ramfs"}
_NO_ROOM = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


class _FileMap(mmap.mmap):
    """A shared map of a deleted temporary file (its pages may be dropped at any time)."""

    file: BinaryIO  # kept open to reserve the file's blocks as the map grows (``resize``)


_live: weakref.WeakSet[_FileMap] = weakref.WeakSet()
_live_lock = threading.Lock()  # the scan's reader thread pages out while the scan makes maps
_full: list[str] = []  # the temporary directory, once it had no room for a map (noted once)


def is_paged(nbytes: int) -> bool:
    """Whether a map of ``nbytes`` is file-backed (``new_map``): big enough, on Linux, with
    the temporary directory on a disk that has had room so far."""
    return nbytes >= PAGED_BYTES and not _full and _on_disk(tempfile.gettempdir())


@cache
def _on_disk(directory: str) -> bool:
    """Whether ``directory`` is on a file system that writes to a disk (on Linux, with
    ``madvise``: not tmpfs or ramfs)."""
    if not sys.platform.startswith("linux") or getattr(mmap, "MADV_DONTNEED", None) is None:
        return False
    kind = file_system(directory)
    return kind is not None and kind not in _RAM_FILE_SYSTEMS


def file_system(directory: str) -> str | None:
    """The type of the file system that holds ``directory`` (the longest mount point above it
    in ``/proc/self/mounts``: "ext4", "tmpfs", ...), None where that cannot be read."""
    try:
        with open("/proc/self/mounts", encoding="utf-8", errors="replace") as f:
            mounts = [fields[1:3] for fields in (line.split() for line in f) if len(fields) > 2]
    except OSError:
        return None
    path = os.path.realpath(directory)
    held = [(point, kind) for point, kind in mounts if path == point or path.startswith(point.rstrip("/") + "/")]
    return max(held, key=lambda m: len(m[0]))[1] if held else None


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
    ``is_paged`` and the file's blocks can be reserved (its pages then go with
    ``page_out``), else anonymous. Either grows in place with ``resize`` where it can."""
    nbytes = max(nbytes, 1)
    if is_paged(nbytes):
        file = tempfile.TemporaryFile(prefix="traceforge-columns-")
        try:
            if _reserve(file, 0, nbytes):
                m = _FileMap(file.fileno(), nbytes, flags=mmap.MAP_SHARED)
                m.file = file
                with _live_lock:
                    _live.add(m)
                return m
        except BaseException:
            file.close()
            raise
        file.close()
    return mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)


def resize(m: mmap.mmap, nbytes: int) -> bool:
    """Resize a map made by ``new_map`` in place (``mremap``); False where it cannot (no
    remap on the system, no room left for a file map's blocks): the caller copies it into
    a new map."""
    if isinstance(m, _FileMap) and not _reserve(m.file, len(m), nbytes):
        return False
    try:
        m.resize(nbytes)
    except SystemError:  # no mremap (macOS)
        return False
    return True


def _reserve(file: BinaryIO, start: int, stop: int) -> bool:
    """Allocate the file's blocks in [start, stop) now (the file then has ``stop`` bytes), so
    that no write to the map can fault for lack of space (SIGBUS); False, with one note on
    stderr, where the temporary directory has no room: the caller keeps the column in memory."""
    try:
        if stop > start:
            os.posix_fallocate(file.fileno(), start, stop - start)
        return True
    except OSError as e:
        if e.errno not in _NO_ROOM:
            file.truncate(stop)  # a file system that cannot allocate ahead (EINVAL, EOPNOTSUPP): sparse
            return True
        if not _full:
            _full.append(tempfile.gettempdir())
            print(f"traceforge: note: no room in {_full[0]} for columns to wait on disk ({os.strerror(e.errno)}): "
                  "they stay in memory (set TMPDIR to a larger disk)", file=sys.stderr)
        return False


def empty(n: int, dtype: np.dtype | type) -> np.ndarray:
    """An array of ``n`` ``dtype``s (zero-filled where in a file map, else uninitialised):
    in its own file map where big (``is_paged``), else on the heap."""
    dtype = np.dtype(dtype)
    if not is_paged(n * dtype.itemsize):
        return np.empty(n, dtype)
    return np.frombuffer(new_map(n * dtype.itemsize), dtype, count=n)


def page_out() -> None:
    """Drop every live file map's pages from this process's resident memory (their data
    stays, and faults back in when read). Safe at any time, from any thread (under the GIL:
    ``madvise`` and a concurrent ``resize`` or ``close`` do not interleave)."""
    with _live_lock:
        maps = list(_live)
    for m in maps:
        try:
            m.madvise(mmap.MADV_DONTNEED)
        except (ValueError, OSError):  # closed meanwhile
            pass
