"""``trim --window`` means what every command's ``--window`` means (from the trace start), a cut
that keeps nothing is an error, and ``trim --steps N-M`` keeps exactly those steps and their GPU
ops (``analyses.steps.steps_cut``), as ``--steps`` does on the analysis commands."""

from __future__ import annotations

import json

import numpy as np
import pytest

import traceforge
from tests.conftest import TRACES, run_cli
from traceforge.analyses.structure.filters import Filters
from traceforge.analyses.structure.steps import gpu_steps, profiler_steps
from traceforge.columns.scan import scan


def _per_step(path) -> dict[int, int]:
    cols = scan(str(path))
    steps = gpu_steps(cols)
    return {int(n): int((steps == n).sum()) for n in profiler_steps(cols).number}


def _names(path) -> list[str]:
    return [e["name"] for e in json.loads(path.read_text())["traceEvents"] if e["ph"] != "M"]


def test_trim_window_is_from_the_trace_start_like_the_filters(sample, tmp_path):
    out = tmp_path / "w.json"
    r = run_cli("trim", str(sample.path), "-o", str(out), "--window", "1ms:2.5ms")
    assert r.returncode == 0, r.stderr
    plus = tmp_path / "plus.json"
    assert run_cli("trim", str(sample.path), "-o", str(plus), "--window", "+1ms:+2.5ms").returncode == 0
    assert out.read_bytes() == plus.read_bytes()  # a + is allowed and changes nothing
    cols = scan(str(sample.path))
    filtered = Filters(window="1ms:2.5ms").apply(cols)
    trimmed = scan(str(out))
    assert len(filtered.gpu) > 0
    assert np.array_equal(np.sort(trimmed.gpu.ts), np.sort(filtered.gpu.ts))
    start = cols.trace_start_ns
    assert trimmed.gpu.ts.min() + trimmed.gpu.dur[np.argmin(trimmed.gpu.ts)] > start + 1_000_000
    assert trimmed.gpu.ts.min() < start + 2_500_000


@pytest.mark.parametrize("window", ["+200s:+300s", "200s:300s"])
def test_trim_to_nothing_is_an_error(sample, tmp_path, window):
    out = tmp_path / "empty.json.gz"
    r = run_cli("trim", str(sample.path), "-o", str(out), "--window", window)
    err = r.stderr.decode()
    assert r.returncode == 1 and err.count("\n") == 1 and "Traceback" not in err
    assert "no event of the trace is in it" in err and "after it" in err
    assert not out.exists() and not list(tmp_path.iterdir())


def test_trim_steps_missing_is_an_error(sample, tmp_path):
    r = run_cli("trim", str(sample.path), "-o", str(tmp_path / "o.json"), "--steps", "30-31")
    assert r.returncode == 1 and b"the trace has steps 10-14" in r.stderr
    assert not list(tmp_path.iterdir())


def _overlapping_steps(path) -> None:
    """Three steps whose GPU work runs into the next step's CPU range, with ac2g flows."""
    events = [{"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python"}}]
    events += [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "pid": 1, "tid": 1,
                "ts": 100 * n, "dur": 100} for n in (1, 2, 3)]
    for n in (1, 2, 3):  # each step launches 2 kernels at its end; they run into the next step
        for k in range(2):
            corr, launch, run = 10 * n + k, 100 * n + 80 + 5 * k, 100 * n + 90 + 30 * k
            events += [
                {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": launch,
                 "dur": 3, "args": {"correlation": corr}},
                {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": corr, "pid": 1, "tid": 1, "ts": launch},
                {"ph": "X", "cat": "kernel", "name": f"k{n}.{k}", "pid": 0, "tid": 7, "ts": run, "dur": 25,
                 "args": {"correlation": corr, "device": 0, "stream": 7}},
                {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": corr, "pid": 0, "tid": 7, "ts": run, "bp": "e"},
            ]
    path.write_text(json.dumps({"traceEvents": events}))


def test_trim_steps_keeps_exactly_those_steps_and_their_gpu_ops(tmp_path):
    src, out = tmp_path / "in.json", tmp_path / "out.json"
    _overlapping_steps(src)
    result = traceforge.trim(str(src), str(out), steps="2")
    names = _names(out)
    assert [n for n in names if n.startswith("ProfilerStep")] == ["ProfilerStep#2"]
    assert [n for n in names if n.startswith("k")] == ["k2.0", "k2.1"]  # not k1.1 (step 1's), nor k3.0 (step 3's)
    assert names.count("ac2g") == 4  # both arrows whole; step 1's and 3's gone
    assert result.flow_events_cut == 1  # the end of step 1's arrow to k1.1, which runs in step 2
    assert (result.start_ns, result.end_ns) == (200_000, 345_000)
    assert _per_step(out) == {2: 2}
    check = run_cli("check", str(out))
    assert check.returncode == 0, check.stdout
    # the filters cut the same: stats --steps 2 equals stats of the trimmed file
    kept = Filters(steps="2").apply(scan(str(src)))
    assert sorted(kept.gpu.correlation.tolist()) == [20, 21]


@pytest.mark.integration
def test_trim_steps_3_4_on_resnet(tmp_path):
    src, out = TRACES["h100_resnet50"], tmp_path / "t.json.gz"
    r = run_cli("trim", str(src), "-o", str(out), "--steps", "3-4")
    assert r.returncode == 0, r.stderr
    before, after = _per_step(src), _per_step(out)
    assert sorted(after) == [3, 4]
    assert after == {3: before[3], 4: before[4]}
    cp = run_cli("critical-path", str(out), "--format", "csv")
    assert b"ProfilerStep#5" not in cp.stdout and b"ProfilerStep#3" in cp.stdout
    r = run_cli("trim", str(src), "-o", str(tmp_path / "e.json.gz"), "--window", "+200ms:+300ms")
    assert r.returncode == 1 and b"no event of the trace is in it" in r.stderr
