"""Command line: ``traceforge <command> ...``; errors become one line and exit code 1."""

from __future__ import annotations

import argparse
import errno
import sys
import tempfile

from .._version import __version__
from ..errors import TraceforgeError
from ..util import progress
from .commands import annotate, check, classify, counters, info, launch_stats
from .commands import critical_path as critical_path_cmd
from .commands import diff as diff_cmd
from .commands import export as export_cmd
from .commands import open as open_cmd
from .commands import patterns as patterns_cmd
from .commands import repair as repair_cmd
from .commands import report as report_cmd
from .commands import stats as stats_cmd
from .commands import trim as trim_cmd

QUIET_HELP = "no progress bar (one is drawn on stderr only when stderr is a terminal)"

# In --help order: writing tracks, Perfetto fidelity, then the tables.
COMMANDS = (annotate, check, repair_cmd, trim_cmd, open_cmd, info, launch_stats, patterns_cmd, classify, counters,
            stats_cmd, export_cmd, diff_cmd, critical_path_cmd, report_cmd)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="traceforge",
        description="Annotate PyTorch profiler (Kineto) traces with analyses you can see in Perfetto "
        "(ui.perfetto.dev): queue lengths, memcpy bandwidth, and more.",
        epilog="Example: traceforge annotate trace.json.gz --all   (then open the .annotated.json.gz in ui.perfetto.dev)",
    )
    parser.add_argument("--version", action="version", version=f"traceforge {__version__}")
    parser.add_argument("-q", "--quiet", action="store_true", help=QUIET_HELP)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS:
        command.register(sub)
    for command_parser in set(sub.choices.values()):  # -q also after the command name
        command_parser.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS, help=QUIET_HELP)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        with progress.shown(not args.quiet):
            return args.func(args)
    except TraceforgeError as e:
        print(f"traceforge: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("traceforge: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        sys.stderr.close()
        return 1
    except OSError as e:
        if e.errno != errno.ENOSPC:
            raise
        # large traces spill columns to temporary files (GBs at 10 GB for check and repair)
        print(f"traceforge: error: no space left on device, for the output or for temporary files in "
              f"{tempfile.gettempdir()} (set TMPDIR to a larger disk)", file=sys.stderr)
        return 1
