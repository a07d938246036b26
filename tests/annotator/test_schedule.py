"""annotate's analyses in a second thread: the GPU-side ones beside the CPU-side ones, or the
tracks beside the copy once the args are known. The same bytes as one at a time, and only
where memory and the cores allow it."""

from __future__ import annotations

import dataclasses
import gzip
import importlib
import threading

import pytest

from tests.conftest import SAMPLE, TRACES
from traceforge.cli.commands.traces import annotate as annotate_command
from traceforge.cli.main import build_parser

annotate_module = importlib.import_module("traceforge.annotator.run")
schedule = importlib.import_module("traceforge.annotator.schedule")
registry = importlib.import_module("traceforge.annotator.registry")


def _annotated(path, out, side_by_side: bool, monkeypatch) -> tuple[bytes, dict[str, list[bool]]]:
    """``--all`` on ``path``; the bytes written, and what each of the two memory checks decided
    (and, under "picked in main thread", where the CPU ops near launch calls were picked)."""
    decided: dict[str, list[bool]] = {"beside_copy": [], "side_by_side": []}
    for check, seen in decided.items():
        real = getattr(schedule, check)
        monkeypatch.setattr(schedule, check, lambda *a, real=real, seen=seen: seen.append(real(*a)) or seen[-1])
    picked, real_picked = [], schedule.picked
    monkeypatch.setattr(schedule, "picked", lambda *a: picked.append(
        threading.current_thread() is threading.main_thread()) or real_picked(*a))
    annotate_module.annotate(str(path), str(out), all=True, options={"side_by_side": side_by_side})
    return gzip.open(out).read(), {**decided, "picked in main thread": picked}


@pytest.mark.parametrize("name", [SAMPLE, "df_index", "negative_queue", "nccl", "trace_diff"])
def test_analyses_in_a_second_thread_write_what_one_at_a_time_writes(tmp_path, monkeypatch, name, trace_path):
    monkeypatch.setattr(schedule, "SIDE_BY_SIDE_BUDGET", 1 << 50)
    beside_copy, decided = _annotated(trace_path(name), tmp_path / "a.json.gz", True, monkeypatch)
    # no args read CPU ops: those the tracks read are picked beside the copy too
    assert decided == {"beside_copy": [True], "side_by_side": [], "picked in main thread": [False]}
    monkeypatch.setattr(schedule, "BESIDE_COPY_BYTES_PER_OP", 1 << 50)  # too much for the copy's side
    paired, decided = _annotated(trace_path(name), tmp_path / "b.json.gz", True, monkeypatch)
    assert decided == {"beside_copy": [False], "side_by_side": [True], "picked in main thread": [True]}
    alone, decided = _annotated(trace_path(name), tmp_path / "c.json.gz", False, monkeypatch)
    assert decided == {"beside_copy": [False], "side_by_side": [False], "picked in main thread": [True]}
    assert beside_copy == paired == alone


def test_a_second_thread_only_under_the_memory_budget(tmp_path, monkeypatch, sample):
    monkeypatch.setattr(schedule, "SIDE_BY_SIDE_BUDGET", schedule.current_rss())  # already over
    _, decided = _annotated(sample.path, tmp_path / "a.json.gz", True, monkeypatch)
    assert decided == {"beside_copy": [False], "side_by_side": [False], "picked in main thread": [True]}


def test_args_that_read_call_stacks_are_made_after_the_pick(tmp_path, monkeypatch):
    """The cupti trace has counters to place (their tables read call stacks): its CPU ops near
    launch calls are picked before the args, beside the copy as one at a time alike."""
    monkeypatch.setattr(schedule, "SIDE_BY_SIDE_BUDGET", 1 << 50)
    beside_copy, decided = _annotated(TRACES["cupti"], tmp_path / "a.json.gz", True, monkeypatch)
    assert decided == {"beside_copy": [True], "side_by_side": [], "picked in main thread": [True]}
    alone, _ = _annotated(TRACES["cupti"], tmp_path / "b.json.gz", False, monkeypatch)
    assert b'"counters":{' in beside_copy and beside_copy == alone


def test_an_error_beside_the_copy_ends_the_run_without_an_output(tmp_path, monkeypatch, sample):
    def fails(cols, ctx):
        raise RuntimeError("mined patterns failed")

    monkeypatch.setitem(registry.ANALYSES, "patterns", dataclasses.replace(registry.ANALYSES["patterns"], build=fails))
    with pytest.raises(RuntimeError, match="mined patterns failed"):
        _annotated(sample.path, tmp_path / "a.json.gz", True, monkeypatch)
    assert list(tmp_path.iterdir()) == []


def test_current_rss_is_this_process():
    before = schedule.current_rss()
    held = bytearray(b"x" * (64 << 20))
    assert schedule.current_rss() - before >= 60 << 20
    del held


@pytest.mark.parametrize("jobs, cluster, expected", [(None, None, False), (2, None, False), (1, None, True),
                                                     (None, "tcp://head:8786", False)])
def test_ranks_run_side_by_side_only_one_at_a_time(monkeypatch, jobs, cluster, expected):
    seen = {}

    def fake(path, out, *, analyses, options, **settings):
        seen.update(options)
        return annotate_module.AnnotateResult(out or "x", 0)

    monkeypatch.setattr(annotate_command, "annotate", fake)
    argv = ["annotate", "t.json", "--all", "-q"] + (["--jobs", str(jobs)] if jobs else []) + (
        ["--cluster", cluster] if cluster else [])
    annotate_command.annotate_one(build_parser().parse_args(argv))
    assert seen["side_by_side"] is expected
