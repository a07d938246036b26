"""Compressed input: the codec by the file's magic bytes, decompressed a block at a time within the
reading limits; inputs that can be read only once (stdin, FIFOs) spooled to be read twice."""

from __future__ import annotations

import io
import os
import shutil
import stat
import sys
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import BinaryIO

import zstandard

try:  # isal: the same gzip format, several times faster than zlib both ways (docs/benchmarks.md)
    from isal import isal_zlib as gzip_zlib
    from isal.igzip import BadGzipFile
    from isal.igzip import IGzipFile as GzipReader
except ImportError:  # pragma: no cover (a platform without isal wheels)
    import zlib as gzip_zlib
    from gzip import BadGzipFile
    from gzip import GzipFile as GzipReader
# The C reader under IGzipFile (every member, as IGzipFile reads): its readinto decompresses into
# the caller's block, where IGzipFile's (io's generic one) reads into new bytes and copies them:
# one copy of every byte less. Private, so looked up.
_RawGzipReader = getattr(gzip_zlib, "_GzipReader", None)

from ... import _native
from ...errors import TraceFormatError, TraceNotFoundError
from ...util import progress
from ..memory import tempfiles
from ..memory.background import prefetched
from ..memory.heap import HeapTrimmer
from ..memory.tempfiles import remove_quietly
from .limits import ReadLimits, read_limits

GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
READ_SIZE = 256 << 10
BLOCK = 4 << 20  # bytes read (or decompressed) at a time: as large as a reader's batch


def detect_codec(head: bytes) -> str:
    """'gzip', 'zstd' or 'plain' from the first bytes of a file (a zstd stream may start with a
    skippable frame, magic 0x184D2A50 to 0x184D2A5F, as ``zstd -d`` reads it)."""
    if head.startswith(GZIP_MAGIC):
        return "gzip"
    if head.startswith(ZSTD_MAGIC) or is_zstd_skippable(head):
        return "zstd"
    return "plain"


def is_zstd_skippable(head: bytes) -> bool:
    """Whether ``head`` starts with the magic of a zstd skippable frame."""
    return len(head) >= 4 and head[1:4] == b"\x2a\x4d\x18" and head[0] & 0xF0 == 0x50


def _open_raw(path: str) -> BinaryIO:
    if path == "-":
        return open(sys.stdin.fileno(), "rb", closefd=False)
    try:
        return open(path, "rb")
    except FileNotFoundError as e:
        raise TraceNotFoundError(path, f"cannot read: {e.strerror or e}") from None
    except OSError as e:
        raise TraceFormatError(path, f"cannot read: {e.strerror or e}") from None


def input_codec(path: str) -> str:
    """"gzip", "zstd" or "plain"; "stream" for stdin or a FIFO, which are not opened for this
    (what is read from them is read once, by the reader)."""
    if read_once(path):
        return "stream"
    with _open_raw(path) as f:
        return detect_codec(f.read(4))


def iter_decompressed(
    path: str, on_read: Callable[[int], None] | None = None, headroom: int = 0, limits: ReadLimits | None = None
) -> Iterator[bytearray]:
    """Yield the decompressed bytes of ``path`` in blocks of up to ``BLOCK`` bytes; errors
    name the compressed offset.

    ``on_read`` (a progress bar) is told the compressed bytes read so far after each read (and,
    a ``progress.PassHook``, the decompressed bytes of each block and the end of the read).
    ``headroom``: each block's first ``headroom`` bytes are spare, filled by the
    decompression thread: a reader can put the end of the previous block there instead of
    copying both into one buffer on its own thread.
    ``limits``: the decompressed-size caps (``io.limits``; default: those in force where the read starts).
    """
    with _open_raw(path) as f:
        head = f.read(4)
        codec = detect_codec(head)
        source = _Source(f, head, path, on_read, codec)
        blocks = _blocks(source, codec, headroom, _SizeCap(source, codec, limits or read_limits()))
        out = blocks if codec == "plain" else prefetched(blocks)
        yield from _counted(out, on_read, headroom) if isinstance(on_read, progress.PassHook) else out


