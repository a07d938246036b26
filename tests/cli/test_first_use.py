"""Issue 39, items 1-9: what a new user trips over, each reproduced as the issue wrote it."""

from __future__ import annotations

import gzip
import io
import json
import socket
import subprocess
import sys
import urllib.request
from decimal import Decimal
from pathlib import Path

import pandas as pd
import zstandard

from tests.conftest import ROOT, raw_json, run_cli

# -- 1. annotate with no analysis flag, or with only an analysis option, is not a silent copy ------


def test_annotate_without_an_analysis_refuses_with_the_flags(sample, tmp_path):
    out = tmp_path / "out.json.gz"
    r = run_cli("annotate", str(sample.path), "-o", str(out))
    err = r.stderr.decode()
    assert r.returncode == 1 and not out.exists(), err
    assert "no analysis chosen" in err and "--queue-length" in err and "--all" in err and "--copy" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_annotate_with_only_an_option_names_its_flag(sample, tmp_path):
    for option, value, owner in (("--op", "aten::addmm", "--patterns"), ("--rules", "hta", "--classify"),
                                  ("--ncu", "x.csv", "--counters")):
        out = tmp_path / "out.json.gz"
        r = run_cli("annotate", str(sample.path), option, value, "-o", str(out))
        err = r.stderr.decode()
        assert r.returncode == 1 and not out.exists(), err
        assert f"{option} is an option of {owner}" in err


def test_annotate_copy_is_the_explicit_plain_copy(sample, tmp_path):
    out = tmp_path / "out.json"
    r = run_cli("annotate", str(sample.path), "--copy", "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert out.read_bytes() == sample.raw


# -- 2. traceforge's outputs are never read back as ranks; a directory's go to one directory -------


def _rank_dir(sample, directory: Path) -> Path:
    """Two ranks of the sample (``distributedInfo.rank`` 0 and 1), gzipped, in ``directory``."""
    directory.mkdir()
    old = b'"distributedInfo": {"backend": "nccl", "rank": 0,'
    for rank in (0, 1):
        raw = sample.raw.replace(old, old.replace(b"0,", f"{rank},".encode()))
        (directory / f"rank{rank}.json.gz").write_bytes(gzip.compress(raw, 1))
    return directory


def test_annotated_outputs_are_not_read_back_as_ranks(sample, tmp_path):
    traces = _rank_dir(sample, tmp_path / "job")
    r = run_cli("annotate", str(traces), "--queue-length")
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in (traces / "annotated").iterdir()) == [
        "rank0.annotated.json.gz", "rank1.annotated.json.gz"]
    assert f"writing the annotated traces to {traces / 'annotated'}/" in r.stderr.decode()
    # the old place: outputs beside the inputs, in the directory itself
    for rank in (0, 1):
        assert run_cli("annotate", str(traces / f"rank{rank}.json.gz"), "--queue-length").returncode == 0
    assert (traces / "rank1.annotated.json.gz").is_file()
    for command in (["stats", "--format", "json"], ["launch-stats", "--format", "json"]):
        r = run_cli(*command, str(traces))
        err = r.stderr.decode()
        assert r.returncode == 0, err
        assert "skipped 2 trace(s) traceforge wrote (rank0.annotated.json.gz, rank1.annotated.json.gz)" in err
        assert "again" not in err
    r = run_cli("launch-stats", "--format", "json", str(traces))
    assert [rank["rank"] for rank in json.loads(r.stdout)["ranks"]] == [0, 1]
    r = run_cli("classify", str(traces))
    assert r.returncode == 0 and b".annotated.json" not in r.stdout, r.stderr
    # named explicitly, an output is read as a trace
    r = run_cli("info", str(traces / "rank0.annotated.json.gz"))
    assert r.returncode == 0, r.stderr


# -- 7. the output's codec follows the input's; -o is optional everywhere; -o x.txt says what it is --


def test_zst_in_gives_zst_out_and_repair_trim_need_no_o(sample, tmp_path):
    src = tmp_path / "trace.json.zst"
    src.write_bytes(zstandard.ZstdCompressor().compress(sample.raw))
    for command, kind in ((["annotate", "--queue-length"], "annotated"), (["repair"], "repaired"),
                          (["trim", "--steps", "11-12"], "trimmed")):
        r = run_cli(command[0], str(src), *command[1:])
        assert r.returncode == 0, r.stderr
        out = tmp_path / f"trace.{kind}.json.zst"
        assert out.read_bytes()[:4] == b"\x28\xb5\x2f\xfd", kind  # zstd's magic
        assert json.loads(raw_json(out))["traceEvents"]
    plain = tmp_path / "plain.json"
    plain.write_bytes(sample.raw)
    assert run_cli("repair", str(plain)).returncode == 0
    assert (tmp_path / "plain.repaired.json").read_bytes()[:1] == b"{"


def test_an_output_suffix_without_a_codec_says_it_is_plain_json(sample, tmp_path):
    for command in (["annotate", "--queue-length"], ["repair"], ["trim", "--steps", "11-12"], ["patterns"]):
        out = tmp_path / f"{command[0]}.txt"
        r = run_cli(command[0], str(sample.path), *command[1:], "-o", str(out))
        assert r.returncode == 0, r.stderr
        assert f"{out}: written as plain (uncompressed) JSON" in r.stderr.decode()
        json.loads(out.read_bytes())
    r = run_cli("repair", str(sample.path), "-o", str(tmp_path / "r.json"))
    assert r.returncode == 0 and b"plain (uncompressed)" not in r.stderr


