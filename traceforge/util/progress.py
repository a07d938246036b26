"""A progress bar on stderr while traces are read: a pass over a multi-GB trace takes a while.

Shown only when stderr is a terminal and not ``-q``. The reader asks ``reader_hook(path)``
for a callback of the compressed bytes it has read (the share done and the ETA), which the
reader also tells the JSON bytes it has decompressed (``PassHook.decompressed``): the speed
shown is that of the JSON, uncompressed, per pass (a trace compresses many times over, so
compressed MB/s would understate a pass's speed by that ratio). The first read of a path is
the ``scan`` pass, later reads of it the ``write`` pass (annotate's second pass copies the
trace). A run over many files draws one bar over all of them (``ranks``).
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

REDRAW_S = 0.1
BAR_CELLS = 24


class ProgressBar:
    """One line redrawn in place:
    ``scan  42% [#####     ] 2,104.6 MB JSON  512.2 MB/s  ETA 0:02`` (the JSON decompressed so
    far and its speed; ``120.3/286.0 MB  88.2 MB/s``, the bytes read, where that is unknown).

    Called as ``bar(pass_name, compressed_bytes_read, total_compressed_bytes or None)``, from
    the reader's helper thread too (hence the lock); a new pass name starts a new line.
    ``add_json(n)`` counts the pass's decompressed bytes: the speed is theirs where known,
    else that of the bytes read.
    """

    def __init__(self, stream: TextIO, clock: Callable[[], float] = time.monotonic):
        self._stream = stream
        self._clock = clock
        self._lock = threading.Lock()
        self._pass: str | None = None
        self._started = 0.0
        self._drawn = 0.0
        self._open = False  # a line is on screen without its newline
        self._stopped = False
        self._json = 0  # decompressed bytes of the current pass
        self.reads: Counter[str] = Counter()  # reads started per path

    def __call__(self, pass_name: str, done: int, total: int | None, final: bool | None = None) -> None:
        """Draw (at most every ``REDRAW_S``); ``final`` (default: ``done >= total``) ends the line."""
        with self._lock:
            if self._stopped:
                return
            now = self._clock()
            if pass_name != self._pass:
                self._end_line()
                self._pass, self._started, self._drawn = pass_name, now, now  # first drawn after REDRAW_S
                self._json = 0
            finished = (total is not None and done >= total) if final is None else final
            if not finished and now - self._drawn < REDRAW_S:
                return
            self._drawn = now
            line = _line(pass_name, done, total, now - self._started, self._json)
            width = shutil.get_terminal_size((80, 24)).columns - 1
            self._stream.write("\r" + line[:width] + "\x1b[K")
            self._open = True
            if finished:
                self._end_line()
            else:
                self._stream.flush()

    def add_json(self, n: int) -> None:
        """``n`` more decompressed bytes in the current pass (drawn with the next call)."""
        self._json += n

    def stop(self) -> None:
        """End the line on screen and draw nothing more (the command is done)."""
        with self._lock:
            self._end_line()
            self._stopped = True

    def _end_line(self) -> None:
        if self._open:
            self._stream.write("\n")
            self._stream.flush()
            self._open = False
        self._pass = None


def _line(pass_name: str, done: int, total: int | None, seconds: float, json_bytes: int = 0) -> str:
    """The bar's text: where the JSON's decompressed bytes are known, their count and speed (the
    share and the ETA still come from the bytes read of the file); else the bytes read."""
    rate = done / seconds if seconds > 0 else 0.0
    if json_bytes:
        json_rate = json_bytes / seconds if seconds > 0 else 0.0
        amount = f"{json_bytes / 1e6:,.1f} MB JSON  {json_rate / 1e6:,.1f} MB/s"
    else:
        amount = f"{done / 1e6:,.1f}{f'/{total / 1e6:,.1f}' if total else ''} MB  {rate / 1e6:.1f} MB/s"
    if not total:
        return f"{pass_name}  {amount}"
    share = min(done / total, 1.0)
    filled = int(share * BAR_CELLS)
    eta = "0:00" if done >= total else _clock_text((total - done) / rate) if rate > 0 else "-:--"
    return f"{pass_name}  {share:4.0%} [{'#' * filled}{' ' * (BAR_CELLS - filled)}] {amount}  ETA {eta}"


def _clock_text(seconds: float) -> str:
    minutes, secs = divmod(int(seconds + 0.5), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


_active: ProgressBar | None = None


@contextmanager
def shown(enabled: bool = True, stream: TextIO | None = None) -> Iterator[ProgressBar | None]:
    """Draw progress while the block runs, if ``enabled`` and ``stream`` (stderr) is a terminal."""
    global _active
    stream = stream if stream is not None else sys.stderr
    if not enabled or not _is_terminal(stream):
        yield None
        return
    bar = ProgressBar(stream)
    previous, _active = _active, bar
    try:
        yield bar
    finally:
        bar.stop()
        _active = previous


@contextmanager
def hidden() -> Iterator[None]:
    """No per-read progress inside the block (worker jobs, the cheap rank look-ups)."""
    global _active
    previous, _active = _active, None
    try:
        yield
    finally:
        _active = previous


def active() -> ProgressBar | None:
    return _active


class PassHook:
    """What one read of a trace reports: called with the compressed bytes read so far;
    ``decompressed(n)`` for each block of JSON it decompressed."""

    def __init__(self, bar: ProgressBar, pass_name: str, total: int | None):
        self._bar, self._pass, self._total = bar, pass_name, total
        self._done = 0

    def __call__(self, done: int) -> None:
        self._done = done  # the line ends in finished(): the JSON still being decompressed counts too
        self._bar(self._pass, done, self._total, final=False)

    def decompressed(self, n: int) -> None:
        self._bar.add_json(n)

    @property
    def read_all(self) -> bool:
        """Every byte of the file has been read."""
        return self._total is not None and self._done >= self._total

    def finished(self) -> None:
        """The last block is read: the line with the pass's whole JSON, ended."""
        self._bar(self._pass, self._done, self._total, final=True)


def reader_hook(path: str, pass_name: str | None = None) -> PassHook | None:
    """The callback a reader of ``path`` reports its bytes to; None when no bar is shown. The
    pass is named ``pass_name``, else ``scan`` (the first read) or ``write`` (a later one): a
    command reading more than twice names its middle reads, so no two passes read alike."""
    bar = _active
    if bar is None:
        return None
    pass_name = pass_name or ("scan" if not bar.reads[path] else "write")
    bar.reads[path] += 1
    return PassHook(bar, pass_name, _file_size(path))


def _file_size(path: str) -> int | None:
    try:
        return os.path.getsize(path) if path != "-" and os.path.isfile(path) else None
    except OSError:
        return None


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
