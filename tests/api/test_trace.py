"""The load-once API: ``traceforge.load(path)`` reads a trace once, and each of its methods
returns what the path-level function of the same name returns for the file."""

from __future__ import annotations

import gzip
import re

import pandas as pd
import pytest

import traceforge
from tests.conftest import ROOT, TRACES
from traceforge.api.files import DERIVED

SAMPLE = ROOT / "samples" / "train_step.json.gz"


def _same(a, b) -> None:
    if isinstance(a, pd.DataFrame):
        pd.testing.assert_frame_equal(a.reset_index(drop=True), b.reset_index(drop=True))
        assert a.attrs == b.attrs
    else:  # a dataclass of DataFrames
        for name, frame in a.tables().items() if hasattr(a, "tables") else vars(a).items():
            other = b.tables()[name] if hasattr(b, "tables") else getattr(b, name)
            _same(frame, other) if isinstance(frame, pd.DataFrame) else None


def _check_every_method(path: str, op: str | None) -> None:
    trace = traceforge.load(path)
    _same(trace.queue_length(), traceforge.queue_length(path))
    _same(trace.memcpy_bandwidth(), traceforge.memcpy_bandwidth(path))
    _same(trace.launch_stats(), traceforge.launch_stats(path))
    _same(trace.classify(), traceforge.classify(path))
    _same(trace.classify(rules="hta"), traceforge.classify(path, rules="hta"))
    _same(trace.classify_kernels(), traceforge.classify_kernels(path))
    _same(trace.patterns(), traceforge.patterns(path))
    if op is not None:
        _same(trace.patterns(op), traceforge.patterns(path, op))
        _same(trace.patterns(op, nested=True, top_k=2), traceforge.patterns(path, op, nested=True, top_k=2))
    _same(trace.stats(), traceforge.stats(path))
    _same(trace.counters(), traceforge.counters(path))
    _same(trace.diff(trace), traceforge.diff(path, path))
    _same(trace.table("queue_length"), traceforge.queue_length(path))
    for name in DERIVED:  # made from the features' declarations: the path function reads what the feature declares
        _same(getattr(trace, name)(), getattr(traceforge, name)(path))
        _same(trace.table(name), traceforge.table(path, name))
    _same_critical_path(trace, path)
    assert trace.info() == traceforge.trace_info(path)


def _same_critical_path(trace, path: str) -> None:
    """``critical_path`` (also of the whole trace): equal results, or the same error where the
    trace has no ProfilerStep#N."""
    for kwargs in ({}, {"annotation": ""}):
        try:
            expected = traceforge.critical_path(path, **kwargs)
        except ValueError as e:
            with pytest.raises(ValueError, match=re.escape(str(e))):
                trace.critical_path(**kwargs)
            continue
        got = trace.critical_path(**kwargs)
        _same(got, expected)
        assert got.has_syncs == expected.has_syncs and got.metadata == expected.metadata


@pytest.mark.slow
def test_every_method_equals_its_path_function_on_the_sample():
    _check_every_method(str(SAMPLE), "aten::addmm")


@pytest.mark.parametrize("name, op", [("df_index", "aten::addmm"), ("negative_queue", None), ("nccl", None),
                                      ("cupti", None), ("amd", None)])
def test_every_method_equals_its_path_function_on_real_traces(name, op):
    _check_every_method(str(TRACES[name]), op)


def test_features_without_a_hand_written_function_have_one_made_from_their_declaration():
    assert sorted(DERIVED) == ["exposed_comm", "idle_gaps", "memory"]
    assert set(DERIVED) <= set(traceforge.__all__) and all(hasattr(traceforge.Trace, name) for name in DERIVED)
    gaps = traceforge.idle_gaps(str(SAMPLE), idle_gaps_min="1us")
    assert len(gaps) > len(traceforge.idle_gaps(str(SAMPLE))) > 0  # the declared option, its declared default
    assert set(gaps["category"]) == {"host_wait", "kernel_wait", "other"}  # host wait reads the joined launch calls


def test_the_stack_analyses_can_read_the_spilled_cpu_ops_again():
    trace = traceforge.load(str(SAMPLE))
    first = trace.launch_stats()
    _same(trace.patterns("aten::addmm"), traceforge.patterns(str(SAMPLE), "aten::addmm"))
    _same(trace.launch_stats(), first)


def test_a_directory_is_one_trace_per_rank(tmp_path):
    data = gzip.decompress(SAMPLE.read_bytes())
    for rank in (0, 1):  # the sample is rank 0 of 2 (distributedInfo)
        (tmp_path / f"rank{rank}.json").write_bytes(data.replace(b'"rank": 0', b'"rank": %d' % rank, 1))
    ranks = traceforge.load(tmp_path)
    assert isinstance(ranks, traceforge.Traces) and len(ranks) == 2
    one = traceforge.load(SAMPLE).queue_length()
    both = ranks.queue_length()
    assert list(both.columns) == ["rank", *one.columns] and len(both) == 2 * len(one)
    _same(both[both["rank"] == 1].drop(columns="rank"), one)
    _same(ranks.stats(), traceforge.stats([str(tmp_path / "rank0.json"), str(tmp_path / "rank1.json")]))


def test_the_api_raises_standard_exceptions_without_cli_flags(tmp_path):
    with pytest.raises(FileNotFoundError, match="no_such.json"):
        traceforge.load(tmp_path / "no_such.json")
    trace = traceforge.load(SAMPLE)
    for call in (lambda: trace.patterns(top_k=0), lambda: trace.patterns("aten::addmm", op_regex="x"),
                 lambda: trace.counters(ncu_skip=-1), lambda: trace.classify(rules="no-such-preset"),
                 lambda: trace.table("no_such_analysis")):
        with pytest.raises(ValueError) as raised:
            call()
        assert "--" not in str(raised.value), str(raised.value)