def _counted(blocks: Iterator[bytearray], hook: progress.PassHook, headroom: int) -> Iterator[bytearray]:
    """``blocks`` as they are, each one's bytes (less its spare ``headroom``) told to ``hook``,
    which hears when the file has been read to its end (a reader may stop before the last block)."""
    ended = False
    try:
        for block in blocks:
            hook.decompressed(max(0, len(block) - headroom))
            yield block
        ended = True
    finally:
        blocks.close()  # type: ignore[attr-defined]  (a generator: its file closes now)
        if ended or hook.read_all:
            hook.finished()


def new_decompressor(codec: str):
    """A streaming decompressor for "gzip" or "zstd" (``.decompress``, ``.eof``, ``.unused_data``)."""
    if codec == "gzip":
        return gzip_zlib.decompressobj(wbits=31)
    return zstandard.ZstdDecompressor().decompressobj()


CODEC_ERRORS = (gzip_zlib.error, zstandard.ZstdError)


class _Source(io.RawIOBase):
    """The input, as a decompressing reader (or, for plain JSON, ``_blocks``) reads it: the sniffed ``head`` first,
    read errors as ``TraceFormatError``, the count of bytes read told to ``on_read``, and
    zstd frames followed (``ZstdFrames``)."""

    def __init__(self, f: BinaryIO, head: bytes, path: str, on_read: Callable[[int], None] | None, codec: str):
        self._f, self._head, self.path, self._on_read = f, head, path, on_read
        self.frames = ZstdFrames() if codec == "zstd" else None
        self.offset = 0  # compressed bytes read

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        view = memoryview(buffer).cast("B")
        n = min(len(view), len(self._head))
        view[:n], self._head = self._head[:n], self._head[n:]
        try:
            n += self._f.readinto(view[n:]) or 0
        except OSError as e:
            raise TraceFormatError(self.path, f"cannot read: {e.strerror or e}") from None
        if self.frames is not None:
            self.frames.follow(view[:n])
        self.offset += n
        if self._on_read is not None and n:
            self._on_read(self.offset)
        return n


def _decompressing_reader(source: _Source, codec: str):
    """A file-like reader of the input's bytes (``readinto``), decompressed."""
    if codec == "gzip":
        # every member, like gzip(1)
        return GzipReader(fileobj=source) if _RawGzipReader is None else _RawGzipReader(source, READ_SIZE)
    if codec == "zstd":
        return zstandard.ZstdDecompressor().stream_reader(source, read_across_frames=True, closefd=False)
    return source


def _blocks(source: _Source, codec: str, headroom: int, cap: _SizeCap) -> Iterator[bytearray]:
    """The input's (decompressed) bytes in fresh blocks of up to ``BLOCK`` after ``headroom``
    spare bytes.

    Reading into blocks of one size lets malloc hand back the same memory each time; the
    decompressors' own outputs (new, growing buffers) page-faulted for about half of the
    decompression time.
    """
    reader = _decompressing_reader(source, codec)
    trimmer = HeapTrimmer()  # resident memory stays flat however much is read (see io.heap)
    while True:
        block = _native.splice.uninitialized(headroom + BLOCK)  # filled by readinto; headroom by the reader
        view = memoryview(block)[headroom:]
        try:
            n = reader.readinto(view)
        except EOFError:  # gzip: the input ends inside a member (or a few bytes follow the last one)
            raise _trailing_garbage(source.path) or _truncated(source, codec) from None
        except (*CODEC_ERRORS, BadGzipFile) as e:
            garbage = _trailing_garbage(source.path) if isinstance(e, BadGzipFile) else None
            damage = _gzip_damage(source.path, e) if codec == "gzip" and garbage is None else None
            raise garbage or damage or TraceFormatError(source.path, f"corrupt {codec} data: {e}",
                                                        offset=source.offset) from None
        finally:
            view.release()
        if not n:
            if source.frames is not None and not source.frames.complete:
                raise _truncated(source, codec)
            return
        if n < BLOCK:
            del block[headroom + n:]
        cap.count(n)
        trimmer.count(n)
        yield block


