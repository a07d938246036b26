"""Run an iterator or a byte sink in a helper thread.

zlib and zstd release the GIL while they (de)compress, so decompressing the input and
compressing the output in threads overlaps them with JSON parsing in the main thread.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")
_DONE = object()


def prefetched(items: Iterator[T], depth: int = 4) -> Iterator[T]:
    """Yield ``items`` as produced ahead by a thread (exceptions re-raised here)."""
    q: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(entry: tuple) -> bool:
        """Block until there is room, unless the consumer has gone (then False)."""
        while not stop.is_set():
            try:
                q.put(entry, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in items:
                if not put((item, None)):
                    return
            put((_DONE, None))
        except BaseException as e:  # handed to the consumer, which raises it
            put((_DONE, e))

    thread = threading.Thread(target=produce, name="traceforge-read", daemon=True)
    thread.start()
    try:
        while True:
            item, error = q.get()
            if item is _DONE:
                if error is not None:
                    raise error
                return
            yield item
    finally:
        stop.set()


class BackgroundSink(Generic[T]):
    """Calls ``consume(item)`` in a thread, in order; ``close()`` waits and re-raises errors."""

    def __init__(self, consume: Callable[[T], None], depth: int = 3):
        # Three chunks in flight keep the compressor busy; each more is ~3.4 MB held
        # (depth 8 cost ~40 MB of peak RSS on `--all` at 5 GB, no speed).
        self._q: queue.Queue = queue.Queue(maxsize=depth)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(consume,), name="traceforge-write", daemon=True)
        self._thread.start()

    def _run(self, consume: Callable[[T], None]) -> None:
        while True:
            item = self._q.get()
            if item is None:
                return
            if self._error is None:
                try:
                    consume(item)
                except BaseException as e:
                    self._error = e

    def write(self, item: T) -> None:
        if self._error is not None:
            raise self._error
        self._q.put(item)

    def close(self) -> None:
        self._q.put(None)
        self._thread.join()
        if self._error is not None:
            raise self._error
