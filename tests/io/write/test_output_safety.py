"""Outputs never replace an input (issue 54 item 1): every writing command, given an output
that is one of the files it reads (the same name, a symlink, a hard link; a trace, a file in
an input directory, a --rules file), refuses in one line before anything is read, and the
input is unchanged. (``tests/io/write/test_output_onto_input.py`` covers -o of the trace writers on
their own input.)"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli
from traceforge.io.read import codec, rank_files

RULES = '{"name": "mine", "rules": [{"category": "all", "match": ".*"}]}'

# (command line with IN as the trace, OUT as the output, RULES as a rules file; which file OUT stands for)
REFUSED = {
    "annotate -o": (("annotate", "IN", "--queue-length", "-o", "OUT"), "trace"),
    "repair -o": (("repair", "IN", "-o", "OUT"), "trace"),
    "trim -o": (("trim", "IN", "--steps", "11", "-o", "OUT"), "trace"),
    "patterns -o": (("patterns", "IN", "-o", "OUT"), "trace"),
    "report -o": (("report", "IN", "-o", "OUT"), "trace"),
    "classify --html": (("classify", "IN", "--html", "OUT"), "trace"),
    "classify --html onto --rules": (("classify", "IN", "--rules", "RULES", "--html", "OUT"), "rules"),
    "annotate --classify --rules": (("annotate", "IN", "--classify", "--rules", "RULES", "-o", "OUT"), "rules"),
    "export --csv": (("export", "IN", "--csv", "OUTDIR"), "trace"),
    "export --parquet": (("export", "IN", "--parquet", "OUTDIR"), "trace"),
}


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def nothing_read(monkeypatch):
    """Opening any trace (or its head, for the rank) fails the test: the refusal comes first."""
    def refuse(path, *args, **kwargs):
        raise AssertionError(f"{path} read before the outputs were checked")

    monkeypatch.setattr(codec, "_open_raw", refuse)
    monkeypatch.setattr(rank_files, "head_rank", refuse)


def one_line_refusal(r) -> str:
    err = r.stderr.decode()
    assert r.returncode == 1 and err.count("\n") == 1 and "Traceback" not in err, err
    assert "refusing to overwrite the input" in err, err
    return err


@pytest.mark.parametrize("link", ["same name", "symlink", "hard link"])
@pytest.mark.parametrize("case", REFUSED)
def test_output_onto_an_input_is_refused_before_reading(case, link, tmp_path, sample, nothing_read):
    args, target = REFUSED[case]
    if "--parquet" in args and importlib.util.find_spec("pyarrow") is None:
        pytest.skip("Parquet needs pyarrow")
    trace = tmp_path / "t.json.gz"
    shutil.copyfile(sample.path, trace)
    rules = tmp_path / "rules.json"
    rules.write_text(RULES)
    victim = trace if target == "trace" else rules
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / ("kernel.parquet" if "--parquet" in args else "kernel.csv" if "--csv" in args else "o.html")
    if link == "same name":
        out = victim
        if "OUTDIR" in args:  # the directory holds the input under the name an export would give a table
            out = out_dir / ("kernel.parquet" if "--parquet" in args else "kernel.csv")
            trace = out
            shutil.move(tmp_path / "t.json.gz", trace)
            victim = trace
    elif link == "symlink":
        out.symlink_to(victim)
    else:
        os.link(victim, out)
    before = {p: digest(p) for p in tmp_path.rglob("*") if p.is_file()}
    argv = [{"IN": str(trace), "OUT": str(out), "RULES": str(rules), "OUTDIR": str(out_dir)}.get(a, a) for a in args]
    one_line_refusal(run_cli(*argv))
    assert {p: digest(p) for p in tmp_path.rglob("*") if p.is_file()} == before


@pytest.mark.parametrize("command", [("annotate", "--queue-length"), ("patterns",)], ids=lambda c: c[0])
def test_many_inputs_one_output_onto_another_input_is_refused(command, tmp_path, sample, nothing_read):
    """With several inputs, -o DIR gets <name>.annotated.json.gz per input: the one for a.json.gz
    is (a hard link to) b.json.gz, which this run reads."""
    inputs = tmp_path / "in"
    inputs.mkdir()
    for name in ("a.json.gz", "b.json.gz"):
        shutil.copyfile(sample.path, inputs / name)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    os.link(inputs / "b.json.gz", out_dir / "a.annotated.json.gz")
    before = digest(inputs / "b.json.gz")
    err = one_line_refusal(run_cli(command[0], str(inputs), *command[1:], "-o", str(out_dir), "--jobs", "2"))
    assert f"{out_dir / 'a.annotated.json.gz'}: refusing to overwrite the input ({inputs / 'b.json.gz'})" in err, err
    assert digest(inputs / "b.json.gz") == before


def test_an_output_that_is_no_input_is_written(tmp_path, sample):
    rules = tmp_path / "rules.json"
    rules.write_text(RULES)
    out = tmp_path / "o.html"
    r = run_cli("classify", str(sample.path), "--rules", str(rules), "--html", str(out))
    assert r.returncode == 0 and out.read_bytes().startswith(b"<!DOCTYPE html>"), r.stderr.decode()


# -- item 2: a full disk leaves nothing behind --------------------------------------------------

FULL_BYTES = 4096  # one page: every output here is larger


@pytest.fixture
def full_disk(tmp_path):
    """A tmpfs of one page (root only: skipped where it cannot be mounted), unmounted after."""
    where = tmp_path / "full"
    where.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={FULL_BYTES}", "tmpfs", str(where)], capture_output=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {r.stderr.decode().strip() or r.returncode}")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=True)


# Every command that writes files, with OUT inside the full disk.
WRITERS = {
    "annotate": ("annotate", "IN", "--all", "-o", "OUT/o.json"),
    "annotate --repair": ("annotate", "IN", "--queue-length", "--repair", "-o", "OUT/o.json"),
    "annotate DIR": ("annotate", "DIR", "--queue-length", "-o", "OUT/annotated", "--jobs", "2"),
    "repair": ("repair", "IN", "-o", "OUT/o.json"),
    "trim": ("trim", "IN", "--steps", "11-12", "-o", "OUT/o.json"),
    "patterns": ("patterns", "IN", "-o", "OUT/o.json"),
    "report": ("report", "IN", "-o", "OUT/r.html"),
    "classify --html": ("classify", "IN", "--html", "OUT/c.html"),
    "export --csv": ("export", "IN", "--csv", "OUT/tables/csv"),
    "export --parquet": ("export", "IN", "--parquet", "OUT/tables"),
    "export into a directory there": ("export", "IN", "--csv", "OUT"),
}


def _tree(where: Path) -> list[str]:
    return sorted(str(p.relative_to(where)) for p in where.rglob("*"))


@pytest.mark.slow
@pytest.mark.parametrize("command", WRITERS)
def test_full_disk_is_one_line_and_leaves_nothing(command, full_disk, tmp_path, sample):
    args = WRITERS[command]
    if "--parquet" in args and importlib.util.find_spec("pyarrow") is None:
        pytest.skip("Parquet needs pyarrow")
    if command == "report":
        pytest.importorskip("bokeh", reason="the report extra (bokeh) is not installed")
    ranks = tmp_path / "ranks"
    ranks.mkdir()
    for rank in (0, 1):
        (ranks / f"rank{rank}.json.gz").write_bytes(gzip.compress(sample.raw.replace(
            b'"distributedInfo": {"backend": "nccl", "rank": 0', b'"distributedInfo": {"backend": "nccl", "rank": %d' % rank), 1))
    temp = tmp_path / "temp"
    temp.mkdir()
    argv = [a.replace("OUT", str(full_disk)).replace("DIR", str(ranks)).replace("IN", str(sample.path)) for a in args]
    r = subprocess.run([sys.executable, "-m", "traceforge", "-q", *argv], capture_output=True, cwd=ROOT, timeout=300,
                       env={**os.environ, "TMPDIR": str(temp)})
    err = r.stderr.decode()
    assert r.returncode == 1 and "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.startswith("traceforge: error")]
    if command == "annotate DIR":  # each rank's error, with the other ranks' results
        assert len(lines) == 2 and all("No space left on device" in line for line in lines), err
    else:
        assert err.count("\n") == 1 and len(lines) == 1, err
        assert "no space left on device" in err.lower(), err
    assert _tree(full_disk) == [], _tree(full_disk)
    assert _tree(temp) == []


def test_full_temporary_directory_for_the_stdin_spool(full_disk, tmp_path, sample):
    out = tmp_path / "o.json"
    r = subprocess.run([sys.executable, "-m", "traceforge", "-q", "annotate", "-", "--queue-length", "-o", str(out)],
                       input=sample.path.read_bytes(), capture_output=True, cwd=ROOT, timeout=300,
                       env={**os.environ, "TMPDIR": str(full_disk)})
    err = r.stderr.decode()
    assert r.returncode == 1 and err.count("\n") == 1 and "no space left on device" in err, err
    assert _tree(full_disk) == [] and not out.exists()


def test_export_into_a_new_directory_appears_whole(tmp_path, sample, monkeypatch):
    """The tables are written inside a temporary directory beside the one asked for (and its
    missing parents): while they are written, the directory is not there."""
    from traceforge.io.write import table_files

    seen = []
    real = table_files.publish

    def watched(tmp, out):
        seen.append((Path(out).exists(), sorted(p.name for p in (tmp_path / "a").iterdir())))
        real(tmp, out)

    monkeypatch.setattr(table_files, "publish", watched)
    (tmp_path / "a").mkdir()
    r = run_cli("export", str(sample.path), "--csv", str(tmp_path / "a" / "b" / "c"))
    assert r.returncode == 0, r.stderr.decode()
    assert seen and not seen[-1][0] and all(name.startswith(".b.traceforge-") for name in seen[-1][1])
    assert sorted(p.name for p in (tmp_path / "a" / "b" / "c").iterdir()) == sorted(
        line.rsplit("/", 1)[1] for line in r.stdout.decode().split())
    assert [p.name for p in (tmp_path / "a").iterdir()] == ["b"]
