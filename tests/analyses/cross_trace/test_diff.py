"""``diff``: CPU operators against a brute force over parsed events, per-step values on two
samples of different step counts, % change, ``--table``, and CSV that ``pandas.read_csv`` reads."""

from __future__ import annotations

import io
from collections import defaultdict
from decimal import Decimal
from fractions import Fraction

import orjson
import pandas as pd
import pytest

import traceforge
from tests.conftest import TRACES, raw_json, run_cli
from traceforge.analyses.cross_trace.diff import TABLES

CPU_CATS = {"cpu_op": "cpu_op", "operator": "cpu_op", "user_annotation": "user_annotation",
            "python_function": "python_function"}


def _ns(value) -> int:
    return int(Decimal(str(value)) * 1000)


def _cpu_truth(raw: bytes) -> dict[tuple[str, str], tuple[int, int]]:
    """(kind, name) -> (count, total ns) over the parsed CPU op slices, ProfilerStep#N left out."""
    out: dict = defaultdict(lambda: [0, 0])
    for e in orjson.loads(raw)["traceEvents"]:
        kind = CPU_CATS.get(str(e.get("cat", "")).lower())
        if e.get("ph") == "X" and kind and not e["name"].startswith("ProfilerStep#"):
            out[kind, e["name"]][0] += 1
            out[kind, e["name"]][1] += max(_ns(e.get("dur", 0)), 0)
    return {k: tuple(v) for k, v in out.items()}


def _steps(raw: bytes) -> int:
    return sum(1 for e in orjson.loads(raw)["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep#"))


def test_cpu_operators_equal_a_brute_force(make_sample):
    a, b = make_sample(steps=5), make_sample(steps=3, seed=1)
    d = traceforge.diff(str(a.path), str(b.path), tables=["cpu_ops"], per_step=False)
    ta, tb = _cpu_truth(a.raw), _cpu_truth(b.raw)
    assert len(ta) > 3 and len(d.cpu_ops) == len(set(ta) | set(tb))
    for r in d.cpu_ops.itertuples():
        assert (r.a_count, r.a_total_ns) == ta.get((r.kind, r.name), (0, 0))
        assert (r.b_count, r.b_total_ns) == tb.get((r.kind, r.name), (0, 0))
        assert r.total_diff_ns == r.b_total_ns - r.a_total_ns and r.count_diff == r.b_count - r.a_count
    assert d.ops.empty and d.categories.empty  # not asked for


@pytest.mark.integration
def test_cpu_operators_equal_a_brute_force_on_a_real_trace():
    path = str(TRACES["trace_diff"])
    truth = _cpu_truth(raw_json(path))
    d = traceforge.diff(path, path, tables=["cpu_ops"])
    assert {(r.kind, r.name): (r.a_count, r.a_total_ns) for r in d.cpu_ops.itertuples()} == truth
    assert (d.cpu_ops["total_diff_ns"] == 0).all() and set(d.cpu_ops["count_change"]) == {"="}
    assert d.cpu_ops["total_change_pct"].fillna(0).eq(0).all()


def test_per_step_values_when_the_step_counts_differ(make_sample):
    a, b = make_sample(), make_sample(steps=3)
    sa, sb = _steps(a.raw), _steps(b.raw)
    assert (sa, sb) == (5, 3)
    d = traceforge.diff(str(a.path), str(b.path))
    assert d.per_step and (d.a_steps, d.b_steps) == (5, 3)
    for name in TABLES:
        df = d.tables()[name]
        assert len(df)
        for r in df.itertuples():
            assert r.a_ns_per_step == r.a_total_ns / sa and r.b_count_per_step == r.b_count / sb
            change = Fraction(r.b_count, sb) - Fraction(r.a_count, sa)
            assert r.count_change == ("+" if change > 0 else "-" if change < 0 else "=")
            per_step = Fraction(r.b_total_ns, sb) - Fraction(r.a_total_ns, sa)
            assert r.ns_per_step_diff == pytest.approx(float(per_step))
            if r.a_total_ns:
                assert r.total_change_pct == pytest.approx(float(100 * per_step / Fraction(r.a_total_ns, sa)))
            else:
                assert pd.isna(r.total_change_pct)
        keys = [abs(Fraction(r.b_total_ns, sb) - Fraction(r.a_total_ns, sa)) for r in df.itertuples()]
        assert keys == sorted(keys, reverse=True)
    whole = traceforge.diff(str(a.path), str(b.path), per_step=False)
    assert not whole.per_step and "a_ns_per_step" not in whole.ops
    assert whole.ops["count_change"].tolist() == [
        "+" if c > 0 else "-" if c < 0 else "=" for c in whole.ops["count_diff"]]
    same = traceforge.diff(str(a.path), str(a.path))  # equal step counts: whole-trace values
    assert not same.per_step and (same.ops["total_diff_ns"] == 0).all()


