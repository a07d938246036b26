"""Injections: what analyses add to a trace, and their exact JSON text.

Analyses return injections; the writer appends their events inside ``traceEvents``.
Rules from Perfetto's JSON importer (docs/perfetto-json.md): one numeric key per counter
event, series separated by name, exact ts text, never NaN/Infinity/null.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import orjson

from .exacttime import ns_to_us_text


@dataclass
class CounterTrack:
    """One Perfetto counter track: ``"<name> <key>"`` in process ``pid``.

    ``values`` are integers scaled by ``10**decimals`` so they are written exactly.
    """

    pid: object
    name: str
    key: str
    ts: np.ndarray  # int64 ns, strictly increasing
    values: np.ndarray  # int64, scaled by 10**decimals
    decimals: int = 0
    cat: str = "traceforge"

    def events(self) -> Iterator[bytes]:
        head = b'{"ph":"C","cat":' + orjson.dumps(self.cat) + b',"name":' + orjson.dumps(self.name)
        head += b',"pid":' + orjson.dumps(self.pid) + b',"ts":'
        key = b',"args":{' + orjson.dumps(self.key) + b":"
        for ts, value in zip(self.ts.tolist(), self.values.tolist()):
            yield b"".join((head, ns_to_us_text(ts).encode(), key, _scaled_text(value, self.decimals).encode(), b"}}"))


def _scaled_text(value: int, decimals: int) -> str:
    if decimals == 0:
        return str(value)
    sign = "-" if value < 0 else ""
    q, r = divmod(abs(value), 10 ** decimals)
    return f"{sign}{q}.{r:0{decimals}d}".rstrip("0").rstrip(".")


def float_text(value: float) -> str:
    """A finite float as JSON text; refuses NaN/Infinity, which Perfetto cannot read."""
    if not math.isfinite(value):
        raise ValueError(f"refusing to write non-finite value {value!r}")
    return repr(float(value))


class EventSource(Protocol):
    def events(self) -> Iterator[bytes]: ...


@dataclass
class Injections:
    """What one annotate run adds: event sources (tracks) and a summary line per analysis."""

    sources: list[EventSource] = field(default_factory=list)
    summary: list[str] = field(default_factory=list)

    def add(self, other: Injections) -> None:
        self.sources.extend(other.sources)
        self.summary.extend(other.summary)

    def events(self) -> Iterator[bytes]:
        for source in self.sources:
            yield from source.events()
