"""Temporary files with recognisable names, and the clean-up of those a killed run left.

Every temporary file traceforge makes on disk (the output being written, beside it; the stdin
spool and annotate --repair's intermediate trace, in the temporary directory), and every
temporary directory (an export's tables, renamed onto the directory asked for once complete),
is named ``<prefix>traceforge-<pid>-<random><suffix>``. SIGTERM, SIGINT and SIGHUP unwind the run
(``cli.main``), which removes them; SIGKILL cannot be caught, so each new temporary file
first removes the ones of the same kind whose process is gone (never another live run's:
concurrent writers to one output each finish their own).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

TAG = "traceforge-"


def make(directory: str | Path, prefix: str, suffix: str) -> tuple[int, str]:
    """``mkstemp`` in ``directory`` with a recognisable name, after removing stale ones like it."""
    remove_stale(directory, prefix, suffix)
    return tempfile.mkstemp(prefix=f"{prefix}{TAG}{os.getpid()}-", suffix=suffix, dir=directory)


def make_dir(directory: str | Path, prefix: str, suffix: str) -> str:
    """``mkdtemp`` in ``directory`` with a recognisable name, after removing stale ones like it."""
    remove_stale(directory, prefix, suffix)
    return tempfile.mkdtemp(prefix=f"{prefix}{TAG}{os.getpid()}-", suffix=suffix, dir=directory)


def make_in_tempdir(prefix: str, suffix: str) -> tuple[int, str]:
    """``make`` in the temporary directory (``$TMPDIR``)."""
    return make(tempfile.gettempdir(), prefix, suffix)


def remove_stale(directory: str | Path, prefix: str, suffix: str) -> list[str]:
    """Remove the temporary files named by ``make`` whose process no longer runs; return them."""
    pattern = re.compile(re.escape(f"{prefix}{TAG}") + r"(\d+)-[A-Za-z0-9_]+" + re.escape(suffix))
    removed = []
    try:
        names = os.listdir(directory)
    except OSError:
        return removed
    for name in names:
        m = pattern.fullmatch(name)
        if m is None or _alive(int(m.group(1))):
            continue
        path = os.path.join(directory, name)
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.unlink(path)
            removed.append(path)
        except OSError:
            pass
    return removed


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):  # another user's process: leave its files
        return True
    return True


def remove_quietly(path: str) -> None:
    """Remove a temporary file, if it is still there (its directory may be gone)."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
