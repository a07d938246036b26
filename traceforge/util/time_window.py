"""The part of a trace a user asks for, as typed: a time window ``START:END`` or profiler
steps ``N-M``, parsed to exact ns (``parse_window``) or step numbers (``parse_steps``); and
the rule by which a slice is in a window (``slice_in_window``), one definition for ``trim``
and the analysis filters.
"""

from __future__ import annotations

import re

import numpy as np

from ..errors import UsageError
from .durations import parse_duration_ns

_STEPS = re.compile(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?")


def parse_window(text: str, trace_start_ns: int | None, trace_end_ns: int | None = None) -> tuple[int, int]:
    """``START:END`` (µs, or with a unit: ``1.5ms``) from the trace start (its earliest ts that
    is not negative, metadata aside: Perfetto's time 0) into exact ns of the trace's ts; a
    leading ``+`` is allowed (and changes nothing). An empty START or END means the trace's
    start or its end. Every command's ``--window``, ``trim``'s too.
    """
    if text.count(":") != 1:
        raise UsageError(f"window {text!r}: write START:END in µs from the trace start, e.g. 100ms:300ms")
    bounds = []
    whole_trace = (trace_start_ns or 0, trace_end_ns + 1 if trace_end_ns is not None else 2**63 - 1)
    for part, default in zip(text.split(":"), whole_trace):
        part = part.strip()
        if not part:
            bounds.append(default)
            continue
        plus = part.startswith("+")
        try:
            ns = parse_duration_ns(part[1:] if plus else part)
        except UsageError:
            raise UsageError(f"window: {part!r} is not a time (µs, or with a unit like 1.5ms)") from None
        if trace_start_ns is None:
            raise UsageError("window: the trace has no timestamps to be relative to")
        bounds.append(ns + trace_start_ns)
    if bounds[0] >= bounds[1]:
        raise UsageError(f"window {text!r}: START must be before END")
    return bounds[0], bounds[1]


def parse_steps(text: str) -> tuple[int, int]:
    """``3-5`` or ``3`` -> (first, last) ProfilerStep numbers."""
    m = _STEPS.fullmatch(text)
    if m is None:
        raise UsageError(f"steps {text!r}: write N or N-M (ProfilerStep numbers), e.g. 3-5")
    first, last = int(m.group(1)), int(m.group(2) or m.group(1))
    if last < first:
        raise UsageError(f"steps {text!r}: the last step comes before the first")
    return first, last


def slice_in_window(start: np.ndarray, end: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """Per slice [start, end) (``end >= start``): does it overlap the window [lo, hi)? A
    zero-length slice does when lo <= start < hi. Slices are kept whole, not clipped."""
    return (start < hi) & ((end > lo) | ((end == start) & (start >= lo)))
