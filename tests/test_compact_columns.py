"""What annotate does to hold less memory must not change a number."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from traceforge.analyses.launches import drop_unjoined_launches
from traceforge.analyses.queue_length import queue_length
from traceforge.scan import scan

from .conftest import TRACES

scan_module = importlib.import_module("traceforge.scan")


@pytest.mark.parametrize("name", ["negative_queue", "trace_diff"])
def test_dropping_unjoined_launch_calls_keeps_queue_lengths(name):
    cols = scan(str(TRACES[name]), cpu_ops=False)
    before = queue_length(cols)
    launches = len(cols.launches)
    drop_unjoined_launches(cols)
    assert 0 < len(cols.launches) < launches  # syncs and event records go
    assert set(cols.launches.cols) == {"ordinal", "ts", "dur", "track", "correlation", "name", "cat", "kernel"}
    after = queue_length(cols)
    assert after.equals(before)


def test_mapped_column_grows_without_losing_values():
    column = scan_module._MappedColumn(np.dtype(np.int32))
    expected = []
    for n in (1, 70_000, 3, 200_000, 0, 65_536):  # across several doublings of the map
        values = np.arange(len(expected), len(expected) + n, dtype=np.int32) * 7
        column.extend(values)
        expected.extend(values.tolist())
    assert column.array().tolist() == expected
