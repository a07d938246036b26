"""Rewriting an event's top-level scalar fields (``pid``, ``tid``, ``ts``) in its raw bytes.

Only the value's bytes change; every other byte of the event (key order, spacing, args,
number spellings) stays as it was, so an edited trace differs from its input exactly
where it was meant to.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import numpy as np

from .jsontext import Texts, join_rows

TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|[{}\[\]:,]', re.DOTALL)  # a JSON string, bracket, colon or comma
_WS = b" \t\r\n"

Replacement = bytes | Callable[[bytes], bytes]


def scalar_spans(raw: bytes) -> dict[bytes, tuple[int, int]]:
    """``{key: (start, end)}`` of the top-level keys of one JSON object whose values are
    scalars (numbers, strings, literals); keys are as written, without quotes."""
    spans: dict[bytes, tuple[int, int]] = {}
    depth = 0
    key: bytes | None = None  # the top-level key just read
    value_at = -1  # where the pending key's value starts (after ':')
    for m in TOKEN.finditer(raw):
        tok = m.group()
        if depth == 1 and value_at >= 0:
            assert key is not None
            if tok[:1] == b'"' and not raw[value_at:m.start()].strip(_WS):
                spans[key] = m.span()
                value_at = -1
                continue
            if tok in (b",", b"}"):
                start = value_at + len(raw[value_at:m.start()]) - len(raw[value_at:m.start()].lstrip(_WS))
                spans[key] = (start, start + len(raw[start:m.start()].rstrip(_WS)))
            value_at = -1
        if tok in (b"{", b"["):
            depth += 1
        elif tok in (b"}", b"]"):
            depth -= 1
        elif depth == 1 and tok == b":" and key is not None:
            value_at = m.end()
        elif depth == 1 and tok[:1] == b'"':
            key = tok[1:-1]
            continue
        if tok != b":":
            key = None
    return spans


def replace_fields(raw: bytes, values: dict[str, Replacement]) -> bytes:
    """``raw`` (one event) with the listed top-level scalar values replaced.

    A value is the new JSON text, or a function of the old text. Keys the event does
    not have as scalars are left alone (nothing is added).
    """
    spans = scalar_spans(raw)
    edits = []
    for key, new in values.items():
        span = spans.get(key.encode())
        if span is not None:
            a, b = span
            edits.append((a, b, new(raw[a:b]) if callable(new) else new))
    return splice(raw, sorted(edits)) if edits else raw


def splice(raw: bytes, edits: list[tuple[int, int, bytes]]) -> bytes:
    """``raw`` with each ``raw[a:b]`` replaced by ``text``; edits sorted and disjoint."""
    out, pos = [], 0
    for a, b, text in edits:
        out += (raw[pos:a], text)
        pos = b
    out.append(raw[pos:])
    return b"".join(out)


def splice_rows(raw: bytes | memoryview, starts: np.ndarray, stops: np.ndarray,
                parts: Sequence[Texts | bytes]) -> bytes:
    """``splice`` with the edits as columns: ``raw[starts[i]:stops[i]]`` -> row i of
    ``parts`` (see ``join_rows``), in one copy."""
    kept = np.concatenate(([0], stops))  # where each piece of raw between the edits starts
    edited = np.append(np.ones(len(starts), bool), False)  # a last row: the rest of raw
    rows = [Texts(raw, kept, np.append(starts, len(raw)) - kept)]
    rows += [Texts.where(p, edited) if isinstance(p, bytes) else p.spread(edited) for p in parts]
    return join_rows(rows).blob
