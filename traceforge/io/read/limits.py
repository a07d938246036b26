"""Reading limits: what keeps the reader's memory bounded however the input is made.

One definition of each limit and its default; the CLI sets them for a run (``--max-event-mb``,
``--max-metadata-mb``, ``--max-size``, ``--max-ratio``) through ``reading_limits``, API callers
the same way (``with traceforge.reading_limits(ReadLimits(max_event_bytes=...))``).

- ``max_event_bytes``: one event's bytes (a 1 GB name is refused at its first byte once this
  much of it is in hand, never held whole).
- ``max_metadata_bytes``: the top-level keys other than ``traceEvents`` (before and after it).
- ``max_ratio``: decompressed bytes per compressed byte read, checked once the decompressed
  bytes pass ``ratio_floor`` (real traces compress 5-40x; bombs 1,000x and more).
- ``max_size``: decompressed bytes in all (None: no absolute cap).

Runs of whitespace between events are never held: the reader drops a run longer than
``WS_RUN_KEPT`` as it streams (see ``io.reader``).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from contextvars import ContextVar
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from ...util.scoped import scoped

MB = 1 << 20
RATIO_FLOOR = 256 * MB
WS_RUN_KEPT = 1 * MB


@dataclass(frozen=True)
class ReadLimits:
    max_event_bytes: int = 256 * MB
    max_metadata_bytes: int = 64 * MB
    max_ratio: int = 200
    max_size: int | None = None
    ratio_floor: int = RATIO_FLOOR


_limits: ContextVar[ReadLimits] = ContextVar("traceforge_read_limits", default=ReadLimits())


def read_limits() -> ReadLimits:
    """The limits in force."""
    return _limits.get()


def reading_limits(limits: ReadLimits) -> AbstractContextManager[None]:
    """Read with ``limits`` inside the block."""
    return scoped(_limits, limits)


def parse_size(text: str) -> int:
    """Bytes from ``"8GB"``, ``"500MB"``, ``"1024"`` (bytes), ``"2.5GB"``; ValueError otherwise."""
    units = {"KB": 1 << 10, "MB": MB, "GB": 1 << 30, "TB": 1 << 40, "B": 1}
    t = text.strip().upper()
    for unit, scale in units.items():
        if t.endswith(unit):
            t = t[:-len(unit)].strip()
            break
    else:
        scale = 1
    try:
        value = Decimal(t)
    except InvalidOperation:
        raise ValueError(f"not a size: {text!r} (e.g. 8GB, 500MB)") from None
    if not value.is_finite() or value <= 0:
        raise ValueError(f"not a size: {text!r} (e.g. 8GB, 500MB)")
    return int(value * scale)
