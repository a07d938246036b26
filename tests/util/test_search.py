"""The galloping searchsorted against numpy's, on every kind of needle order."""

from __future__ import annotations

import numpy as np
import pytest

from traceforge.analyses.patterns.mining import _non_overlapping
from traceforge.util.search import searchsorted


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_searchsorted_is_numpys(dtype):
    rng = np.random.default_rng(3)
    info = np.iinfo(dtype)
    for trial in range(2000):
        n, m = int(rng.integers(0, 200)), int(rng.integers(64, 300))
        span = (-20, 20) if trial % 2 else (info.min, info.max)  # many ties / the whole range
        haystack = np.sort(rng.integers(*span, n, dtype=dtype, endpoint=True))
        needles = rng.integers(*span, m, dtype=dtype, endpoint=True)
        if trial % 4 == 1:
            needles.sort()  # rising, as columns in file order mostly are
        elif trial % 4 == 2:
            needles = np.sort(needles)[::-1].copy()  # falling: every search goes back
        for side in ("left", "right"):
            assert np.array_equal(searchsorted(haystack, needles, side), np.searchsorted(haystack, needles, side=side))


def test_searchsorted_extremes_and_other_types():
    big = np.iinfo(np.int64)
    haystack = np.array([big.min, big.min, -1, 0, 0, big.max], np.int64)
    needles = np.tile(np.array([big.max, big.min, 0, -1, 1, big.min + 1], np.int64), 20)
    for side in ("left", "right"):
        assert np.array_equal(searchsorted(haystack, needles, side), np.searchsorted(haystack, needles, side=side))
    assert np.array_equal(searchsorted(np.zeros(0, np.int64), needles), np.zeros(len(needles), np.intp))
    mixed = needles.astype(np.float64)  # numpy's own search: other and mixed types, scalars, few needles
    assert np.array_equal(searchsorted(haystack, mixed), np.searchsorted(haystack, mixed))
    assert searchsorted(haystack, np.int64(0), "right") == 5
    assert np.array_equal(searchsorted(haystack[::2], needles[::3]), np.searchsorted(haystack[::2], needles[::3]))


def test_non_overlapping_windows_are_the_greedy_choice():
    rng = np.random.default_rng(5)
    for trial in range(500):
        n = int(rng.integers(1, 6))
        pos = np.unique(rng.integers(0, int(rng.integers(1, 60)), int(rng.integers(0, 40)))).astype(
            np.int32 if trial % 2 else np.int64)
        kept, end = [], None
        for p in pos.tolist():
            if end is None or p >= end:
                kept.append(p)
                end = p + n
        got = _non_overlapping(pos, n)
        assert got.tolist() == kept and got.dtype == pos.dtype
