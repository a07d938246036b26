"""Command line: ``traceforge <command> ...``.

The rule at this edge: an error in the input, the options or the environment (a file that
cannot be read or written) is one line on stderr and exit code 1; anything else is a bug in
traceforge: one line saying "internal error" and where to report it, exit code 3, and a
traceback only with ``--debug``. No input, however malformed, gives a traceback.
"""

from __future__ import annotations

import argparse
import errno
import io
import os
import signal
import sys
import tempfile
import threading
import traceback
import types
from collections.abc import Iterator
from contextlib import contextmanager

from .._version import __version__
from ..errors import TraceforgeError
from ..io.read.limits import reading_limits
from ..io.write import run_outputs
from ..util import progress, signals
from .commands.tables import classify, counters, info, launch_stats
from .commands.tables import collectives as collectives_cmd
from .commands.tables import critical_path as critical_path_cmd
from .commands.tables import diff as diff_cmd
from .commands.tables import patterns as patterns_cmd
from .commands.tables import report as report_cmd
from .commands.tables import roofline as roofline_cmd
from .commands.tables import stats as stats_cmd
from .commands.traces import annotate, check
from .commands.traces import export as export_cmd
from .commands.traces import merge as merge_cmd
from .commands.traces import open as open_cmd
from .commands.traces import repair as repair_cmd
from .commands.traces import trim as trim_cmd
from .options import add_limit_arguments, limits_of
from .output_checks import refuse_outputs_onto_inputs

QUIET_HELP = "no progress bar (one is drawn on stderr only when stderr is a terminal)"
DEBUG_HELP = "on an internal error (a bug in traceforge, exit code 3), also print the Python traceback"
INTERNAL_ERROR_EXIT = 3
REPORT_TO = "the traceforge issue tracker"

# In --help order: writing tracks, Perfetto fidelity, then the tables.
COMMANDS = (annotate, check, repair_cmd, trim_cmd, open_cmd, info, launch_stats, patterns_cmd, classify, counters,
            stats_cmd, export_cmd, diff_cmd, critical_path_cmd, roofline_cmd, report_cmd, collectives_cmd, merge_cmd)


