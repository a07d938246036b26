"""Issue 39, items 4, 8 and 9 beyond launch-stats: times from the trace start, inputs that are
not Kineto GPU traces say what they lack, and text outputs fit 100 columns."""

from __future__ import annotations

import json
import re
from decimal import Decimal
from pathlib import Path

import pandas as pd

from tests.conftest import TRACES, run_cli
from traceforge.annotator.registry import ANALYSES
from traceforge.cli.output import Col, render

WIDTH = 100


def _ns(ts: object) -> int:
    return int(Decimal(str(ts)) * 1000)


def _trace_start_ns(events: list[dict]) -> int:
    """The earliest ts >= 0 of any event but metadata, in exact ns (Perfetto's time 0)."""
    return min(_ns(e["ts"]) for e in events if e.get("ph") != "M" and "ts" in e and Decimal(str(e["ts"])) >= 0)


def _wide(text: str, *paths: object) -> list[str]:
    """The lines of ``text`` over ``WIDTH`` columns once each path is written as PATH."""
    for path in paths:
        text = text.replace(str(path), "PATH")
    return [line for line in text.splitlines() if len(line) > WIDTH]


def _chrome_trace(tmp_path: Path) -> Path:
    """A plain Chrome trace: slices and a counter, no Kineto category, key or GPU event."""
    path = tmp_path / "chrome.json"
    path.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "name": "load", "cat": "io", "ts": 10, "dur": 5, "pid": 1, "tid": 1},
        {"ph": "X", "name": "parse", "ts": 20, "dur": 7, "pid": 1, "tid": 1},
        {"ph": "C", "name": "mem", "ts": 21, "pid": 1, "args": {"v": 3}}], "displayTimeUnit": "ms"}))
    return path


# -- 8. input that is not a Kineto GPU trace ---------------------------------------------------


def test_info_of_an_empty_trace_object_is_not_a_bare_array(tmp_path):
    empty, bare = tmp_path / "empty.json", tmp_path / "bare.json"
    empty.write_text('{"traceEvents": []}')
    bare.write_text("[]")
    r = run_cli("info", str(empty))
    assert r.returncode == 0, r.stderr
    assert "(bare array)" not in r.stdout.decode() and "top-level keys: traceEvents\n" in r.stdout.decode()
    assert json.loads(run_cli("info", str(empty), "--format", "json").stdout)["top_level_keys"] == ["traceEvents"]
    assert "top-level keys: (bare array)" in run_cli("info", str(bare)).stdout.decode()


def test_a_plain_chrome_trace_is_not_labelled_kineto(tmp_path, sample):
    path = _chrome_trace(tmp_path)
    r = run_cli("info", str(path))
    first = r.stdout.decode().splitlines()[0]
    assert r.returncode == 0 and "(Kineto;" not in first and "(Chrome trace, not Kineto;" in first, first
    doc = json.loads(run_cli("info", str(path), "--format", "json").stdout)
    assert doc["vocabulary"] == "Chrome trace, not Kineto"
    assert "no GPU events" in doc["lacks"] and "ProfilerActivity.CUDA" in doc["lacks"]
    assert "lacks: no GPU events" in r.stdout.decode()
    kineto = json.loads(run_cli("info", str(sample.path), "--format", "json").stdout)
    assert kineto["vocabulary"] == "Kineto" and kineto["lacks"] is None


def test_stats_of_a_trace_without_gpu_events_says_so_instead_of_empty_tables(tmp_path):
    path = _chrome_trace(tmp_path)
    r = run_cli("stats", str(path))
    err, out = r.stderr.decode(), r.stdout.decode()
    assert r.returncode == 0, err
    (note,) = err.strip().splitlines()
    assert note.startswith(f"traceforge: note: rank 0 ({path}): no GPU events") and "ProfilerActivity.CUDA" in note
    for empty in ("Temporal breakdown", "Communication/computation overlap", "Launch overlap", "GPU busy"):
        assert empty not in out, out
    assert "0 GPU ops" in out


def test_patterns_finding_nothing_says_what_to_try(sample, tmp_path):
    r = run_cli("patterns", str(sample.path), "--min-len", "1000")
    assert r.returncode == 0 and "no pattern found" in r.stdout.decode()
    note = " ".join(r.stderr.decode().split())  # one note, wrapped to 100 columns
    assert note.count("traceforge: note:") == 1
    assert "a smaller --min-len (now 1000, default 3)" in note and "--op NAME" in note
    r = run_cli("patterns", str(sample.path), "--op", "aten::addmm", "--min-len", "1000", "--format", "json")
    assert json.loads(r.stdout)["patterns"] == []
    note = " ".join(r.stderr.decode().split())
    assert "--min-len 1 (now 1000" in note and "--nested" in note and "--op-regex" in note
    r = run_cli("patterns", str(_chrome_trace(tmp_path)))
    assert "no GPU events" in " ".join(r.stderr.decode().split())  # wrapped where the path is long


# -- 9. text that fits 100 columns ---------------------------------------------------------------


