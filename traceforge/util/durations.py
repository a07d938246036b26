"""Durations typed by users (``50us``, ``1.5ms``, ``2s``) as exact integer ns."""

from __future__ import annotations

import argparse
import re
from decimal import Decimal, InvalidOperation

from ..errors import UsageError

_NS_PER_UNIT = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
_DURATION = re.compile(r"\s*([0-9]*\.?[0-9]+)\s*(ns|us|µs|ms|s)?\s*", re.IGNORECASE)


def parse_duration_ns(text: str) -> int:
    """``"1.5ms"`` -> ``1500000``. A bare number is µs (HTA's unit for its cutoffs).

    Parsed as a decimal, so no float rounding; a value below 1 ns resolution is refused.
    """
    m = _DURATION.fullmatch(text)
    if not m:
        raise UsageError(f"not a duration: {text!r} (write e.g. 50us, 1.5ms, 2s)")
    try:
        value = Decimal(m.group(1)) * _NS_PER_UNIT[(m.group(2) or "us").lower()]
    except InvalidOperation:
        raise UsageError(f"not a duration: {text!r}") from None
    if value != value.to_integral_value():
        raise UsageError(f"duration {text!r} is not a whole number of ns")
    return int(value)


def duration_arg(text: str) -> int:
    """argparse ``type=`` for a duration option: ns, or argparse's own usage error."""
    try:
        return parse_duration_ns(text)
    except UsageError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def duration_ns(value: object, default: int) -> int:
    """An API option given as ns (int) or as text like ``"100us"``; ``None`` -> ``default``."""
    if value is None:
        return default
    if isinstance(value, str):
        return parse_duration_ns(value)
    if type(value) is int and value >= 0:
        return value
    raise UsageError(f"a duration must be ns (a non-negative int) or text like '100us', not {value!r}")
