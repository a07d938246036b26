"""How Perfetto's JSON importer reads times and thread ids, bug for bug.

Times: an integer µs is multiplied by 1000 exactly; anything with a fraction or exponent
goes through Perfetto's own digit-by-digit double parser and ``int64(double * 1000)``.
At epoch magnitude (~1.7e15 µs) that quantises the ns, which alone can make nested slices
overlap, so checks must use these numbers and not our exact ones.

Threads: Perfetto keys a thread track by (pid, tid) after coercing both to uint32: an
integer out of range becomes 0 and a tid of 0 (or none) becomes the pid, which is how
Kineto's negative thread ids end up on the process's main thread. A non-empty string
pid/tid is an interned name (kept here as the string itself).
"""

from __future__ import annotations

import math
import re

from ..exacttime import to_ns

U32_MAX = 2**32 - 1
_TWO_POW_53 = str(2**53)  # up to here every prefix of the digits is an exact double
_NUMBER = re.compile(r"(-?)(\d+)(?:\.(\d+))?(?:[eE]([-+]?\d+))?")


def time_ns(value: object) -> tuple[int, int] | None:
    """(Perfetto's ns, exact ns) of a JSON ts/dur value, or None if Perfetto sees no number.

    The reader hands fractional values over as their text (see ``io.reader``).
    """
    if type(value) is int:
        if abs(value) < 2**63 // 1000:
            return value * 1000, value * 1000
        value = str(value)
    elif type(value) is float:
        value = repr(value)
    elif type(value) is not str:
        return None
    m = _NUMBER.fullmatch(value)
    if m is None:
        return None
    sign, whole, frac, exp = m.groups()
    perfetto = _perfetto_ns(sign, whole, frac, exp)
    if perfetto is None:
        return None
    if exp is None and (frac is None or len(frac) <= 3):
        exact = int(whole) * 1000 + (int(frac.ljust(3, "0")) if frac else 0)
        return perfetto, -exact if sign else exact
    return perfetto, to_ns(value)


def _perfetto_ns(sign: str, whole: str, frac: str | None, exp: str | None) -> int | None:
    """Perfetto's StringToDouble then ``static_cast<int64_t>(d * 1000.0)``; None when that
    is no int64 (Perfetto gets garbage there, so the event counts as unreadable)."""
    if len(whole) > 20 and exp is None:
        return None
    exact_double = len(whole) < 16 or (len(whole) == 16 and whole <= _TWO_POW_53)
    out = float(int(whole)) if exact_double else _fold(whole)
    if frac:
        # frac and 10**len(frac) are exact doubles below 16 digits: one rounded division.
        out += float(int(frac)) / 10.0 ** len(frac) if len(frac) < 16 else _fold(frac) / _fold("1" + "0" * len(frac))
    if exp is not None:
        e = int(exp)
        try:
            scale = math.pow(10.0, abs(e))
        except OverflowError:  # C's pow gives inf
            scale = math.inf
        out = out / scale if e < 0 else out * scale
    ns = out * 1000.0
    if not ns < 2.0**63:  # also inf and nan
        return None
    return -int(ns) if sign else int(ns)


def _fold(digits: str) -> float:
    """``out = out * 10 + digit`` in doubles, as Perfetto parses long digit runs."""
    out = 0.0
    for ch in digits:
        out = out * 10.0 + (ord(ch) - 48)
    return out


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
