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
