"""No command writes onto a file it reads: every output a command line names (``-o``,
``--html``, the files ``--csv DIR`` / ``--parquet DIR`` could replace, each file of an
output directory for several inputs) is checked against every file it reads (the traces,
the files in an input directory, ``--rules`` and ``--ncu`` files) before anything is read.
The check is ``io.codec.refuse_input`` (the same file by device and inode: also a symlink or
a hard link to it), the one the writers themselves run on their own input.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from pathlib import Path

from ..io.read.rank_files import trace_files
from ..io.write.output import refuse_input
from . import ranks

SIDE_INPUTS = ("rules", "ncu")  # options that name a file the command reads
FILE_OUTPUTS = ("output", "html")  # options that name a file the command writes
DIRECTORY_OUTPUTS = {"csv": ".csv", "parquet": ".parquet"}  # export: DIR/<kind><suffix>


def refuse_outputs_onto_inputs(args: argparse.Namespace) -> None:
    """UsageError naming the first output of ``args`` that is one of its inputs."""
    inputs = list(_inputs(args))
    if not inputs:
        return
    for out in _outputs(args):
        refuse_input(out, inputs)


def _traces(args: argparse.Namespace) -> list[str]:
    given = getattr(args, "input", None) or getattr(args, "inputs", None) or []
    return [str(p) for p in ([given] if isinstance(given, (str, os.PathLike)) else given)]


def _inputs(args: argparse.Namespace) -> Iterator[str]:
    yield from trace_files(_traces(args))
    for name in SIDE_INPUTS:
        value = getattr(args, name, None)
        if isinstance(value, str) and os.path.isfile(value):
            yield value


def _outputs(args: argparse.Namespace) -> Iterator[str]:
    traces = _traces(args)
    several = isinstance(getattr(args, "input", None), list) and hasattr(args, "cluster") and ranks.fans_out(args)
    for name in FILE_OUTPUTS:
        out = getattr(args, name, None)
        if not isinstance(out, str) or out == "-":
            continue
        yield out
        if several and name == "output":  # a directory: a file in it per input
            yield from ranks.outputs_in(out, trace_files(traces))
    for name, suffix in DIRECTORY_OUTPUTS.items():
        out = getattr(args, name, None)
        if not isinstance(out, str):
            continue
        yield out
        try:
            yield from (str(p) for p in Path(out).iterdir() if p.name.endswith(suffix))
        except OSError:  # not there yet (or not a directory: the export says so)
            pass
