"""The benchmark tiler (scripts/tile_trace.py): its CPU-only copies grow the host side alone."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from tests.conftest import ROOT, SAMPLE
from traceforge.columns.scan import scan


@pytest.mark.parametrize("name", [SAMPLE, "alexnet"])
def test_cpu_only_copies_add_cpu_ops_after_the_gpu_work(name, tmp_path, trace_path):
    out = tmp_path / "tiled.json"
    subprocess.run([sys.executable, str(ROOT / "scripts" / "tile_trace.py"), str(trace_path(name)), "-o", str(out),
                    "--copies", "2", "--cpu-only-copies", "3"], check=True, capture_output=True, timeout=120)
    original, tiled = scan(str(trace_path(name))), scan(str(out))

    assert len(original.cpu_ops) > 0
    assert len(tiled.gpu) == 2 * len(original.gpu)
    assert len(tiled.launches) == 2 * len(original.launches)
    assert len(tiled.cpu_ops) == 5 * len(original.cpu_ops)
    # The three host-only copies come after the second copy's last event, in order, and
    # hold the same ops (names and durations) as the original.
    second_end = max(int(np.max(t.ts + np.maximum(t.dur, 0))) for t in (tiled.gpu, tiled.launches))
    host_only = tiled.cpu_ops.take(np.arange(2 * len(original.cpu_ops), 5 * len(original.cpu_ops)))
    assert host_only.ts.min() > second_end
    names = [original.names[i] for i in original.cpu_ops.name]
    for k in range(3):
        copy = host_only.take(np.arange(k * len(original.cpu_ops), (k + 1) * len(original.cpu_ops)))
        assert [tiled.names[i] for i in copy.name] == names
        assert np.array_equal(copy.dur, original.cpu_ops.dur)
        assert len(np.unique(copy.ts - original.cpu_ops.ts)) == 1
