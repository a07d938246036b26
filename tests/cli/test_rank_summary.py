"""``stats``' text over many ranks is made rank by rank in the jobs (``api.files.stats_each``),
and must print exactly what rendering the gathered tables of every rank did: the same lines,
ranks in the same order (as first met in the tables: the order of the inputs, except where
``--top`` sorts ``launch_overlaps`` by rank number), the same notes for ranks without GPU ops."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import orjson
import pytest

import traceforge
from tests.api.test_fan_out import DISTRIBUTED, RANKS
from tests.conftest import run_cli
from traceforge.cli.commands.tables import stats as stats_command
from traceforge.cli.rank_summary import summarize

# A rank with CPU ops and no GPU op: no rows in the GPU tables, a note on stderr.
CPU_ONLY = {
    "distributedInfo": {"backend": "nccl", "rank": 7},
    "traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 100, "dur": 20},
        {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 130, "dur": 5},
    ],
}


@pytest.fixture(scope="module")
def ranks(make_sample, tmp_path_factory) -> Path:
    """test_fan_out's three ranks of different sizes (file names in the order ranks 2, 1, 0) and
    a CPU-only rank 7 whose file sorts first."""
    where = tmp_path_factory.mktemp("stats_text") / "ranks"
    where.mkdir()
    for rank, (steps, seed) in RANKS.items():
        raw = make_sample(steps=steps, seed=seed).raw
        named = raw.replace(DISTRIBUTED, b'"distributedInfo": {"backend": "nccl", "rank": %d' % rank)
        (where / f"trace_{'cba'[rank]}.json.gz").write_bytes(gzip.compress(named, 1, mtime=0))
    (where / "cpu.json.gz").write_bytes(gzip.compress(orjson.dumps(CPU_ONLY), 1, mtime=0))
    return where


def _gathered_text(where: Path, wanted: tuple[str, ...], top: int) -> tuple[str, str]:
    """(stdout, stderr) as the command made them before: every rank's tables gathered (the
    API's ``stats``), then cut, put in rank order, noted and rendered at once, then the summary
    across ranks."""
    tables = {name: stats_command._in_rank_order(df)
              for name, df in stats_command._limited(traceforge.stats(where, tables=wanted), wanted, top).items()}
    notes = "".join(f"{note}\n" for note in stats_command._notes(tables.get("summary")))
    text = "\n".join(stats_command._text(tables)) + "\n"
    figures = stats_command._rank_figures(tables)
    if len(figures) > 1:
        text += "\n".join(summarize([(rank, *figures[rank]) for rank in sorted(figures)]).lines()) + "\n"
    return text, notes


CASES = {
    "default": (),
    "top 0": ("--top", "0"),
    "top 1": ("--top", "1"),
    "overlaps sorted by rank, then temporal": ("--table", "temporal", "--table", "launch_overlaps", "--top", "2"),
    "overlaps in input order": ("--table", "launch_overlaps", "--table", "temporal", "--top", "0"),
    "GPU tables only": ("--table", "kernel_types", "--table", "queue"),
    "totals": ("--table", "activity_all", "--table", "memcpy"),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("jobs", ["1", "2"])
def test_text_made_per_rank_is_the_gathered_tables_text(ranks, case, jobs):
    options = CASES[case]
    run = run_cli("stats", str(ranks), *options, "--jobs", jobs)
    assert run.returncode == 0, run.stderr.decode()
    wanted = tuple(dict.fromkeys(options[i + 1] for i, word in enumerate(options) if word == "--table"))
    top = int(options[options.index("--top") + 1]) if "--top" in options else stats_command.TEXT_TOP
    stdout, notes = _gathered_text(ranks, wanted or stats_command.default_tables(), top)
    assert run.stdout.decode() == stdout
    assert run.stderr.decode() == notes


def test_the_cases_place_ranks_apart_from_the_input_order(ranks):
    """The cases above test the order: the files in the order ranks 7, 2, 1, 0, printed in rank
    order whatever the tables (issue 53 item 7)."""
    def heads(*options: str) -> list[str]:
        out = run_cli("stats", str(ranks), *options, "--jobs", "2").stdout.decode().splitlines()
        return [line.split(":")[0] for line in out if line.startswith("rank ")]

    assert heads() == ["rank 0", "rank 1", "rank 2", "rank 7"]
    assert heads("--table", "temporal", "--table", "launch_overlaps", "--top", "2") == [
        "rank 0", "rank 1", "rank 2", "rank 7"]
    assert heads("--table", "launch_overlaps", "--table", "temporal", "--top", "0") == [
        "rank 0", "rank 1", "rank 2", "rank 7"]
    assert "no GPU events" in run_cli("stats", str(ranks), "--jobs", "2").stderr.decode()


def test_a_rank_with_no_rows_in_any_table_prints_nothing(ranks, tmp_path):
    only_cpu = tmp_path / "cpu"
    only_cpu.mkdir()
    shutil.copy(ranks / "cpu.json.gz", only_cpu)
    run = run_cli("stats", str(only_cpu), "--table", "kernel_types")
    assert run.returncode == 0, run.stderr.decode()
    assert run.stdout.decode() == "\n"
