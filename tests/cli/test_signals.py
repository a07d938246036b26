"""SIGINT and SIGTERM at any point of a many-file run (issue 54 item 4, issue 55 item 6): the
run ends with one line and exit 130 / 143, no traceback (from the parent or its workers), no
temporary file left in the temporary directory or beside the outputs, no output at all (a
stopped run leaves nothing, even one stopped just after its last write), and no worker left
running. A run the signal comes too late for finishes as an unsignalled one does.

Each command runs ``TRIES`` times (``$TRACEFORGE_SIGNAL_TRIES``, default 2: the issue's
acceptance is 50, ``TRACEFORGE_SIGNAL_TRIES=50``), the signal sent at a random moment of
the run's length (measured on an unsignalled run), to the parent alone (``kill``) or to its
whole process group (a terminal's Ctrl-C).
"""

from __future__ import annotations

import gzip
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, load_script

TRIES = int(os.environ.get("TRACEFORGE_SIGNAL_TRIES", "2"))
DISTRIBUTED = b'"distributedInfo": {"backend": "nccl", "rank": 0'
STOPPED = {signal.SIGINT: (130, "traceforge: interrupted"), signal.SIGTERM: (143, "traceforge: terminated by SIGTERM")}

# Each many-file command over DIR (two ranks), --jobs 2; OUT: a directory for what it writes.
COMMANDS = {
    "stats": ("stats", "DIR"),
    "annotate": ("annotate", "DIR", "--queue-length", "--launch-delay", "-o", "OUT/annotated"),
    "launch-stats": ("launch-stats", "DIR"),
    "patterns": ("patterns", "DIR"),
    "patterns -o": ("patterns", "DIR", "-o", "OUT/drawn"),
    "classify": ("classify", "DIR", "--html", "OUT/c.html"),
    "critical-path": ("critical-path", "DIR"),
    "report": ("report", "DIR", "-o", "OUT/r.html"),
    "export": ("export", "DIR/rank0.json.gz", "--csv", "OUT/tables"),  # one file, but a directory of outputs
    "patterns -o one": ("patterns", "DIR/rank0.json.gz", "-o", "OUT/p.json.gz"),  # the table printed after the write
}


@pytest.fixture(scope="module")
def rank_dir(tmp_path_factory, sample) -> Path:
    """Two ranks, the sample tiled to ~8 MB each: runs long enough to signal midway."""
    where = tmp_path_factory.mktemp("signals")
    ranks = where / "ranks"
    ranks.mkdir()
    tile = load_script("tile_trace")
    for rank in (0, 1):
        one = where / f"one{rank}.json.gz"
        one.write_bytes(gzip.compress(sample.raw.replace(DISTRIBUTED, DISTRIBUTED[:-1] + b"%d" % rank), 1))
        tile.main([str(one), "--size", "8MB", "-o", str(ranks / f"rank{rank}.json.gz")])
    return ranks


def _argv(command: str, rank_dir: Path, out: Path) -> list[str]:
    args = [a.replace("DIR", str(rank_dir)).replace("OUT", str(out)) for a in COMMANDS[command]]
    return [sys.executable, "-m", "traceforge", "-q", *args, *(["--jobs", "2"] if args[1] == str(rank_dir) else [])]


def _tree(where: Path) -> dict[str, bytes]:
    return {str(p.relative_to(where)): p.read_bytes() if p.is_file() else b"" for p in sorted(where.rglob("*"))}


def _group_gone(pgid: int, within_s: float = 20) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def _run(argv: list[str], temp: Path, signum: int | None = None, after_s: float = 0, group: bool = False):
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
                            env={**os.environ, "TMPDIR": str(temp)})
    if signum is not None:
        time.sleep(after_s)
        try:
            (os.killpg if group else os.kill)(proc.pid, signum)
        except ProcessLookupError:  # finished already
            pass
    try:
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return proc.returncode, err.decode(), _group_gone(proc.pid)


def _untimed_line(line: str) -> str:
    import re

    return re.sub(r" in \d+(\.\d+)? s\b", " in - s", line)


def _untimed(files: dict[str, bytes]) -> dict[str, bytes]:
    """The outputs less what differs between runs (the report's element ids)."""
    import re

    uuid = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
    return {k: uuid.sub(b"<id>", v) if k.endswith(".html") else v for k, v in files.items()}


@pytest.mark.slow
@pytest.mark.parametrize("command", COMMANDS)
def test_signals_at_random_points_leave_nothing(command, rank_dir, tmp_path):
    if command == "report":
        pytest.importorskip("bokeh", reason="the report extra (bokeh) is not installed")
    temp, out = tmp_path / "temp", tmp_path / "out"
    temp.mkdir()
    out.mkdir()
    start = time.monotonic()
    code, err, gone = _run(_argv(command, rank_dir, out), temp)
    length = time.monotonic() - start
    assert code == 0 and gone, err
    said = {_untimed_line(line) for line in err.splitlines()}  # what the run says on its way (-q: little)
    want = _untimed(_tree(out))
    assert want or command in ("stats", "launch-stats", "patterns", "critical-path")
    rng = random.Random(f"{command}-{TRIES}")
    outcomes = {"stopped": 0, "finished": 0}
    for attempt in range(TRIES):
        for p in sorted(out.rglob("*"), key=lambda p: -len(p.parts)):
            p.unlink() if p.is_file() else p.rmdir()
        signum = rng.choice([signal.SIGINT, signal.SIGTERM])
        group = rng.random() < 0.5
        after = rng.uniform(0.2, length * 1.1)
        code, err, gone = _run(_argv(command, rank_dir, out), temp, signum, after, group)
        where = f"try {attempt}: {signum.name} to the {'group' if group else 'parent'} after {after:.2f} s"
        assert "Traceback" not in err, f"{where}: {err}"
        assert gone, f"{where}: a process of the run is still running"
        assert list(temp.iterdir()) == [], f"{where}: left in TMPDIR: {list(temp.iterdir())}"
        if code == 0:  # the signal came once the run was done (or before it could stop anything)
            outcomes["finished"] += 1
            assert _untimed(_tree(out)) == want, f"{where}: finished with other outputs"
            continue
        outcomes["stopped"] += 1
        if code == -signum and err == "":  # before Python ran any of traceforge: nothing to say, nothing written
            assert _tree(out) == {}, f"{where}: killed before it started, yet left {sorted(_tree(out))}"
            continue
        lines = err.splitlines()
        assert code == STOPPED[signum][0] and lines and lines[-1] == STOPPED[signum][1], f"{where}: exit {code}: {err}"
        assert {_untimed_line(line) for line in lines[:-1]} <= said, f"{where}: {err}"  # one line of its own
        assert _tree(out) == {}, f"{where}: a stopped run left {sorted(_tree(out))}"
    print(f"{command}: {outcomes} in {TRIES} tries, run length {length:.2f} s")