def test_render_splits_a_wide_table_into_blocks_repeating_the_keys():
    df = pd.DataFrame({"dev": [0, 1, 12], "name": ["a" * 70, "short", "x" * 30 + "MIDDLE" + "y" * 150],
                       **{f"c{i}": [10**i, 2 * 10**i, 3] for i in range(12)}})
    cols = [Col("dev", "dev", repeat=True), *[Col(f"col{i}", f"c{i}") for i in range(12)],
            Col("name", "name", left=True)]
    lines = render(df, cols)
    assert max(map(len, lines)) <= WIDTH and lines[0] != lines[-1]
    blocks = "\n".join(lines).split("\n\n")
    assert len(blocks) >= 2
    seen: dict[str, list[str]] = {}
    for block in blocks:
        head, *rows = block.splitlines()
        headers = head.split()
        assert headers[0] == "dev" and len(rows) == 3
        cells = [row.split() for row in rows]
        assert [c[0] for c in cells] == ["0", "1", "12"]  # the key column, in each block
        for j, h in enumerate(headers[1:], 1):
            seen[h] = [" ".join(c[j:]) if h == "name" else c[j] for c in cells]
    # every column once, every value whole (a name too long for the width is cut in the middle)
    assert set(seen) == {f"col{i}" for i in range(12)} | {"name"}
    for i in range(12):
        assert seen[f"col{i}"] == [str(v) for v in df[f"c{i}"]]
    assert seen["name"][:2] == ["a" * 70, "short"]
    assert seen["name"][2].startswith("x" * 30) and seen["name"][2].endswith("y" * 20) and "…" in seen["name"][2]
    # a table that fits is one block, as before
    assert render(df.head(1), cols[:3]) == ["  dev  col0  col1", "    0     1    10"]


def test_annotate_summary_is_one_line_per_analysis(sample, tmp_path):
    out = tmp_path / "out.json.gz"
    r = run_cli("annotate", str(sample.path), "--all", "-o", str(out))
    err = r.stderr.decode()
    assert r.returncode == 0, err
    lines = err.splitlines()
    assert re.fullmatch(rf"{re.escape(str(out))}: [\d,]+ events appended in [\d.]+ s", lines[0]), lines[0]
    items = [line for line in lines[1:] if line.startswith("  ") and not line.startswith("    ")]
    assert len(items) == sum(a.in_all for a in ANALYSES.values())
    assert any(line.startswith("  queue length: ") for line in items)
    assert not _wide(err, out)


def test_check_lines_fit_100_columns(tmp_path):
    long = "void at::native::" + "vectorized_elementwise_kernel<4, " * 8 + ">"
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "name": long, "ts": 0, "dur": 10, "pid": 1, "tid": 1},
        {"ph": "X", "name": long, "ts": 5, "dur": 10, "pid": 1, "tid": 1},
        *[{"ph": "f", "name": "ac2g", "cat": "ac2g", "id": i, "bp": "e", "ts": 1, "pid": 1, "tid": 1}
          for i in range(4)]]}))
    r = run_cli("check", str(path))
    text = r.stdout.decode()
    assert r.returncode == 1 and "slice_spill_overlapping_complete_event 1:" in text
    assert not _wide(text, path), text
    assert re.search(r"^ {12}e\.g\. #1 ", text, re.M) and re.search(r"^ {17}#\d ", text, re.M)


def test_stats_default_text_fits_100_columns():
    path = TRACES["nccl"]
    r = run_cli("stats", str(path))
    text = r.stdout.decode()
    assert r.returncode == 0 and not _wide(text, path), _wide(text, path)
    # each table is still whole: every top kernel's count and the streams' key columns in each block
    doc = json.loads(run_cli("stats", str(path), "--format", "json", "--top", "10").stdout)
    for row in doc["top_kernels"]:
        assert f"{row['total_ns'] / 1e6:,.3f}" in text
    streams = text.split("GPU busy and idle per stream")[1].split("\n\n\n")[0]
    assert streams.count("  device  stream ") == 2


# -- 4. times from the trace start beside absolute ones ----------------------------------------


def test_stats_and_info_show_the_span_from_the_trace_start(sample):
    events = json.loads(sample.raw)["traceEvents"]
    start = _trace_start_ns(events)
    doc = json.loads(run_cli("stats", str(sample.path), "--format", "json", "--table", "summary").stdout)
    (summary,) = doc["summary"]
    assert summary["trace_start"] == start
    text = run_cli("stats", str(sample.path)).stdout.decode()
    rel = f"{(summary['span_start'] - start) / 1e6:,.3f} .. {(summary['span_end'] - start) / 1e6:,.3f} ms"
    assert f"wall span {summary['span_ns'] / 1e6:,.3f} ms: {rel} from the trace start" in text
    info = json.loads(run_cli("info", str(sample.path), "--format", "json").stdout)["time_span"]
    first = _ns(info["first_ts_us"])
    assert _ns(info["first_rel_us"]) == first - start and _ns(info["trace_start_us"]) == start
    assert _ns(info["last_end_rel_us"]) == _ns(info["last_end_us"]) - start
    assert f"{info['first_rel_us']} .. {info['last_end_rel_us']} us from the trace start" in \
        run_cli("info", str(sample.path)).stdout.decode()


def test_critical_path_segments_from_the_trace_start(sample):
    start = _trace_start_ns(json.loads(sample.raw)["traceEvents"])
    doc = json.loads(run_cli("critical-path", str(sample.path), "--format", "json", "--table", "segments").stdout)
    seg = doc["segments"]
    assert seg and all(s["start_rel_ns"] == s["start"] - start and s["end_rel_ns"] == s["end"] - start for s in seg)
    text = run_cli("critical-path", str(sample.path), "--table", "segments").stdout.decode()
    assert "at us" in text and f"{seg[0]['start_rel_ns'] / 1e3:,.3f}" in text and not _wide(text)
