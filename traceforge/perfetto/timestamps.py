"""How Perfetto's JSON importer reads a ts/dur number, bug for bug.

An integer µs is multiplied by 1000 exactly; anything with a fraction or exponent goes
through Perfetto's own digit-by-digit double parser and ``int64(double * 1000)``. At
epoch magnitude (~1.7e15 µs) that quantises the ns, which alone can make abutting or
nested slices overlap: ``check`` predicts with these numbers, and every track traceforge
lays out (lanes, flow ends, repair) is placed on them.
"""

from __future__ import annotations

import math
import re

import numpy as np

from ..util.exacttime import to_ns

_TWO_POW_53 = str(2**53)  # up to here every prefix of the digits is an exact double
_NUMBER = re.compile(r"(-?)(\d+)(?:\.(\d+))?(?:[eE]([-+]?\d+))?")
_EXACT_DOUBLE_INT = 2**53


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


def perfetto_ns(exact: np.ndarray, fractional: np.ndarray | None = None) -> np.ndarray:
    """The ns Perfetto reads for µs times written with at most 3 decimals, vectorised.

    ``exact``: int64 ns; ``fractional``: whether each was written with a decimal point
    (default: as traceforge writes them, with a fraction only when not whole µs).
    Integers are multiplied exactly; fractions go through a double, truncated, as
    ``time_ns`` does one value at a time. Done in chunks: the float temporaries of
    millions of slices would weigh more than their columns.
    """
    exact = np.asarray(exact, dtype=np.int64)
    if len(exact) <= _CHUNK:
        return _perfetto_chunk(exact, fractional)
    out = np.empty(len(exact), np.int64)
    for lo in range(0, len(exact), _CHUNK):
        hi = lo + _CHUNK
        out[lo:hi] = _perfetto_chunk(exact[lo:hi], None if fractional is None else fractional[lo:hi])
    return out


_CHUNK = 1 << 16


def _perfetto_chunk(exact: np.ndarray, fractional: np.ndarray | None) -> np.ndarray:
    if fractional is None:
        fractional = exact % 1000 != 0
    if not fractional.any():  # whole µs (older Kineto writes only these): Perfetto reads them exactly
        return exact.copy()
    whole, frac = np.divmod(np.abs(exact), 1000)
    rounded = np.trunc((whole.astype(np.float64) + frac / 1000.0) * 1000.0).astype(np.int64)
    ns = np.where(fractional, rounded, np.abs(exact))
    for i in np.flatnonzero(fractional & (whole > _EXACT_DOUBLE_INT)).tolist():  # Perfetto folds digits
        ns[i] = time_ns(f"{whole[i]}.{frac[i]:03d}")[0]
    return np.where(exact < 0, -ns, ns)


def perfetto_ns_of(ns: int) -> int:
    """``perfetto_ns`` of one time as traceforge writes it (``exacttime.ns_to_us_text``)."""
    return int(perfetto_ns(np.array([ns], dtype=np.int64))[0])
