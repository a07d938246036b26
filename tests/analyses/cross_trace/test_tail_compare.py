"""The notebook's views: time share over the five CUPTI activity kinds (``stats --table
activity``; every kind: ``activity_all``), and two traces' tails compared (``stats --compare``)."""

from __future__ import annotations

import csv
import io
import json
from collections import defaultdict
from decimal import Decimal

import pytest

import traceforge
from tests.conftest import TRACES, raw_json
from traceforge.analyses.cross_trace.tail_compare import COMPARED
from traceforge.analyses.structure.activity import CUPTI_KINDS
from traceforge.cli.main import main

FIVE = {"kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "cuda_driver"}


def _cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_activity_shares_over_the_five_cupti_kinds_equal_a_brute_force():
    """hta/nccl_parser_config: per kind of the five, events and summed dur (exact, from the
    JSON text), and the shares of their sum, which add up to 100 %."""
    events = json.loads(raw_json(TRACES["nccl"]), parse_float=Decimal)["traceEvents"]  # exact numbers
    count: dict[str, int] = defaultdict(int)
    total: dict[str, int] = defaultdict(int)
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in FIVE:
            count[e["cat"]] += 1
            total[e["cat"]] += max(int(Decimal(e["dur"]) * 1000), 0)
    grand = sum(total.values())
    assert set(CUPTI_KINDS) == FIVE and set(count) == {"kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime"}

    act = traceforge.stats(str(TRACES["nccl"]), tables=["activity"]).activity
    assert set(act["kind"]) == set(count)
    for r in act.itertuples():
        assert r.events == count[r.kind] and r.total_ns == total[r.kind], r.kind
        assert r.share_pct == 100.0 * total[r.kind] / grand
    assert act["share_pct"].sum() == pytest.approx(100.0, abs=1e-12)
    assert act["total_ns"].sum() == grand

    every = traceforge.stats(str(TRACES["nccl"]), tables=["activity_all"]).activity_all
    assert {"cpu_op", "user_annotation"} <= set(every["kind"]) and every["share_pct"].sum() == pytest.approx(100.0)
    assert every.set_index("kind").loc[list(count), "total_ns"].tolist() == [total[k] for k in count]


def test_activity_text_names_the_all_kinds_table(sample, capsys):
    code, out, _ = _cli(capsys, "stats", str(sample.path), "--table", "activity")
    assert code == 0 and "--table activity_all" in out and "cpu_op" not in out
    code, out, _ = _cli(capsys, "stats", str(sample.path), "--table", "activity_all", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert code == 0 and "cpu_op" in {r["kind"] for r in rows}
    assert sum(float(r["share_pct"]) for r in rows) == pytest.approx(100.0)


def _ratio_columns() -> list[str]:
    return [f"{v}_ratio" for v in COMPARED]


def test_a_trace_compared_with_itself_gives_ratios_of_exactly_one(sample, capsys):
    table = traceforge.compare_tails(str(sample.path), str(sample.path))
    assert len(table) >= 4 and set(table["kind"]) >= {"kernel", "cuda_runtime", "cpu_op"}
    for column in _ratio_columns():
        values = table[column].tolist()
        assert all(v == 1.0 for v in values), (column, values)
    code, out, _ = _cli(capsys, "stats", "--compare", str(sample.path), str(sample.path), "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert code == 0 and len(rows) == len(table)
    assert all(float(r[c]) == 1.0 for r in rows for c in _ratio_columns())
    code, out, _ = _cli(capsys, "stats", "--compare", str(sample.path), str(sample.path))
    assert code == 0 and "ratio B/A" in out and "1.000" in out
    for bad in (["stats", "--compare", str(sample.path)],
                ["stats", "--compare", str(sample.path), str(sample.path), "--table", "tails"]):
        code, _, err = _cli(capsys, *bad)
        assert code == 1 and err.count("\n") == 1 and "--compare takes two traces" in err


def test_tails_compared_are_b_over_a_of_each_trace_tails():
    """Two real traces: every ratio is B's value over A's from each trace's own tails table,
    and that table's top-p mean is the brute-force mean of the kind's longest events."""
    a, b = str(TRACES["nccl"]), str(TRACES["alexnet"])
    table = traceforge.compare_tails(a, b).set_index("kind")
    ta = traceforge.stats(a, tables=["tails"]).tails.set_index("kind")
    tb = traceforge.stats(b, tables=["tails"]).tails.set_index("kind")
    assert list(table.index) == list(dict.fromkeys([*ta.index, *tb.index]))
    for kind in table.index:
        for value in COMPARED:
            if kind in ta.index and kind in tb.index and ta.loc[kind, value] != 0:
                assert table.loc[kind, f"{value}_ratio"] == float(tb.loc[kind, value]) / float(ta.loc[kind, value])
            else:
                assert table.loc[kind, f"{value}_ratio"] != table.loc[kind, f"{value}_ratio"]  # NaN
    events = json.loads(raw_json(TRACES["alexnet"]), parse_float=Decimal)["traceEvents"]
    kernels = sorted((max(int(Decimal(e["dur"]) * 1000), 0) for e in events
                      if e.get("ph") == "X" and e.get("cat") == "kernel"), reverse=True)
    n = max(1, len(kernels) * 5 // 100)
    assert table.loc["kernel", "b_top5_mean_ns"] == sum(kernels[:n]) / n
