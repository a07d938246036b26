"""A writer ``edit`` that drops events and rewrites top-level fields, byte-exact elsewhere.

Used by ``repair`` (move events to other threads, drop dangling flow ends, shift every
``ts``) and ``trim`` (drop what is outside a window). Events that are neither dropped nor
changed keep their bytes, and so do the separators between the events that stay.

A batch's edits are spliced in one copy (``fields.splice_rows``). Only events with new
fields, or whose ts cannot be placed without parsing them, are tokenised one by one; the new
ts texts of the others go where the scanner found the old ones, made a batch at a time
(integer ones from the scanner's values, formatted in C), so rebasing every ts costs about
what copying does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from ..read import rows as R
from ..read.reader import WS, EventBatch, parse_event
from .fields import TOKEN, Replacement, replace_fields, splice_rows
from .jsontext import Texts

_MINUS = ord("-")


class TsRewrite(Protocol):
    """A new top-level ts for every event: from its text, or, for texts of non-negative
    integers, from their values all at once."""

    def text(self, text: bytes) -> bytes: ...

    def integers(self, values: np.ndarray) -> np.ndarray: ...


@dataclass
class EventEdits:
    """What to change, by event ordinal.

    ``keep``: one bool per event (False drops it), or None to keep all. ``ordinals``
    (sorted) get ``fields(k)`` (the k-th one's ``{key: new JSON text}``) applied. ``ts``
    rewrites every event's top-level numeric ``ts`` text.

    When events may be dropped, each batch comes back without its trailing separator
    (the writer puts a comma between batches): a batch with nothing left would otherwise
    leave the comma of the one before it in front of ``]``.
    """

    keep: np.ndarray | None = None
    ordinals: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    fields: Callable[[int], dict[str, Replacement]] | None = None
    ts: TsRewrite | None = None

    def __call__(self, batch: EventBatch) -> bytes:
        return self.separated(self._edit(batch))

    def separated(self, data: bytes | memoryview) -> bytes | memoryview:
        """A batch's edited bytes as the writer takes them: without the trailing separator
        when events may be dropped (see the class docstring)."""
        if self.keep is None:
            return data
        data = bytes(data).rstrip(WS)
        return data[:-1] if data.endswith(b",") else data

    def touches(self, batch: EventBatch) -> bool:
        """Whether any event of ``batch`` is dropped or changed."""
        first, n = batch.first, batch.count
        lo, hi = np.searchsorted(self.ordinals, [first, first + n]) if len(self.ordinals) else (0, 0)
        return self.ts is not None or lo != hi or (self.keep is not None and not self.keep[first:first + n].all())

    def _edit(self, batch: EventBatch) -> bytes:
        first, n = batch.first, batch.count
        keep = self.keep[first:first + n] if self.keep is not None else None
        if not self.touches(batch):
            return batch.raw
        lo, hi = np.searchsorted(self.ordinals, [first, first + n]) if len(self.ordinals) else (0, 0)
        if keep is not None and not keep.any():
            return b""
        raw = batch.raw
        ts = self._new_ts(batch) if self.ts is not None else _NewTs.none()
        dropped = np.flatnonzero(~keep) if keep is not None else np.zeros(0, np.int64)
        changed = {int(o) - first: k for k, o in enumerate(self.ordinals[lo:hi].tolist(), start=int(lo))}
        # Events rewritten one by one: new fields, or a ts that could not be placed.
        tokenised = np.zeros(n, bool)
        tokenised[list(changed)] = True
        tokenised[ts.owners[ts.starts < 0]] = True
        if keep is not None:
            tokenised &= keep
        one_by_one = np.flatnonzero(tokenised)
        texts = [self._rewritten(raw, a, b, changed.get(i)) for i, a, b in
                 zip(one_by_one.tolist(), batch.spans[one_by_one, 0].tolist(), batch.spans[one_by_one, 1].tolist())]
        # Each other kept event with a ts gets its new text there; dropped events go with
        # what follows them up to the next event.
        plain = ~tokenised[ts.owners] & (keep[ts.owners] if keep is not None else True)
        next_start = np.append(batch.spans[1:, 0], len(raw))
        starts = np.concatenate((ts.starts[plain], batch.spans[dropped, 0], batch.spans[one_by_one, 0]))
        stops = np.concatenate((ts.stops[plain], next_start[dropped], batch.spans[one_by_one, 1]))
        source = np.repeat([0, 1, 2], [np.count_nonzero(plain), len(dropped), len(one_by_one)])  # of each edit
        parts = [ts.texts.take(plain).spread(source == 0), Texts.of(texts).spread(source == 2)]  # dropped: no text
        order = np.argsort(starts, kind="stable")
        return splice_rows(raw, starts[order], stops[order], [part.take(order) for part in parts])

    def _rewritten(self, raw: bytes, a: int, b: int, changed: int | None) -> bytes:
        """Event ``raw[a:b]`` with its new fields and ts, by tokenising it."""
        assert self.fields is not None or changed is None
        values = dict(self.fields(changed)) if changed is not None else {}
        if self.ts is not None:
            values.setdefault("ts", self.ts.text)
        return replace_fields(raw[a:b], values)

    def _new_ts(self, batch: EventBatch) -> _NewTs:
        """The new top-level ts text of every event with a numeric one. Integer texts the
        scanner read are rewritten all at once (``TsRewrite.integers``), others one by one."""
        assert self.ts is not None
        raw = batch.raw
        owners, starts, stops = self._ts_positions(batch)
        known = np.flatnonzero(starts >= 0)
        rows = batch.raw_rows
        integer = np.zeros(len(owners), bool)
        if rows is not None:
            flags = rows[owners[known], R.FLAGS]
            integer[known] = (flags & (R.F_TS | R.F_TS_FRAC | R.F_ODD)) == R.F_TS
        integer[integer] = np.frombuffer(raw, np.uint8)[starts[integer]] != _MINUS  # "-0" stays as written
        values = np.zeros(len(owners), np.int64)
        if integer.any():
            values[integer] = self.ts.integers(rows[owners[integer], R.TS] // 1000)
        if integer[known].all():
            texts = Texts.numbers(values)
            texts.lengths[starts < 0] = 0
        else:
            texts = Texts.of([b"%d" % v if whole else self.ts.text(raw[a:b]) if a >= 0 else b""
                              for whole, v, a, b in zip(integer.tolist(), values.tolist(), starts.tolist(),
                                                        stops.tolist())])
        return _NewTs(owners, starts, stops, texts)

    @staticmethod
    def _ts_positions(batch: EventBatch) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Where each event's top-level ts number is: (event, start, stop) in event order,
        start -1 where the event must be tokenised to find it.

        The scanner read each ts and noted where (``TS_AT``, ``TS_END``), except in odd events
        (a ts as text, say) and those with two ts keys: those are tokenised, and so is every
        event of a batch the scanner did not read (the exact decoder walked it: rare).
        """
        rows = batch.raw_rows
        if rows is None:
            return np.arange(batch.count), np.full(batch.count, -1), np.full(batch.count, -1)
        odd = (rows[:, R.FLAGS] & R.F_ODD) != 0
        owners = np.flatnonzero((rows[:, R.FLAGS] & R.F_TS != 0) | odd)
        starts, stops = rows[owners, R.TS_AT].copy(), rows[owners, R.TS_END].copy()
        unplaced = odd[owners] | (starts < 0)  # -2: two ts keys
        starts[unplaced] = stops[unplaced] = -1
        return owners, starts, stops


