"""Compressed, atomic output: the codec by the output's suffix, the levels by ``--compression``,
and the one way every output is put in place (a temporary file renamed onto it)."""

from __future__ import annotations

import errno
import os
import stat
import sys
import zlib
from collections.abc import Iterable
from contextlib import AbstractContextManager
from contextvars import ContextVar
from pathlib import Path
from typing import BinaryIO

import zstandard

from ...errors import UsageError
from ...util.scoped import scoped
from ..memory import tempfiles
from ..memory.background import BackgroundSink
from ..memory.tempfiles import remove_quietly
from ..read.codec import READ_SIZE, gzip_zlib
from . import run_outputs

GZIP_LEVEL = 1  # speed over size: traces are rewritten often and read once by the UI
ZSTD_LEVEL = 3
# --compression small: gzip's own default level through zlib (ISA-L stops at level 3, no
# smaller than its level 1 on traces) and zstd 9: smaller, much slower to write (docs/benchmarks.md).
SMALL_GZIP_LEVEL, SMALL_ZSTD_LEVEL = 6, 9
COMPRESSIONS = ("fast", "small")
_compression: ContextVar[str] = ContextVar("traceforge_compression", default="fast")


def output_compression(compression: str) -> AbstractContextManager[None]:
    """Traces written inside are compressed for speed ("fast", the default) or size ("small")."""
    if compression not in COMPRESSIONS:
        raise UsageError(f"unknown compression {compression!r} (known: {', '.join(COMPRESSIONS)})")
    return scoped(_compression, compression)


def compression_in_force() -> str:
    """The ``output_compression`` in force here ("fast" or "small"), to hand to another process."""
    return _compression.get()


class Compressor:
    """Writes bytes to a binary file, compressed (in a helper thread) by the output's codec,
    at the levels of the ``output_compression`` in force when it is made."""

    def __init__(self, f: BinaryIO, codec: str):
        self._f = f
        small = _compression.get() == "small"
        if codec == "gzip":
            self._c = (zlib.compressobj(SMALL_GZIP_LEVEL, zlib.DEFLATED, 31) if small
                       else gzip_zlib.compressobj(GZIP_LEVEL, gzip_zlib.DEFLATED, 31))
        elif codec == "zstd":
            self._c = zstandard.ZstdCompressor(level=SMALL_ZSTD_LEVEL if small else ZSTD_LEVEL).compressobj()
        else:
            self._c = None
        self._worker = BackgroundSink(self._compress_and_write)

    def _compress_and_write(self, parts: tuple[bytes, ...]) -> None:
        for data in parts:
            out = data if self._c is None else self._c.compress(data)
            if out:
                self._f.write(out)

    def write(self, *parts: bytes) -> None:
        """Queue ``parts`` to be written in order, as one item: a separator goes with the block
        it precedes without copying the block (MBs) and without a place in the queue of its own."""
        if any(parts):
            self._worker.write(parts)

    def abort(self) -> None:
        """Stop the helper thread after a failure (the output is being thrown away)."""
        try:
            self._worker.close()
        except BaseException:
            pass

    def close(self) -> None:
        self._worker.close()
        if self._c is not None:
            self._f.write(self._c.flush())
        self._f.flush()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def output_codec(out: str) -> str:
    name = out.lower()
    if name.endswith(".gz"):
        return "gzip"
    if name.endswith(".zst") or name.endswith(".zstd"):
        return "zstd"
    return "plain"


def publish(tmp: str, out: str | Path) -> None:
    """Rename a finished temporary file (or directory) onto ``out``, with an ordinary file's (or
    directory's) permissions (``mkstemp`` and ``mkdtemp`` make them private). The run notes what
    was at ``out`` first (``run_outputs``): stopped by a signal after this, it removes the output."""
    directory = os.path.isdir(tmp)
    os.chmod(tmp, (0o777 if directory else 0o666) & ~_umask())
    run_outputs.watch(out, whole_directory=directory)
    os.replace(tmp, out)


def _temp_beside(out: str) -> tuple[int, str]:
    """A new temporary file (fd, path) in ``out``'s directory; a UsageError where none can be made."""
    target = Path(out)
    directory = target.parent if str(target.parent) else Path(".")
    try:
        return tempfiles.make(directory, f".{target.name}.", ".tmp")
    except OSError as e:
        raise UsageError(f"{out}: cannot write: {e.strerror or e}") from None


