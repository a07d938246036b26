"""A writer ``edit`` that drops events and rewrites top-level fields, byte-exact elsewhere.

Used by ``repair`` (move events to other threads, drop dangling flow ends, shift every
``ts``) and ``trim`` (drop what is outside a window). Events that are neither dropped nor
changed keep their bytes, and so do the separators between the events that stay.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from . import rows as R
from .fields import Replacement, replace_fields, splice
from .reader import WS, EventBatch

_TS = re.compile(rb'"ts"[ \t\r\n]*:[ \t\r\n]*(-?[0-9][0-9.eE+-]*)')


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
    ts: Callable[[bytes], bytes] | None = None

    def __call__(self, batch: EventBatch) -> bytes:
        data = self._edit(batch)
        if self.keep is None:
            return data
        data = data.rstrip(WS)
        return data[:-1] if data.endswith(b",") else data

    def _edit(self, batch: EventBatch) -> bytes:
        first, n = batch.first, batch.count
        keep = self.keep[first:first + n] if self.keep is not None else None
        lo, hi = np.searchsorted(self.ordinals, [first, first + n]) if len(self.ordinals) else (0, 0)
        if self.ts is None and lo == hi and (keep is None or keep.all()):
            return batch.raw
        if keep is not None and not keep.any():
            return b""
        raw = batch.raw
        ts_at = self._ts_positions(batch) if self.ts is not None else {}
        dropped = np.flatnonzero(~keep).tolist() if keep is not None else []
        if lo == hi and not dropped and None not in ts_at.values():
            return self._shift_all(raw, ts_at)
        spans = batch.spans
        edits: list[tuple[int, int, bytes]] = []  # (start, end, new bytes) in raw, in order
        changed = {int(o) - first: k for k, o in enumerate(self.ordinals[lo:hi].tolist(), start=int(lo))}
        drop = set(dropped)
        for i in sorted(drop | changed.keys() | ts_at.keys()):
            a, b = spans[i]
            if i in drop:
                edits.append((a, spans[i + 1][0] if i + 1 < n else len(raw), b""))
            elif i in changed or ts_at.get(i) is None:
                assert self.fields is not None or i not in changed
                values = dict(self.fields(changed[i])) if i in changed else {}
                if self.ts is not None:
                    values.setdefault("ts", self.ts)
                edits.append((a, b, replace_fields(raw[a:b], values)))
            else:
                s, e = ts_at[i]
                edits.append((s, e, self.ts(raw[s:e])))
        return splice(raw, edits)

    @staticmethod
    def _ts_positions(batch: EventBatch) -> dict[int, tuple[int, int] | None]:
        """Where each event's top-level ts number is, in event order, by one regex pass.

        Usually the matches are, in order, exactly the ts values the reader parsed: each
        belongs to the next event that has one. Where the scanner's rows show that, no
        event is parsed. Otherwise (a ``ts`` key inside args, say)
        an event gets its span only if it holds exactly one match with its own ts text,
        and None (tokenise it) if not.
        """
        matches = list(_TS.finditer(batch.raw))
        rows = batch.raw_rows
        if rows is not None and not (rows[:, R.FLAGS] & R.F_ODD).any():  # the scanner read every ts
            # Each event with a numeric ts holds a match of its own: as many matches as such
            # events means there is no other (a "ts" in args), so they are theirs, in order.
            timed = np.flatnonzero(rows[:, R.FLAGS] & R.F_TS)
            if len(matches) == len(timed):
                return {i: m.span(1) for i, m in zip(timed.tolist(), matches)}
        owners, texts = [], []
        for i, e in enumerate(batch.events):
            ts = e.get("ts")
            if type(ts) is str:
                owners.append(i)
                texts.append(ts)
            elif type(ts) is int:
                owners.append(i)
                texts.append(str(ts))
        found_texts = [m.group(1) for m in matches]
        if len(matches) == len(texts) and b"\0".join(found_texts) == "\0".join(texts).encode():
            return {i: m.span(1) for i, m in zip(owners, matches)}
        starts = batch.spans[:, 0]
        hits: dict[int, list] = {}
        for owner, m in zip((np.searchsorted(starts, [m.start() for m in matches], side="right") - 1).tolist(),
                            matches):
            hits.setdefault(owner, []).append(m)
        found: dict[int, tuple[int, int] | None] = {i: None for i in hits}
        for i, text in zip(owners, texts):
            ms = hits.get(i)
            found[i] = ms[0].span(1) if ms is not None and len(ms) == 1 and ms[0].group(1) == text.encode() else None
        return {i: found[i] for i in sorted(found)}

    def _shift_all(self, raw: bytes, ts_at: dict[int, tuple[int, int] | None]) -> bytes:
        """Only ts values change: splice each rewritten number in (the common rebase case)."""
        assert self.ts is not None
        out, pos = [], 0
        shift = self.ts
        for a, b in ts_at.values():  # type: ignore[misc]  (no None here: checked by the caller)
            out += (raw[pos:a], shift(raw[a:b]))
            pos = b
        out.append(raw[pos:])
        return b"".join(out)
