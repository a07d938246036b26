"""Adding keys to an event's ``args`` while leaving every other byte of it as it was."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence

import numpy as np
import orjson

from ..inject import ArgColumns
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
        return end[:-1] + b',"args":' + _dumps(extra) + b"}" + raw[len(end):]
    if any(k in args for k in extra):
        return _replace_args(raw, {**args, **extra})
    body = _dumps(extra)[1:-1]
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


def _dumps(obj: dict) -> bytes:
    try:
        return orjson.dumps(obj)
    except TypeError:
        return json.dumps(obj, ensure_ascii=False, allow_nan=False).encode()


def patch_editor(patches: dict[int, dict], columns: Sequence[ArgColumns] = ()) -> Callable[[EventBatch], bytes]:
    """A writer ``edit`` that merges ``patches[ordinal]`` and ``columns`` into those events' args."""
    ordinals = np.fromiter(sorted(patches), dtype=np.int64, count=len(patches))

    def edit(batch: EventBatch) -> bytes:
        first, stop = batch.first, batch.first + batch.count
        extras: dict[int, dict] = {}
        for column in columns:
            for ordinal, extra in column.rows(first, stop):
                extras.setdefault(ordinal, {}).update(extra)
        lo, hi = np.searchsorted(ordinals, [first, stop])
        for ordinal in ordinals[lo:hi].tolist():
            extras.setdefault(ordinal, {}).update(patches[ordinal])
        if not extras:
            return batch.raw
        raw, spans = batch.raw, batch.spans
        args_at = _args_objects(batch)
        edits = []
        for ordinal in sorted(extras):
            i = ordinal - first
            extra = extras[ordinal]
            found = args_at.get(i)
            if found is not None and not any(_dumps(k) in raw[found[0]:found[1]] for k in extra):
                edits.append(_append_to_args(raw, found, extra))
            else:  # no args object, or one that may have these keys already: the parsed event decides
                a, b = spans[i]
                edits.append((a, b, add_args(raw[a:b], batch.event(i), extra)))
        return splice(raw, edits)

    return edit


def _args_objects(batch: EventBatch) -> dict[int, tuple[int, int]]:
    """Event index -> (offset of ``{``, offset of ``}``) of its args object in ``raw``, where known."""
    rows = batch.raw_rows
    if rows is None:
        return {}
    plain = (rows[:, R.FLAGS] & (R.F_ARGS | R.F_ODD)) == R.F_ARGS
    at = np.flatnonzero(plain)
    return dict(zip(at.tolist(), zip(rows[at, R.ARGS_START].tolist(), rows[at, R.ARGS_END].tolist())))


def _append_to_args(raw: bytes, args: tuple[int, int], extra: dict) -> tuple[int, int, bytes]:
    """The edit that adds ``extra``'s keys (none of them already there) at the end of an args object."""
    start, close = args
    body = _dumps(extra)[1:-1]
    inside = raw[start + 1:close].rstrip(_WS)
    if not inside.lstrip(_WS):
        return close, close, body
    at = start + 1 + len(inside)
    return at, at, b", " + body
