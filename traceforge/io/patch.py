"""Adding keys to an event's ``args`` while leaving every other byte of it as it was."""

from __future__ import annotations

import json
from functools import cached_property
import re
from collections.abc import Callable, Sequence

import numpy as np
import orjson

from ..inject import ArgColumns, json_bytes
from .fields import splice
from . import rows as R
from .reader import EventBatch

_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|[{}\[\]]', re.DOTALL)
_WS = b" \t\r\n"


def add_args(raw: bytes, event: dict, extra: dict) -> bytes:
    """``raw`` (one event's bytes, parsed as ``event``) with ``extra`` merged into its args."""
    args = event.get("args")
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

    def may_be_in(self, data: bytes) -> bool:
        """Whether one of the keys we add might already be in ``data``'s args."""
        return any(k in data for k in self.key_texts)

    @cached_property
    def ordinals(self) -> np.ndarray:
        """Every ordinal that gets args, sorted (a merge of sorted runs: no hashing)."""
        merged = np.sort(np.concatenate([self._patched, *(c.ordinals.astype(np.int64) for c in self.columns)]),
                         kind="stable")
        return merged[np.concatenate(([True], merged[1:] != merged[:-1]))] if len(merged) else merged

    def bodies(self, first: int, stop: int) -> dict[int, bytes]:
        """Ordinal -> the JSON members to add (``"k":v,...``), for ordinals in ``[first, stop)``."""
        if not self._disjoint:
            return {o: json_bytes(extra)[1:-1] for o, extra in self.between(first, stop).items() if extra}
        texts = [column.texts(first, stop) for column in self.columns]
        lo, hi = np.searchsorted(self._patched, [first, stop])
        if texts and lo == hi and all(ords == texts[0][0] for ords, _ in texts[1:]):  # columns over the same events
            joined = texts[0][1] if len(texts) == 1 else [b",".join([t for t in row if t])
                                                          for row in zip(*(t for _, t in texts))]
            return {o: t for o, t in zip(texts[0][0], joined) if t}
        parts: dict[int, list[bytes]] = {}
        for ords, column_texts in texts:
            for ordinal, text in zip(ords, column_texts):
                if text:
                    parts.setdefault(ordinal, []).append(text)
        for ordinal in self._patched[lo:hi].tolist():
            if self.patches[ordinal]:
                parts.setdefault(ordinal, []).append(json_bytes(self.patches[ordinal])[1:-1])
        return {o: p[0] if len(p) == 1 else b",".join(p) for o, p in parts.items()}

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


def patch_editor(extra_args: ExtraArgs) -> Callable[[EventBatch], bytes]:
    """A writer ``edit`` that merges ``extra_args`` into those events' args."""

    def edit(batch: EventBatch) -> bytes:
        bodies = extra_args.bodies(batch.first, batch.first + batch.count)
        if not bodies:
            return batch.view
        raw, spans = batch.raw, batch.spans
        places = _args_places(batch)
        keys = extra_args.key_texts if extra_args.may_be_in(raw) else ()
        edits = []
        for ordinal, body in sorted(bodies.items()):
            i = ordinal - batch.first
            a, b = spans[i]
            at, empty = places.get(i, (-1, False))
            edits.append(patched_event(raw, a, b, at, empty, body, lambda: batch.event(i), keys))
        return splice(raw, edits)

    return edit


def patched_event(raw: bytes, start: int, end: int, at: int, empty: bool, body: bytes,
                  parsed: Callable[[], dict], keys: Sequence[bytes] = ()) -> tuple[int, int, bytes]:
    """The edit adding the JSON members ``body`` to the args of the event at ``raw[start:end]``.

    ``at``: where its args object takes new members (after the last one, or before the
    ``}`` of an ``empty`` one; -1 if unknown). Unless one of ``keys`` (JSON texts) may be in
    that object already, the members go there; otherwise the parsed event decides.
    """
    if at >= 0 and not any(raw.find(k, start, at) >= 0 for k in keys):
        return at, at, body if empty else b", " + body
    return start, end, add_args(raw[start:end], parsed(), orjson.loads(b"{" + body + b"}"))


def _args_places(batch: EventBatch) -> dict[int, tuple[int, bool]]:
    """Event index -> (where its args take new members, whether they are empty), where the
    scanner placed them in ``raw``."""
    rows = batch.raw_rows
    if rows is None:
        return {}
    at = np.flatnonzero((rows[:, R.FLAGS] & (R.F_ARGS | R.F_ODD)) == R.F_ARGS)
    return dict(zip(at.tolist(), zip(rows[at, R.ARGS_AT].tolist(), (rows[at, R.FLAGS] & R.F_ARGS_EMPTY != 0).tolist())))
