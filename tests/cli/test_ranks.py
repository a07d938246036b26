"""Many rank traces at once (--jobs, --cluster), the summary across ranks, and the progress bar."""

from __future__ import annotations

import gzip
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
import zstandard

from tests.conftest import ROOT, TRACES, raw_json, stderr_on_a_terminal
from traceforge.api.results import gpu_figures
from traceforge.cli.main import main
from traceforge.cli.rank_summary import summarize
from traceforge.cli.ranks import rank_files
from traceforge.columns.scan import scan
from traceforge.util.progress import ProgressBar

RANK_KEY = b'"distributedInfo": {"rank": 0}'
# File names in another order than the ranks, so the order must come from distributedInfo.
RANKS = {"trace_a.json.gz": 2, "trace_b.json.zst": 0, "trace_c.json.gz": 3, "trace_d.json.zst": 1}
STRAGGLER = 3  # this rank's trace is tiled 4 times, the others twice: twice the GPU busy time


def _tile(copies: int, out: Path) -> bytes:
    subprocess.run([sys.executable, str(ROOT / "scripts" / "tile_trace.py"), str(TRACES["alexnet"]), "-o", str(out),
                    "--copies", str(copies)], check=True, capture_output=True, timeout=120)
    return out.read_bytes()


@pytest.fixture(scope="module")
def rank_dir(tmp_path_factory) -> Path:
    """Four tiled copies of the alexnet trace with distributedInfo.rank set to 0..3 in their bytes."""
    work = tmp_path_factory.mktemp("ranks")
    tiled = {n: _tile(n, work / f"tiled{n}.json") for n in (2, 4)}
    traces = work / "traces"
    traces.mkdir()
    for name, rank in RANKS.items():
        data = tiled[4 if rank == STRAGGLER else 2]
        assert data.count(RANK_KEY) == 1 and data.index(RANK_KEY) < data.index(b'"traceEvents"')
        data = data.replace(RANK_KEY, b'"distributedInfo": {"rank": %d}' % rank)
        packed = gzip.compress(data, mtime=0) if name.endswith(".gz") else zstandard.ZstdCompressor().compress(data)
        (traces / name).write_bytes(packed)
    return traces


def _by_rank(directory: Path) -> list[Path]:
    return sorted(directory.iterdir(), key=lambda p: RANKS[p.name])


def cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_ranks_come_from_distributed_info_then_the_file_name(rank_dir, tmp_path):
    files = rank_files([str(rank_dir)])
    assert [(Path(f.path).name, f.rank, f.source) for f in files] == [
        (p.name, RANKS[p.name], "distributedInfo") for p in _by_rank(rank_dir)]
    # The CUPTI trace writes distributedInfo after traceEvents (not read), triton has none.
    (tmp_path / "job_rank-7.json.gz").write_bytes(TRACES["cupti"].read_bytes())
    (tmp_path / "other.json.gz").write_bytes(TRACES["triton"].read_bytes())
    named = rank_files([str(tmp_path / "other.json.gz"), str(TRACES["df_index"]), str(tmp_path)])
    assert [(Path(f.path).name, f.rank, f.source) for f in named] == [
        ("df_index_resolver.json.gz", 1, "distributedInfo"), ("job_rank-7.json.gz", 7, "file name"),
        ("other.json.gz", 8, "order"), ("other.json.gz", 9, "order")]


def test_annotate_directory_equals_single_runs(rank_dir, tmp_path, capsys):
    out_dir = tmp_path / "out"
    code, out, err = cli(capsys, "annotate", str(rank_dir), "--all", "-o", str(out_dir), "--jobs", "2")
    assert code == 0, err
    assert sorted(p.name for p in out_dir.iterdir()) == sorted(  # compressed as each input is
        re.sub(r"\.json\.(gz|zst)$", r".annotated.json.\1", n) for n in RANKS)
    for path in _by_rank(rank_dir):
        many = out_dir / re.sub(r"\.json\.(gz|zst)$", r".annotated.json.\1", path.name)
        single = tmp_path / many.name
        code, _, single_err = cli(capsys, "annotate", str(path), "--all", "-o", str(single))
        assert code == 0, single_err
        assert many.read_bytes() == single.read_bytes()
        assert f"{many}: " in err and "\n  queue length: " in err
    summary = out[out.index("== across 4 ranks =="):].splitlines()
    rows = [line.split() for line in summary[2:6]]
    assert [int(r[0]) for r in rows] == [0, 1, 2, 3]
    busy = [float(r[2].replace(",", "")) for r in rows]
    assert busy[STRAGGLER] == pytest.approx(2 * busy[0], rel=1e-6) and len(set(busy[:3])) == 1
    assert re.search(rf"stragglers \(.*\): rank {STRAGGLER} GPU busy [\d,.]+ ms \(\+100% vs", " ".join(out.split()))


