"""Every many-file command fans out the same way (``api.fan_out``): ``--jobs 2`` prints and
writes exactly what ``--jobs 1`` does, the summary across ranks comes from the jobs' small
results (no trace is read again for it), and rank heads are read without a reader's batch.
The Dask path is checked against the local one in ``tests/cli/test_ranks.py`` (launch-stats,
annotate) and here (stats, critical-path)."""

from __future__ import annotations

import gzip
import re
import time
from collections import Counter
from pathlib import Path

import orjson
import pytest

from tests.conftest import load_script, run_cli
from traceforge.api import fan_out
from traceforge.errors import TraceforgeError
from traceforge.io.read import reader as reader_module
from traceforge.io.read.rank_files import head_rank

DISTRIBUTED = b'"distributedInfo": {"backend": "nccl", "rank": 0'
# rank -> (steps, seed) of the sample it is made from: sizes differ, so the largest (started
# first) is not rank 0, and jobs finish out of rank order. File names sort against the ranks.
RANKS = {0: (3, 1), 1: (5, 2), 2: (2, 3)}


@pytest.fixture(scope="module")
def rank_dir(make_sample, tmp_path_factory) -> Path:
    """Three samples of different sizes, ``distributedInfo.rank`` 0..2 in their heads."""
    where = tmp_path_factory.mktemp("fan_out") / "ranks"
    where.mkdir()
    for rank, (steps, seed) in RANKS.items():
        raw = make_sample(steps=steps, seed=seed).raw
        assert raw.count(DISTRIBUTED) == 1
        named = raw.replace(DISTRIBUTED, b'"distributedInfo": {"backend": "nccl", "rank": %d' % rank)
        (where / f"trace_{'cba'[rank]}.json.gz").write_bytes(gzip.compress(named, 1, mtime=0))
    return where


# Each command as a user runs it over a directory of ranks; OUT is where it writes files.
COMMANDS = {
    "annotate": ("annotate", "{dir}", "--all", "-o", "{out}"),
    "stats": ("stats", "{dir}"),
    "stats-json": ("stats", "{dir}", "--format", "json", "--table", "summary", "--table", "top_kernels"),
    "classify": ("classify", "{dir}"),
    "launch-stats": ("launch-stats", "{dir}"),
    "patterns": ("patterns", "{dir}"),
    "critical-path": ("critical-path", "{dir}", "--table", "summary", "--table", "segments"),
    "report": ("report", "{dir}", "-o", "{out}/report.html"),
}


def _run(command: str, rank_dir: Path, out: Path, *more: str):
    out.mkdir(parents=True, exist_ok=True)
    args = [a.format(dir=rank_dir, out=out) for a in COMMANDS[command]]
    return run_cli(*args, *more, process=command == "report")  # bokeh numbers its models per process


def _untimed(text: bytes) -> bytes:
    """stderr less the seconds each rank took (``... appended in 0.1 s``)."""
    return re.sub(rb" in \d+(\.\d+)? s\b", b" in - s", text)


UUID = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _files(out: Path) -> dict[str, bytes]:
    """The files written, less the random element ids bokeh gives the report page each time."""
    return {p.name: UUID.sub(b"<id>", p.read_bytes()) if p.suffix == ".html" else p.read_bytes()
            for p in sorted(out.iterdir())}


@pytest.mark.slow
@pytest.mark.parametrize("command", COMMANDS)
def test_two_jobs_print_and_write_what_one_does(command, rank_dir, tmp_path):
    if command == "report":
        pytest.importorskip("bokeh", reason="the report extra (bokeh) is not installed")
    one = _run(command, rank_dir, tmp_path / "one", "--jobs", "1")
    two = _run(command, rank_dir, tmp_path / "two", "--jobs", "2")
    assert one.returncode == 0, one.stderr.decode()
    assert two.returncode == 0, two.stderr.decode()
    assert one.stdout or _files(tmp_path / "one")
    assert two.stdout == one.stdout
    assert _untimed(two.stderr.replace(b"/two", b"/one")) == _untimed(one.stderr)
    assert _files(tmp_path / "two") == _files(tmp_path / "one")
    if command == "stats-json":  # every rank, in rank order (the files are in the order 2, 1, 0)
        assert [r["rank"] for r in orjson.loads(one.stdout)["summary"]] == [0, 1, 2]