class OneLineParser(argparse.ArgumentParser):
    """A bad option is an error like any other: one line, exit code 1 (argparse's own 2 is
    ``check``'s verdict "Perfetto would refuse the file")."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(1, f"{self.prog}: error: {one_line(message)} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="traceforge",
        description="Annotate PyTorch profiler (Kineto) traces with analyses you can see in Perfetto "
        "(ui.perfetto.dev): queue lengths, memcpy bandwidth, and more.",
        epilog="Example: traceforge annotate trace.json.gz --all   (then open the .annotated.json.gz in ui.perfetto.dev)",
    )
    parser.add_argument("--version", action="version", version=f"traceforge {__version__}")
    parser.add_argument("-q", "--quiet", action="store_true", help=QUIET_HELP)
    parser.add_argument("--debug", action="store_true", help=DEBUG_HELP)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS:
        command.register(sub)
    for command_parser in set(sub.choices.values()):  # -q and --debug also after the command name
        command_parser.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS, help=QUIET_HELP)
        command_parser.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=DEBUG_HELP)
        add_limit_arguments(command_parser)
    return parser


def main(argv: list[str] | None = None, *, process: bool = False) -> int:
    """Run the command line ``argv``; the exit code. ``process``: this is the whole process
    (``python -m traceforge``), so once the command has finished, or is unwinding from a
    signal, further signals are ignored instead of cutting the exit short."""
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
    except KeyboardInterrupt:  # Ctrl-C while starting up
        print("traceforge: interrupted", file=sys.stderr)
        return 130
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 1
    tolerate_any_text()
    try:
        with progress.shown(not args.quiet), signals_unwind(process), reading_limits(limits_of(args)), \
                run_outputs.recorded():
            try:
                refuse_outputs_onto_inputs(args)  # before anything is read
                code = args.func(args)
                if process:
                    signals.ignore()  # done: a signal now is too late to stop anything, and exits 0 as it should
            except BaseException as e:
                if process:
                    signals.ignore()  # a signal now does not cut the clean-up or the error's line short
                if isinstance(e, KeyboardInterrupt):  # Ctrl-C, SIGTERM, SIGHUP: a stopped run leaves no output
                    run_outputs.withdraw()
                raise
            return code
    except Terminated as e:
        print(f"traceforge: terminated by {signal.Signals(e.signum).name}", file=sys.stderr)
        return 128 + e.signum
    except TraceforgeError as e:
        print(f"traceforge: error: {one_line(str(e))}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("traceforge: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        sys.stderr.close()
        return 1
    except OSError as e:
        if e.errno is None:
            return internal_error(e, args.debug)
        print(f"traceforge: error: {os_error_line(e)}", file=sys.stderr)
        return 1
    except Exception as e:  # a bug: say so, in one line
        return internal_error(e, args.debug)


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP (what ``timeout``, job schedulers and a closed terminal send), raised in
    the main thread like Ctrl-C's KeyboardInterrupt, so the run unwinds and removes its temporary
    files."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


UNWINDING_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))


@contextmanager
def signals_unwind(process: bool = False) -> Iterator[None]:
    """While the command runs, SIGTERM and SIGHUP raise ``Terminated`` (SIGINT already raises
    KeyboardInterrupt); the handlers are put back afterwards. ``process`` (the whole process
    is this run): the first signal also has the others ignored from then on, so a second one
    cannot cut the unwinding (the removal of temporary files) short, and nothing is put back:
    the interpreter's exit would put the default handlers back, under which a late signal
    kills the process (``main`` ignores them once the command is done)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    pid = os.getpid()

    def raise_stop(signum: int, frame: types.FrameType | None) -> None:
        if os.getpid() != pid:  # a worker just forked, before its own handlers (api.fan_out.worker_started)
            return
        if _in_fork_hook(frame):  # an exception there is swallowed ("Exception ignored"): again, once out of it
            threading.Timer(0.01, os.kill, (pid, signum)).start()
            return
        if process:
            signals.ignore()
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise Terminated(signum)

    ours = (*UNWINDING_SIGNALS, *((signal.SIGINT,) if process else ()))
    saved = {s: signal.signal(s, raise_stop) for s in ours}
    try:
        yield
    finally:
        if not process:
            for s, handler in saved.items():
                signal.signal(s, handler)


def _in_fork_hook(frame: types.FrameType | None) -> bool:
    """Whether ``frame`` is logging's after-fork hook in the parent (``_releaseLock``, run by
    ``os.fork`` as the workers start), which swallows any exception raised in it."""
    while frame is not None:
        if frame.f_code.co_name == "_releaseLock" and "logging" in frame.f_code.co_filename:
            return True
        frame = frame.f_back
    return False


def tolerate_any_text() -> None:
    """Text that was not UTF-8 in a trace (read as lone surrogates) is printed as backslash escapes
    rather than failing the command."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")


def os_error_line(e: OSError) -> str:
    """One line for an error of the system (a file that cannot be read or written, a full disk)."""
    if e.errno == errno.ENOSPC:  # large traces spill columns to temporary files (GBs at 10 GB for check and repair)
        return (f"no space left on device, for the output or for temporary files in {tempfile.gettempdir()} "
                "(set TMPDIR to a larger disk)")
    where = f"{e.filename}: " if e.filename is not None else ""
    return one_line(f"{where}{e.strerror or e}")


def internal_error(e: BaseException, debug: bool) -> int:
    """Report a bug in traceforge: one line (the traceback too with ``--debug``), exit code 3."""
    if debug:
        traceback.print_exception(e, file=sys.stderr)
    hint = "" if debug else " (run again with --debug for the traceback)"
    print(f"traceforge: internal error: {type(e).__name__}: {one_line(str(e))[:300]}; this is a bug in traceforge, "
          f"please report it to {REPORT_TO} with the command{hint}", file=sys.stderr)
    return INTERNAL_ERROR_EXIT


def one_line(text: str) -> str:
    """``text`` with its line breaks as spaces (an error is one line on stderr)."""
    return " ".join(text.split("\n")) if "\n" in text else text
