"""What a run has put in place, so that a run stopped by a signal leaves none of it.

A file is written under a temporary name and renamed onto its own only once complete
(``codec.publish``); a signal before the rename leaves nothing. One after it (the command
still printing, or other files still to come: several ranks, an export's tables) would leave
a complete output from a run that exits 130/143. So, while a run is ``recorded``, each path an
output may take is ``watch``ed before it is written (by this process, or by a worker writing
for it), and ``withdraw`` removes what this run put there: a file that is not the one that was
there before (by device and inode), a directory that was not there before (made whole and
renamed into place, or made empty and left empty once this run's files are removed). An
output that replaced an older file takes the older file with it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass
class _Run:
    before: dict[str, tuple[int, int] | None] = field(default_factory=dict)  # path -> (st_dev, st_ino) or None
    whole: set[str] = field(default_factory=set)  # directories renamed into place with their files


_run: _Run | None = None  # None: not recording (the Python API; a worker)


@contextmanager
def recorded() -> Iterator[None]:
    """Watch what is put in place inside (``withdraw`` removes it)."""
    global _run
    saved, _run = _run, _Run()
    try:
        yield
    finally:
        _run = saved


def watch(path: str | os.PathLike, *, whole_directory: bool = False) -> None:
    """Note what is at ``path`` now, before this run may put an output there (``whole_directory``:
    a directory written under a temporary name and renamed onto ``path``)."""
    if _run is None:
        return
    key = os.path.abspath(path)
    _run.before.setdefault(key, _identity(key))
    if whole_directory:
        _run.whole.add(key)


def withdraw() -> list[str]:
    """Remove what this run put at the watched paths (deepest first); return the paths removed."""
    if _run is None:
        return []
    removed = []
    for path in sorted(_run.before, key=lambda p: -p.count(os.sep)):
        before, now = _run.before[path], _identity(path)
        if now is None or now == before:
            continue
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                if before is not None:
                    continue  # a directory that was there: only this run's files in it go
                if path in _run.whole:
                    shutil.rmtree(path)
                else:
                    os.rmdir(path)  # made by mkdir: only if nothing else went in
            else:
                os.unlink(path)
            removed.append(path)
        except OSError:
            pass
    _run.before.clear()
    _run.whole.clear()
    return removed


def _identity(path: str) -> tuple[int, int] | None:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino
