"""traceforge check: predictions of what Perfetto's JSON importer drops, moves or mis-renders."""

from __future__ import annotations

import importlib
import json
import random
import time

import numpy as np
import orjson
import pytest

from tests.conftest import SAMPLE, TRACES, raw_json, run_cli
from traceforge.perfetto import check_trace


def _write(tmp_path, events, name="t.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps({"traceEvents": events}))
    return str(path)


def _x(name, ts, dur, pid=1, tid=1, cat="cpu_op", **kw) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, **kw}


def _flow(ph, fid, ts, pid=1, tid=1, **kw) -> dict:
    return {"ph": ph, "cat": "ac2g", "name": "ac2g", "id": fid, "pid": pid, "tid": tid, "ts": ts, **kw}


def _counter(ts, args, **kw) -> dict:
    return {"ph": "C", "name": "Queue length", "pid": 1, "ts": ts, "args": args, **kw}


def _check(tmp_path, events):
    return check_trace(_write(tmp_path, events))


# -- a clean trace -------------------------------------------------------------------------

CLEAN = [
    {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python"}},
    {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "main"}},
    _x("step", 0, 100),
    _x("aten::mm", 10, 20),
    _x("cudaLaunchKernel", 12, 5, cat="cuda_runtime"),
    _flow("s", 1, 12),
    _x("aten::add", 30, 10),  # starts where aten::mm ends: [start, end) intervals do not overlap
    _x("zero", 35, 0),
    _x("sgemm", 40, 30, pid=0, tid=7, cat="kernel"),
    _flow("f", 1, 40, pid=0, tid=7, bp="e"),
    {"ph": "i", "s": "t", "name": "mark", "pid": 1, "tid": 1, "ts": 50},
    {"ph": "i", "s": "g", "name": "global", "ts": 50},
    _counter(0, {"stream 7": 1}),
    _counter(5, {"stream 7": 0}),
    {"ph": "B", "name": "region", "pid": 1, "tid": 2, "ts": 0},
    {"ph": "E", "pid": 1, "tid": 2, "ts": 20},
]


def test_clean_trace_reports_nothing(tmp_path):
    report = _check(tmp_path, CLEAN)
    assert report.stats == {} and report.warnings == {}
    assert report.losses == 0 and report.exit_code == 0
    assert report.events == len(CLEAN)
    r = run_cli("check", _write(tmp_path, CLEAN))
    assert r.returncode == 0, r.stdout + r.stderr
    assert b"without loss" in r.stdout


# -- one small trace per rule --------------------------------------------------------------

