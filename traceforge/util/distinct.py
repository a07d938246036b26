"""Distinct values of 8-byte ints in first-seen order, by the C hash table (``_factorize``):
no sort, and the GIL is released while it runs."""

from __future__ import annotations

import numpy as np

from .. import _native


def factorized(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``pd.factorize`` of 8-byte ints without pandas: codes (intp) by first appearance, and
    where each distinct value is first met."""
    codes, first = np.empty(len(values), np.intp), np.empty(len(values), np.intp)
    return codes, first[:_native.factorize.factorize(np.ascontiguousarray(values), codes, first)].copy()


def unique(values: np.ndarray) -> np.ndarray:
    """``np.unique`` of a 1-D array, sorted. Integers and bools are sorted and the first of each
    run kept: numpy 2.3+ finds them by hashing instead, which on millions of distinct int32 is
    far slower than the sort; other dtypes go to ``np.unique`` (one NaN kept, as it does)."""
    values = np.asarray(values)
    if values.dtype.kind not in "iub" or values.ndim != 1:
        return np.unique(values)
    ordered = np.sort(values)
    if len(ordered) < 2:
        return ordered
    return ordered[np.concatenate(([True], ordered[1:] != ordered[:-1]))]
