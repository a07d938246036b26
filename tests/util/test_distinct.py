"""util.distinct.unique: np.unique's answer, by a sort where numpy would hash (tests on the dtypes
the columns hold, and on what it hands to np.unique itself)."""

from __future__ import annotations

import numpy as np
import pytest

from traceforge.util.distinct import unique


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint16, np.uint64, np.intp, np.bool_])
@pytest.mark.parametrize("size", [0, 1, 2, 7, 10_000])
def test_unique_equals_numpy(dtype, size):
    rng = np.random.default_rng(size)
    values = rng.integers(0, 50 if size > 100 else 3, size).astype(dtype)
    got, want = unique(values), np.unique(values)
    assert got.dtype == want.dtype and np.array_equal(got, want)


def test_extremes_and_other_dtypes():
    big = np.array([np.iinfo(np.int64).max, np.iinfo(np.int64).min, 0, np.iinfo(np.int64).max])
    assert unique(big).tolist() == [np.iinfo(np.int64).min, 0, np.iinfo(np.int64).max]
    floats = np.array([2.0, np.nan, 1.0, np.nan, 2.0])
    assert np.array_equal(unique(floats), np.unique(floats), equal_nan=True)  # one NaN, as numpy keeps
    assert unique(np.array(["b", "a", "b"])).tolist() == ["a", "b"]
    assert unique([3, 1, 3]).tolist() == [1, 3]
    pairs = np.array([[1, 2], [1, 2]])
    assert np.array_equal(unique(pairs), np.unique(pairs))