def _rank_blocks(text: str) -> dict[int, str]:
    parts = re.split(r"^== rank (\d+): .* ==\n", text, flags=re.M)
    blocks = {int(r): body for r, body in zip(parts[1::2], parts[2::2])}
    last = max(blocks)
    blocks[last] = blocks[last][: blocks[last].index("== across")]
    return {r: body[:-1] for r, body in blocks.items()}  # each block ends with a blank line


def test_launch_stats_directory_equals_single_runs(rank_dir, capsys):
    code, out, err = cli(capsys, "launch-stats", str(rank_dir), "--jobs", "2")
    assert code == 0, err
    blocks = _rank_blocks(out)
    assert sorted(blocks) == [0, 1, 2, 3]
    for path in _by_rank(rank_dir):
        code, single, _ = cli(capsys, "launch-stats", str(path))
        assert blocks[RANKS[path.name]] == single
    assert "longest launch delays: rank " in out
    code, out, err = cli(capsys, "launch-stats", str(rank_dir), "--jobs", "2", "--format", "json")
    doc = orjson.loads(out)
    assert "== across 4 ranks ==" in err  # the summary stays off stdout, so it parses
    for entry, path in zip(doc["ranks"], _by_rank(rank_dir)):
        _, single, _ = cli(capsys, "launch-stats", str(path), "--format", "json")
        assert entry["rank"] == RANKS[path.name] and entry["result"] == orjson.loads(single)
    assert [s["rank"] for s in doc["summary"]["stragglers"]] == [STRAGGLER]


def test_classify_directory_keeps_each_file(rank_dir, capsys):
    code, out, err = cli(capsys, "classify", str(rank_dir), "--format", "json", "--jobs", "2")
    assert code == 0, err
    files = orjson.loads(out)["files"]
    for entry, path in zip(files, sorted(rank_dir.iterdir())):  # a directory's files in name order
        _, single, _ = cli(capsys, "classify", str(path), "--format", "json")
        assert entry == orjson.loads(single)["files"][0]
    assert "== across 4 ranks ==" in err


def test_a_broken_rank_does_not_hide_the_others(rank_dir, tmp_path, capsys):
    broken = tmp_path / "rank5.json"
    broken.write_bytes(b'{"traceEvents": [{"ph": "X", "cat": "kernel"')
    code, out, err = cli(capsys, "launch-stats", str(rank_dir), str(broken), "--jobs", "1")
    assert code == 1
    assert re.search(r"error: rank 5: .*rank5\.json.*truncated", err)
    assert sorted(_rank_blocks(out)) == [0, 1, 2, 3] and "== across 4 ranks ==" in out


@pytest.mark.parametrize("args, message", [
    (["-o", "{file}"], "with several inputs -o names a directory"),
    (["-o", "-"], "several outputs cannot go to standard output"),
    (["--jobs", "2", "--cluster", "tcp://127.0.0.1:1"], "--jobs is for this machine"),
    (["-"], "works with one input only"),
])
def test_fan_out_usage_errors(rank_dir, tmp_path, capsys, args, message):
    existing = tmp_path / "file.json.gz"
    existing.write_bytes(b"")
    code, _, err = cli(capsys, "annotate", str(rank_dir), *[a.format(file=existing) for a in args], "--all")
    assert code == 1 and message in err and err.count("\n") == 1


@pytest.mark.parametrize("name", ["df_index", "negative_queue"])
def test_step_time_needs_no_cpu_ops(name):
    """Mined patterns, classify and the core tracks read no CPU op; their rank figures still
    have the median ProfilerStep time, the same as from every CPU op."""
    gpu_only = gpu_figures(scan(str(TRACES[name]), cpu_ops=False, keep_launch=lambda n: False))
    every = scan(str(TRACES[name]))
    steps = [d for n, d in zip(every.cpu_ops.name.tolist(), every.cpu_ops.dur.tolist())
             if every.names[n].startswith("ProfilerStep#")]
    assert len(steps) == 5 and gpu_only["step_ns"] == sorted(steps)[2] == gpu_figures(every)["step_ns"]


