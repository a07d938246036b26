"""``traceforge critical-path``: text, CSV and JSON say what the API says; ``--step``,
``--annotation``; several ranks with the straggler (longest total span) first; bad values are
one-line errors."""

from __future__ import annotations

import io
import json

import pandas as pd
import pytest

import traceforge
from tests.analyses.critical_path.test_path import EVENTS
from tests.conftest import ROOT, run_cli

SAMPLE = str(ROOT / "samples" / "train_step.json.gz")


def _frame(done) -> pd.DataFrame:
    assert done.returncode == 0, done.stderr
    return pd.read_csv(io.BytesIO(done.stdout), keep_default_na=False)


def test_csv_tables_are_the_apis():
    path = traceforge.critical_path(SAMPLE)
    summary = _frame(run_cli("critical-path", SAMPLE, "--format", "csv", "--table", "summary"))
    assert summary["rank"].tolist() == [0] * 5  # the sample's distributedInfo rank
    pd.testing.assert_frame_equal(summary.drop(columns="rank"), path.summary, check_dtype=False)
    seg = _frame(run_cli("critical-path", SAMPLE, "--format", "csv", "--table", "segments"))
    assert len(seg) == len(path.segments)
    for c in ("instance", "start", "end", "weight", "event", "event_row", "from_row", "to_row"):
        assert seg[c].tolist() == path.segments[c].tolist(), c
    assert seg["category"].tolist() == path.segments["category"].tolist()
    assert seg["name"].tolist() == path.segments["name"].tolist()
    assert seg["cross"].tolist() == path.segments["cross"].tolist()
    # the segments tile each step: each starts where the one before ended
    for _, one in seg.groupby("instance"):
        assert (one["start"].to_numpy()[1:] == one["end"].to_numpy()[:-1]).all()


def test_json_and_text():
    done = run_cli("critical-path", SAMPLE, "--format", "json", "--table", "summary", "--table", "segments")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    path = traceforge.critical_path(SAMPLE)
    assert [r["length_ns"] for r in doc["summary"]] == path.summary["length_ns"].tolist()
    assert [r["label"] for r in doc["summary"]] == [f"ProfilerStep#{n}" for n in range(10, 15)]
    assert len(doc["segments"]) == len(path.segments)
    text = run_cli("critical-path", SAMPLE, "--table", "summary", "--table", "segments")
    assert text.returncode == 0, text.stderr
    out = text.stdout.decode()
    assert "critical path by instance" in out and "critical path segments" in out
    assert all(f"ProfilerStep#{n}" in out for n in range(10, 15))
    row = path.summary.iloc[0]
    assert f"{row['span_ns'] / 1e6:.3f}" in out  # the span in ms


def test_step_and_annotation():
    one = _frame(run_cli("critical-path", SAMPLE, "--step", "12", "--format", "csv", "--table", "summary"))
    assert one["label"].tolist() == ["ProfilerStep#12"]
    whole = traceforge.critical_path(SAMPLE).summary
    assert one["span_ns"].iloc[0] == whole.loc[whole["number"] == 12, "span_ns"].iloc[0]
    trace = _frame(run_cli("critical-path", SAMPLE, "--annotation", "", "--format", "csv", "--table", "summary"))
    assert trace["label"].tolist() == ["trace"]
    cols = [c for c in trace.columns if c.endswith("_ns") and c not in ("span_ns", "length_ns")]
    assert trace[cols].sum(axis=1).iloc[0] == trace["span_ns"].iloc[0]  # the breakdown tiles the span
    named = _frame(run_cli("critical-path", SAMPLE, "--annotation", "ProfilerStep#1", "--format", "csv", "--table", "summary"))
    assert named["label"].tolist() == [f"ProfilerStep#{n}" for n in range(10, 15)]  # names containing it
    assert named["number"].tolist() == list(range(5))  # numbered from 0 by start


def _rank_file(path, rank: int, stretch: int):
    """The hand-built trace of test_critical_path with rank ``rank``, every time * ``stretch``."""
    events = [dict(e, ts=e["ts"] * stretch, dur=e["dur"] * stretch) for e in EVENTS]
    path.write_text(json.dumps({"distributedInfo": {"rank": rank}, "traceEvents": events}))
    return str(path)


def test_several_ranks_straggler_first(tmp_path):
    fast = _rank_file(tmp_path / "a.json", 0, 1)
    slow = _rank_file(tmp_path / "b.json", 1, 3)
    table = _frame(run_cli("critical-path", fast, slow, "--format", "csv", "--table", "summary"))
    assert table["rank"].tolist() == [1, 0]  # the straggler (longest span) first
    assert table["span_ns"].tolist() == [300_000, 100_000]
    assert table["length_ns"].tolist() == [3 * 65_000, 65_000]
    seg = _frame(run_cli("critical-path", fast, slow, "--format", "csv", "--table", "segments"))
    assert seg["rank"].tolist() == [1] * 10 + [0] * 10  # the straggler's path first, in time order
    assert seg["start"].tolist()[:10] == [3 * s for s in seg["start"].tolist()[10:]]
    text = run_cli("critical-path", fast, slow)
    lines = [line for line in text.stdout.decode().splitlines() if "ProfilerStep#1" in line]
    ranks = [line.split()[0] for line in lines]  # a wide table is printed in blocks, each with the rank column
    assert ranks and ranks == ["1", "0"] * (len(ranks) // 2)


@pytest.mark.parametrize("args, message", [
    (["--step", "99"], "critical-path: no instance 99 of ProfilerStep (the trace has 10-14)"),
    (["--annotation", "no_such_range"], "critical-path: the trace has no no_such_range range"),
    (["--format", "csv", "--table", "summary", "--table", "segments"], "writes one table"),
])
def test_bad_values_are_one_line_errors(args, message):
    done = run_cli("critical-path", SAMPLE, *args)
    assert done.returncode == 1
    err = done.stderr.decode().strip()
    assert len(err.splitlines()) == 1 and message in err and "Traceback" not in err


def test_a_trace_without_steps_says_how_to_name_one(tmp_path):
    path = tmp_path / "nostep.json"
    path.write_text(json.dumps({"traceEvents": [e for e in EVENTS if not e["name"].startswith("ProfilerStep")]}))
    done = run_cli("critical-path", str(path))
    assert done.returncode == 1
    err = done.stderr.decode().strip()
    assert len(err.splitlines()) == 1 and "name one with --annotation" in err
    ok = run_cli("critical-path", str(path), "--annotation", "", "--format", "csv", "--table", "summary")
    assert _frame(ok)["length_ns"].tolist() == [65_000]  # the whole trace: the same path


def test_a_missing_file_is_one_line(tmp_path):
    done = run_cli("critical-path", str(tmp_path / "nope.json"))
    assert done.returncode == 1 and len(done.stderr.decode().strip().splitlines()) == 1
