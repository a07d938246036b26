"""The benchmark's per-command floor (scripts/bench.py): what it compresses is the command's output."""

from __future__ import annotations

import gzip
import importlib.util
import os
import sys
from pathlib import Path

from tests.conftest import ROOT


def _bench():
    spec = importlib.util.spec_from_file_location("bench", ROOT / "scripts" / "bench.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("bench", module)  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_job_floor_compresses_the_output_not_the_input(tmp_path):
    trace, output, dst = tmp_path / "t.json.gz", tmp_path / "t.all.json.gz", tmp_path / "t.floor.json.gz"
    trace.write_bytes(gzip.compress(b'{"traceEvents": []}' * 1000))
    wrote = b'{"traceEvents": [{"ph": "C"}]}' * 3000
    output.write_bytes(gzip.compress(wrote))

    reading = _bench().job_floor(trace, output, dst)

    assert gzip.decompress(dst.read_bytes()) == wrote
    assert reading >= 0


def test_job_floor_of_a_command_that_writes_no_trace_compresses_nothing(tmp_path):
    trace, dst = tmp_path / "t.json.gz", tmp_path / "t.floor.json.gz"
    trace.write_bytes(gzip.compress(b'{"traceEvents": []}'))

    _bench().job_floor(trace, Path(os.devnull), dst)

    assert gzip.decompress(dst.read_bytes()) == b""


def test_repeated_command_reports_its_fastest_run_and_highest_peak(monkeypatch):
    bench = _bench()
    runs = iter([bench.Run(3.0, 5.0, 100, 0, b"a"), bench.Run(2.0, 4.0, 90, 0, b"b"), bench.Run(2.5, 4.5, 120, 0, b"c")])
    monkeypatch.setattr(bench, "run_child", lambda cmd, env: next(runs))
    assert bench.fastest(["x"], {}, 3) == bench.Run(2.0, 4.0, 120, 0, b"b")
    failing = iter([bench.Run(1.0, 1.0, 50, 0, b""), bench.Run(0.5, 0.5, 60, 2, b"err"), bench.Run(0.1, 0.1, 1, 0, b"")])
    monkeypatch.setattr(bench, "run_child", lambda cmd, env: next(failing))
    assert bench.fastest(["x"], {}, 3).returncode == 2  # a failure is reported, not hidden by a faster run