CASES = {
    "negative dur": ([_x("a", 0, -5)], "slice_negative_duration", 1),
    "partial overlap": ([_x("a", 0, 10), _x("b", 5, 10)], "slice_spill_overlapping_complete_event", 1),
    "overlap in file order reversed": ([_x("b", 5, 10), _x("a", 0, 10)], "slice_spill_overlapping_complete_event", 1),
    "nested deeper overlap": ([_x("a", 0, 100), _x("b", 10, 20), _x("c", 25, 10)],
                              "slice_spill_overlapping_complete_event", 1),
    "depth 513": ([_x(f"d{i}", i, 10_000 - 2 * i) for i in range(513)], "slice_max_depth_exceeded", 1),
    "negative ts": ([_x("a", -3, 1)], "trace_sorter_negative_timestamp_dropped", 1),
    "X without dur": ([{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 0}], "json_parser_failure", 1),
    "misplaced end": ([_x("parent", 0, 10), {"ph": "B", "name": "open", "pid": 1, "tid": 1, "ts": 2},
                       _x("next", 12, 1)], "misplaced_end_event", 1),
    "duplicate flow id": ([_x("a", 0, 10), _flow("s", 5, 1), _flow("s", 5, 2)], "flow_duplicate_id", 1),
    "flow without enclosing slice": ([_flow("s", 5, 1, tid=9)], "flow_no_enclosing_slice", 1),
    "flow end without start": ([_x("k", 0, 10), _flow("f", 5, 1, bp="e")], "flow_end_without_start", 1),
    "flow end before its start": ([_x("k", 0, 10), _x("l", 20, 10), _flow("f", 5, 1, bp="e"), _flow("s", 5, 21)],
                                  "flow_end_without_start", 1),
    "flow step without start": ([_x("k", 0, 10), _flow("t", 5, 1)], "flow_step_without_start", 1),
    "flow invalid id": ([_x("k", 0, 10), _flow("s", "not hex", 1)], "flow_invalid_id", 1),
    "flow without direction": ([_x("k", 0, 10, bind_id=2**40)], "flow_without_direction", 1),
    "f without bp nor s": ([_flow("f", 5, 1), _x("k", 2, 10)], "flow_end_from_slice_0", 1),
    "counter with two keys": ([_counter(0, {"a": 1, "b": 2})], "counter_multiple_keys", 1),
    "numeric counter id": ([_counter(0, {"stream": 1}, id=7), _counter(0, {"stream": 2}, id=8)],
                           "counter_id_not_string", 2),
    "non-numeric counter value": ([_counter(0, {"a": "many"})], "json_parser_failure", 1),
    "counter args not an object": ([_counter(0, [1, 2])], "json_parser_failure", 1),
    "thread instant without tid": ([{"ph": "i", "name": "a", "pid": 1, "ts": 0}], "json_parser_failure", 1),
    "null dur": ([_x("a", 0, None)], "json_tokenizer_failure", 1),
    "no ts": ([{"ph": "X", "name": "a", "pid": 1, "tid": 1, "dur": 1}], "json_tokenizer_failure", 1),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_rule_is_predicted(case, tmp_path):
    events, stat, count = CASES[case]
    report = _check(tmp_path, events)
    assert report.stats == {stat: count}, report.stats
    assert report.exit_code == (2 if stat == "json_tokenizer_failure" else 1)
    assert len(report.examples[stat]) == min(count, 3)


def test_different_threads_do_not_overlap(tmp_path):
    assert _check(tmp_path, [_x("a", 0, 10), _x("b", 5, 10, tid=2)]).stats == {}


def test_negative_tid_merges_onto_main_thread(tmp_path):
    report = _check(tmp_path, [_x("a", 0, 10, pid=7, tid=7), _x("b", 5, 10, pid=7, tid=-123)])
    assert report.stats == {"slice_spill_overlapping_complete_event": 1}
    assert report.breakdown["slice_spill_overlapping_complete_event"] == {"merged thread ids": 1}
    assert report.warnings == {"pid_tid_out_of_range": 1}


def test_float_rounding_overlap_is_reported_and_explained(tmp_path):
    # Adjacent in exact ns; Perfetto's double rounds a up by 45 ns and b up by 44 ns.
    a = '{"ph":"X","name":"a","pid":1,"tid":1,"ts":1712195495888728.531,"dur":0.257}'
    b = '{"ph":"X","name":"b","pid":1,"tid":1,"ts":1712195495888728.788,"dur":1}'
    path = tmp_path / "epoch.json"
    path.write_text(f'{{"traceEvents":[{a},{b}]}}')
    report = check_trace(str(path))
    assert report.stats == {"slice_spill_overlapping_complete_event": 1}
    assert report.breakdown["slice_spill_overlapping_complete_event"] == {"float rounding": 1}
    assert "--rebase-time" in report.examples["slice_spill_overlapping_complete_event"][0].note
    small_a, small_b = (event.replace("1712195495888728.", "28.") for event in (a, b))
    rebased = tmp_path / "rebased.json"
    rebased.write_text(f'{{"traceEvents":[{small_a},{small_b}]}}')
    assert check_trace(str(rebased)).stats == {}


def test_nan_is_fatal(tmp_path):
    path = tmp_path / "nan.json"
    path.write_text('{"traceEvents":[{"ph":"C","name":"q","pid":1,"ts":0,"args":{"v":NaN}}]}')
    report = check_trace(str(path))
    assert report.stats == {"json_syntax_error": 1} and report.exit_code == 2
    r = run_cli("check", str(path))
    assert r.returncode == 2, r.stdout + r.stderr
    assert b"json_syntax_error" in r.stdout


@pytest.mark.slow
def test_stdin(tmp_path):
    r = run_cli("check", "-", stdin=json.dumps({"traceEvents": [_x("a", 0, 10), _x("b", 5, 10)]}).encode())
    assert r.returncode == 1 and b"slice_spill_overlapping_complete_event 1:" in r.stdout


def test_unreadable_file_is_an_error_not_a_verdict(tmp_path):
    r = run_cli("check", str(tmp_path / "missing.json"))
    assert r.returncode == 1 and b"cannot read" in r.stderr


def test_kineto_quirks_are_warnings(tmp_path):
    events = [
        _x("k", 0, 0, pid=0, tid=7, cat="kernel"),
        _x("__missing__", 5, 1, pid=0, tid=7, cat="kernel"),
        _x("bad\u0001name", 10, 1),
        _x("big", 20, 1, tid=2**33),
    ]
    report = _check(tmp_path, events)
    assert report.stats == {} and report.exit_code == 0
    assert report.warnings == {"gpu_zero_or_negative_duration": 1, "missing_name": 1,
                               "control_characters": 1, "pid_tid_out_of_range": 1}


def test_cli_json_and_max_examples(tmp_path):
    path = _write(tmp_path, [_x("k", 0, 10)] + [_flow("f", i, 1, bp="e") for i in range(5)])
    r = run_cli("check", path, "--format", "json", "--max-examples", "2")
    assert r.returncode == 1, r.stderr
    doc = orjson.loads(r.stdout)
    assert doc["stats"] == {"flow_end_without_start": 5} and doc["exit_code"] == 1 and doc["losses"] == 5
    (problem,) = [p for p in doc["problems"] if p["name"] == "flow_end_without_start"]
    assert len(problem["examples"]) == 2 and problem["examples"][0]["ordinal"] == 1
    text = run_cli("check", path).stdout.decode()
    # the header; the problem's count, explanation, 3 examples (one line each) and (2 lines) that the same
    # ends are dangling_flow_end, not listed again as a warning; the verdict
    assert "flow_end_without_start 5:" in text and text.count("\n") == 1 + (1 + 1 + 3 + 2) + 1
    assert "of these, 5 are dangling_flow_end" in text and "WARNING" not in text
    assert max(map(len, text.replace(path, "PATH").splitlines())) <= 100


# -- real traces ---------------------------------------------------------------------------

def test_negative_queue_trace_matches_perfetto():
    """Perfetto's own stats on this trace: 25 spilled slices, 28,196 f without s."""
    report = check_trace(str(TRACES["negative_queue"]))
    assert report.stats == {"slice_spill_overlapping_complete_event": 25, "flow_end_without_start": 28196,
                            "flow_bound_to_other_slice": 2}  # two ac2g arrows inside spilled launch calls
    assert report.breakdown["slice_spill_overlapping_complete_event"]["merged thread ids"] == 24
    assert report.exit_code == 1


def test_cupti_trace_flow_ends_without_start():
    doc = json.loads(raw_json(TRACES["cupti"]))["traceEvents"]
    starts = {(e["id"], e["cat"], e["name"]) for e in doc if e.get("ph") == "s"}
    dangling = sum((e["id"], e["cat"], e["name"]) not in starts for e in doc if e.get("ph") == "f")
    assert dangling > 0
    report = check_trace(str(TRACES["cupti"]))
    assert report.warnings["dangling_flow_end"] == dangling
    assert report.stats["flow_end_without_start"] == dangling


def test_large_trace_streams_in_seconds():
    started = time.process_time()
    report = check_trace(str(TRACES["df_index"]))
    assert report.events == 216_092
    assert time.process_time() - started < 10


# -- our own output ------------------------------------------------------------------------

def _synthetic_kineto(n_kernels: int = 6) -> list[dict]:
    events = [
        {"ph": "M", "name": "process_name", "pid": 10, "tid": 0, "args": {"name": "python"}},
        {"ph": "M", "name": "thread_name", "pid": 10, "tid": 10, "args": {"name": "main"}},
        {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "GPU 0"}},
        {"ph": "M", "name": "thread_name", "pid": 0, "tid": 7, "args": {"name": "stream 7"}},
        _x("ProfilerStep#1", 1000, 1000, pid=10, tid=10, cat="user_annotation"),
    ]
    for i in range(n_kernels):
        launch, start, corr = 1010 + 40 * i, 1100 + 100 * i, 100 + i
        args = {"device": 0, "stream": 7, "correlation": corr}
        events += [
            _x("aten::mm", launch - 5, 30, pid=10, tid=10),
            _x("cudaLaunchKernel", launch, 10, pid=10, tid=10, cat="cuda_runtime", args={"correlation": corr}),
            _flow("s", corr, launch, pid=10, tid=10),
            _x(f"kernel_{i % 2}", start, 60, pid=0, tid=7, cat="kernel", args=args),
            _flow("f", corr, start, pid=0, tid=7, bp="e"),
        ]
    corr, launch, start = 200, 1010 + 40 * n_kernels, 1100 + 100 * n_kernels
    events += [
        _x("cudaMemcpyAsync", launch, 10, pid=10, tid=10, cat="cuda_runtime", args={"correlation": corr}),
        _flow("s", corr, launch, pid=10, tid=10),
        _x("Memcpy HtoD (Pinned -> Device)", start, 50, pid=0, tid=7, cat="gpu_memcpy",
           args={"device": 0, "stream": 7, "correlation": corr, "bytes": 1 << 20}),
        _flow("f", corr, start, pid=0, tid=7, bp="e"),
    ]
    return events


