"""Names that are not valid UTF-8 in the trace (issue 54 item 5, issue 55's regressions): a
kernel named ``\\ud800`` (an escape of a lone surrogate), CPU operators named with the bytes
``\\xff`` (invalid UTF-8), an args value of ``1e400`` beside them. Every command gives its
result, the names escaped (``\\ud800``, ``\\udcff``) in text, CSV and JSON, with pyarrow (pandas
keeps strings in Arrow, which cannot hold lone surrogates) and without."""

from __future__ import annotations

import json
import re

import pytest

from tests.conftest import run_cli
from tests.support.arrow_modes import MODES, run_in

KERNEL_MARK, CPU_MARK = "\\ud800", "\\udcff"  # as printed: the escape of each


def _odd_names(raw: bytes) -> bytes:
    raw = re.sub(rb'("cat": "kernel", "name": ")[^"]*"', rb'\1\\ud800"', raw, count=3)
    raw = re.sub(rb'("cat": "cpu_op", "name": ")[^"]*"', b'\\1\xff"', raw, count=3)
    return raw.replace(b'"args": {', b'"args": {"x": 1e400, ', 5)


@pytest.fixture
def odd(tmp_path, sample):
    path = tmp_path / "odd.json"
    path.write_bytes(_odd_names(sample.raw))
    return path


def _ok(r) -> str:
    err = r.stderr.decode("utf-8", "replace")
    assert r.returncode == 0 and "internal error" not in err, err[-600:]
    return r.stdout.decode("utf-8")  # printed escaped: valid UTF-8


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_odd_names_print_escaped_with_and_without_pyarrow(mode, odd, tmp_path):
    shown = {
        ("classify", "--kernels"): KERNEL_MARK,
        ("diff", str(odd), "--table", "cpu_ops", "--format", "csv"): CPU_MARK,
        ("diff", str(odd), "--table", "ops", "--format", "json"): KERNEL_MARK,
        ("stats", "--table", "top_kernels", "--format", "json"): KERNEL_MARK,
    }
    for args, mark in shown.items():
        out = _ok(run_in(mode, args[0], str(odd), *args[1:], "-q"))
        assert mark in out, (args, out[:800])
        if "json" in args:
            json.loads(out)  # the escape is JSON's own
    html = tmp_path / "c.html"
    _ok(run_in(mode, "classify", str(odd), "--html", str(html), "-q"))
    report = tmp_path / "r.html"
    _ok(run_in(mode, "report", str(odd), "-o", str(report), "-q"))
    assert report.stat().st_size > 0 and html.stat().st_size > 0


REPORTS = (("info",), ("stats",), ("classify", "--kernels"), ("launch-stats",), ("patterns",), ("critical-path",),
           ("counters",), ("diff", "{path}"), ("diff", "{path}", "--table", "cpu_ops"))


@pytest.mark.parametrize("fmt", ["text", "csv", "json"])
def test_odd_names_every_report_command_every_format(fmt, odd):
    for command in REPORTS:
        args = [a.format(path=odd) for a in command[1:]]
        if fmt == "csv" and command[0] in ("stats", "critical-path", "diff") and "--table" not in args:
            args += ["--table", {"stats": "top_kernels", "critical-path": "summary", "diff": "ops"}[command[0]]]
        if fmt == "csv" and command[0] == "info":
            continue  # info: text or json
        r = run_cli(command[0], str(odd), *args, "--format", fmt, "-q")
        out = _ok(r)  # valid UTF-8: no raw surrogate reached the output
        if fmt == "json":
            json.loads(out)
        if fmt != "text" and (command[0] == "classify" or "cpu_ops" in args):
            assert (KERNEL_MARK if command[0] == "classify" else CPU_MARK) in out, (command, fmt, out[:600])