def test_the_api_fans_out_stats(rank_dir):
    import traceforge

    one = traceforge.stats(rank_dir, tables=("summary", "top_kernels", "streams"))
    two = traceforge.stats(rank_dir, tables=("summary", "top_kernels", "streams"), jobs=2)
    for name, table in one.tables().items():
        assert table.equals(two.tables()[name]), name
    assert one.summary["rank"].tolist() == [2, 1, 0]


@pytest.mark.parametrize("command", ["annotate", "stats", "classify", "launch-stats", "patterns", "critical-path"])
def test_the_summary_reads_no_trace_again(command, rank_dir, tmp_path, monkeypatch):
    """A run over the ranks opens each trace as often as a run on that trace alone does: the
    summary across ranks is made from the jobs' results (``--jobs 1``: all in this process)."""
    opened: Counter[str] = Counter()
    batches = reader_module.TraceReader.batches

    def counted(self):
        opened[Path(self.path).name] += 1
        return batches(self)

    monkeypatch.setattr(reader_module.TraceReader, "batches", counted)
    alone: Counter[str] = Counter()
    for i, trace in enumerate(sorted(rank_dir.iterdir())):
        single = tmp_path / f"single{i}"
        single.mkdir()
        (single / trace.name).symlink_to(trace)
        r = run_cli(*(a.format(dir=single / trace.name, out=single / "out.json.gz") for a in COMMANDS[command]))
        assert r.returncode == 0, r.stderr.decode()
        alone.update(opened)
        opened.clear()
    r = _run(command, rank_dir, tmp_path / "all", "--jobs", "1")
    assert r.returncode == 0, r.stderr.decode()
    assert opened == alone and set(opened) == {p.name for p in rank_dir.iterdir()}


def test_head_rank_reads_only_the_head(rank_dir, tmp_path):
    """``distributedInfo.rank`` before ``traceEvents`` (as Kineto writes it), from the head alone:
    a file cut short after its head still answers; a rank key inside a value, after the events
    or in an array trace does not count."""
    assert [head_rank(str(p)) for p in sorted(rank_dir.iterdir())] == [2, 1, 0]
    head = gzip.decompress(sorted(rank_dir.iterdir())[0].read_bytes())[:100_000]
    cut = tmp_path / "cut.json"
    cut.write_bytes(head)
    assert head_rank(str(cut)) == 2
    cases = {
        "after.json": b'{"traceEvents": [], "distributedInfo": {"rank": 5}}',
        "nested.json": b'{"other": {"distributedInfo": {"rank": 5}, "traceEvents": []}, "traceEvents": []}',
        "array.json": b'[{"distributedInfo": {"rank": 5}}]',
        "bom.json": b'\xef\xbb\xbf {"distributedInfo": {"rank": 7},\n "traceEvents": []}',
        "late.json": b'{"x": "' + b"a" * 200_000 + b'", "distributedInfo": {"rank": 8}, "traceEvents": []}',
    }
    found = {}
    for name, text in cases.items():
        (tmp_path / name).write_bytes(text)
        found[name] = head_rank(str(tmp_path / name))
    assert found == {"after.json": None, "nested.json": None, "array.json": None, "bom.json": 7, "late.json": 8}


def test_results_come_back_in_item_order(tmp_path):
    """The largest trace starts first, yet each result is at its item's place."""
    sizes = {"a": 10, "b": 3000, "c": 20}
    for name, size in sizes.items():
        (tmp_path / name).write_bytes(b"x" * size)
    paths = [str(tmp_path / n) for n in sizes]
    expected = [b"x" * size for size in sizes.values()]
    assert fan_out.run_jobs(Path.read_bytes, [Path(p) for p in paths], paths, jobs=2) == expected
    assert fan_out.run_jobs(Path.read_bytes, [Path(p) for p in paths], paths, jobs=1) == expected


