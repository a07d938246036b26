"""Perfetto's identity of a v1 flow, its (id, cat, name), as one dense key per distinct triple.

The replay reads rows back a window of times at a time, but a flow's events can be far
apart in time: the keys are found first, by one pass over the spilled rows, and held as
sorted arrays (~17 bytes a key), so each window's flow events get their key by binary
search. Which keys have a start (``s``) anywhere in the trace is known then too: the ends
of the others are Kineto's dangling flow ends.
"""

from __future__ import annotations

import numpy as np

from ..scan import SpilledColumns, Table
from .collect import FLOW_END, FLOW_END_NEXT, FLOW_START

NONE = -1  # the key of a row that is no v1 flow event


class FlowKeys:
    """Keys 0 .. ``count`` - 1, one per distinct (id, cat, name) of v1 flow events."""

    def __init__(self, pairs: np.ndarray, ids: np.ndarray, keys: np.ndarray, started: np.ndarray):
        self._pairs = pairs  # distinct (cat, name) pairs, packed, sorted
        self._ids = ids  # distinct flow ids, sorted
        self._keys = keys  # pair rank * len(ids) + id rank, sorted: a key is its place here
        self.started = started  # per key: some s event has it

    @property
    def count(self) -> int:
        return len(self._keys)

    @classmethod
    def of(cls, rows: SpilledColumns) -> FlowKeys:
        """The keys of the flow events in ``rows`` (fields of ``collect.FIELDS``), by two
        passes over them: the distinct pairs and ids, then the distinct (pair, id) keys."""
        pairs, ids = [], []
        for chunk in rows.chunks():
            flow = chunk.kind >= FLOW_START
            pairs.append(_distinct([_pair(chunk, flow)]))
            ids.append(_distinct([chunk.fid[flow]]))
        pairs, ids = _distinct(pairs), _distinct(ids)
        if len(pairs) * max(len(ids), 1) >= 2**63:
            raise OverflowError("too many distinct flow keys")
        keys, starts = [], []
        for chunk in rows.chunks():
            flow = chunk.kind >= FLOW_START
            packed = _packed(pairs, ids, _pair(chunk, flow), chunk.fid[flow])
            keys.append(_distinct([packed]))
            starts.append(_distinct([packed[chunk.kind[flow] == FLOW_START]]))
        keys = _distinct(keys)
        started = np.zeros(len(keys), bool)
        started[np.searchsorted(keys, _distinct(starts))] = True
        return cls(pairs, ids, keys, started)

    def index(self, rows: Table) -> np.ndarray:
        """Each row's key (int64), ``NONE`` for rows that are no flow event."""
        out = np.full(len(rows), NONE, np.int64)
        flow = np.flatnonzero(rows.kind >= FLOW_START)
        if len(flow):
            packed = _packed(self._pairs, self._ids, _pair(rows, flow), rows.fid[flow])
            out[flow] = np.searchsorted(self._keys, packed)
        return out

    def dangling(self, rows: Table, key: np.ndarray) -> np.ndarray:
        """Mask of the flow ends whose key no ``s`` event has."""
        end = (rows.kind == FLOW_END) | (rows.kind == FLOW_END_NEXT)
        out = np.zeros(len(rows), bool)
        out[end] = ~self.started[key[end]]
        return out


def _pair(rows: Table, picked: np.ndarray) -> np.ndarray:
    """The picked rows' (cat, name) packed in one int64 (both are string ids, -1 for none)."""
    return (rows.cat[picked] << 32) | (rows.name[picked] & 0xFFFFFFFF)


def _packed(pairs: np.ndarray, ids: np.ndarray, pair: np.ndarray, fid: np.ndarray) -> np.ndarray:
    """(pair, id), both among the distinct ones, as one int64 that sorts as the pair does."""
    return np.searchsorted(pairs, pair) * len(ids) + np.searchsorted(ids, fid)


def _distinct(parts: list[np.ndarray]) -> np.ndarray:
    """The distinct values of the arrays in ``parts``, sorted; ``parts`` is emptied as they
    are joined. By sorting: numpy 2's ``np.unique`` hashes, and took 1.6 s on 1.5 M ids."""
    values = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    parts.clear()
    values.sort()
    return values[np.r_[True, values[1:] != values[:-1]]] if len(values) else values
