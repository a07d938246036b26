"""Two traces' tail concentration compared per activity kind, as ratios B / A.

From each trace's ``tails`` table (``stats.tails``: per kind, the count, total and mean, and
for p in 1, 5, 10 the top p % events' share of the kind's time and their mean), one row per
kind of either trace: both sides' values and their ratio B / A, for ``count``, ``total_ns``,
``mean_ns`` and each ``top{p}_pct`` and ``top{p}_mean_ns``. A ratio is NaN where A's value is
0 or the kind is missing from a trace. Integer values (counts, ns) stay integers; a missing one is
None. The ratio of two equal values is exactly 1 (a trace
compared with itself gives 1 everywhere). Kinds: A's order, then those only B has.
"""

from __future__ import annotations

import numpy as np

from ...util.lazy_pandas import pd
from .stats import TAIL_PERCENTS

COMPARED = ("count", "total_ns", "mean_ns", *(f"top{p}_{c}" for p in TAIL_PERCENTS for c in ("pct", "mean_ns")))


def compared_tails(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """kind, then per value of ``COMPARED``: ``a_<value>``, ``b_<value>``, ``<value>_ratio`` (B / A)."""
    kinds = list(dict.fromkeys([*a["kind"].tolist(), *b["kind"].tolist()]))
    out = pd.DataFrame({"kind": kinds})
    sides = {"a": a.set_index("kind").reindex(kinds), "b": b.set_index("kind").reindex(kinds)}
    for value in COMPARED:
        va = sides["a"][value].to_numpy(float)
        vb = sides["b"][value].to_numpy(float)
        integer = all(pd.api.types.is_integer_dtype(side[value]) for side in (a, b))
        out[f"a_{value}"] = _exact(sides["a"][value]) if integer else va
        out[f"b_{value}"] = _exact(sides["b"][value]) if integer else vb
        with np.errstate(divide="ignore", invalid="ignore"):
            out[f"{value}_ratio"] = np.where(va != 0, vb / np.where(va != 0, va, 1.0), np.nan)
    return out


def _exact(column: pd.Series) -> np.ndarray:
    """An integer column, reindexed: int64, or where a kind is missing, Python ints and None
    (a count is never written as ``1154.0``)."""
    if column.notna().all():
        return column.to_numpy().astype(np.int64)
    return np.array([None if pd.isna(v) else int(v) for v in column.tolist()], dtype=object)
