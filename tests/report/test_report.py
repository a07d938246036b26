"""``traceforge report``: the page is written, self-contained, and every plot has data
(checked against brute-force computations over the trace's events); the downsampling keeps
every bucket's peaks; a 4-rank directory compares ranks and names its straggler."""

from __future__ import annotations

import gzip
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import TRACES, run_cli
from traceforge.report import write_report
from traceforge.report.collect import delay_histogram, delays_below
from traceforge.report.downsample import min_max_buckets

pytest.importorskip("bokeh", reason="the report extra (bokeh) is not installed")


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.loaded: list[str] = []

    def handle_starttag(self, tag, attrs):
        for key, value in attrs:
            if key in ("src", "href") and value:
                self.loaded.append(value)


def remote_urls(page: str) -> list[str]:
    """Every src/href of a tag that points at the network."""
    tags = _Tags()
    tags.feed(page)
    return [u for u in tags.loaded if re.match(r"(?i)(https?:)?//", u)]


def test_downsampling_keeps_every_bucket_peak():
    rng = np.random.default_rng(7)
    ts = np.cumsum(rng.integers(1, 1_000, 50_000)).astype(np.int64)
    values = rng.integers(0, 1_000, 50_000)
    kept_ts, kept = min_max_buckets(ts, values, buckets=100)
    assert len(kept_ts) <= 400 and np.all(np.diff(kept_ts) > 0)
    lo, hi = int(ts[0]), int(ts[-1])
    for b in range(100):  # brute force: each bucket's min and max, by plain Python
        inside = [(t, v) for t, v in zip(ts.tolist(), values.tolist()) if (t - lo) * 100 // (hi - lo + 1) == b]
        got = [v for t, v in zip(kept_ts.tolist(), kept.tolist()) if (t - lo) * 100 // (hi - lo + 1) == b]
        assert max(v for _, v in inside) == max(got) and min(v for _, v in inside) == min(got)
        assert inside[0][1] == got[0] and inside[-1][1] == got[-1]
    short_ts, short = min_max_buckets(ts[:50], values[:50], buckets=100)
    assert short_ts.tolist() == ts[:50].tolist() and short.tolist() == values[:50].tolist()


def test_delay_histogram_counts_every_delay():
    delays = np.array([-5, 0, 999, 1_000, 5_000, 123_456], np.int64)
    edges, counts = delay_histogram(delays)
    # the bins start at the positive delays' 1st percentile, not decades below them; those under it
    # (and those <= 0: the clocks overlap) count in the first bin
    assert counts.sum() == len(delays) and edges[0] == 999 and edges[-1] > 123_456
    assert delays_below(delays, edges) == 2 and counts[0] >= 3


def _events(path: Path) -> list[dict]:
    return json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]


def test_report_on_the_sample(sample, tmp_path):
    out = tmp_path / "report.html"
    r = run_cli("report", str(sample.path), "-o", str(out))
    assert r.returncode == 0, r.stderr
    page = out.read_text()
    assert remote_urls(page) == [] and "<script src=" not in page
    assert len(page) < 5_000_000
    [rank] = write_report([sample.path], str(tmp_path / "again.html"))
    events = _events(sample.path)
    kernels = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    # every plot has data, and the data is the trace's
    assert len(rank.temporal) and rank.temporal["span_ns"].iloc[0] > 0
    assert rank.categories["instances"].sum() == len(kernels)
    top = rank.top_kernels.iloc[0]
    assert top["count"] == sum(1 for e in kernels if e["name"] == top["name"] and e["cat"] == "kernel")
    assert rank.delay_counts.sum() == len(kernels)  # each launched GPU op has a delay
    assert rank.queue and rank.memcpy and len(rank.patterns)
    assert int(rank.overlap["comm_ns"].iloc[0]) > 0
    steps = [e for e in events if e.get("ph") == "X" and e.get("name", "").startswith("ProfilerStep#")]
    assert list(rank.steps["name"]) == [e["name"] for e in steps]
    for title in ("Temporal breakdown", "Kernel categories", "Top kernels", "Queue length over time",
                  "Memcpy bandwidth", "Memset bandwidth", "Launch delay distribution", "Frequent kernel sequences",
                  "Communication overlap", "In Perfetto:"):
        assert title in page, title


def test_missing_extra_is_one_line(sample, tmp_path, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_bokeh(name, *args, **kwargs):
        if name.startswith("bokeh"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_bokeh)
    r = run_cli("report", str(sample.path), "-o", str(tmp_path / "r.html"))
    assert r.returncode == 1 and r.stderr.decode().strip().count("\n") == 0
    assert "traceforge[report]" in r.stderr.decode() and not (tmp_path / "r.html").exists()


def four_ranks(source: Path, where: Path, slow: int = 3) -> Path:
    """Four copies of ``source`` with ``distributedInfo.rank`` 0..3; rank ``slow`` has every GPU op
    twice as long (a straggler by GPU busy time)."""
    doc = json.loads(gzip.decompress(source.read_bytes()))
    where.mkdir()
    for rank in range(4):
        copy = json.loads(json.dumps(doc))
        copy["distributedInfo"] = {**copy.get("distributedInfo", {}), "rank": rank}
        copy = {"distributedInfo": copy.pop("distributedInfo"), **copy}
        if rank == slow:
            for e in copy["traceEvents"]:
                if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and "dur" in e:
                    e["dur"] = e["dur"] * 2
        (where / f"trace{rank}.json.gz").write_bytes(gzip.compress(json.dumps(copy).encode(), 1))
    return where


@pytest.mark.slow
def test_four_ranks_name_the_straggler(sample, tmp_path):
    ranks = four_ranks(sample.path, tmp_path / "ranks")
    out = tmp_path / "report.html"
    r = run_cli("report", str(ranks), "-o", str(out))
    assert r.returncode == 0, r.stderr
    page = out.read_text()
    assert "Across 4 ranks" in page and re.search(r"Found: rank 3 GPU busy \+\d+%", page)
    assert [f"Rank {i}" in page for i in range(4)] == [True] * 4


@pytest.mark.parametrize("name", ["nccl", "df_index"])
def test_report_on_real_traces(name, tmp_path):
    out = tmp_path / "report.html"
    r = run_cli("report", str(TRACES[name]), "-o", str(out))
    assert r.returncode == 0, r.stderr
    page = out.read_text()
    assert remote_urls(page) == [] and len(page) < 5_000_000
    assert "Communication overlap" in page or name != "nccl"