def test_stragglers_are_far_from_the_median():
    ms = 1_000_000
    runs = [(r, f"r{r}", {"gpu_busy_ns": busy * ms, "step_ns": 100 * ms}) for r, busy in enumerate([100, 104, 96, 150])]
    found = summarize(runs).stragglers
    assert [(s["rank"], s["figure"]) for s in found] == [(3, "gpu_busy_ns")]
    assert found[0]["median"] == 102 * ms and found[0]["deviation"] == pytest.approx(48 / 102)
    assert summarize(runs[:2]).stragglers == []  # two ranks: each as far from the median as the other


def test_cluster_results_equal_the_local_run(rank_dir, tmp_path, capsys, monkeypatch):
    distributed = pytest.importorskip("distributed", reason="--cluster needs dask[distributed] (the test extra)")
    code, local, _ = cli(capsys, "launch-stats", str(rank_dir), "--format", "json", "--jobs", "2")
    assert code == 0
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1, host="127.0.0.1",
                                  dashboard_address=None) as cluster:
        code, remote, err = cli(capsys, "launch-stats", str(rank_dir), "--format", "json",
                                "--cluster", cluster.scheduler_address)
        assert code == 0, err
        assert orjson.loads(remote) == orjson.loads(local)
        monkeypatch.chdir(tmp_path)  # relative paths are ours, not the workers' (started elsewhere)
        code, _, err = cli(capsys, "annotate", os.path.relpath(rank_dir), "--all", "-o", "remote",
                           "--cluster", cluster.scheduler_address)
        assert code == 0, err
    code, _, _ = cli(capsys, "annotate", str(rank_dir), "--all", "-o", str(tmp_path / "local"), "--jobs", "2")
    remote_files = sorted((tmp_path / "remote").iterdir())
    assert [p.name for p in remote_files] == [p.name for p in sorted((tmp_path / "local").iterdir())]
    assert all(p.read_bytes() == (tmp_path / "local" / p.name).read_bytes() for p in remote_files)


def test_progress_bar_on_a_terminal_only(tmp_path):
    trace = str(TRACES["nccl"])
    drawn = stderr_on_a_terminal("annotate", trace, "--launch-delay", "-o", str(tmp_path / "a.json.gz"))
    for pass_name in ("scan", "write"):  # launch delay patches args: the trace is read twice
        # the speed is of the JSON, uncompressed (issue 39 item 5): its size is the trace's raw size
        json_mb = f"{len(raw_json(TRACES['nccl'])) / 1e6:,.1f}"
        assert re.search(rf"\r{pass_name}  100% \[#+\] {json_mb} MB JSON  [\d.,]+ MB/s  ETA 0:00", drawn)
    assert drawn.index("\rscan") < drawn.index("\rwrite")
    quiet = stderr_on_a_terminal("annotate", trace, "--launch-delay", "-o", str(tmp_path / "b.json.gz"), "-q")
    assert "MB/s" not in quiet and "a.json.gz" not in quiet
    assert "b.json.gz: " in quiet and "\n  launch delay: " in quiet
    piped = subprocess.run([sys.executable, "-m", "traceforge", "annotate", trace, "--queue-length", "-o",
                            str(tmp_path / "c.json.gz")], capture_output=True, cwd=ROOT, timeout=120)
    assert piped.returncode == 0 and b"MB/s" not in piped.stderr and b"\r" not in piped.stderr
    assert raw_json(tmp_path / "a.json.gz") == raw_json(tmp_path / "b.json.gz")


def test_progress_line_rate_and_eta():
    stream, now = io.StringIO(), [0.0]
    bar = ProgressBar(stream, clock=lambda: now[0])
    bar("scan", 0, 100_000_000)
    now[0] = 2.0
    bar("scan", 50_000_000, 100_000_000)
    assert stream.getvalue() == "\rscan   50% [############            ] 50.0/100.0 MB  25.0 MB/s  ETA 0:02\x1b[K"
    now[0] = 4.0
    bar("scan", 100_000_000, 100_000_000)
    assert stream.getvalue().endswith("\rscan  100% [########################] 100.0/100.0 MB  25.0 MB/s  ETA 0:00\x1b[K\n")
    now[0] = 5.0
    bar("write", 0, None)  # stdin: no total, so no bar and no ETA
    now[0] = 6.0
    bar("write", 3_000_000, None)
    bar.stop()
    assert stream.getvalue().endswith("\rwrite  3.0 MB  3.0 MB/s\x1b[K\n")
