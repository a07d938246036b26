"""Exact JSON text made from columns: ``Texts`` (a column of short byte strings in one
buffer), ``join_rows`` (row-wise concatenation in C), args added to many events
(``ArgColumns``), and blocks of events (``Block``) as the writer takes them.

Nothing here knows what the events mean; ``emit`` builds tracks from these pieces.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import islice
from typing import Protocol

import numpy as np
import orjson

from ... import _native
from ...util.distinct import unique
from ...util.search import in_sorted

_INT_DIGITS = 4300  # Python's default sys.get_int_max_str_digits()


def json_int(text: str) -> int | float:
    """A JSON integer's value for the stdlib's decoder (``parse_int``): one of more digits than
    Python converts to an int (its guard against quadratic time) is read as a float, infinite
    past the double range, as a number such as ``1e400`` is."""
    return int(text) if len(text) <= _INT_DIGITS else float(text)


def fits_int32(values: np.ndarray) -> bool:
    """Whether every one of ``values`` and its negation fit int32."""
    return not len(values) or (values.min() > -2**31 and values.max() < 2**31)


def compact_ints(values: np.ndarray) -> np.ndarray:
    """``values`` as int32 when they fit (``fits_int32``), else as they are: what injections
    and narrow columns hold."""
    return values.astype(np.int32) if fits_int32(values) else values


def _bounds(dtype: np.dtype) -> tuple[int, int]:
    info = np.iinfo(dtype)
    return int(info.min), int(info.max)


def json_bytes(value: object) -> bytes:
    """Compact JSON of ``value`` (orjson's text; the stdlib for what orjson refuses: bytes that
    were not UTF-8 in the trace go out as they came in, a lone surrogate as its escape)."""
    try:
        return orjson.dumps(value)
    except TypeError:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        try:
            return text.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:  # a lone surrogate read from an escape such as "\ud800"
            return json.dumps(value, allow_nan=False, separators=(",", ":")).encode()


Block = tuple[int, bytes]  # (n, n events joined by ",\n")


@dataclass
class Texts:
    """A column of short byte strings (JSON texts) as slices of one buffer: row i is
    ``blob[starts[i]:starts[i] + lengths[i]]``, empty where it has none. No bytes object
    per row: args for a million GPU ops are made and spliced a chunk at a time."""

    blob: bytes
    starts: np.ndarray  # int64
    lengths: np.ndarray  # int64

    @classmethod
    def of(cls, texts: Sequence[bytes]) -> Texts:
        lengths = np.fromiter(map(len, texts), np.int64, len(texts))
        return cls(b"".join(texts), np.cumsum(lengths) - lengths, lengths)

    @classmethod
    def where(cls, text: bytes, present: np.ndarray) -> Texts:
        """``text`` on the rows where ``present``, nothing on the others."""
        return cls(text, np.zeros(len(present), np.int64), present.astype(np.int64) * len(text))

    @classmethod
    def numbers(cls, values: np.ndarray, decimals: int = 0, prefix: bytes = b"", real: bool = False) -> Texts:
        """Integers as exact decimal text of ``value / 10**decimals`` (``1500, 3`` -> ``1.5``),
        each after ``prefix``; ``real``: whole ones end in ``.0``, as floats print."""
        blob, ends = _native.counter_text.fixed_point_texts(np.ascontiguousarray(values, dtype=np.int64), decimals,
                                                            prefix, real)
        ends = np.frombuffer(ends, np.int64)
        starts = np.concatenate(([0], ends))[:-1]
        return cls(blob, starts, ends - starts)

    def __len__(self) -> int:
        return len(self.lengths)

    def __getitem__(self, i: int) -> bytes:
        start = int(self.starts[i])
        return self.blob[start:start + int(self.lengths[i])]

    def take(self, rows: np.ndarray) -> Texts:
        """The rows ``rows`` (indexes or a mask)."""
        return Texts(self.blob, self.starts[rows], self.lengths[rows])

    def only(self, present: np.ndarray) -> Texts:
        """These texts on the rows where ``present``; nothing on the others."""
        return Texts(self.blob, self.starts, np.where(present, self.lengths, 0))

    def spread(self, present: np.ndarray) -> Texts:
        """These texts, in order, on the rows where ``present``; nothing on the others."""
        starts, lengths = np.zeros(len(present), np.int64), np.zeros(len(present), np.int64)
        starts[present], lengths[present] = self.starts, self.lengths
        return Texts(self.blob, starts, lengths)


def join_rows(parts: Sequence[Texts | bytes], sep: bytes = b"") -> Texts:
    """Row by row, the non-empty texts of ``parts`` (a ``bytes`` part: that text on every
    row) joined by ``sep``: one copy in C, read from the parts' own columns."""
    rows = next(len(p) for p in parts if isinstance(p, Texts))
    ints = partial(np.ascontiguousarray, dtype=np.int64)
    blob, lengths = _native.splice.join_rows(
        [p.blob if isinstance(p, Texts) else p for p in parts],
        [(ints(p.starts), ints(p.lengths)) if isinstance(p, Texts) else None for p in parts], rows, sep)
    row_lengths = np.frombuffer(lengths, np.int64)
    return Texts(blob, np.cumsum(row_lengths) - row_lengths, row_lengths)


def event_lines(parts: Sequence[Texts | bytes], rows: int) -> bytes:
    """A block of appended events: each of ``rows`` rows its parts joined, rows apart by ",\n"."""
    return join_rows([*parts, Texts.where(b",\n", np.arange(rows) < rows - 1)]).blob


