"""Two traces' tail concentration compared per activity kind, as ratios B / A.

From each trace's ``tails`` table (``stats.tails``: per kind, the count, total and mean, and
for p in 1, 5, 10 the top p % events' share of the kind's time and their mean), one row per
kind of either trace: both sides' values and their ratio B / A, for ``count``, ``total_ns``,
``mean_ns`` and each ``top{p}_pct`` and ``top{p}_mean_ns``. A ratio is NaN where A's value is
0 or the kind is missing from a trace. The ratio of two equal values is exactly 1 (a trace
compared with itself gives 1 everywhere). Kinds: A's order, then those only B has.
"""

from __future__ import annotations

import numpy as np

from ..util.lazy_pandas import pd
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
        out[f"a_{value}"] = va
        out[f"b_{value}"] = vb
        with np.errstate(divide="ignore", invalid="ignore"):
            out[f"{value}_ratio"] = np.where(va != 0, vb / np.where(va != 0, va, 1.0), np.nan)
    return out
