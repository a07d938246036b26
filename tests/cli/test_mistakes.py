"""Small CLI mistakes a new user makes: ``critical-path --format csv`` with the default table,
``classify --elapsed-s`` before the path, ``annotate --repair`` alone, ``%%`` in --help."""

import io

import pandas as pd
import pytest

from tests.conftest import run_cli
from traceforge.cli.main import build_parser


def test_critical_path_csv_takes_the_default_table(sample):
    r = run_cli("critical-path", str(sample.path), "--format", "csv")
    assert r.returncode == 0, r.stderr
    table = pd.read_csv(io.BytesIO(r.stdout))
    assert {"rank", "label", "span_ns", "length_ns"} <= set(table.columns)
    assert len(table) == 5  # the sample's 5 steps
    r = run_cli("critical-path", str(sample.path), "--format", "csv", "--table", "summary", "--table", "segments")
    assert r.returncode == 1 and b"--table" in r.stderr


def test_classify_elapsed_s_leaves_the_path(sample):
    path = str(sample.path)
    before = run_cli("classify", "--elapsed-s", "15.5", path, "--format", "json")
    after = run_cli("classify", path, "--format", "json", "--elapsed-s", "15.5")
    assert before.returncode == 0, before.stderr
    assert b'"window_ns": 15500000000' in before.stdout
    assert before.stdout == after.stdout
    several = run_cli("classify", "--elapsed-s", "15,16", path, path, "--format", "json")
    assert several.returncode == 0, several.stderr
    assert b'"window_ns": 15000000000' in several.stdout and b'"window_ns": 16000000000' in several.stdout
    repeated = run_cli("classify", "--elapsed-s", "15", "--elapsed-s", "16", path, path, "--format", "json")
    assert repeated.stdout == several.stdout


def test_annotate_repair_alone_points_to_repair(sample, tmp_path):
    out = tmp_path / "out.json.gz"
    r = run_cli("annotate", str(sample.path), "--repair", "-o", str(out))
    err = r.stderr.decode()
    assert r.returncode == 1 and err.count("\n") == 1
    assert f"traceforge repair {sample.path}" in err
    assert not out.exists()


def _parsers():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return sorted(sub.choices.items())


@pytest.mark.parametrize("name,parser", _parsers(), ids=[n for n, _ in _parsers()])
def test_help_has_no_literal_double_percent(name, parser):
    text = parser.format_help()
    assert "%%" not in text, f"{name} --help prints a literal %%"
