"""What annotate does to hold less memory must not change a number."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from traceforge.analyses.launches import STREAM_LAUNCH_APIS, api_name
from traceforge.analyses.queue_length import queue_length
from traceforge.scan import scan

from .conftest import TRACES

scan_module = importlib.import_module("traceforge.scan")


@pytest.mark.parametrize("name", ["negative_queue", "trace_diff", "amd"])
def test_scanning_only_stream_launches_keeps_queue_lengths(name):
    every = scan(str(TRACES[name]), cpu_ops=False)
    some = scan(str(TRACES[name]), cpu_ops=False, keep_launch=lambda n: api_name(n) in STREAM_LAUNCH_APIS)
    assert 0 < len(some.launches) < len(every.launches)  # syncs, event records, ... are not kept
    assert queue_length(some).equals(queue_length(every))


def test_mapped_column_grows_without_losing_values():
    column = scan_module._MappedColumn(np.dtype(np.int32))
    expected = []
    for n in (1, 70_000, 3, 200_000, 0, 65_536):  # across several doublings of the map
        values = np.arange(len(expected), len(expected) + n, dtype=np.int32) * 7
        column.extend(values)
        expected.extend(values.tolist())
    assert column.array().tolist() == expected