# -- 3 and 4. launch-stats: one table per CSV (outliers too), ns in CSV and JSON, relative times ---


def _events(sample) -> list[dict]:
    return json.loads(sample.raw)["traceEvents"]


def _trace_start_ns(events: list[dict]) -> int:
    """The earliest ts >= 0 of any event but metadata, in exact ns."""
    return min(int(Decimal(str(e["ts"])) * 1000) for e in events if e.get("ph") != "M" and "ts" in e
               and Decimal(str(e["ts"])) >= 0)


def test_launch_stats_csv_and_json_agree_in_ns_with_outliers_in_csv(sample):
    path = str(sample.path)
    stats_csv = pd.read_csv(io.BytesIO(run_cli("launch-stats", path, "--format", "csv").stdout))
    doc = json.loads(run_cli("launch-stats", path, "--format", "json", "--top", "3").stdout)
    assert list(stats_csv.columns) == ["by", "key", "figure", "count", "mean_ns", "min_ns", "p50_ns", "p90_ns",
                                       "p99_ns", "max_ns"]
    assert stats_csv.to_dict("records") == doc["statistics"]
    r = run_cli("launch-stats", path, "--format", "csv", "--table", "outliers", "--top", "3")
    assert r.returncode == 0, r.stderr
    worst = pd.read_csv(io.BytesIO(r.stdout))
    assert list(worst.columns)[:7] == ["list", "launch_delay_ns", "cpu_duration_ns", "gpu_duration_ns", "gpu_ts_ns",
                                       "gpu_ts_rel_ns", "device"]
    from_json = [{"list": name, **row} for name, entry in doc["outliers"].items() for row in entry["worst"]]
    assert len(worst) == len(from_json) > 0
    assert worst.fillna("").to_dict("records") == [{k: ("" if v is None else v) for k, v in row.items()}
                                                  for row in from_json]
    # relative = absolute - the trace start, checked against the events themselves
    events = _events(sample)
    start = _trace_start_ns(events)
    assert doc["trace_start_ns"] == start
    gpu_starts = {int(Decimal(str(e["ts"])) * 1000) for e in events if e.get("cat") in ("kernel", "gpu_memcpy",
                                                                                        "gpu_memset")}
    for row in from_json:
        assert row["gpu_ts_ns"] in gpu_starts and row["gpu_ts_rel_ns"] == row["gpu_ts_ns"] - start


def test_launch_stats_text_shows_times_from_the_trace_start(sample):
    r = run_cli("launch-stats", str(sample.path), "--delay-cutoff", "0us", "--top", "1")
    text = r.stdout.decode()
    doc = json.loads(run_cli("launch-stats", str(sample.path), "--format", "json", "--delay-cutoff", "0us",
                             "--top", "1").stdout)
    row = doc["outliers"]["long_delay"]["worst"][0]
    assert "at ms" in text and "GPU ts us" in text and "from the trace start" in text
    assert f"{row['gpu_ts_rel_ns'] / 1e6:,.3f}" in text
    assert max(len(line.replace(str(sample.path), "PATH")) for line in text.splitlines()) <= 100


# -- 5. progress: the speed of the JSON, uncompressed, per pass -----------------------------------


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_counts_the_uncompressed_json_per_pass(sample):
    from traceforge.io.read.reader import TraceReader
    from traceforge.util import progress

    stream = _Terminal()
    with progress.shown(True, stream):
        for _ in range(2):  # a scan pass, then a write pass
            for _ in TraceReader(str(sample.path)).batches():
                pass
    lines = [line.split("\r")[-1].replace("\x1b[K", "") for line in stream.getvalue().split("\n") if line]
    json_mb = f"{len(sample.raw) / 1e6:,.1f} MB JSON"  # the decompressed size, not the .gz file's
    assert [line.split()[0] for line in lines] == ["scan", "write"]
    for line in lines:
        assert "100%" in line and json_mb in line and line.endswith("ETA 0:00"), line
    assert sample.path.stat().st_size < len(sample.raw) / 3


def test_progress_line_speed_is_of_the_json():
    from traceforge.util.progress import ProgressBar

    stream, now = io.StringIO(), [0.0]
    bar = ProgressBar(stream, clock=lambda: now[0])
    bar("scan", 0, 100_000_000)
    now[0] = 2.0
    bar.add_json(1_000_000_000)  # 10x the compressed bytes
    bar("scan", 50_000_000, 100_000_000)
    assert stream.getvalue().endswith("\rscan   50% [############            ] 1,000.0 MB JSON  500.0 MB/s  ETA 0:02\x1b[K")


# -- 6. open: HEAD is answered; a port ui.perfetto.dev will not fetch from is said --------------


def test_open_answers_head_and_explains_another_port(sample):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "traceforge", "open", str(sample.path), "--port", str(port),
                             "--no-browser"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        trace_url = proc.stdout.readline().decode().strip().split("url=", 1)[1]
        with urllib.request.urlopen(urllib.request.Request(trace_url, method="HEAD"), timeout=10) as r:
            assert r.status == 200 and r.read() == b""
            assert int(r.headers["Content-Length"]) == sample.path.stat().st_size
            assert r.headers["Access-Control-Allow-Origin"] == "https://ui.perfetto.dev"
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=10)
    assert f"fetches traces from 127.0.0.1:9001 only; on port {port}" in err.decode()
