"""Queue length and memcpy bandwidth: HTA's numbers where definitions match, exactness, sanity."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import orjson
import pytest

from tests.conftest import SAMPLE, TRACES, raw_json, run_cli
from traceforge.analyses.launches.calls import HTA_QUEUE_APIS, last_step_start
from traceforge.analyses.launches.queue_length import queue_length
from traceforge.analyses.memory.memcpy_bw import RATE_SCALE, copy_rows, memcpy_bandwidth
from traceforge.util.exacttime import to_ns


def _stream(df, stream):
    return df[df.stream == stream].queue_length.to_numpy()


def test_queue_length_matches_hta_on_its_own_terms(columns):
    """HTA leaves graph launches out and drops the last profiler step: so do we, here only."""
    cols = columns("negative_queue")
    df = queue_length(cols, launched_before_ns=last_step_start(cols), apis=HTA_QUEUE_APIS)
    s7 = _stream(df, 7)
    assert s7.min() == 0 and s7.max() == 946  # HTA: 0 / 946
    # HTA's 9,680 points count duplicate rows at equal ts; we net them into one point each.
    assert len(s7) == 9576
    cols = columns("df_index")
    df = queue_length(cols, launched_before_ns=last_step_start(cols), apis=HTA_QUEUE_APIS)
    assert (_stream(df, 7).max(), round(_stream(df, 7).mean(), 1)) == (73, 8.1)  # HTA: 73, 8.1
    assert (_stream(df, 14).max(), round(_stream(df, 14).mean(), 1)) == (20, 2.1)  # HTA: 20, 2.1
    cols = columns("trace_diff")
    df = queue_length(cols, launched_before_ns=last_step_start(cols), apis=HTA_QUEUE_APIS)
    assert _stream(df, 7).max() == 1013  # HTA: 1013


def test_queue_length_all_steps_and_graph_launches(columns):
    """Our default: every step kept and each graph-launched op counted (+N at the launch)."""
    df = queue_length(columns("negative_queue"))
    s7 = _stream(df, 7)
    assert (len(s7), s7.min(), s7.max()) == (12391, 0, 994)
    assert s7[-1] == 0
    df = queue_length(columns("trace_diff"))  # 12 cudaGraphLaunch of ~400 ops each
    assert _stream(df, 7).max() == 1338


@pytest.mark.parametrize("name", [SAMPLE, *sorted(TRACES)])
def test_queue_length_never_negative_and_one_point_per_ts(name, columns):
    df = queue_length(columns(name))
    assert (df.queue_length >= 0).all()
    assert not df.duplicated(["device", "stream", "ts"]).any()




@pytest.mark.parametrize("name", [SAMPLE, "nccl", "ns_resolution"])
def test_counter_ts_are_exact_event_ts(name, tmp_path, trace_path):
    """Fractional-µs traces: every counter ts we write is the exact text of an event's ts."""
    out = tmp_path / "out.json"
    assert run_cli("annotate", str(trace_path(name)), "--queue-length", "-o", str(out)).returncode == 0
    from traceforge.io.read.reader import TraceReader

    event_ts, counter_ts = set(), []
    for batch in TraceReader(str(out)).batches():
        for e in batch.events:
            if e.get("ph") == "C" and e.get("cat") == "traceforge":
                counter_ts.append(to_ns(e["ts"]))
            elif "ts" in e:
                event_ts.add(to_ns(e["ts"]))
    assert counter_ts and all(isinstance(t, int) for t in counter_ts)
    assert set(counter_ts) <= event_ts
    assert any(t % 1000 for t in counter_ts)  # the fraction survived


