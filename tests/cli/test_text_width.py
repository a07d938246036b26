"""Every command's text output fits 100 columns (``cli.output.WIDTH``), on the sample and on the
shared real traces: tables in blocks, names cut in the middle, notes wrapped. A line naming a
path longer than that is the one exception the README allows."""

from __future__ import annotations

import pytest

from tests.conftest import TRACES, run_cli
from traceforge.cli.commands.tables.stats import TABLES as STATS_TABLES
from traceforge.cli.main import build_parser
from traceforge.cli.output import WIDTH


def _commands(a: str, b: str, tmp: str) -> list[tuple[str, ...]]:
    """Each command, with its text tables, on trace ``a`` (``b``: a second trace)."""
    return [
        ("info", a), ("check", a), ("stats", a), ("stats", a, *[x for t in STATS_TABLES for x in ("--table", t)]),
        ("stats", "--compare", a, b), ("stats", a, b),
        ("launch-stats", a), ("launch-stats", a, "--table", "outliers"), ("launch-stats", a, b),
        ("critical-path", a), ("critical-path", a, "--table", "segments"), ("critical-path", a, b),
        ("patterns", a), ("patterns", a, "--op", "aten::conv2d", "--top-k", "5"), ("patterns", a, b),
        ("classify", a), ("classify", a, "--kernels"), ("classify", a, b),
        ("counters", a), ("diff", a, b),
        ("annotate", a, "--all", "-o", f"{tmp}/a.json.gz"), ("repair", a, "-o", f"{tmp}/r.json.gz"),
        ("trim", a, "--steps", "3-4", "-o", f"{tmp}/t.json.gz"), ("export", a, "--csv", f"{tmp}/csv"),
        ("roofline", a), ("collectives", a, b), ("merge", a, b, "-o", f"{tmp}/m.json.gz"),
    ]


def _wide_lines(r, paths: list[str]) -> list[str]:
    """The lines wider than WIDTH, a path counted as the short one a user would type (t.json.gz)."""
    lines = (r.stdout + r.stderr).decode("utf-8", "replace").splitlines()
    wide = []
    for line in lines:
        shown = line
        for p in sorted(paths, key=len, reverse=True):
            shown = shown.replace(p, "t.json.gz")
        if len(shown) > WIDTH:
            wide.append(line)
    return wide


def test_every_command_is_checked(tmp_path):
    """``open`` serves a file and ``report`` writes HTML: the rest print text, and each is run here."""
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    checked = {c[0] for c in _commands("A", "B", str(tmp_path))}
    assert set(sub.choices) - {"open", "report"} == checked


def _run_all(a: str, b: str, tmp_path) -> list[str]:
    wide = []
    for command in _commands(a, b, str(tmp_path)):
        r = run_cli("-q", *command)
        assert r.returncode in (0, 1), (command, r.stderr[-2000:])
        wide += [f"{' '.join(command)}: {line}" for line in _wide_lines(r, [a, b, str(tmp_path)])]
    return wide


def test_text_fits_on_the_sample(sample, make_sample, tmp_path):
    other = make_sample(steps=3, seed=1)
    assert _run_all(str(sample.path), str(other.path), tmp_path) == []


@pytest.mark.integration
@pytest.mark.parametrize("name", ["h100_resnet50", "h100_ddp", "nccl"])
def test_text_fits_on_the_shared_traces(name, tmp_path):
    assert _run_all(str(TRACES[name]), str(TRACES["h100_cudagraph"]), tmp_path) == []


@pytest.mark.integration
def test_counters_with_ncu_fits():
    trace = TRACES["h100_ncu_target"]
    csv = trace.parent / "ncu_raw.csv"
    for command in (("counters", str(trace), "--ncu", str(csv)), ("counters", str(csv))):
        r = run_cli(*command)
        assert r.returncode == 0, r.stderr
        assert _wide_lines(r, [str(trace), str(csv)]) == []