def test_annotated_clean_trace_passes(tmp_path):
    src = _write(tmp_path, _synthetic_kineto())
    assert check_trace(src).exit_code == 0
    out = tmp_path / "out.json"
    r = run_cli("annotate", src, "--all", "-o", str(out))
    assert r.returncode == 0, r.stderr
    report = check_trace(str(out))
    assert (report.stats, report.warnings) == ({}, {}), report.examples


@pytest.mark.parametrize("name", [SAMPLE, *sorted(TRACES)])
def test_annotate_adds_no_problems(name, trace_path, annotated_all):
    out = annotated_all(name)  # annotate --all
    before, after = check_trace(str(trace_path(name))), check_trace(str(out))
    for counts_before, counts_after in ((before.stats, after.stats), (before.warnings, after.warnings)):
        worse = {k: (counts_before.get(k, 0), n) for k, n in counts_after.items() if n > counts_before.get(k, 0)}
        assert not worse, (worse, after.examples)


# -- rows without a parser agree with the parser -------------------------------------------

def _odd_and_plain_events(seed: int, n: int) -> list[str]:
    """Event texts: mostly plain slices and flows on a few threads (nested, overlapping,
    tied), and every form a rule looks at: times as ints, 1-4 decimals, "5.000", text,
    exponents, null, negatives; dur keys without a number; odd pids/tids and names; flow
    ids as ints, hex text and floats; bp other than "e"; bind_id; instants, counters, async,
    metadata; escaped and unknown keys."""
    r = random.Random(seed)
    times = ["{:.0f}", "{:.3f}", "{:.1f}", "{:.2f}", "{:.4f}", "{:.0f}.000", '"{:.0f}"', "1e3", "null", "-{:.0f}"]
    base = r.choice([100.0, 1712195495519000.0])
    out = []
    for i in range(n):
        t = base + i // 3 + r.choice([0, 0.5, 0.001, 2.25])
        ts = r.choice(times[:3] if r.random() < 0.9 else times)
        dur = r.choice(["0", "1", "2.5", "10", "0.000", "-1", "null", '"x"', "100"])
        tid = r.choice(["1", "2", '"stream 7"', "-5", str(2**40), ""])
        tid_member = f'"tid": {tid}, ' if tid else ""
        name = r.choice(['"a"', '"b"', '"k__missing__"', '""', "3", '"E\\u0041"'])
        cat = r.choice(['"kernel"', '"Kernel"', '"cpu_op"', '"ac2g"', '""', "7"])
        common = f'"pid": 1, {tid_member}"ts": {ts.format(t) if "{" in ts else ts}, "name": {name}, "cat": {cat}'
        kind = r.random()
        if kind < 0.6:
            extra = r.choice(["", "", ', "bind_id": 3, "flow_out": true', ', "args": {"x": [1, 2]}', ', "t\\u0073": 1'])
            out.append(f'{{"ph": "X", {common}, "dur": {dur}{extra}}}')
        elif kind < 0.8:
            ph = r.choice("sftf")
            fid = r.choice(["1", "2", "7", '"0x2"', '"zz"', "1.5", "-3"])
            bp = r.choice(["", ', "bp": "e"', ', "bp": "e"', ', "bp": "s"'])
            out.append(f'{{"ph": "{ph}", {common}, "id": {fid}{bp}}}')
        elif kind < 0.88:
            out.append(f'{{"ph": "{r.choice("BE")}", {common}}}')
        else:
            ph = r.choice(["i", "I", "C", "C", "C", "b", "M", "P", "", "Xy"])
            tail = r.choice(['', ', "s": "t"', ', "s": "g"', ', "args": {"v": 1}', ', "args": {"a": 1, "b": 2}',
                             ', "args": {"v": "2"}', ', "args": {"v": 1}, "id": 4', ', "args": {"v": 1}, "id": "x"'])
            out.append(f'{{"ph": "{ph}", {common}{tail}}}')
    return out


