"""Event args that ``scan`` does not keep: ``External id`` and a kernel's shared memory,
keyed by event ordinal.

Only export needs them, so they are not scan columns: an ``OpArgsCollector`` rides along
scan's pass (``scan(path, on_batch=collector)``) and the trace is still read once.
"""

from __future__ import annotations

from array import array

import numpy as np

from .io.reader import EventBatch
from .scan import Table

FIELDS = ("external_id", "shared_memory")
MISSING = -1
_INT64 = range(-(1 << 63), 1 << 63)


def _int(value: object) -> int:
    return value if type(value) is int and value in _INT64 else MISSING


class OpArgsCollector:
    """Call with each batch of a pass; then ``table()``. Keeps complete events with these args."""

    def __init__(self) -> None:
        self._cols = {k: array("q") for k in ("ordinal", *FIELDS)}

    def __call__(self, batch: EventBatch) -> None:
        cols = self._cols
        ordinal = batch.first - 1
        for e in batch.events:
            ordinal += 1
            args = e.get("args")
            if type(args) is not dict or e.get("ph") != "X":
                continue
            ext, smem = args.get("External id"), args.get("shared memory")
            if ext is None and smem is None:
                continue
            cols["ordinal"].append(ordinal)
            cols["external_id"].append(_int(ext))
            cols["shared_memory"].append(_int(smem))

    def table(self) -> Table:
        return Table({k: np.frombuffer(v, dtype=np.int64).copy() for k, v in self._cols.items()})


def lookup(args: Table, ordinals: np.ndarray) -> dict[str, np.ndarray]:
    """The ``FIELDS`` of the events with these ordinals (``MISSING`` where an event had none)."""
    pos = np.searchsorted(args.ordinal, ordinals)
    clipped = np.minimum(pos, max(len(args) - 1, 0))
    found = (pos < len(args)) & (args.ordinal[clipped] == ordinals) if len(args) else np.zeros(len(ordinals), bool)
    out = {}
    for k in FIELDS:
        col = np.full(len(ordinals), MISSING, np.int64)
        col[found] = args.cols[k][clipped[found]]
        out[k] = col
    return out