def _gzip_damage(path: str, error: Exception) -> TraceFormatError | None:
    """The error for gzip data that fails to decompress, at the compressed byte where zlib
    stops (found by re-reading ``path``, halving the read that fails), with the start of its
    member and the decompressed bytes before it. A failed check (CRC or length) is known only
    at the member's end: the damage is then somewhere in the member, which the error names.
    None where ``path`` is not a regular file (read once) or the re-read finds no damage."""
    if not os.path.isfile(path):
        return None
    with open(path, "rb") as f:
        d, member, at, out = zlib.decompressobj(wbits=31), 0, 0, 0  # at: compressed offset of data[0]
        while data := f.read(READ_SIZE):
            while data:
                before = d.copy()
                try:
                    out += _inflated(d, data)
                except zlib.error as e:
                    lo, hi = 0, len(data)  # data[:hi] fails from ``before``, data[:lo] does not
                    while hi - lo > 1:
                        mid = (lo + hi) // 2
                        try:
                            _inflated(before.copy(), data[:mid])
                            lo = mid
                        except zlib.error:
                            hi = mid
                    out += _inflated(before, data[:lo])
                    check = "check" in str(e)  # "incorrect data check" / "incorrect length check"
                    where = (f"at compressed byte {at + lo:,}, the end of the gzip member from byte {member:,}: "
                             "the damage is somewhere in that member" if check else
                             f"at compressed byte {at + lo:,} (in the gzip member from byte {member:,})")
                    return TraceFormatError(path, f"corrupt gzip data ({e}) {where}, after {out:,} decompressed "
                                            "bytes", offset=at + lo)
                if not d.eof:
                    at += len(data)
                    break
                used = len(data) - len(d.unused_data)
                data, at = d.unused_data, at + used
                member, d = at, zlib.decompressobj(wbits=31)
    return None


def _inflated(d, data: bytes) -> int:
    """Decompress ``data`` with ``d`` in bounded steps; the bytes it gives."""
    n = len(d.decompress(data, READ_SIZE))
    while d.unconsumed_tail and not d.eof:
        n += len(d.decompress(d.unconsumed_tail, READ_SIZE))
    return n


def _trailing_garbage(path: str) -> TraceFormatError | None:
    """The error for bytes after a complete gzip member that do not start another member, at
    the byte where they start; None where the gzip data has no such bytes or ``path`` is not a
    regular file (stdin, a FIFO: read once). Run only once the reader has failed: it reads
    the file again, decompressing into a bounded buffer that is thrown away."""
    if not os.path.isfile(path):
        return None
    with open(path, "rb") as f:
        d, data = gzip_zlib.decompressobj(wbits=31), b""
        try:
            while True:
                data = data or f.read(READ_SIZE)
                if not data:
                    return None  # the data ends inside a member (or where one ends: not this error)
                _inflated(d, data)
                if not d.eof:
                    data = b""
                    continue
                end = f.tell() - len(d.unused_data)  # where this member ends
                data = d.unused_data + f.read(len(GZIP_MAGIC))
                if not data:
                    return None
                if not data.startswith(GZIP_MAGIC):
                    return TraceFormatError(path, f"{os.path.getsize(path) - end} bytes after the end of the gzip data "
                                            f"are not gzip (trailing garbage: `head -c {end}` cuts them off)",
                                            offset=end)
                d = gzip_zlib.decompressobj(wbits=31)
        except CODEC_ERRORS:
            return None  # damage inside a member: the reader's own error says so


class _SizeCap:
    """The decompressed-size limits (``io.limits``): ``max_size`` bytes in all, and, for
    compressed input past ``ratio_floor`` bytes, ``max_ratio`` bytes per compressed byte read."""

    def __init__(self, source: _Source, codec: str, limits: ReadLimits):
        self.source, self.codec, self.size = source, codec, 0
        self.max_size, self.max_ratio = limits.max_size, limits.max_ratio if codec != "plain" else None
        self.floor = limits.ratio_floor

    def count(self, n: int) -> None:
        self.size += n
        if self.max_size is not None and self.size > self.max_size:
            raise TraceFormatError(self.source.path, f"the input is larger than --max-size {self.max_size:,} bytes "
                                   "(decompressed); raise --max-size to read it", offset=self.max_size)
        if self.max_ratio is not None and self.size > self.floor and self.size > self.max_ratio * self.source.offset:
            raise TraceFormatError(self.source.path, f"{self.codec} data expands more than {self.max_ratio}x "
                                   f"({self.size:,} bytes from {self.source.offset:,}): a decompression bomb? "
                                   "raise --max-ratio to read it", offset=self.size)