def _report_fields(report) -> tuple:
    return report.stats, report.warnings, report.breakdown, report.examples, report.exit_code


def _without_rows(monkeypatch):
    """Make ``check`` parse every event, as it did before it read plain events from rows."""
    module = importlib.import_module("traceforge.perfetto.collect")
    monkeypatch.setattr(module._Collector, "plain",
                        lambda self, rows: (np.zeros(len(rows), bool), None, np.zeros(0, np.int64)))


@pytest.mark.parametrize("seed", range(8))
def test_plain_rows_and_the_parser_agree_on_odd_events(seed, tmp_path, monkeypatch):
    path = tmp_path / "t.json"
    path.write_text('{"traceEvents": [\n' + ",\n".join(_odd_and_plain_events(seed, 3000)) + "\n]}")
    fast = check_trace(str(path), max_examples=10)
    assert fast.stats.get("slice_spill_overlapping_complete_event") and fast.warnings.get("pid_tid_out_of_range")
    _without_rows(monkeypatch)
    assert _report_fields(check_trace(str(path), max_examples=10)) == _report_fields(fast)


@pytest.mark.parametrize("name", [SAMPLE, "nccl", "ns_resolution", "cupti", "trace_diff"])
def test_plain_rows_and_the_parser_agree_on_real_traces(name, monkeypatch, trace_path):
    fast = check_trace(str(trace_path(name)), max_examples=10)
    _without_rows(monkeypatch)
    assert _report_fields(check_trace(str(trace_path(name)), max_examples=10)) == _report_fields(fast)


