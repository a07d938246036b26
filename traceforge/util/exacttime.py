"""Exact time: Kineto writes µs, possibly with a 3-digit fraction; we keep integer ns.

A float64 cannot hold ``1712195495519689.047`` µs, so numbers are converted from their
text. The reader hands fractional ``ts``/``dur`` values over as strings for that reason.
"""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation

NS_PER_US = 1000


def to_ns(value: object) -> int:
    """Convert a µs value (int, exact decimal text, Decimal or float) to integer ns.

    More than 3 decimals (below 1 ns) are rounded half-even. Raises ValueError on
    anything that is not a finite number.
    """
    if type(value) is int:
        return value * NS_PER_US
    if isinstance(value, str):
        return _text_to_ns(value)
    if isinstance(value, bool) or value is None:
        raise ValueError(f"not a number: {value!r}")
    if isinstance(value, (float, Decimal)):
        # A float that reached us did not come from fractional text (the reader quotes
        # those); its shortest repr is the text it was parsed from.
        return _text_to_ns(repr(value) if isinstance(value, float) else str(value))
    if isinstance(value, int):
        return int(value) * NS_PER_US
    raise ValueError(f"not a number: {value!r}")


def _text_to_ns(text: str) -> int:
    text = text.strip()
    whole, dot, frac = text.partition(".")
    if dot and frac.isdigit() and len(frac) <= 3 and _is_int_text(whole):
        ns = abs(int(whole)) * NS_PER_US + int(frac.ljust(3, "0"))
        return -ns if whole.startswith("-") else ns
    if not dot and _is_int_text(whole):
        return int(whole) * NS_PER_US
    try:
        d = Decimal(text)
    except InvalidOperation:
        raise ValueError(f"not a number: {text!r}") from None
    if not d.is_finite():
        raise ValueError(f"not a finite number: {text!r}")
    return int((d * NS_PER_US).to_integral_value(rounding=ROUND_HALF_EVEN))


def _is_int_text(s: str) -> bool:
    body = s[1:] if s[:1] in "-+" else s
    return body.isdigit() and body.isascii()


def ns_to_us_text(ns: int) -> str:
    """Integer ns as exact µs text with up to 3 decimals (``1500`` -> ``"1.5"``)."""
    sign = "-" if ns < 0 else ""
    q, r = divmod(abs(int(ns)), NS_PER_US)
    if r == 0:
        return f"{sign}{q}"
    return f"{sign}{q}.{r:03d}".rstrip("0")


INT64_NS = (-(2**63), 2**63 - 1)  # the times traceforge represents: int64 ns, as the scan reads them


def json_time_ns(value: object) -> int | None:
    """``to_ns`` of a ts/dur as the reader hands it over (an int, or a fractional number's
    text); None if it is not a number or lies beyond int64 ns (the scan's rule: no time)."""
    if type(value) is not int and type(value) is not str:
        return None
    try:
        ns = to_ns(value)
    except ValueError:
        return None
    return ns if INT64_NS[0] <= ns <= INT64_NS[1] else None