def test_per_step_needs_steps(tmp_path, sample):
    bare = tmp_path / "bare.json"
    bare.write_bytes(orjson.dumps({"traceEvents": [
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 2,
         "args": {"device": 0, "stream": 7, "correlation": 1}}]}))
    assert not traceforge.diff(str(sample.path), str(bare)).per_step  # auto: off
    r = run_cli("diff", str(sample.path), str(bare), "--per-step")
    assert r.returncode == 1 and r.stderr.decode().count("\n") == 1
    assert "per-step values need profiler steps in both traces (A has 5, B 0)" in r.stderr.decode()


@pytest.mark.parametrize("table", TABLES)
@pytest.mark.parametrize("per_step", ["--per-step", "--no-per-step"])
def test_every_csv_is_one_table_that_pandas_reads(make_sample, table, per_step):
    a, b = str(make_sample().path), str(make_sample(steps=3).path)
    r = run_cli("diff", a, b, "--format", "csv", "--table", table, per_step)
    assert r.returncode == 0, r.stderr
    got = pd.read_csv(io.BytesIO(r.stdout), keep_default_na=False, na_values=[""])
    expected = traceforge.diff(a, b, tables=[table], per_step=per_step == "--per-step").tables()[table]
    assert list(got.columns) == list(expected.columns)
    assert len(got) == len(expected)
    for column in expected.columns:
        if expected[column].dtype.kind in "iu":
            assert got[column].tolist() == expected[column].tolist()
        elif expected[column].dtype.kind == "f":
            assert got[column].to_numpy() == pytest.approx(expected[column].to_numpy(), nan_ok=True)
        else:
            assert got[column].astype(str).tolist() == expected[column].astype(str).tolist()


def test_several_tables_as_csv_are_refused(sample):
    for extra in ([], ["--table", "ops", "--table", "cpu_ops"]):
        r = run_cli("diff", str(sample.path), str(sample.path), "--format", "csv", *extra)
        err = r.stderr.decode()
        assert r.returncode == 1 and r.stdout == b"" and err.count("\n") == 1 and "Traceback" not in err
        assert "diff --format csv writes one table: name it with --table (ops, categories, cpu_ops)" in err


def test_text_and_json(make_sample):
    a, b = str(make_sample().path), str(make_sample(steps=3).path)
    r = run_cli("diff", a, b)
    assert r.returncode == 0, r.stderr
    text = r.stdout.decode()
    assert "(5 profiler steps)" in text and "(3 profiler steps)" in text and "values per profiler step" in text
    assert text.index("Per category") < text.index("Per GPU op name") < text.index("Per CPU operator")
    r = run_cli("diff", a, b, "--format", "json", "--table", "categories")
    doc = orjson.loads(r.stdout)
    assert list(doc) == ["categories"] and "ns_per_step_diff" in doc["categories"][0]


def test_trace_diff_equals_the_path_function(make_sample):
    a, b = str(make_sample().path), str(make_sample(steps=3).path)
    by_path = traceforge.diff(a, b)
    loaded = traceforge.load(a).diff(traceforge.load(b))
    assert loaded.per_step == by_path.per_step
    for name in TABLES:
        pd.testing.assert_frame_equal(loaded.tables()[name], by_path.tables()[name])
