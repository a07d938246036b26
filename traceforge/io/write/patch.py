"""Adding keys to an event's ``args`` while leaving every other byte of it as it was.

An event whose ``args`` is not an object (a number, string, array, ``null``: no args any
reader can show) has that value replaced by the object of the added keys; the event keeps
one ``args`` key (never a second one appended)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from functools import cached_property, partial

import numpy as np
import orjson

from ... import _native
from ...util.search import in_sorted
from ..read import rows as R
from ..read.reader import EventBatch
from .fields import splice_rows
from .jsontext import ArgColumns, Texts, join_rows, json_bytes

_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|[{}\[\]]', re.DOTALL)
_WS = b" \t\r\n"


def add_args(raw: bytes, event: dict, extra: dict) -> bytes:
    """``raw`` (one event's bytes, parsed as ``event``) with ``extra`` merged into its args."""
    args = event.get("args")
    if "args" in event and type(args) is not dict:  # replaced: see the module's docstring
        start, stop = _args_value_span(raw)
        return raw[:start] + json_bytes(extra) + raw[stop:]
    if type(args) is not dict:
        end = raw.rstrip(_WS)
        return end[:-1] + b',"args":' + json_bytes(extra) + b"}" + raw[len(end):]
    if any(k in args for k in extra):
        return _replace_args(raw, {**args, **extra})
    body = json_bytes(extra)[1:-1]
    if next(reversed(event)) == "args":
        # args is the last key (as Kineto writes it), and its value is an object: so the
        # last "}" before the event's own closing brace closes args.
        end = len(raw.rstrip(_WS)) - 1
        return _insert(raw, len(raw[:end].rstrip(_WS)) - 1, bool(args), body)
    return _insert(raw, _args_span(raw)[1], bool(args), body)


def _insert(raw: bytes, close: int, nonempty: bool, body: bytes) -> bytes:
    """Put ``body`` (``"k":v,...``) at the end of the args object whose ``}`` is at ``close``."""
    if not nonempty:
        return raw[:close] + body + raw[close:]
    at = len(raw[:close].rstrip(_WS))
    return raw[:at] + b", " + body + raw[at:]


def _args_span(raw: bytes) -> tuple[int, int]:
    """(offset of ``{``, offset of ``}``) of the top-level ``args`` object, by tokenising."""
    depth = 0
    want_args = False
    start = -1
    for m in _TOKEN.finditer(raw):
        tok = m.group()
        if tok in (b"{", b"["):
            depth += 1
            if want_args and depth == 2 and tok == b"{":
                start = m.start()
            want_args = False
        elif tok in (b"}", b"]"):
            if start >= 0 and depth == 2:
                return start, m.start()
            depth -= 1
        else:
            want_args = depth == 1 and tok == b'"args"' and raw[m.end():].lstrip(_WS)[:1] == b":"
    raise ValueError("event has no args object")


_SCALAR_END = re.compile(rb"[^\s,}\]]*")


def _args_value_span(raw: bytes) -> tuple[int, int]:
    """(start, stop) of the value of the event's top-level ``args`` member, whatever its type (the
    last such member, as the parsed event holds it)."""
    depth = 0
    found = None
    for m in _TOKEN.finditer(raw):
        tok = m.group()
        if tok in (b"{", b"["):
            depth += 1
        elif tok in (b"}", b"]"):
            depth -= 1
        elif depth == 1 and tok == b'"args"' and raw[m.end():].lstrip(_WS)[:1] == b":":
            colon = raw.index(b":", m.end())
            found = colon + 1 + len(raw[colon + 1:]) - len(raw[colon + 1:].lstrip(_WS))
    if found is None:
        raise ValueError("event has no args member")
    first = raw[found:found + 1]
    if first == b'"':
        return found, _TOKEN.match(raw, found).end()
    if first in (b"{", b"["):
        depth = 0
        for m in _TOKEN.finditer(raw, found):
            depth += 1 if m.group() in (b"{", b"[") else -1 if m.group() in (b"}", b"]") else 0
            if depth == 0:
                return found, m.end()
        raise ValueError("args value not closed")
    return found, _SCALAR_END.match(raw, found).end()


def _replace_args(raw: bytes, merged: dict) -> bytes:
    start, close = _args_span(raw)
    return raw[:start] + json.dumps(merged, ensure_ascii=False).encode("utf-8", "surrogateescape") + raw[close + 1:]


class ExtraArgs:
    """The args to add, by event ordinal: a few per-event ``patches`` plus ``columns``."""

    def __init__(self, patches: dict[int, dict], columns: Sequence[ArgColumns] = ()):
        self.patches = patches
        self.columns = columns
        self._patched = np.fromiter(sorted(patches), dtype=np.int64, count=len(patches))
        sources = [set(c.values) for c in columns] + [{k for extra in patches.values() for k in extra}]
        keys = set().union(*sources)
        self.key_texts = [json_bytes(k) for k in sorted(keys)]  # as they would appear in the trace
        # No key comes from two sources: each event's args text is its sources' texts joined.
        self._disjoint = sum(map(len, sources)) == len(keys)

    @cached_property
    def ordinals(self) -> np.ndarray:
        """Every ordinal that gets args, sorted (a merge of sorted runs: no hashing)."""
        runs = [run for run in (self._patched, *(c.ordinals for c in self.columns)) if len(run)]
        longest = max(runs, key=len, default=None)
        if (longest is not None and bool((longest[1:] > longest[:-1]).all())
                and all(run is longest or in_sorted(longest, run).all() for run in runs)):
            return longest.astype(np.int64)  # one source holds every other's events (e.g. all GPU ops): no merge
        merged = np.sort(np.concatenate([self._patched, *(c.ordinals.astype(np.int64) for c in self.columns)]),
                         kind="stable")
        return merged[np.concatenate(([True], merged[1:] != merged[:-1]))] if len(merged) else merged

    def bodies(self, ordinals: np.ndarray) -> Texts:
        """The JSON members to add (``"k":v,...``) to each of ``ordinals``: a run of
        ``self.ordinals``, so that it holds every event in its range that gets args."""
        if not self._disjoint:
            extras = self.between(int(ordinals[0]), int(ordinals[-1]) + 1) if len(ordinals) else {}
            return Texts.of([json_bytes(extras[o])[1:-1] if extras.get(o) else b"" for o in ordinals.tolist()])
        members = [texts for column in self.columns for texts in column.member_texts(ordinals)]
        if len(self._patched):
            lo, hi = np.searchsorted(self._patched, [ordinals[0], ordinals[-1] + 1]) if len(ordinals) else (0, 0)
            texts = Texts.of([json_bytes(self.patches[o])[1:-1] for o in self._patched[lo:hi].tolist()])
            members.append(texts.spread(in_sorted(self._patched[lo:hi], ordinals)))
        return join_rows(members, b",") if members else Texts.of([b""] * len(ordinals))

    def between(self, first: int, stop: int) -> dict[int, dict]:
        """Ordinal -> args to add, for ordinals in ``[first, stop)``."""
        extras: dict[int, dict] = {}
        for column in self.columns:
            for ordinal, extra in column.rows(first, stop):
                extras.setdefault(ordinal, {}).update(extra)
        lo, hi = np.searchsorted(self._patched, [first, stop])
        for ordinal in self._patched[lo:hi].tolist():
            extras.setdefault(ordinal, {}).update(self.patches[ordinal])
        return extras


class BodyRuns:
    """``ExtraArgs.bodies`` of many sorted ordinals, made ``size`` at a time and handed out
    in consecutive pieces: a chunk's few hundred events are too few to pay for the calls."""

    def __init__(self, extra_args: ExtraArgs, ordinals: np.ndarray, size: int = 1 << 15):
        self._extra_args, self._ordinals, self._size = extra_args, ordinals, size
        self._lo, self._texts = 0, Texts.of([])

    def texts(self, lo: int, hi: int) -> Texts:
        """The bodies of ``ordinals[lo:hi]`` (``lo`` never goes back)."""
        if hi > self._lo + len(self._texts):
            self._lo = lo
            self._texts = self._extra_args.bodies(self._ordinals[lo:max(hi, lo + self._size)])
        return self._texts.take(slice(lo - self._lo, hi - self._lo))


def patch_editor(extra_args: ExtraArgs) -> Callable[[EventBatch], bytes]:
    """A writer ``edit`` that merges ``extra_args`` into those events' args."""

    def edit(batch: EventBatch) -> bytes:
        lo, hi = np.searchsorted(extra_args.ordinals, [batch.first, batch.first + batch.count])
        if lo == hi:
            return batch.view
        ordinals = extra_args.ordinals[lo:hi]
        index = ordinals - batch.first
        spans = batch.spans[index]
        return with_members(batch.raw, extra_args.bodies(ordinals), extra_args.key_texts, spans[:, 0], spans[:, 1],
                            *_args_places(batch, index), lambda i: batch.event(int(index[i])))

    return edit


def with_members(raw: bytes | memoryview, bodies: Texts, keys: Sequence[bytes], starts: np.ndarray,
                 ends: np.ndarray, at: np.ndarray, empty: np.ndarray, parsed: Callable[[int], dict]) -> bytes:
    """``raw`` with the JSON members ``bodies`` (``"k":v,...``) added to the args of the
    events at ``raw[starts:ends]``.

    ``at``: where each one's args object takes new members (after the last one, or before
    the ``}`` of an ``empty`` one; -1 if unknown). The members go there, unless one of
    ``keys`` (JSON texts) that the event's own body adds occurs between the event's start
    and that place (it may be in the args already): then the parsed event (``parsed(i)``) decides.
    """
    ints = partial(np.ascontiguousarray, dtype=np.int64)
    common = _native.splice.insert_members(raw, ints(starts), ints(at), np.ascontiguousarray(empty, bool),
                                           bodies.blob, ints(bodies.starts), ints(bodies.lengths), keys)
    if common is not None:  # every event's args place known, no key met: one pass in C
        return common
    edited = bodies.lengths > 0
    placed = at >= 0
    placed[placed] = ~_own_keys_met(raw, bodies, keys, ints(starts[placed]), ints(at[placed]), np.flatnonzero(placed))
    reparsed = edited & ~placed
    merged = Texts.of([add_args(bytes(raw[starts[i]:ends[i]]), parsed(i), orjson.loads(b"{" + bodies[i] + b"}"))
                       for i in np.flatnonzero(reparsed).tolist()])
    texts = [Texts.where(b", ", placed & ~empty), bodies.only(placed), merged.spread(reparsed)]
    return splice_rows(raw, np.where(placed, at, starts)[edited], np.where(placed, at, ends)[edited],
                       [t.take(edited) for t in texts])


def _own_keys_met(raw: bytes | memoryview, bodies: Texts, keys: Sequence[bytes], starts: np.ndarray,
                  stops: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Per span ``raw[starts[i]:stops[i]]`` (the event before its args' place; ``rows``: its
    body's row): does one of ``keys`` occur in it that its own body adds? Keys only other
    events get do not matter: the members go in after the event's own."""
    def containing(data: bytes | memoryview, lo: np.ndarray, hi: np.ndarray, needles: Sequence[bytes]) -> np.ndarray:
        return np.frombuffer(_native.splice.spans_containing(data, lo, hi, needles), bool)

    met = containing(raw, starts, stops, keys)
    hit = np.flatnonzero(met)
    if not len(hit):
        return met
    met = met.copy()
    met[hit] = False
    b_lo = np.ascontiguousarray(bodies.starts[rows[hit]], np.int64)
    b_hi = b_lo + bodies.lengths[rows[hit]]
    for key in keys:
        adds = hit[containing(bodies.blob, b_lo, b_hi, [key])]  # the bodies are short: looked at first
        if len(adds):
            met[adds] |= containing(raw, starts[adds], stops[adds], [key])
    return met


def _args_places(batch: EventBatch, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where the args of the batch's events ``index`` take new members in ``raw`` (-1 where the
    scanner did not place them), and whether they are empty."""
    rows = batch.raw_rows
    if rows is None:
        return np.full(len(index), -1, np.int64), np.zeros(len(index), bool)
    flags = rows[index, R.FLAGS]
    known = (flags & (R.F_ARGS | R.F_ODD)) == R.F_ARGS
    return np.where(known, rows[index, R.ARGS_AT], -1), known & (flags & R.F_ARGS_EMPTY != 0)