def written_in_place(out: str) -> bool:
    """Whether ``out`` is written as a stream (stdout, a character device such as /dev/null, a
    FIFO) rather than through a temporary file renamed onto it: a rename would replace the
    device or FIFO with a regular file. Anything else that is not a regular file (a directory,
    a socket, a block device) is refused: a UsageError."""
    if out == "-":
        return True
    try:
        mode = os.stat(out).st_mode
    except OSError:
        return False  # not there yet (or not reachable: the temporary file's creation says why)
    if stat.S_ISREG(mode):
        return False
    if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode):
        return True
    what = "a directory" if stat.S_ISDIR(mode) else "not a regular file"
    raise UsageError(f"{out}: cannot write: {what} (name a file to write the trace to)")


def refuse_input(out: str, inputs: Iterable[str]) -> None:
    """UsageError when ``out`` is an existing regular file that is one of ``inputs``: the same
    file by device and inode, so also through a symlink or a hard link."""
    if out == "-":
        return
    try:
        target = os.stat(out)
    except OSError:
        return  # not there yet
    if not stat.S_ISREG(target.st_mode):
        return
    for src in inputs:
        if src == "-":
            continue
        try:
            source = os.stat(src)
        except OSError:
            continue
        if (source.st_dev, source.st_ino) == (target.st_dev, target.st_ino):
            same = "" if os.path.abspath(src) == os.path.abspath(out) else f" ({src})"
            raise UsageError(f"{out}: refusing to overwrite the input{same}; name another output file")


def check_writable(out: str, inputs: Iterable[str] = ()) -> None:
    """Raise now the error writing ``out`` would raise at the end (the input itself, no such
    directory, no permission, a directory), for a command that reads the whole trace before it
    writes: not minutes later."""
    refuse_input(out, inputs)
    if not written_in_place(out):
        fd, tmp = _temp_beside(out)
        try:
            os.close(fd)
        finally:  # a signal in between too
            remove_quietly(tmp)


class AtomicOutput:
    """Context manager: a Compressor over a temp file renamed onto ``out`` only on success.

    ``-`` writes to stdout (uncompressed, not atomic: a pipe has no rename). ``codec``: "plain"
    (an HTML page), "gzip" or "zstd" whatever the suffix; by default the suffix picks it.
    """

    def __init__(self, out: str, inputs: tuple[str, ...] = (), codec: str | None = None):
        self.out = out
        self._codec = codec
        refuse_input(out, inputs)
        self._tmp: str | None = None
        self._in_place: BinaryIO | None = None
        self._file: BinaryIO | None = None
        self._sink: Compressor | None = None

    def __enter__(self) -> Compressor:
        if self.out == "-":
            self._file = sys.stdout.buffer
            self._sink = Compressor(self._file, "plain")
            return self._sink
        if written_in_place(self.out):  # a device or FIFO: never replaced by a rename
            self._in_place = open(self.out, "wb", buffering=READ_SIZE)
            self._file = self._in_place
            self._sink = Compressor(self._file, self._codec or output_codec(self.out))
            return self._sink
        fd, self._tmp = _temp_beside(self.out)
        try:
            self._file = os.fdopen(fd, "wb", buffering=READ_SIZE)
            self._sink = Compressor(self._file, self._codec or output_codec(self.out))
        except BaseException:  # __exit__ is not called when __enter__ fails
            remove_quietly(self._tmp)
            raise
        return self._sink

    def __exit__(self, exc_type, exc, tb) -> None:
        assert self._file is not None and self._sink is not None
        if exc_type is not None:
            self._sink.abort()
        if self._tmp is None:
            try:
                if exc_type is None:
                    self._sink.close()
            finally:
                if self._in_place is not None:
                    self._in_place.close()
            return
        try:
            if exc_type is None:
                self._sink.close()
            self._file.close()
            if exc_type is None:
                publish(self._tmp, self.out)
        except OSError as e:
            remove_quietly(self._tmp)
            raise UsageError(f"{self.out}: cannot write: {e.strerror or e}") from None
        except BaseException:
            remove_quietly(self._tmp)
            raise
        if exc_type is not None:
            remove_quietly(self._tmp)
            if isinstance(exc, OSError) and exc.errno == errno.EFBIG:  # ulimit -f, or the file system's limit
                raise UsageError(f"{self.out}: cannot write: {exc.strerror}") from None


def write_file(out: str, data: bytes, inputs: Iterable[str] = ()) -> None:
    """Write ``data`` to ``out`` as it is (no compression, whatever the suffix) through
    ``AtomicOutput``: a failure (a full disk, a signal) leaves no partial file and any old one
    as it was."""
    with AtomicOutput(out, inputs=tuple(inputs), codec="plain") as sink:
        sink.write(data)
