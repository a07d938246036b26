"""A UTF-8 byte order mark (issue 41 item 17): Perfetto (trace_processor v58.2) refuses a trace that
starts with one ("Unknown trace type"), object or array alike, so every command refuses it the same
way, at byte 0, before reading any event (it was read by some commands, refused by others after the
whole read, and called importable by ``check`` for an array)."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT, run_cli
from traceforge.io.read.reader import BOM

EVENT = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 2,
         "args": {"stream": 7, "device": 0}}
# after the first event, JSON that breaks: a command that read on before deciding would name it instead
BROKEN_LATER = b', {"ph": "X", "ts": 5, "dur": }'

COMMANDS = [("info",), ("stats",), ("classify",), ("patterns",), ("launch-stats",), ("critical-path",),
            ("counters",), ("export", "--csv", "{tmp}/csv"), ("diff", "{path}"), ("annotate", "--queue-length", "-o", "{out}"),
            ("annotate", "--launch-delay", "-o", "{out}"), ("repair", "-o", "{out}"), ("trim", "--window", "0:1ms", "-o", "{out}")]


def bom_trace(tmp_path, layout: str, suffix: str) -> str:
    events = json.dumps(EVENT).encode() + BROKEN_LATER
    body = b'{"traceEvents": [' + events + b"]}" if layout == "object" else b"[" + events + b"]"
    path = tmp_path / f"bom{suffix}"
    data = BOM + body
    path.write_bytes(gzip.compress(data) if suffix.endswith(".gz") else data)
    return str(path)


def refused(r: subprocess.CompletedProcess, code: int = 1) -> str:
    err = r.stderr.decode()
    assert r.returncode == code, err + r.stdout.decode()
    assert "Traceback" not in err
    return err


@pytest.mark.parametrize("layout", ["object", "array"])
@pytest.mark.parametrize("suffix", [".json", ".json.gz"])
@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c[:2]))
def test_every_command_refuses_a_bom_at_byte_0(tmp_path, layout, suffix, command):
    path = bom_trace(tmp_path, layout, suffix)
    out = tmp_path / "out.json"
    args = [a.format(tmp=tmp_path, path=path, out=out) for a in command]
    err = refused(run_cli(args[0], path, *args[1:]))
    assert err.count("\n") == 1 and "byte order mark" in err and "(byte 0)" in err and path in err, err
    assert not out.exists()


@pytest.mark.parametrize("layout", ["object", "array"])
def test_check_says_perfetto_refuses_it(tmp_path, layout):
    r = run_cli("check", bom_trace(tmp_path, layout, ".json"))
    text = r.stdout.decode()
    assert r.returncode == 2 and "byte order mark" in text and "0 events" in text, text


def test_report_refuses_it(tmp_path):
    pytest.importorskip("bokeh")
    out = tmp_path / "r.html"
    err = refused(run_cli("report", bom_trace(tmp_path, "array", ".json"), "-o", str(out)))
    assert "byte order mark" in err and not out.exists(), err


def test_open_refuses_it_before_serving(tmp_path):
    r = subprocess.run([sys.executable, "-m", "traceforge", "open", "--no-browser", "--port", "0",
                        bom_trace(tmp_path, "object", ".json.gz")], capture_output=True, cwd=ROOT, timeout=60)
    err = refused(r)
    assert "byte order mark" in err and not r.stdout, err


def test_a_bom_later_is_invalid_json_at_its_byte(tmp_path):
    data = b'{"traceEvents": [' + json.dumps(EVENT).encode() + b", " + BOM + b"]}"
    path = tmp_path / "t.json"
    path.write_bytes(data)
    err = refused(run_cli("stats", str(path)))
    assert f"byte {data.index(BOM)}" in err, err