def _truncated(source: _Source, codec: str) -> TraceFormatError:
    return TraceFormatError(source.path, f"truncated {codec} stream (input ends before the compressed data does)",
                            offset=source.offset)


class ZstdFrames:
    """Follows the frame and block headers of zstd data (RFC 8878) as it is read, without
    decompressing, to tell whether it ends at the end of a frame: zstandard's stream reader
    ends a truncated stream silently."""

    def __init__(self) -> None:
        self._held = b""  # the start of a header, waiting for the rest
        self._skip = 0  # bytes to pass before the next header
        self._in_frame = False  # the next header is a block's (else a frame's)
        self._checksum = 0  # bytes after the frame's last block

    @property
    def complete(self) -> bool:
        return not (self._in_frame or self._skip or self._held)

    def follow(self, data: bytes | memoryview) -> None:
        """Move past ``data`` (a view of it is not kept: only a partial header is copied)."""
        if self._held:
            data, self._held = self._held + data, b""
        at = 0
        while True:
            at += self._skip
            if at > len(data):
                self._skip = at - len(data)
                return
            self._skip, size = 0, self._header_size(data, at)
            if size is None or at + size > len(data):
                self._held = bytes(data[at:])
                return
            self._skip = self._take_header(data[at:at + size])
            at += size

    def _header_size(self, data: bytes, at: int) -> int | None:
        """The size of the header at ``at``, if enough of it is there to tell."""
        if self._in_frame:
            return 3
        if len(data) < at + 5:
            return None
        if data[at:at + 4] != ZSTD_MAGIC:
            return 8  # a skippable frame: magic and size (anything else the decompressor rejects)
        flags = data[at + 4]
        single_segment = flags >> 5 & 1
        content_size = (single_segment, 2, 4, 8)[flags >> 6]
        return 5 + (1 - single_segment) + (0, 1, 2, 4)[flags & 3] + content_size

    def _take_header(self, header: bytes) -> int:
        """Move past a header; returns the bytes that follow it before the next one."""
        if not self._in_frame:
            if header[:4] != ZSTD_MAGIC:
                return int.from_bytes(header[4:8], "little")
            self._in_frame, self._checksum = True, 4 if header[4] & 4 else 0
            return 0
        value = int.from_bytes(header, "little")
        last, kind, size = value & 1, value >> 1 & 3, value >> 3
        if last:
            self._in_frame = False
        return (1 if kind == 1 else size) + (self._checksum if last else 0)


def spool_stdin(path: str = "-") -> str:
    """Copy standard input (or the FIFO ``path``) to a temporary file so that it can be read twice."""
    fd, tmp = tempfiles.make_in_tempdir("stdin-", ".trace")
    try:
        with os.fdopen(fd, "wb") as out:
            if path == "-":
                shutil.copyfileobj(sys.stdin.buffer, out, READ_SIZE)
            else:
                with open(path, "rb") as src:
                    shutil.copyfileobj(src, out, READ_SIZE)
    except BaseException:  # a full temporary directory, a signal: no spool left behind
        remove_quietly(tmp)
        raise
    return tmp


def read_once(path: str) -> bool:
    """Whether ``path`` can be read only once: stdin (``-``) or a FIFO."""
    if path == "-":
        return True
    try:
        return stat.S_ISFIFO(os.stat(path).st_mode)
    except OSError:
        return False


@contextmanager
def readable_twice(path: str) -> Iterator[str]:
    """``path``, or where it can be read only once (stdin, a FIFO) a spooled copy of it, removed
    on every way out."""
    if not read_once(path):
        yield path
        return
    tmp = spool_stdin(path)
    try:
        yield tmp
    finally:
        remove_quietly(tmp)
