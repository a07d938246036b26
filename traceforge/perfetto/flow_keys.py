"""Perfetto's identity of a v1 flow, its (id, cat, name), as one dense key per distinct triple.

The replay reads rows back a window of times at a time, but a flow's events can be far
apart in time: the keys are found first, by a pass over the spilled rows, and held as a
sorted array (8 bytes a key), so each window's flow events get their key by binary search.
Which keys have a start (``s``) anywhere in the trace is known then too: the ends of the
others are Kineto's dangling flow ends.

A key is packed in one int64: the (cat, name) pair's rank among the flows' pairs, times the
span of flow ids, plus the id's place in it. The span is the ids' range (Kineto's are
small counters), or, where that does not fit, their rank among the distinct ids, which
takes a pass more and 8 bytes a distinct id.
"""

from __future__ import annotations

import numpy as np

from ..columns.table import SpilledColumns, Table
from ..util import progress
from .collect import FLOW_END, FLOW_END_NEXT, FLOW_START, Collected, flow_pair

NONE = -1  # the key of a row that is no v1 flow event


class FlowKeys:
    """Keys 0 .. ``count`` - 1, one per distinct (id, cat, name) of v1 flow events."""

    def __init__(self, pairs: np.ndarray, low: int, ids: np.ndarray | None, width: int):
        self._pairs = pairs  # the flows' distinct (cat, name) pairs, sorted
        self._low = low  # ids are placed from here (``ids`` None) or by rank in ``ids``
        self._ids = ids
        self._width = width
        self._keys = np.zeros(0, np.int64)  # packed, sorted: a key is its place here
        self.started = np.zeros(0, bool)  # per key: some s event has it

    @property
    def count(self) -> int:
        return len(self._keys)

    @classmethod
    def of(cls, collected: Collected) -> FlowKeys:
        """The keys of the flow events in ``collected.rows``."""
        pairs, (low, high) = collected.flow_pairs, collected.flow_id_range or (0, 0)
        if len(pairs) * (high - low + 1) < 2**63:
            out = cls(pairs, low, None, high - low + 1)
        else:
            ids = _distinct([_distinct([chunk.fid[chunk.kind >= FLOW_START]]) for chunk in collected.rows.chunks()])
            out = cls(pairs, 0, ids, len(ids))
        out._find(collected.rows)
        return out

    def _find(self, rows: SpilledColumns) -> None:
        """Every distinct key, and which of them an s event has, by a pass over the rows (on
        the progress bar: long enough to show on a big trace)."""
        keys, starts = [], []
        bar, width, done = progress.active(), len(rows.fields) * 8, 0
        for chunk in rows.chunks():
            flow = chunk.kind >= FLOW_START
            packed = self._packed(chunk, flow)
            keys.append(_distinct([packed]))
            starts.append(_distinct([packed[chunk.kind[flow] == FLOW_START]]))
            done += len(chunk) * width
            if bar is not None:
                bar("flow keys", done, len(rows) * width)
        self._keys = _distinct(keys)
        self.started = np.zeros(len(self._keys), bool)
        self.started[np.searchsorted(self._keys, _distinct(starts))] = True

    def _packed(self, rows: Table, picked: np.ndarray) -> np.ndarray:
        """The picked rows' keys, packed (see the module's doc)."""
        fid = rows.fid[picked]
        place = fid - self._low if self._ids is None else np.searchsorted(self._ids, fid)
        return np.searchsorted(self._pairs, flow_pair(rows.cat[picked], rows.name[picked])) * self._width + place

    def index(self, rows: Table) -> np.ndarray:
        """Each row's key (int64), ``NONE`` for rows that are no flow event."""
        out = np.full(len(rows), NONE, np.int64)
        flow = np.flatnonzero(rows.kind >= FLOW_START)
        if len(flow):
            out[flow] = np.searchsorted(self._keys, self._packed(rows, flow))
        return out

    def dangling(self, rows: Table, key: np.ndarray) -> np.ndarray:
        """Mask of the flow ends whose key no ``s`` event has."""
        end = (rows.kind == FLOW_END) | (rows.kind == FLOW_END_NEXT)
        out = np.zeros(len(rows), bool)
        out[end] = ~self.started[key[end]]
        return out


def _distinct(parts: list[np.ndarray]) -> np.ndarray:
    """The distinct values of the arrays in ``parts``, sorted; ``parts`` is emptied as they
    are joined. By sorting: numpy 2's ``np.unique`` hashes, much slower on millions of ids."""
    values = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    parts.clear()
    values.sort()
    return values[np.r_[True, values[1:] != values[:-1]]] if len(values) else values
