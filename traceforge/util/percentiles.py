"""Percentiles that stay exact: nearest-rank, so a percentile is always one of the values."""

from __future__ import annotations

import numpy as np


def nearest_rank(sorted_values: np.ndarray, p: int) -> int:
    """The p-th percentile (0 < p <= 100) of ascending integer ``sorted_values`` (not empty),
    nearest-rank: the ``ceil(p * n / 100)``-th smallest value. Unlike pandas' ``quantile``
    (linear interpolation), it never falls between two values."""
    if not 0 < p <= 100:
        raise ValueError(f"percentile {p} not in (0, 100]")
    return int(sorted_values[(p * len(sorted_values) + 99) // 100 - 1])
