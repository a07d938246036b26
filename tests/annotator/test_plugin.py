"""A feature is one module: a toy one with one track and one table, declared in a module outside
traceforge and named in ``TRACEFORGE_PLUGINS``, shows up everywhere the built-in ones do
(``annotate --help``, ``--all``, the per-rank summary, ``traceforge.annotate``, ``stats --table``
in text, CSV and JSON, ``Trace.table``, its ``Trace`` method and its path-level function) with no
other file edited. docs/architecture.md ("Adding a feature") walks through the same module."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import orjson
import pytest

from tests.conftest import ROOT

SAMPLE = ROOT / "samples" / "train_step.json.gz"

TOY = textwrap.dedent('''
    """A toy analysis: how many GPU ops have started, every ``toy_every``-th GPU op start."""

    import numpy as np
    import pandas as pd

    from traceforge.annotator.plugin import Analysis, Column, Figure, Option, Table
    from traceforge.emit.tracks import CounterTrack, Injections


    def started(cols, every):
        ts = np.unique(np.sort(cols.gpu.ts)[::every])
        return ts, np.arange(1, len(ts) + 1)


    def table(cols, ctx):
        ts, count = started(cols, ctx.options["toy_every"])
        return pd.DataFrame({"ts": ts, "started": count})


    def build(cols, ctx):
        ts, count = started(cols, ctx.options["toy_every"])
        track = CounterTrack(pid=cols.gpu_pid(int(cols.gpu.device[0])), name="Toy", key="started", ts=ts,
                             values=count)
        return Injections([track], [f"toy: {len(ts)} points"], figures={"toy_points": len(ts)})


    ANALYSIS = Analysis(
        "toy", "a toy counter track: GPU ops started so far", build,
        options=(Option("toy_every", "a point every N GPU ops (default 2)", default=2, parse=int, metavar="N"),),
        launch_apis=frozenset(), figures=(Figure("toy_points", "toy points"),),
        tables=(Table("toy", "Toy: GPU ops started so far", (Column("ts us", "ts", "ts_us"),
                                                              Column("started", "started", "count")), table),),
    )
''')


@pytest.fixture
def toy_env(tmp_path, monkeypatch):
    (tmp_path / "toy_analysis.py").write_text(TOY)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]),
           "TRACEFORGE_PLUGINS": "toy_analysis"}
    return env


def _run(env, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "traceforge", *args], env=env, capture_output=True, text=True,
                          timeout=300)


def _toy_points(path: Path) -> list[dict]:
    events = orjson.loads(gzip.open(path).read())["traceEvents"]
    return [e for e in events if e.get("name") == "Toy"]


def test_a_toy_analysis_is_a_flag_with_its_options(toy_env):
    done = _run(toy_env, "annotate", "--help")
    assert done.returncode == 0, done.stderr
    assert "--toy " in done.stdout and "--toy-every N" in done.stdout and "GPU ops started so far" in done.stdout


def test_a_toy_analysis_runs_in_all_and_in_the_rank_summary(toy_env, tmp_path):
    ranks = tmp_path / "ranks"
    ranks.mkdir()
    raw = gzip.open(SAMPLE).read()
    for rank in (0, 1):  # one trace per rank: the sample's distributedInfo says rank 0
        (ranks / f"rank{rank}.json.gz").write_bytes(gzip.compress(raw.replace(b'"rank": 0', f'"rank": {rank}'.encode(), 1)))
    out = tmp_path / "out"
    done = _run(toy_env, "annotate", str(ranks), "--all", "--toy-every", "3", "-o", str(out), "-q")
    assert done.returncode == 0, done.stderr
    points = _toy_points(out / "rank0.annotated.json.gz")
    assert len(points) > 10 and [p["args"]["started"] for p in points] == list(range(1, len(points) + 1))
    header = next(line for line in done.stdout.splitlines() + done.stderr.splitlines() if "toy points" in line)
    assert header.split().count("toy") == 1
    assert f"toy: {len(points)} points" in done.stderr


def test_a_toy_analysis_is_in_the_python_api(toy_env, tmp_path):
    code = textwrap.dedent(f'''
        import traceforge
        result = traceforge.annotate({str(SAMPLE)!r}, {str(tmp_path / "api.json.gz")!r}, toy=True,
                                     options={{"toy_every": 4}})
        table = traceforge.load({str(SAMPLE)!r}).table("toy", toy_every=4)
        assert "toy" in traceforge.ANALYSES
        print(result.figures["toy_points"], len(table), int(table["started"].iloc[-1]))
    ''')
    done = subprocess.run([sys.executable, "-c", code], env=toy_env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    figures, rows, last = map(int, done.stdout.split())
    assert figures == rows == last == len(_toy_points(tmp_path / "api.json.gz")) > 0


def test_a_plugin_module_that_cannot_be_imported_is_one_warning(toy_env):
    done = _run({**toy_env, "TRACEFORGE_PLUGINS": "no_such_module"}, "annotate", "--help")
    assert done.returncode == 0 and "--queue-length" in done.stdout
    assert done.stderr.splitlines() == ["traceforge: warning: analysis module no_such_module (from TRACEFORGE_PLUGINS) "
                                        "cannot be imported: No module named 'no_such_module'; left out"]


def test_a_toy_feature_is_a_stats_table_in_text_csv_and_json(toy_env):
    done = _run(toy_env, "stats", "--help")
    assert done.returncode == 0, done.stderr
    assert "gpu_annotations, toy" in " ".join(done.stdout.split())  # the last of the --table choices
    text = _run(toy_env, "stats", str(SAMPLE), "--table", "toy")
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    at = lines.index("Toy: GPU ops started so far")
    assert lines[at + 1].split() == ["ts", "us", "started"] and lines[at + 2].split()[-1] == "1"
    csv = _run(toy_env, "stats", str(SAMPLE), "--table", "toy", "--format", "csv")
    assert csv.returncode == 0, csv.stderr
    rows = csv.stdout.splitlines()
    assert rows[0] == "rank,ts,started" and rows[1].endswith(",1") and rows[-1].endswith(f",{len(rows) - 1}")
    doc = orjson.loads(_run(toy_env, "stats", str(SAMPLE), "--table", "toy", "--table", "summary",
                            "--format", "json").stdout)
    assert list(doc) == ["summary", "toy"] and [r["started"] for r in doc["toy"]] == list(range(1, len(rows)))
    assert [r["ts"] for r in doc["toy"]] == [int(r.split(",")[1]) for r in rows[1:]]  # exact ns
    assert lines[at + 2].split()[0] == f"{doc['toy'][0]['ts'] // 1000}.{doc['toy'][0]['ts'] % 1000:03d}"


def test_a_toy_feature_has_a_trace_method_and_a_path_function(toy_env):
    code = textwrap.dedent(f'''
        import traceforge
        loaded = traceforge.load({str(SAMPLE)!r})
        method, function = loaded.toy(toy_every=3), traceforge.toy({str(SAMPLE)!r}, toy_every=3)
        assert method.equals(function) and method.equals(loaded.table("toy", toy_every=3))
        assert "toy" in traceforge.__all__ and traceforge.table({str(SAMPLE)!r}, "toy").equals(loaded.toy())
        every_other = traceforge.stats({str(SAMPLE)!r}, tables=["toy"]).toy
        assert every_other.drop(columns="rank").equals(loaded.toy())
        print(len(method), len(loaded.toy()), int(method["started"].iloc[-1]))
    ''')
    done = subprocess.run([sys.executable, "-c", code], env=toy_env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    rows, default_rows, last = map(int, done.stdout.split())
    assert rows == last > 10 and default_rows > rows  # every 2nd GPU op start (the default) gives more points
