"""CLI subcommands: each module has ``register(subparsers)`` that sets ``func`` on its parser.

``func(args) -> int`` returns the exit code; errors are raised as TraceforgeError.
"""

from __future__ import annotations

import argparse
import sys

from ...io.write.output import COMPRESSIONS
from ...io.write.output_names import plain_output_note


def add_compression_argument(parser: argparse.ArgumentParser) -> None:
    """``--compression`` for a command that writes a trace (run it inside ``output_compression``)."""
    parser.add_argument("--compression", choices=COMPRESSIONS, default="fast",
                        help="how the output is compressed (its suffix picks the codec): fast (default: gzip level 1 "
                        "through ISA-L, zstd level 3) or small (gzip level 6 through zlib, zstd level 9): 24-32 %% "
                        "smaller, 10-15x slower to compress")


def note_plain_output(out: str | None) -> None:
    """Say on stderr that ``out`` is written as plain JSON when its suffix picks no codec (``-o x.txt``)."""
    note = plain_output_note(out) if out is not None else None
    if note:
        print(f"traceforge: note: {note}", file=sys.stderr)