def _replays(path, max_rows=None, max_examples=10) -> tuple[tuple, tuple]:
    """The reports of the C walk (over windows of ``max_rows`` rows) and of the Python
    reference (every row in memory) on the same trace."""
    from tests.support.replay_reference import Columns
    from tests.support.replay_reference import replay as reference
    from traceforge.perfetto.replay import replay
    from traceforge.perfetto.report import CheckReport, Findings

    reports = []
    for walk in (lambda c, f: replay(c, f, max_rows), lambda c, f: reference(Columns.of(c), f)):
        findings = Findings(max_examples)
        walk(_collected(path), findings)
        reports.append(_report_fields(CheckReport.from_findings("t", 0, findings, 0.0)))
    return reports[0], reports[1]


def _collected(path) -> object:
    from traceforge.io.read.reader import TraceReader
    from traceforge.perfetto.report import Findings

    return importlib.import_module("traceforge.perfetto.collect").collect(TraceReader(str(path)), Findings(3))


@pytest.mark.parametrize("seed", range(8))
def test_the_c_walk_replays_as_the_python_reference_on_odd_events(seed, tmp_path):
    path = tmp_path / "t.json"
    path.write_text('{"traceEvents": [\n' + ",\n".join(_odd_and_plain_events(100 + seed, 4000)) + "\n]}")
    c_walk, reference = _replays(path)
    assert c_walk[0].get("slice_spill_overlapping_complete_event") and c_walk[0].get("flow_duplicate_id")
    assert c_walk == reference
    assert _replays(path, max_rows=97)[0] == reference  # ~40 windows: the walk's state carries over


