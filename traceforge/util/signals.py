"""The signals that stop a run (Ctrl-C's SIGINT, SIGTERM, SIGHUP), and ignoring them where a
run must not be cut short (its clean-up, its exit once done).

Ignoring is process-wide (``SIG_IGN``), where blocking with ``pthread_sigmask`` is per thread:
a signal the main thread blocks is still delivered to one of the reading or writing threads,
whose C handler has Python raise it in the main thread all the same (or, once the interpreter
is finishing and has put the default handlers back, ends the process).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

STOPPING = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))


def ignore() -> None:
    """Ignore the stopping signals from now on (in the main thread only: elsewhere a no-op)."""
    if threading.current_thread() is threading.main_thread():
        for s in STOPPING:
            signal.signal(s, signal.SIG_IGN)


@contextmanager
def ignored() -> Iterator[None]:
    """Ignore the stopping signals inside; their handlers are put back after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = {s: signal.signal(s, signal.SIG_IGN) for s in STOPPING}
    try:
        yield
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler)
