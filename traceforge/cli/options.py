"""CLI options made from the analyses' declarations (``annotator.plugin.Option``): one
definition of each option's name, default, parser and help."""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterable
from dataclasses import fields, replace

from ..annotator.plugin import Option
from ..api.results import HTA_VERSIONS, LATEST_HTA, Filters
from ..io.read.limits import RATIO_FLOOR, ReadLimits, parse_size


def add_options(parser: argparse.ArgumentParser | argparse._ArgumentGroup, options: Iterable[Option]) -> None:
    """An argument per option, once per name (analyses may share one)."""
    seen: set[str] = set()
    for option in options:
        if option.name in seen:
            continue
        seen.add(option.name)
        if option.flag:
            parser.add_argument(option.cli, dest=option.name, action="store_true", help=option.help)
        else:
            parser.add_argument(option.cli, dest=option.name, type=option.parse, default=option.default,
                                metavar=option.metavar, help=option.help)


HTA_HELP = ("HTA's choices, for HTA's numbers side by side: the last profiler step left out by HTA's rule "
            "(launch calls from the latest start of any ProfilerStep#N event on, CPU- or GPU-side, and the GPU "
            "ops they launched; every GPU op without a launch call), HTA's launch APIs, times rounded to whole "
            f"µs as HTA rounds them (HTA {LATEST_HTA}'s; --hta-version for another). See docs/hta.md")


class _HtaFlag(argparse.Action):
    """``--hta``: HTA's choices, of the version ``--hta-version`` named if it came first."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        if getattr(namespace, self.dest, None) is None:
            setattr(namespace, self.dest, LATEST_HTA)


def add_hta_argument(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """``--hta`` and ``--hta-version VERSION`` (``args.hta``: None, or a version of ``HTA_VERSIONS``):
    HTA's choices (``analyses.hta_choices``), one switch for every command with an HTA counterpart."""
    parser.add_argument("--hta", action=_HtaFlag, help=HTA_HELP)
    parser.add_argument("--hta-version", dest="hta", choices=HTA_VERSIONS, metavar="VERSION",
                        help=f"HTA's choices of this version ({', '.join(HTA_VERSIONS)}); implies --hta")


def count_arg(text: str) -> int:
    """An argparse ``type`` for a count: an integer, 0 or more."""
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError("must be 0 or more")
    return value


FILTER_OPTIONS = ("steps", "window", "kernel", "op")


def add_filter_arguments(parser: argparse.ArgumentParser) -> None:
    """The "filters" group (``analyses.filters``): ``--steps``, ``--window``, ``--kernel``,
    ``--op``; one the command already has (``patterns --op``) keeps its own meaning."""
    group = parser.add_argument_group(
        "filters", "analyse only part of the trace, as read (no temporary file); filters given together all apply")
    helps = {
        "steps": ("N[-M]", "ProfilerStep#N to ProfilerStep#M (the CPU side inside their ranges) and the GPU work "
                  "those steps launched (what trim --steps cuts)"),
        "window": ("A:B", "[A, B) from the trace start, as Perfetto shows time: µs or with a unit (100ms:250ms); an "
                   "empty side is the trace's start or end. Slices overlapping it stay whole (what trim --window A:B "
                   "cuts)"),
        "kernel": ("REGEX", "only GPU ops whose name matches (re.search), and the launch calls of those"),
        "op": ("REGEX", "only CPU operators whose name matches, what starts inside them on their thread, and the "
               "GPU ops launched from there"),
    }
    for name, (metavar, text) in helps.items():
        if f"--{name}" not in parser._option_string_actions:
            group.add_argument(f"--{name}", dest=f"where_{name}", metavar=metavar, help=text)


def filters_of(args: argparse.Namespace) -> Filters | None:
    """The filters given on the command line (``add_filter_arguments``), None for none."""
    where = Filters(**{name: getattr(args, f"where_{name}", None) for name in FILTER_OPTIONS})
    return where or None


def _positive_mb(text: str) -> int:
    try:
        mb = int(text)
    except ValueError:
        mb = 0
    if mb <= 0:
        raise argparse.ArgumentTypeError(f"not a positive whole number of MB: {text!r}")
    return mb << 20


def _size(text: str) -> int:
    try:
        return parse_size(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_limit_arguments(parser: argparse.ArgumentParser) -> None:
    """The reading limits (``io.limits.ReadLimits``), each defaulting to its one definition there."""
    d = ReadLimits()
    group = parser.add_argument_group("reading limits", "what keeps memory bounded on crafted or damaged input")
    group.add_argument("--max-event-mb", dest="max_event_bytes", type=_positive_mb, default=argparse.SUPPRESS,
                       metavar="MB", help=f"refuse an event longer than this (default {d.max_event_bytes >> 20})")
    group.add_argument("--max-metadata-mb", dest="max_metadata_bytes", type=_positive_mb, default=argparse.SUPPRESS,
                       metavar="MB", help=f"refuse top-level metadata longer than this (default "
                       f"{d.max_metadata_bytes >> 20})")
    group.add_argument("--max-size", dest="max_size", type=_size, default=argparse.SUPPRESS, metavar="SIZE",
                       help="refuse input that decompresses to more than this (e.g. 50GB; default: no cap)")
    group.add_argument("--max-ratio", dest="max_ratio", type=int, default=argparse.SUPPRESS, metavar="X",
                       help=f"refuse compressed input expanding more than X times (past "
                       f"{RATIO_FLOOR >> 20} MB; default {d.max_ratio})")


def limits_of(args: argparse.Namespace) -> ReadLimits:
    """The reading limits given on the command line (``add_limit_arguments``), defaults for the rest."""
    return replace(ReadLimits(), **{f.name: getattr(args, f.name) for f in fields(ReadLimits) if hasattr(args, f.name)})


def port_number(text: str) -> int:
    """A TCP port, 0 (any free one) to 65535."""
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"not a port (0 to 65535): {text!r}")
    return port


def output_path(text: str) -> str:
    """An output file or directory named on the command line: not empty (``-o ''`` is not the
    default output)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path names no file")
    try:
        os.fsencode(text)
    except UnicodeEncodeError:  # a lone surrogate not from the command line's bytes (an API caller's)
        raise argparse.ArgumentTypeError(f"not a path this system can name: {text!r}") from None
    return text
