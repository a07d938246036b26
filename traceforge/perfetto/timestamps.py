"""How Perfetto's JSON importer reads a ts/dur number, bug for bug.

An integer µs is multiplied by 1000 exactly. A number with a fraction or exponent is parsed
to the nearest double (correctly rounded, as Python's ``float``); if that double is a whole
number, it is taken as that integer µs times 1000 exactly, else as ``d * 1000.0`` rounded to
the nearest integer. Measured on trace_processor v58.2 (every one of the 45,421 slices of
``hta/ns_resolution_trace`` has these ts and dur). At epoch magnitude (~1.7e15 µs) a double
holds only quarter µs, so fractional µs are quantised (``...893.111`` µs becomes ``...893000``
ns, ``...890.172`` becomes ``...890304``), which alone can make abutting or nested slices
overlap: ``check`` predicts with these numbers, and every track traceforge lays out (lanes,
flow ends, repair) is placed on them. Small numbers (durations, rebased times) come out exact.
"""

from __future__ import annotations

import math
import re

import numpy as np

from ..util.exacttime import to_ns

_NUMBER = re.compile(r"(-?)(\d+)(?:\.(\d+))?(?:[eE]([-+]?\d+))?")
_EXACT_DOUBLE_INT = 2**53
_NS_LIMIT = 2.0**63
_INT64_MAX = 2**63 - 1


def time_ns(value: object) -> tuple[int, int] | None:
    """(Perfetto's ns, exact ns) of a JSON ts/dur value, or None if Perfetto sees no number.

    The reader hands fractional values over as their text (see ``io.read.reader``).
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
    perfetto = _perfetto_ns(value)
    if perfetto is None:
        return None
    if exp is None and (frac is None or len(frac) <= 3):
        exact = int(whole) * 1000 + (int(frac.ljust(3, "0")) if frac else 0)
        return perfetto, -exact if sign else exact
    return perfetto, to_ns(value)


def _perfetto_ns(text: str) -> int | None:
    """The importer's ns of a number's text (see the module docstring); None when that is no
    int64 (Perfetto gets garbage there, so the event counts as unreadable)."""
    try:
        d = float(text)
    except OverflowError:
        return None
    if not abs(d) * 1000.0 < _NS_LIMIT:  # also inf and nan
        return None
    if d == math.floor(d):
        return int(d) * 1000
    return _round_half_away(d * 1000.0)


def _round_half_away(x: float) -> int:
    """llround: to the nearest integer, halves away from zero. Not ``floor(x + 0.5)``: where
    doubles are 1 apart (2^52 to 2^53, ns of times near 5e12 µs) an integral x plus 0.5 is a
    tie that rounds to even, one above x."""
    a = abs(x)
    whole = math.floor(a)
    n = int(whole) + (a - whole >= 0.5)  # a - whole is exact
    return n if x >= 0 else -n


def perfetto_ns(exact: np.ndarray, fractional: np.ndarray | None = None) -> np.ndarray:
    """The ns Perfetto reads for µs times written with at most 3 decimals, vectorised.

    ``exact``: int64 ns; ``fractional``: whether each was written with a decimal point
    (default: as traceforge writes them, with a fraction only when not whole µs).
    Integers are multiplied exactly; fractions go through a double as ``time_ns`` reads
    them one value at a time. Done in chunks: the float temporaries of
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
    # whole + frac/1000 is the correctly rounded double of the text: frac/1000 is off by at most
    # 2^-54, far less than the distance from the exact value (a multiple of 1/1000 that is not a
    # binary fraction unless frac is one of k/8, which are exact) to a rounding midpoint of the sum
    # once whole >= 2048; below that, d * 1000.0 rounds back to the exact ns either way.
    d = whole.astype(np.float64) + frac / 1000.0
    scaled = d * 1000.0
    whole_d = np.floor(d)
    integral = (d == whole_d) & (np.abs(whole_d) < 2**63 // 1000)
    rounded = np.floor(scaled)  # llround as ``_round_half_away`` does it (no ``+ 0.5`` before the floor)
    rounded += (scaled - rounded) >= 0.5
    with np.errstate(invalid="ignore"):  # beyond int64 ns (whole >= 2^53): worked out one at a time below
        ns = np.where(integral, whole_d.astype(np.int64) * 1000, rounded.astype(np.int64))
    ns = np.where(fractional, ns, np.abs(exact))
    for i in np.flatnonzero(fractional & (whole >= _EXACT_DOUBLE_INT)).tolist():  # the sum rounds twice
        read = time_ns(f"{whole[i]}.{frac[i]:03d}")
        ns[i] = read[0] if read is not None else _INT64_MAX  # no int64 to Perfetto (unreadable): the last ns
    return np.where(exact < 0, -ns, ns)


def perfetto_ns_of(ns: int) -> int:
    """``perfetto_ns`` of one time as traceforge writes it (``exacttime.ns_to_us_text``)."""
    return int(perfetto_ns(np.array([ns], dtype=np.int64))[0])
