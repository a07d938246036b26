"""A FIFO (named pipe) as the input of every command (issue 54 item 3): it is read once, so
each command answers within seconds with what the same bytes in a file give, or refuses in
one line (``open``, which serves the file to the browser again and again). Sniffing the
content (nsys CSV, ncu CSV, the rank in the head) used to read the pipe's head away and then
hang waiting for bytes that never came."""

from __future__ import annotations

import gzip
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.conftest import ROOT

TIMEOUT_S = 60  # the answer comes in about a second; the margin is for a loaded machine

# Each command with the trace as IN; OUT: a file or directory it writes (compared with the
# same run on a regular file).
COMMANDS = {
    "info": ("info", "IN"),
    "check": ("check", "IN"),
    "stats": ("stats", "IN"),
    "critical-path": ("critical-path", "IN"),
    "classify": ("classify", "IN", "--format", "csv"),
    "launch-stats": ("launch-stats", "IN"),
    "patterns": ("patterns", "IN"),
    "counters": ("counters", "IN"),
    "diff": ("diff", "IN", "OTHER"),
    "export": ("export", "IN", "--csv", "OUT"),
    "annotate": ("annotate", "IN", "--queue-length", "-o", "OUT"),
    "repair": ("repair", "IN", "-o", "OUT"),
    "trim": ("trim", "IN", "--steps", "11", "-o", "OUT"),
    "patterns-o": ("patterns", "IN", "-o", "OUT"),
    "stats-two": ("stats", "IN", "OTHER", "--jobs", "2"),
}


def _run(args: tuple[str, ...], src: Path, other: Path, out: Path) -> subprocess.CompletedProcess:
    argv = [{"IN": str(src), "OTHER": str(other), "OUT": str(out)}.get(a, a) for a in args]
    return subprocess.run([sys.executable, "-m", "traceforge", "-q", *argv], capture_output=True, cwd=ROOT,
                          timeout=TIMEOUT_S)


def _fed(fifo: Path, data: bytes) -> threading.Thread:
    """A thread writing ``data`` into ``fifo`` (the reader's end opens it)."""
    def write() -> None:
        try:
            with open(fifo, "wb") as f:
                f.write(data)
        except BrokenPipeError:  # a reader that refused it stops reading
            pass

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return thread


def _release(fifo: Path) -> None:
    """A writer still blocked opening ``fifo`` is let go (nothing read it)."""
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    os.close(fd)


def _tree(out: Path) -> dict[str, bytes]:
    if out.is_dir():
        return {p.name: p.read_bytes() for p in sorted(out.iterdir())}
    return {out.name: out.read_bytes()} if out.exists() else {}


def _untimed(text: bytes) -> bytes:
    return re.sub(rb"\d+(\.\d+)? s\b", b"- s", text)


@pytest.mark.slow
@pytest.mark.parametrize("command", COMMANDS)
def test_fifo_input_answers_as_a_file_does(command, tmp_path, sample):
    args = COMMANDS[command]
    (tmp_path / "pipe").mkdir()
    (tmp_path / "file").mkdir()
    fifo, regular = tmp_path / "pipe" / "rank0.json.gz", tmp_path / "file" / "rank0.json.gz"
    shutil.copyfile(sample.path, regular)
    other = tmp_path / "rank1.json.gz"  # rank 1 in its head (the pipe's rank comes from its name: rank0)
    other.write_bytes(gzip.compress(sample.raw.replace(b'"distributedInfo": {"backend": "nccl", "rank": 0',
                                                       b'"distributedInfo": {"backend": "nccl", "rank": 1'), 1))
    os.mkfifo(fifo)
    writer = _fed(fifo, sample.path.read_bytes())
    try:
        got = _run(args, fifo, other, tmp_path / "pipe" / "out")
    finally:
        _release(fifo)
        writer.join(10)
    want = _run(args, regular, other, tmp_path / "file" / "out")
    assert want.returncode == 0, want.stderr.decode()
    assert got.returncode == 0, got.stderr.decode()
    assert b"Traceback" not in got.stderr
    # info names the codec it read: a pipe's is not sniffed ahead ("stream")
    assert got.stdout.replace(str(fifo.parent).encode(), str(regular.parent).encode()).replace(
        b"; stream)", b"; gzip)") == want.stdout
    assert _untimed(got.stderr.replace(str(fifo.parent).encode(), str(regular.parent).encode())) == \
        _untimed(want.stderr)
    assert _tree(tmp_path / "pipe" / "out") == _tree(tmp_path / "file" / "out")


@pytest.mark.slow
def test_report_reads_a_fifo_once(tmp_path, sample):
    pytest.importorskip("bokeh", reason="the report extra (bokeh) is not installed")
    fifo = tmp_path / "in.json.gz"
    os.mkfifo(fifo)
    writer = _fed(fifo, sample.path.read_bytes())
    try:
        r = _run(("report", "IN", "-o", "OUT"), fifo, fifo, tmp_path / "r.html")
    finally:
        _release(fifo)
        writer.join(10)
    assert r.returncode == 0, r.stderr.decode()
    assert (tmp_path / "r.html").read_bytes().startswith(b"<!DOCTYPE html>") or b"<html" in (tmp_path / "r.html").read_bytes()[:500]


def test_open_refuses_a_fifo_in_one_line(tmp_path):
    fifo = tmp_path / "in.json.gz"
    os.mkfifo(fifo)  # never opened: refused before any read
    r = _run(("open", "IN", "--no-browser", "--port", "0"), fifo, fifo, fifo)
    err = r.stderr.decode()
    assert r.returncode == 1 and err.count("\n") == 1 and "not standard input or a FIFO" in err, err


def test_stdin_to_counters_is_read_once(sample):
    r = subprocess.run([sys.executable, "-m", "traceforge", "-q", "counters", "-"], input=sample.path.read_bytes(),
                       capture_output=True, cwd=ROOT, timeout=TIMEOUT_S)
    assert r.returncode == 0 and b"kernel events" in r.stdout, r.stderr.decode()
