"""Run Perfetto's own importer, ``trace_processor_shell``, on a trace: its import stats, or any SQL.

``check`` predicts the importer's stats; where the real importer is at hand
(``check --trace-processor``, and the tests), this runs it and reads the same stats back.
Found as: the path given, else ``$TRACEFORGE_TRACE_PROCESSOR``, else ``trace_processor_shell``
or ``trace_processor`` on ``PATH``, else the binary the ``perfetto`` Python package manages
(it may download it on first use).

A loss, in the stats, is what the importer dropped or moved: severity ``error`` or
``data_loss``, and every ``flow_*`` stat (``flow_end_without_start`` is only ``info`` there).
"""

from __future__ import annotations

import csv
import io
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass

from ..errors import TraceforgeError, UsageError
from .rules import FATAL, LOSS, RULES

ENV = "TRACEFORGE_TRACE_PROCESSOR"
NAMES = ("trace_processor_shell", "trace_processor")
LOSS_SEVERITIES = ("error", "data_loss")
STATS_SQL = "select name, idx, severity, value from stats where value > 0"


@dataclass(frozen=True)
class Stat:
    """One import stat: ``name`` (with ``[idx]`` for indexed stats), severity, value."""

    name: str
    severity: str
    value: int

    @property
    def loss(self) -> bool:
        return self.severity in LOSS_SEVERITIES or self.name.startswith("flow_")


def find(explicit: str | None = None) -> str | None:
    """The trace_processor binary to run (see the module docstring), or None where there is none.
    An ``explicit`` path that is not an executable file is a UsageError."""
    if explicit:
        path = shutil.which(explicit) or (explicit if os.access(explicit, os.X_OK) and os.path.isfile(explicit)
                                          else None)
        if path is None:
            raise UsageError(f"--trace-processor {explicit}: not an executable file")
        return path
    named = os.environ.get(ENV)
    if named:
        return find(named)
    for name in NAMES:
        path = shutil.which(name)
        if path:
            return path
    return _from_perfetto_package()


def _from_perfetto_package() -> str | None:
    try:
        from perfetto.trace_processor.platform import PlatformDelegate  # type: ignore[import-not-found]
    except ImportError:
        return None
    try:
        return PlatformDelegate().get_shell_path(bin_path=None)
    except Exception:  # noqa: BLE001  (offline, unsupported platform: there is none)
        return None


def query(binary: str, trace: str, sql: str, *, timeout: float | None = None) -> list[dict[str, str]]:
    """Rows of the last statement of ``sql`` on ``trace`` imported by ``binary`` (values as text;
    NULL as ``[NULL]``). One run imports the trace once: put several questions in one statement
    (``union all``) rather than run it again."""
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as f:
        f.write(sql.rstrip().rstrip(";") + ";\n")
    try:
        done = subprocess.run([binary, "-q", f.name, trace], capture_output=True, timeout=timeout)
    except OSError as e:
        raise TraceforgeError(f"{binary}: cannot run: {e}") from None
    except subprocess.TimeoutExpired:
        raise TraceforgeError(f"{binary}: no answer within {timeout:g} s on {trace}") from None
    finally:
        os.unlink(f.name)
    if done.returncode != 0:
        tail = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or [f"exit code {done.returncode}"]
        raise TraceforgeError(f"{binary} failed on {trace}: {tail[0]}")
    text = done.stdout.decode(errors="replace")
    blocks = text.split("\n\n")  # a block per statement; the last one is the answer
    return list(csv.DictReader(io.StringIO(blocks[-1].strip("\n") + "\n")))


def import_stats(binary: str, trace: str, *, timeout: float | None = None) -> dict[str, Stat]:
    """Every non-zero import stat of ``trace`` by name (``name[idx]`` for indexed ones)."""
    out = {}
    for row in query(binary, trace, STATS_SQL, timeout=timeout):
        name = row["name"] if row["idx"] in ("", "[NULL]") else f"{row['name']}[{row['idx']}]"
        out[name] = Stat(name, row["severity"], int(row["value"]))
    return out


def losses(stats: dict[str, Stat]) -> dict[str, int]:
    """The stats that count a loss (see the module docstring), by name."""
    return {name: s.value for name, s in stats.items() if s.loss}


def side_by_side(predicted: dict[str, int], stats: dict[str, Stat]) -> list[tuple[str, int | None, int]]:
    """(stat, check's prediction, trace_processor's value) for every stat either names: the
    predicted ones that are the importer's own stats (not ``check``'s mis-render names, which
    the importer does not count) and the importer's losses. None: ``check`` has no such rule."""
    own = {name for name, rule in RULES.items() if rule.severity in (FATAL, LOSS) and name != "json_syntax_error"}
    names = [n for n in predicted if n in own] + sorted(n for n, s in stats.items() if s.loss and n not in predicted)
    return [(n, predicted.get(n, 0 if n in RULES else None), stats[n].value if n in stats else 0) for n in names]
