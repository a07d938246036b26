"""How Perfetto's JSON importer reads times and thread ids, bug for bug.

Times: see ``traceforge.perfetto_time`` (checks must use Perfetto's numbers, not our
exact ones).

Threads: Perfetto keys a thread track by (pid, tid) after coercing both to uint32: an
integer out of range becomes 0 and a tid of 0 (or none) becomes the pid, which is how
Kineto's negative thread ids end up on the process's main thread. A non-empty string
pid/tid is an interned name (kept here as the string itself).
"""

from __future__ import annotations

import math

U32_MAX = 2**32 - 1


def coerce_id(value: object) -> int | str | None:
    """A pid/tid as Perfetto reads it: uint32, interned string, or None (absent/unusable)."""
    if type(value) is int:
        return value if 0 <= value <= U32_MAX else None
    if type(value) is str:
        return value or None
    if type(value) is float and 0 <= value <= U32_MAX:
        return int(value)
    return None


def thread_of(pid: object, tid: object) -> tuple[int | str, int | str]:
    """The (pid, tid) pair Perfetto files an event's thread track under."""
    p = coerce_id(pid)
    if p is None:
        p = 0
    t = coerce_id(tid)
    return p, (p if t is None or t == 0 else t)


def out_of_range(value: object) -> bool:
    """An integer pid/tid that Perfetto silently turns into 0."""
    return type(value) is int and not 0 <= value <= U32_MAX


def flow_id(value: object) -> int | None:
    """A v1 ``id`` / v2 ``bind_id`` as Perfetto reads it (strings are hex), or None."""
    if type(value) is int:
        return value % 2**64
    if type(value) is float and math.isfinite(value):
        return int(value) % 2**64
    if type(value) is str and value:
        try:
            return int(value, 16) % 2**64
        except ValueError:
            return None
    return None


def counter_number(value: object) -> bool:
    """Whether Perfetto reads a counter arg as a number (numbers, numeric strings)."""
    if type(value) is int or type(value) is float:
        return True
    if type(value) is str:
        try:
            float(value)
        except ValueError:
            return False
        return "_" not in value
    return False