@pytest.mark.slow
def test_cluster_stats_and_critical_path_equal_the_local_run(rank_dir):
    distributed = pytest.importorskip("distributed", reason="--cluster needs dask[distributed] (the test extra)")
    local = {c: _run(c, rank_dir, rank_dir.parent / "local", "--jobs", "1") for c in ("stats", "critical-path")}
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1, host="127.0.0.1",
                                  dashboard_address=None) as cluster:
        for command, expected in local.items():
            r = _run(command, rank_dir, rank_dir.parent / "remote", "--cluster", cluster.scheduler_address)
            assert r.returncode == 0, r.stderr.decode()
            assert r.stdout == expected.stdout, command


@pytest.mark.parametrize("nested", [False, True])
def test_bench_rank_copies_differ_only_in_rank(nested, sample, tmp_path):
    """``scripts/bench.py --ranks``'s copies: ranks 0..N-1 in their heads, the events untouched;
    also where ``distributedInfo`` holds objects (torch 2.x's ``pg_config``)."""
    bench = load_script("bench")
    raw = sample.raw
    if nested:
        raw = raw.replace(DISTRIBUTED, DISTRIBUTED + b', "pg_config": [{"pg_name": "0", "ranks": [0]}]')
    trace = tmp_path / "t.json.gz"
    trace.write_bytes(gzip.compress(raw, 1))
    directory = bench.rank_copies(trace, 3, 1, tmp_path)
    copies = sorted(directory.iterdir())
    assert [head_rank(str(p)) for p in copies] == [0, 1, 2]
    events = raw[raw.index(b'"traceEvents"'):]
    for path in copies:
        text = gzip.decompress(path.read_bytes())
        assert text[text.index(b'"traceEvents"'):] == events
        assert orjson.loads(text)["distributedInfo"] == {"rank": int(path.name[4]), "world_size": 3}


def _fails_after(item: tuple[int, float, bool]) -> int:
    """A job: waits ``delay`` s, then returns its index or fails."""
    index, delay, ok = item
    time.sleep(delay)
    if not ok:
        raise TraceforgeError(f"item {index} failed")
    return index


def test_the_error_is_the_first_failing_item_s_not_the_first_to_fail(tmp_path):
    """Items 0 and 2 fail; 2 (started beside 0, the largest) fails first, 0 half a second
    later: the error is item 0's, as one job at a time gives; item 1 never matters."""
    paths = []
    for i, size in enumerate((3000, 10, 2000)):  # largest first: 0 and 2 start together
        (tmp_path / f"t{i}").write_bytes(b"x" * size)
        paths.append(str(tmp_path / f"t{i}"))
    items = [(0, 0.5, False), (1, 0.0, True), (2, 0.0, False)]
    for jobs in (1, 2):
        with pytest.raises(TraceforgeError, match=r"^item 0 failed$"):
            fan_out.run_jobs(_fails_after, items, paths, jobs=jobs)
    assert fan_out.run_jobs(_fails_after, [(0, 0.0, True), (1, 0.0, True)], paths[:2], jobs=2) == [0, 1]

def test_every_many_file_command_numbers_the_ranks_alike(tmp_path):
    """One rule for a trace's rank (``io.rank_files.file_ranks``): distributedInfo, else the
    name, else after the highest found. A file with neither beside rank1.json is rank 6 here
    for stats as for launch-stats (stats took its position, 1, and called it a duplicate)."""
    kernel = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 2,
              "args": {"device": 0, "stream": 7, "correlation": 1}}
    traces = {"a.json": {"distributedInfo": {"rank": 5}}, "rank1.json": {}, "foo.json": {}}
    for name, head in traces.items():
        (tmp_path / name).write_bytes(orjson.dumps({**head, "traceEvents": [kernel]}))
    paths = [str(tmp_path / name) for name in traces]
    stats = run_cli("stats", *paths, "--format", "json", "--table", "summary")
    assert stats.returncode == 0, stats.stderr
    assert [row["rank"] for row in orjson.loads(stats.stdout)["summary"]] == [1, 5, 6]
    launch = run_cli("launch-stats", *paths)
    assert re.findall(rb"== rank (\d+):", launch.stdout) == [b"1", b"5", b"6"], launch.stdout
