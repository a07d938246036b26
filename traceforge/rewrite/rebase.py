"""Rebasing timestamps: every ``ts`` minus the trace start, exactly, base kept in the file.

Kineto's convention: an event happened at ``baseTimeNanoseconds + ts * 1000`` ns (no key:
a base of 0). Rebasing subtracts a whole number of µs, ``start_us`` (the earliest ts
Perfetto keeps, rounded down), from every ts and adds ``start_us * 1000`` to the base,
so that sum is unchanged for every event. It is done on the number's text: the digits
after the decimal point are kept as written, so nothing is rounded. Perfetto ignores
the key and shows the small numbers, which a double holds to the ns.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal, localcontext

import numpy as np

from ..errors import TraceFormatError
from ..io.write.fields import scalar_spans

BASE_KEY = "baseTimeNanoseconds"
_WS = b" \t\r\n"


def shift_us_text(text: bytes, delta_us: int) -> bytes:
    """JSON number ``text`` (µs) minus ``delta_us``, exact; non-numbers come back unchanged."""
    whole, dot, frac = text.partition(b".")
    if whole.isdigit() and (frac.isdigit() or not frac):
        shifted = int(whole) - delta_us
        if shifted >= 0:
            return b"%d" % shifted + dot + frac
    try:
        value = Decimal(text.decode("ascii"))
    except (ValueError, ArithmeticError):
        return text
    if not value.is_finite():
        return text
    with localcontext() as ctx:
        ctx.prec = len(text) + len(str(delta_us)) + 2  # room for every digit: exact
        return format(value - delta_us, "f").encode()


@dataclass(frozen=True)
class Rebase:
    """Each event's ts moved back by ``delta_us`` (an ``io.event_edits.TsRewrite``). A ts
    that was not negative stays so: only metadata can start before the trace (thread names
    written at ts 0), and Perfetto drops a negative ts. A ts written as a string moves too
    and stays a string: Perfetto reads the number in it, and so does the scan."""

    delta_us: int

    def text(self, text: bytes) -> bytes:
        if len(text) >= 2 and text[:1] == text[-1:] == b'"':
            return b'"' + self.text(text[1:-1]) + b'"'
        shifted = shift_us_text(text, self.delta_us)
        return b"0" if shifted[:1] == b"-" and text.lstrip()[:1] != b"-" else shifted

    def integers(self, values: np.ndarray) -> np.ndarray:
        """``text`` of texts of non-negative integers, all at once, from their values."""
        return np.maximum(values - self.delta_us, 0)


def start_us(earliest_ns: int) -> int:
    """The whole µs at or before the earliest ts."""
    return earliest_ns // 1000


def base_time_editors(reader_head: bytes, reader_tail: bytes, layout: str, metadata: dict,
                      delta_us: int, path: str) -> tuple[Callable[[bytes], bytes], Callable[[bytes], bytes], int]:
    """(edit_head, edit_tail, new base) for ``write_trace``: the base grows by ``delta_us``.

    The key is rewritten where it is; without one, it is added after the events (where
    Kineto writes it); a bare event array becomes ``{"traceEvents": [...], key: base}``.
    """
    old = metadata.get(BASE_KEY, 0)
    if type(old) is not int:
        raise TraceFormatError(path, f"top-level {BASE_KEY} is {old!r}, not an integer: cannot rebase")
    new = old + delta_us * 1000
    value = str(new).encode()
    member = b'"' + BASE_KEY.encode() + b'": ' + value
    if layout == "array":
        return (lambda head: _replace_first(head, b"[", b'{"traceEvents": ['),
                lambda tail: _replace_last(tail, b"]", b"], " + member + b"}"), new)
    prefix = b'{"traceEvents": ['
    in_head = scalar_spans(reader_head).get(BASE_KEY.encode())
    in_tail = scalar_spans(prefix + reader_tail).get(BASE_KEY.encode())
    if in_head is not None:
        return lambda head: _splice(head, in_head, value), lambda tail: tail, new
    if in_tail is not None:
        span = (in_tail[0] - len(prefix), in_tail[1] - len(prefix))
        return lambda head: head, lambda tail: _splice(tail, span, value), new
    return lambda head: head, lambda tail: _add_last_member(tail, member), new


def _splice(text: bytes, span: tuple[int, int], value: bytes) -> bytes:
    return text[:span[0]] + value + text[span[1]:]


def _replace_first(text: bytes, old: bytes, new: bytes) -> bytes:
    i = text.index(old)
    return text[:i] + new + text[i + len(old):]


def _replace_last(text: bytes, old: bytes, new: bytes) -> bytes:
    i = text.rindex(old)
    return text[:i] + new + text[i + len(old):]


def _add_last_member(tail: bytes, member: bytes) -> bytes:
    close = tail.rindex(b"}")
    body = tail[:close].rstrip(_WS)
    return body + b",\n  " + member + b"\n" + tail[close:]
