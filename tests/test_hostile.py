"""Hostile and unlucky inputs (issue 41): every malformed input is one line naming the file and
the place, exit code 1, no traceback, nothing left behind; a bug is one line saying "internal
error", exit code 3, with a traceback only under ``--debug``."""

from __future__ import annotations

import subprocess

from .conftest import run_cli


def one_line_error(r: subprocess.CompletedProcess, code: int = 1) -> str:
    """The error line of a failed run, checking it is one line, the exit code, and no traceback."""
    err = r.stderr.decode()
    assert r.returncode == code, err
    assert "Traceback" not in err and err.count("\n") == 1, err
    return err


# -- the rule at the CLI edge ---------------------------------------------------------------

def test_internal_error_is_one_line_exit_3(monkeypatch, sample):
    from traceforge.cli.commands import info

    def broken(args):
        raise KeyError("a bug")

    monkeypatch.setattr(info, "run", broken)
    err = one_line_error(run_cli("info", str(sample.path)), code=3)
    assert err.startswith("traceforge: internal error: KeyError: 'a bug'") and "report" in err and "--debug" in err


def test_internal_error_traceback_with_debug(monkeypatch, sample):
    from traceforge.cli.commands import info

    def broken(args):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(info, "run", broken)
    for argv in (("--debug", "info", str(sample.path)), ("info", "--debug", str(sample.path))):
        r = run_cli(*argv)
        err = r.stderr.decode()
        assert r.returncode == 3, err
        assert "Traceback" in err and "in broken" in err, err
        assert err.splitlines()[-1].startswith("traceforge: internal error: ZeroDivisionError: a bug"), err


def test_os_error_is_one_line_exit_1(monkeypatch, sample):
    from traceforge.cli.commands import info

    def unlucky(args):
        raise PermissionError(13, "Permission denied", "/some/file")

    monkeypatch.setattr(info, "run", unlucky)
    err = one_line_error(run_cli("info", str(sample.path)))
    assert err == "traceforge: error: /some/file: Permission denied\n", err