@dataclass
class _NewTs:
    """Events' new top-level ts texts: event, (start, stop) of the old text in the batch
    (-1: find it by tokenising), and the new text."""

    owners: np.ndarray
    starts: np.ndarray
    stops: np.ndarray
    texts: Texts

    @classmethod
    def none(cls) -> _NewTs:
        empty = np.zeros(0, np.int64)
        return cls(empty, empty, empty, Texts(b"", empty, empty))


def edits_after(first: Callable[[EventBatch], bytes | memoryview], edits: EventEdits, scanner: R.RowScanner
                ) -> Callable[[EventBatch], bytes | memoryview]:
    """A writer ``edit``: ``first`` (one that keeps every event, e.g. args added), then
    ``edits``. A batch both change is scanned again (``rescanned``) so that ``edits`` finds
    its events where ``first`` left them; the other batches cost what one of the two does."""

    def edit(batch: EventBatch) -> bytes | memoryview:
        data = first(batch)
        if not edits.touches(batch):
            return edits.separated(data)
        if len(data) == len(batch.view) and data == batch.view:
            return edits(batch)
        return edits(rescanned(batch, bytes(data), scanner))

    return edit


def rescanned(batch: EventBatch, data: bytes, scanner: R.RowScanner) -> EventBatch:
    """``batch``'s events (the same ordinals) as they are in ``data``, its bytes rewritten.

    The scanner's rows where it reads every event; otherwise (events only the exact decoder
    reads: rare) each event is found by its braces and parsed."""
    rows = scanner.scan(data + b"]", len(data) + 1).rows
    if len(rows) == batch.count:
        return EventBatch(batch.first, data, 0, len(data), batch.offset, rows=rows, scanner=scanner)
    spans = event_spans(data)
    if len(spans) != batch.count:
        raise ValueError(f"rewritten batch of {batch.count} events has {len(spans)}")
    events = [parse_event(data[a:b]) for a, b in spans.tolist()]
    return EventBatch(batch.first, data, 0, len(data), batch.offset, events=events, spans=spans, scanner=scanner)


def event_spans(data: bytes) -> np.ndarray:
    """(count, 2): [start, end) of each top-level JSON value of a run of events ``data``
    (objects, separated by commas), found by their brackets outside strings."""
    spans, depth, start = [], 0, 0
    for m in TOKEN.finditer(data):
        tok = m.group()
        if tok in (b"{", b"["):
            if depth == 0:
                start = m.start()
            depth += 1
        elif tok in (b"}", b"]"):
            depth -= 1
            if depth == 0:
                spans.append((start, m.end()))
    return np.array(spans, np.int64).reshape(-1, 2)