def test_the_c_walk_replays_as_the_python_reference_on_deep_and_unbalanced_stacks(tmp_path):
    events = [_x(f"d{i}", i, 10_000 - 2 * i) for i in range(600)]  # past the depth limit
    events += [{"ph": "B", "name": f"b{i % 3}", "pid": 1, "tid": 2, "ts": 20_000 + i} for i in range(40)]
    events += [{"ph": "E", "name": f"b{i % 2}", "pid": 1, "tid": 2, "ts": 20_050 + i} for i in range(30)]
    events += [_x("inner", 20_010, 500, tid=2), _x("late", 21_000, 5, tid=2)]
    events += [_x("k", 0, 10, tid=3, bind_id=2**63 + 5, flow_out=True), _x("l", 20, 10, tid=3, bind_id=2**63 + 5,
               flow_in=True), _x("m", 40, 10, tid=3, bind_id=0, flow_in=True, flow_out=True)]
    path = _write(tmp_path, events)
    c_walk, reference = _replays(path)
    assert c_walk[0].get("slice_max_depth_exceeded") and c_walk[0].get("misplaced_end_event")
    assert c_walk == reference
    assert _replays(path, max_rows=50)[0] == reference


@pytest.mark.parametrize("name", [SAMPLE, "negative_queue", "nccl", "ns_resolution", "trace_diff"])
def test_the_c_walk_replays_as_the_python_reference_on_real_traces(name, monkeypatch, trace_path):
    import traceforge.columns.windows

    c_walk, reference = _replays(trace_path(name))
    assert c_walk == reference
    small = name == SAMPLE  # 1,135 events: smaller windows and blocks, so there are several
    monkeypatch.setattr(traceforge.columns.windows, "BLOCK", 100 if small else 2000)  # windows gathered by reading blocks again
    assert _replays(trace_path(name), max_rows=250 if small else 5000)[0] == reference


@pytest.mark.parametrize("ids", ["small", "spanning 64 bits"])
def test_flow_keys_over_any_id_range(ids, tmp_path, monkeypatch):
    """Flow keys are packed from the ids' range, or from their ranks where the range is too
    wide (ids from both ends of 64 bits): either way each (id, cat, name) is one flow."""
    from traceforge.perfetto.flow_keys import FlowKeys

    first = 5 if ids == "small" else 2**63 - 40
    fids = [first + i if i % 2 else (first + i) % 2**64 ^ (2**63 if ids != "small" else 0) for i in range(60)]
    events = [_x("k", 0, 10_000, tid=t) for t in (1, 2)]
    for i, fid in enumerate(fids):
        cat = "ac2g" if i % 3 else "fwdbwd"
        events.append({**_flow("s", hex(fid), 10 + i, tid=1), "cat": cat})
        if i % 4:
            events.append({**_flow("f", hex(fid), 20 + i, tid=2, bp="e"), "cat": cat})
        if i % 5 == 0:  # an end whose id no s has
            events.append({**_flow("f", hex((fid + 1000) % 2**64), 30 + i, tid=2, bp="e"), "cat": cat})
    events.append({**_flow("s", hex(fids[7]), 100, tid=1), "cat": "ac2g"})  # a duplicate start
    path = _write(tmp_path, events)
    keys = FlowKeys.of(_collected(path))
    assert keys.count == 72 and (keys._ids is None) == (ids == "small")
    c_walk, reference = _replays(path)
    assert c_walk == reference and _replays(path, max_rows=20)[0] == reference
    assert c_walk[0] == {"flow_duplicate_id": 1, "flow_end_without_start": 12}
    assert c_walk[1] == {"dangling_flow_end": 12}
