"""Per-copy bandwidth: Kineto's own rate where a copy's dur is whole µs (older Kineto truncates
it), bytes/dur otherwise; and on ROCm (no bytes) the reason there is no bandwidth is said."""

from __future__ import annotations

import json
from decimal import Decimal

import numpy as np
import pytest

from tests.conftest import TRACES, raw_json, run_cli
from traceforge.analyses.memory.memcpy_bw import RATE_SCALE, copy_rates, copy_rows, memcpy_bandwidth
from traceforge.columns.scan import scan

ARG = "memory bandwidth (GB/s)"


def _copy(ts, dur, nbytes, rate=None, name="Memcpy HtoD (Pinned -> Device)"):
    args = {"device": 0, "stream": 7, "correlation": 1, "bytes": nbytes}
    if rate is not None:
        args[ARG] = rate
    return {"ph": "X", "cat": "gpu_memcpy", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur, "args": args}


def test_rate_per_copy(tmp_path):
    events = [
        _copy(0, 2, 3000, rate=1.2),  # whole µs, with Kineto's rate: the rate (bytes/dur would say 1.5)
        _copy(10, 2, 3000),  # whole µs, no rate: bytes/dur
        _copy(20, 2.5, 3000, rate=9.0),  # ns duration: bytes/dur, whatever the arg says
        _copy(30, 0, 3000, rate=4.0),  # zero duration: no interval, left out
    ]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    cols = scan(str(path))
    rows, _ = copy_rows(cols)
    assert copy_rates(cols, rows).tolist() == [1_200_000, 1_500_000, 1_200_000]
    df = memcpy_bandwidth(cols)
    assert df.rate_units.max() == 1_500_000 and "message" not in df.attrs


def _args_by_ordinal(path) -> list:
    events = json.loads(raw_json(path), parse_float=Decimal)["traceEvents"]
    return [e.get("args", {}) if isinstance(e, dict) else {} for e in events]


@pytest.mark.integration
@pytest.mark.parametrize("name", ["trace_diff", "ns_resolution", "negative_queue", "df_index"])
def test_every_copy_equals_kinetos_rate(name):
    """Each copy's rate is Kineto's arg to our unit (1e-6 GB/s): within half a unit, plus the
    arg's own printed digits (17 significant: far below a unit)."""
    cols = scan(str(TRACES[name]))
    rows, _ = copy_rows(cols)
    assert len(rows) > 1000
    ours = copy_rates(cols, rows)
    args = _args_by_ordinal(TRACES[name])
    kineto = [args[o][ARG] for o in cols.gpu.ordinal[rows].tolist()]
    off = [abs(Decimal(int(u)) / RATE_SCALE - k) for u, k in zip(ours.tolist(), kineto)]
    assert max(off) <= Decimal("0.5") / RATE_SCALE + Decimal("1e-12")
    if name == "ns_resolution":  # ns durations: bytes/dur is Kineto's rate, kept for all but whole-µs copies
        assert len(cols.copy_rates) < len(rows) // 100
    else:  # whole-µs durations: bytes over the truncated dur was a median 8-22 % too high
        gpu = cols.gpu
        naive = gpu.bytes[rows] / gpu.dur[rows]
        ratio = naive / np.array([float(k) if k else np.nan for k in kineto])
        assert np.nanmedian(ratio) > 1.05 and np.nanmax(ratio) > 1.5


@pytest.mark.integration
def test_rocm_says_why_there_is_no_bandwidth(tmp_path):
    out = tmp_path / "amd.json.gz"
    r = run_cli("annotate", str(TRACES["amd"]), "--memcpy-bw", "-o", str(out))
    assert r.returncode == 0, r.stderr
    said = (r.stdout + r.stderr).decode()
    assert "memcpy bandwidth: 0 counter tracks" in said and "2 copies have no 'bytes' arg" in said
    assert "ROCm" in said
    df = memcpy_bandwidth(scan(str(TRACES["amd"])))
    assert len(df) == 0 and "no 'bytes' arg" in df.attrs["message"]
