"""Which files make up a job's traces, and which rank each one is."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable
from pathlib import Path

from ..errors import UsageError
from .output_names import is_output

TRACE_SUFFIXES = (".json", ".json.gz", ".json.zst")
RANK_IN_NAME = re.compile(r"(?<![a-z])rank[-_]?(\d+)", re.IGNORECASE)


def trace_paths(inputs: Iterable[str | os.PathLike]) -> list[str]:
    """Files as given; a directory stands for its trace files (one per rank), sorted, less the
    traces traceforge wrote there (``*.annotated.json.gz``, ...: ``io.output_names``), which a
    note on stderr names (give such a file by name to read it)."""
    paths = []
    for item in inputs:
        p = Path(item)
        if p.is_dir():
            listed = sorted(str(f) for f in p.iterdir() if f.is_file() and f.name.endswith(TRACE_SUFFIXES))
            found = [f for f in listed if not is_output(f)]
            skipped = [Path(f).name for f in listed if is_output(f)]
            if not found:
                only = f" (only traceforge's outputs: {', '.join(skipped)})" if skipped else ""
                raise UsageError(f"{item}: no trace files (*.json, *.json.gz, *.json.zst) in this directory{only}")
            if skipped:
                print(f"traceforge: note: {item}: skipped {len(skipped)} trace(s) traceforge wrote "
                      f"({_listed(skipped)}); name a file to read it", file=sys.stderr)
            paths.extend(found)
        else:
            paths.append(str(item))
    return paths


def _listed(names: list[str], most: int = 3) -> str:
    return ", ".join(names[:most]) + (f", ... ({len(names) - most} more)" if len(names) > most else "")


def metadata_rank(metadata: dict) -> int | None:
    """``distributedInfo.rank`` of a trace's top-level keys, if it is an int."""
    info = metadata.get("distributedInfo")
    rank = info.get("rank") if isinstance(info, dict) else None
    return rank if type(rank) is int else None


def name_rank(path: str) -> int | None:
    """The number after ``rank`` in the file name (``rank3``, ``rank-3``, ``rank_3``)."""
    m = RANK_IN_NAME.search(Path(path).name)
    return int(m.group(1)) if m else None


def claim_rank(seen: dict[int, str], rank: int, path: str) -> None:
    """Record ``path`` as the trace of ``rank`` in ``seen`` (rank -> path); a second trace of
    one rank is an error, for every command that takes one trace per rank."""
    if rank in seen:
        raise UsageError(f"{path}: rank {rank} again (already {seen[rank]}); give one trace per rank")
    seen[rank] = path
