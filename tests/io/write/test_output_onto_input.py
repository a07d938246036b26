"""Output onto the input (issue 41 item 17): every command that writes refuses it before the first
read (it was refused only when the output was opened, after a whole read for the analyses that add
args), whether the output names the input, a symlink to it or a hard link to it."""

from __future__ import annotations

import os
import shutil

import pytest

from tests.conftest import run_cli
from traceforge.io.read.reader import TraceReader

WRITERS = [("annotate", "--queue-length"), ("annotate", "--launch-delay"), ("annotate", "--queue-length", "--repair"),
           ("patterns", "--tag-kernels"), ("repair",), ("trim", "--steps", "2"), ("report",)]


@pytest.fixture
def unread(monkeypatch):
    """Reading any trace fails the test: a refusal must come first."""
    def read(self):
        raise AssertionError(f"{self.path} read before the output was checked")
        yield

    monkeypatch.setattr(TraceReader, "batches", read)


@pytest.mark.parametrize("link", ["same name", "symlink", "hard link", "relative"])
@pytest.mark.parametrize("command", WRITERS, ids=" ".join)
def test_output_onto_the_input_is_refused_before_reading(tmp_path, sample, command, link, unread, monkeypatch):
    if command[0] == "report":
        pytest.importorskip("bokeh")
    path = tmp_path / "t.json.gz"
    shutil.copyfile(sample.path, path)
    out = tmp_path / "out.json.gz"
    if link == "symlink":
        out.symlink_to(path)
    elif link == "hard link":
        os.link(path, out)
    else:
        out = path
    if link == "relative":
        monkeypatch.chdir(tmp_path)
        out = "./sub/../t.json.gz"
        (tmp_path / "sub").mkdir()
    r = run_cli(command[0], str(path), *command[1:], "-o", str(out))
    err = r.stderr.decode()
    assert r.returncode == 1 and err.count("\n") == 1 and "Traceback" not in err, err
    assert "refusing to overwrite the input" in err, err
    assert path.read_bytes() == sample.path.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "sub") == sorted(
        ["t.json.gz"] + (["out.json.gz"] if link in ("symlink", "hard link") else []))


def test_another_output_is_written(tmp_path, sample):
    out = tmp_path / "out.json.gz"
    r = run_cli("annotate", str(sample.path), "--launch-delay", "-o", str(out))
    assert r.returncode == 0 and out.exists(), r.stderr.decode()
