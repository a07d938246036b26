"""annotate's GPU-side analyses in a second thread beside the CPU-side ones: the same bytes
as one at a time, and only where memory and the cores allow it."""

from __future__ import annotations

import argparse
import gzip
import importlib

import pytest

from traceforge.commands import annotate as annotate_command

from .conftest import TRACES

annotate_module = importlib.import_module("traceforge.annotate")


def _annotated(path, out, side_by_side: bool, monkeypatch) -> tuple[bytes, list[bool]]:
    """``--all`` on ``path``; the bytes written, and whether the analyses ran side by side."""
    decided = []
    real = annotate_module._side_by_side
    monkeypatch.setattr(annotate_module, "_side_by_side", lambda *a: decided.append(real(*a)) or decided[-1])
    annotate_module.annotate(str(path), str(out), all=True, options={"side_by_side": side_by_side})
    return gzip.open(out).read(), decided


@pytest.mark.parametrize("name", ["df_index", "negative_queue", "nccl", "trace_diff"])
def test_side_by_side_writes_what_one_at_a_time_writes(tmp_path, monkeypatch, name):
    monkeypatch.setattr(annotate_module, "SIDE_BY_SIDE_BUDGET", 1 << 50)
    paired, decided = _annotated(TRACES[name], tmp_path / "a.json.gz", True, monkeypatch)
    assert decided == [True]
    alone, decided = _annotated(TRACES[name], tmp_path / "b.json.gz", False, monkeypatch)
    assert decided == [False]
    assert paired == alone


def test_side_by_side_only_under_the_memory_budget(tmp_path, monkeypatch):
    monkeypatch.setattr(annotate_module, "SIDE_BY_SIDE_BUDGET", annotate_module.current_rss())  # already over
    _, decided = _annotated(TRACES["df_index"], tmp_path / "a.json.gz", True, monkeypatch)
    assert decided == [False]


def test_current_rss_is_this_process():
    before = annotate_module.current_rss()
    held = bytearray(b"x" * (64 << 20))
    assert annotate_module.current_rss() - before >= 60 << 20
    del held


@pytest.mark.parametrize("jobs, cluster, expected", [(None, None, False), (2, None, False), (1, None, True),
                                                     (None, "tcp://head:8786", False)])
def test_ranks_run_side_by_side_only_one_at_a_time(monkeypatch, jobs, cluster, expected):
    seen = {}

    def fake(path, out, *, analyses, options):
        seen.update(options)
        return annotate_module.AnnotateResult(out or "x", 0)

    monkeypatch.setattr(annotate_command, "annotate", fake)
    args = argparse.Namespace(input="t.json", output=None, all=True, jobs=jobs, cluster=cluster, quiet=True,
                              rank_figures=True, compression="fast", func=None, command="annotate",
                              **{name: False for name in annotate_module.ANALYSES})
    annotate_command.annotate_one(args)
    assert seen["side_by_side"] is expected
