"""Numbers that read right (issue 53 item 10): one meaning per name, integer counts as integers,
one verdict per flow end, missing values alike in CSV and parquet."""

import json

import numpy as np
import pytest

from tests.conftest import TRACES, run_cli, stderr_on_a_terminal
from traceforge.columns.scan import scan
from traceforge.util.union import union_ns


def test_union_counts_each_instant_once():
    start = np.array([0, 5, 20, 21], np.int64)
    end = np.array([10, 8, 30, 25], np.int64)
    assert union_ns(start, end) == 10 + 10


def test_info_busy_is_the_union_and_summed_is_the_sum(sample):
    streams = json.loads(run_cli("info", str(sample.path), "--format", "json").stdout)["gpu_streams"]
    cols = scan(str(sample.path))
    for s in streams:
        rows = (cols.gpu.device == s["device"]) & (cols.gpu.stream == s["stream"])
        ts, dur = cols.gpu.ts[rows].astype(np.int64), cols.gpu.dur[rows].astype(np.int64)
        covered = np.zeros(int((ts + dur).max() - ts.min()), bool)
        for a, d in zip((ts - ts.min()).tolist(), dur.tolist()):
            covered[a:a + d] = True
        assert s["busy_ms"] * 1e6 == pytest.approx(int(covered.sum()), abs=1e-3)
        assert s["summed_ms"] * 1e6 == pytest.approx(int(dur.sum()), abs=1e-3)
    text = run_cli("info", str(sample.path)).stdout.decode()
    assert "busy ms" in text and "summed ms" in text


@pytest.mark.integration
def test_info_and_stats_busy_agree_on_resnet():
    info = run_cli("info", str(TRACES["h100_resnet50"])).stdout.decode()
    stats = run_cli("stats", str(TRACES["h100_resnet50"])).stdout.decode()
    assert "118.405    119.315" in info  # busy (the union), summed
    assert "118.405" in stats


def test_compare_csv_counts_are_integers(sample, make_sample):
    other = make_sample(steps=3, seed=1)
    r = run_cli("stats", "--compare", str(sample.path), str(other.path), "--format", "csv")
    assert r.returncode == 0, r.stderr
    header, *rows = r.stdout.decode().splitlines()
    names = header.split(",")
    for row in rows:
        cells = dict(zip(names, row.split(",")))
        for key in ("a_count", "b_count", "a_total_ns", "b_total_ns"):
            assert cells[key] == "" or cells[key].isdigit(), (key, cells[key])
    r = run_cli("stats", "--compare", str(sample.path), str(other.path), "--format", "json")
    doc = json.loads(r.stdout)["tail_compare"]
    assert all(type(row["a_count"]) is int for row in doc)


def test_missing_values_alike_in_csv_and_parquet(sample, tmp_path):
    pytest.importorskip("pyarrow")
    import pandas as pd

    r = run_cli("export", str(sample.path), "--csv", str(tmp_path / "c"), "--parquet", str(tmp_path / "p"))
    assert r.returncode == 0, r.stderr
    missing = 0
    for f in sorted((tmp_path / "c").glob("*.csv")):
        csv = pd.read_csv(f)
        parquet = pd.read_parquet(tmp_path / "p" / f"{f.stem}.parquet")
        for col in csv.columns:
            assert (csv[col].isna() == parquet[col].isna()).all(), (f.stem, col)
            assert not (parquet[col].astype(str) == "").any(), (f.stem, col)
            missing += int(csv[col].isna().sum())
    assert missing > 0  # the sample has GPU ops without a launching CPU op


@pytest.mark.parametrize("cut", [("--steps", "11-12"), ("--window", "1ms:3ms")])
def test_no_pass_reaches_100_percent_twice(sample, tmp_path, cut):
    import re

    drawn = stderr_on_a_terminal("trim", str(sample.path), *cut, "-o", str(tmp_path / "t.json.gz"))
    done = re.findall(r"\r(\w+)\s+100%", drawn)
    assert "write" in done and len(done) == len(set(done)), done