def test_memcpy_bandwidth_never_exceeds_active_copies(columns):
    """Brute force: at each point, the value is the exact sum of the active copies' rates (a copy's
    rate: Kineto's arg where its dur is a whole µs, as on this trace, else bytes/dur)."""
    cols = columns("trace_diff")
    df = memcpy_bandwidth(cols)
    rows, kinds = copy_rows(cols)
    gpu = cols.gpu
    start, end = gpu.ts[rows], gpu.ts[rows] + gpu.dur[rows]
    events = orjson.loads(raw_json(TRACES["trace_diff"]))["traceEvents"]
    rate = np.array([events[o]["args"]["memory bandwidth (GB/s)"] if d % 1000 == 0 else b / d
                     for o, b, d in zip(gpu.ordinal[rows].tolist(), gpu.bytes[rows].tolist(), gpu.dur[rows].tolist())])
    largest = {}
    for (device, kind), g in df.groupby(["device", "kind"]):
        mine = (gpu.device[rows] == device) & (kinds == kind)
        for ts, value, units in zip(g.ts.to_numpy(), g.gbps.to_numpy(), g.rate_units.to_numpy()):
            active = mine & (start <= ts) & (ts < end)
            brute = rate[active].sum()
            assert value <= brute + active.sum() * 0.5 / RATE_SCALE + 1e-12
            assert abs(value - brute) <= active.sum() * 0.5 / RATE_SCALE + 1e-12
            if not active.any():
                assert units == 0
        largest[kind] = g.gbps.max()
    assert largest["DtoD"] == pytest.approx(392.798, abs=1e-3)  # HTA's spike: 671.5


def test_memcpy_bandwidth_zero_duration_and_hta_maxima(columns):
    df = memcpy_bandwidth(columns("negative_queue"))
    assert df.gbps.ge(0).all() and np.isfinite(df.gbps).all()
    top = df.groupby("kind").gbps.max()
    # Whole-µs copies take Kineto's own rate (tests/analyses/memory/test_memcpy_bw.py), as HTA's do: the peaks agree.
    assert top["HtoD"] == pytest.approx(21.166, abs=0.001)  # HTA: 21.2
    assert top["DtoD"] == pytest.approx(865.162, abs=0.001)  # HTA: 865.2, a single 8 MB copy
    df = memcpy_bandwidth(columns("df_index"))
    assert df[df.kind == "DtoD"].gbps.max() == pytest.approx(384.821, abs=0.001)  # HTA: 384.8


def test_counter_events_follow_perfetto_rules(annotated_all):
    doc = orjson.loads(raw_json(annotated_all("negative_queue")))  # annotate --all
    counters = [e for e in doc["traceEvents"] if e.get("ph") == "C"]
    assert {e.get("cat") for e in counters} == {"traceforge"}  # the input has no counters
    tracks = {}
    for e in counters:
        assert "id" not in e
        assert len(e["args"]) == 1
        (key, value), = e["args"].items()
        assert isinstance(value, (int, float)) and np.isfinite(value)
        tracks.setdefault((e["pid"], f'{e["name"]} {key}'), []).append(e["ts"])
    names = {name for _, name in tracks}
    assert {"Queue length stream 7", "Memcpy HtoD GB/s", "Memcpy DtoD GB/s", "Memset GB/s"} <= names
    for ts in tracks.values():
        assert ts == sorted(ts) and len(ts) == len(set(ts))


def _imports_pandas(*args: str) -> bool:
    """Does ``traceforge ARGS`` (run in a fresh interpreter) import pandas?"""
    code = ("import sys; from traceforge.cli.main import main; rc = main(sys.argv[1:]); "
            "print('pandas' in sys.modules); sys.exit(rc)")
    run = subprocess.run([sys.executable, "-c", code, *args, "-q"], capture_output=True, text=True, timeout=600)
    imported = run.stdout.splitlines()[-1] if run.stdout else ""  # after the command's own output
    assert run.returncode in (0, 1) and imported in ("True", "False"), run.stderr  # check: 1 = findings
    return imported == "True"


def test_writing_tracks_never_imports_pandas(tmp_path):
    """Importing pandas is a large share of a command on a small trace (docs/benchmarks.md): only
    the commands that build tables import it, when they do."""
    trace, out = str(TRACES["df_index"]), str(tmp_path / "out.json.gz")
    assert not _imports_pandas("annotate", trace, "--all", "-o", out)  # mined patterns and counters too
    assert not _imports_pandas("check", out)
    assert _imports_pandas("classify", trace)  # its tables are DataFrames: the check above can fail