class EventSource(Protocol):
    def events(self) -> Iterator[bytes]: ...


class BlockSource(Protocol):
    def blocks(self) -> Iterator[Block]: ...


def event_blocks(events: Iterable[bytes], size: int = 8192) -> Iterator[Block]:
    """Events as blocks of ``size``: one join and one compressor call per block, not per event."""
    it = iter(events)
    while chunk := list(islice(it, size)):
        yield len(chunk), b",\n".join(chunk)


@dataclass(frozen=True)
class FixedPoint:
    """An ``ArgColumns`` decode: ints to the reals ``value / 10**decimals`` (ns to µs: 3),
    whose args are written from the ints, exactly (whole ones as ``4.0``, typed as reals)."""

    decimals: int

    def __call__(self, column: np.ndarray) -> np.ndarray:
        return column / 10**self.decimals


@dataclass
class ArgColumns:
    """The same arg keys added to many events, held as columns.

    A dict per event costs hundreds of bytes; on a trace with a million kernels the
    columns cost a few bytes per value. ``values[key][i]`` goes on event ``ordinals[i]``
    (no arg where it is None). A key in ``decode`` holds a compact form (label codes,
    int32 ns) that ``decode[key]`` turns into the values a batch at a time as it is
    written: a byte or four per op rather than a pointer or a float.
    """

    ordinals: np.ndarray
    values: dict[str, np.ndarray]
    decode: dict[str, Callable[[np.ndarray], np.ndarray]] = field(default_factory=dict)
    _codes: dict[str, tuple[np.ndarray, Texts]] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.values = {k: np.asarray(v) for k, v in self.values.items()}
        if bool((self.ordinals[1:] < self.ordinals[:-1]).any()):  # sorted already: no copies
            order = np.argsort(self.ordinals, kind="stable")
            self.ordinals = self.ordinals[order]
            self.values = {k: v[order] for k, v in self.values.items()}

    def __len__(self) -> int:
        return len(self.ordinals)

    def rows(self, first: int, stop: int) -> Iterator[tuple[int, dict]]:
        """(ordinal, args) for the events with ordinals in ``[first, stop)``."""
        lo, hi = self._range(first, stop)
        if lo == hi:
            return
        columns = {k: (self.decode[k](v[lo:hi]) if k in self.decode else v[lo:hi]).tolist()
                   for k, v in self.values.items()}
        for i, ordinal in enumerate(self.ordinals[lo:hi].tolist()):
            yield ordinal, {k: v[i] for k, v in columns.items() if v[i] is not None}

    def member_texts(self, ordinals: np.ndarray) -> list[Texts]:
        """Per key, the members (``"key":value``) of the events ``ordinals``, a row each; empty
        where an event has none: the text ``rows`` would serialise to. ``ordinals`` (sorted)
        must hold every ordinal of this column between their first and last."""
        lo, hi = self._range(int(ordinals[0]), int(ordinals[-1]) + 1) if len(ordinals) else (0, 0)
        if hi - lo == len(ordinals):  # these are all of ``ordinals`` (args on every GPU op): as they are
            return [self._member_texts(k, v[lo:hi]) for k, v in self.values.items()]
        present = in_sorted(self.ordinals[lo:hi], ordinals)
        return [self._member_texts(k, v[lo:hi]).spread(present) for k, v in self.values.items()]

    def _range(self, first: int, stop: int) -> tuple[int, int]:
        bounds = np.array([first, stop]).clip(*(_bounds(self.ordinals.dtype))).astype(self.ordinals.dtype)
        lo, hi = np.searchsorted(self.ordinals, bounds)  # same dtype: no conversion of the column
        return int(lo), int(hi)

    def _member_texts(self, key: str, column: np.ndarray) -> Texts:
        if column.dtype.kind in "iu" and column.dtype.itemsize <= 2:  # codes
            codes, texts = self._code_texts(key)
            return texts.take(np.searchsorted(codes, column))
        prefix = json_bytes(key) + b":"
        decode = self.decode.get(key)
        if isinstance(decode, FixedPoint):  # written from the ints: exact, no float
            return Texts.numbers(column, decode.decimals, prefix, real=True)
        values = decode(column) if decode is not None else column
        if values.dtype.kind in "iuf" and len(values):  # numbers: one serialisation, a prefix at each comma
            numbers = orjson.dumps(values.tolist())[1:-1]
            commas = np.flatnonzero(np.frombuffer(numbers, np.uint8) == ord(","))
            starts = np.concatenate(([0], commas + 1))
            lengths = np.concatenate((commas, [len(numbers)])) - starts + len(prefix)
            return Texts(prefix + numbers.replace(b",", b"," + prefix), starts + np.arange(len(starts)) * len(prefix),
                         lengths)
        return Texts.of([b"" if v is None else prefix + json_bytes(v) for v in values.tolist()])

    def _code_texts(self, key: str) -> tuple[np.ndarray, Texts]:
        """The distinct codes of column ``key`` and their members, made once for all chunks."""
        if key not in self._codes:
            codes = unique(self.values[key])
            prefix = json_bytes(key) + b":"
            decoded = (self.decode[key](codes) if key in self.decode else codes).tolist()
            self._codes[key] = codes, Texts.of([b"" if v is None else prefix + json_bytes(v) for v in decoded])
        return self._codes[key]
