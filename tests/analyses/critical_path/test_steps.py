"""``critical-path`` on every step: a step with no work (no GPU op, a zero-duration step) gives
a row saying so, never an internal error; every step of every shared trace has a path."""

from __future__ import annotations

import json
from functools import lru_cache

import pytest

from tests.conftest import TRACE_FILES, TRACES, run_cli
from traceforge.analyses.critical_path.graph import instances
from traceforge.analyses.critical_path.path import CATEGORY_COLUMNS, NO_WORK, critical_path
from traceforge.columns.scan import scan


def _x(cat, name, ts, dur, pid=1, tid=1, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _write(tmp_path, events):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    return str(path)


def test_zero_duration_step_without_work(tmp_path):
    """ProfilerStep#1 of 0 µs holding nothing (issue 54 item 6): a row whose note says so."""
    path = _write(tmp_path, [_x("user_annotation", "ProfilerStep#1", 10, 0)])
    done = run_cli("critical-path", path)
    assert done.returncode == 0, done.stderr
    assert "ProfilerStep#1: " + NO_WORK in " ".join(done.stdout.decode().split())
    row = critical_path(scan(path)).summary.iloc[0]
    assert (row["span_ns"], row["length_ns"], row["note"]) == (0, 0, NO_WORK)


def test_step_with_only_instant_cpu_ops(tmp_path):
    """A step whose CPU ops last 0 ns and that launches nothing (hta/amd_trace's step 2): asked
    for alone (the graph of that step only has no node), a row of idle saying so."""
    events = [_x("user_annotation", "ProfilerStep#1", 0, 50), _x("cpu_op", "aten::mm", 1, 40),
              _x("user_annotation", "ProfilerStep#2", 60, 20), _x("cpu_op", "aten::empty", 65, 0)]
    path = _write(tmp_path, events)
    done = run_cli("critical-path", path, "--step", "2", "--format", "json")
    assert done.returncode == 0, done.stderr
    (row,) = json.loads(done.stdout)["summary"]
    assert (row["label"], row["span_ns"], row["idle_ns"], row["length_ns"], row["note"]) == \
        ("ProfilerStep#2", 20_000, 20_000, 0, NO_WORK)
    both = critical_path(scan(path)).summary
    assert both["note"].tolist() == ["", NO_WORK] and both["length_ns"].tolist() == [40_000, 0]


@lru_cache(maxsize=1)
def _columns(name):
    return scan(str(TRACES[name]))


@pytest.mark.integration
@pytest.mark.parametrize("name", sorted(TRACE_FILES))
def test_every_step_of_every_shared_trace(name):
    """Each step alone (the graph of that step only) and all together: a row per step that
    tiles the span, no internal error (issue 52 item 2: hta/amd_trace's step 2 had an IndexError)."""
    cols = _columns(name)
    numbers = instances(cols).number.tolist()
    if not numbers:
        pytest.skip(f"{name} has no ProfilerStep")
    whole = critical_path(cols, segments=False).summary
    assert whole["number"].tolist() == numbers
    for n in numbers:
        row = critical_path(cols, step=n).summary.iloc[0]
        assert row["number"] == n
        assert sum(int(row[c]) for c in CATEGORY_COLUMNS) == row["span_ns"]
        assert (row["note"] == NO_WORK) == (row["length_ns"] == 0 and row["idle_ns"] == row["span_ns"])


@pytest.mark.integration
def test_amd_step_2_from_the_cli():
    done = run_cli("critical-path", str(TRACES["amd"]), "--step", "2", "--format", "json")
    assert done.returncode == 0, done.stderr
    (row,) = json.loads(done.stdout)["summary"]
    assert (row["label"], row["length_ns"], row["note"]) == ("ProfilerStep#2", 0, NO_WORK)
