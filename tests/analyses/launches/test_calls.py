"""A launch call is the runtime or driver event whose correlation id a GPU op has, whatever it
is called: the same trace with its launch calls renamed (a suffix no name list knows) gives the
same launch-delay table, queue length and annotate output (args, arrows, counters)."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import numpy as np
import pytest

import traceforge
from tests.conftest import SAMPLE, raw_json, run_cli
from traceforge.analyses.launches.calls import STREAM_LAUNCH_APIS
from traceforge.analyses.launches.delay import HTA_LAUNCH_STATS_APIS

SUFFIX = "_new"  # neither a CUPTI version nor a stream suffix (``launches.api_name`` strips those)
_LAUNCH_NAME = re.compile(rb'"(' + b"|".join(re.escape(a.encode()) for a in sorted(STREAM_LAUNCH_APIS, key=len,
                                                                                  reverse=True)) + rb')"')


def renamed(src: Path, out: Path) -> int:
    """``src`` with every stream launch API's name written with ``SUFFIX``; how many were renamed."""
    data = raw_json(src)
    assert SUFFIX.encode() + b'"' not in data
    text, n = _LAUNCH_NAME.subn(lambda m: b'"' + m.group(1) + SUFFIX.encode() + b'"', data)
    out.write_bytes(gzip.compress(text, 1))
    return n


def _undone(path: Path) -> bytes:
    return re.sub(rb'"([A-Za-z0-9]+)' + re.escape(SUFFIX.encode()) + rb'"', rb'"\1"', raw_json(path))


@pytest.fixture(params=[SAMPLE, "ns_resolution", "h100_cudagraph", "h100_resnet50"])
def traces(request, trace_path, tmp_path) -> tuple[Path, Path]:
    """(a trace, the same with its launch calls renamed)."""
    src = Path(trace_path(request.param))
    out = tmp_path / "renamed.json.gz"
    assert renamed(src, out) > 50
    return src, out


def test_launch_delay_table_is_the_same(traces):
    src, out = traces
    before, after = traceforge.launch_stats(str(src)), traceforge.launch_stats(str(out))
    assert len(before) > 50
    assert (after["api"] == before["api"] + SUFFIX).all()
    assert after.drop(columns="api").equals(before.drop(columns="api"))


def test_queue_length_is_the_same(traces):
    src, out = traces
    before = traceforge.queue_length(str(src))
    assert len(before) > 50 and before.equals(traceforge.queue_length(str(out)))
    loaded = traceforge.load(str(out))
    assert loaded.queue_length().equals(before)
    assert loaded.launch_stats().drop(columns="api").equals(traceforge.load(str(src)).launch_stats().drop(columns="api"))


def test_annotate_adds_the_same_args_arrows_and_counters(traces, tmp_path):
    """``--launch-delay --queue-length`` (and ``--all``): the outputs differ only by the names."""
    src, out = traces
    for flags in (("--launch-delay", "--queue-length"), ("--all",)):
        a, b = tmp_path / "a.json", tmp_path / "b.json"
        for path, target in ((src, a), (out, b)):
            r = run_cli("annotate", str(path), *flags, "-o", str(target))
            assert r.returncode == 0, r.stderr.decode()[-2000:]
        original = raw_json(a)
        assert b'"launch_delay_us"' in original and b'"Queue length' in original
        assert original.count(b'"cat":"launch_delay"') > 20  # arrows drawn
        assert _undone(b) == original, flags


def test_hta_sets_stay_by_name(trace_path, tmp_path):
    """Where HTA's choices are asked for (``apis``), calls by other names are not launches."""
    src = Path(trace_path(SAMPLE))
    out = tmp_path / "renamed.json.gz"
    renamed(src, out)
    assert len(traceforge.launch_stats(str(src), apis=HTA_LAUNCH_STATS_APIS)) > 50
    assert len(traceforge.launch_stats(str(out), apis=HTA_LAUNCH_STATS_APIS)) == 0


def test_a_call_no_gpu_op_joins_is_no_launch(trace_path):
    """Runtime calls with a correlation id but no GPU op (syncs, event records) put no work on a stream."""
    from traceforge.analyses.launches.calls import stream_launch_mask
    from traceforge.columns.scan import scan

    cols = scan(str(trace_path(SAMPLE)))
    mask = stream_launch_mask(cols)
    joined = np.isin(cols.launches.correlation, cols.gpu.correlation) & (cols.launches.correlation >= 0)
    assert np.array_equal(mask, joined) and 0 < mask.sum() < len(mask)
