"""traceforge run with and without pyarrow. Where pyarrow is installed pandas 3 keeps strings
in Arrow, which cannot hold the lone surrogates of names that were not UTF-8 in a trace; a
test of names runs the command both ways: in a process where pyarrow imports (skipped where
it is not installed) and in one where importing it fails (pandas then goes without)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from tests.conftest import ROOT

HAS_PYARROW = importlib.util.find_spec("pyarrow") is not None
MODES = ("pyarrow", "no-pyarrow")
_WITHOUT_PYARROW = ("import runpy, sys; sys.modules['pyarrow'] = None; sys.argv[0] = 'traceforge'; "
                    "runpy.run_module('traceforge', run_name='__main__', alter_sys=True)")


def command_in(mode: str, *args: str) -> list[str]:
    """The command line of ``traceforge ARGS`` with pyarrow (``"pyarrow"``; skips the test where
    it is not installed) or without (``"no-pyarrow"``)."""
    if mode == "pyarrow":
        if not HAS_PYARROW:
            pytest.skip("pyarrow is not installed in this environment")
        return [sys.executable, "-m", "traceforge", *args]
    return [sys.executable, "-c", _WITHOUT_PYARROW, *args]


def run_in(mode: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """``traceforge ARGS`` in a process with pyarrow (``"pyarrow"``) or without (``"no-pyarrow"``)."""
    return subprocess.run(command_in(mode, *args), capture_output=True, cwd=ROOT, timeout=timeout)

