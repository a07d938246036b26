"""``traceforge annotate``: write analyses back into the trace as tracks."""

from __future__ import annotations

import argparse
import sys

from ....annotator.registry import ANALYSES, option_values
from ....annotator.run import annotate
from ....api.results import gpu_figures
from ....errors import UsageError
from ....io.write.output import output_compression
from ... import ranks
from ...options import (
    add_filter_arguments,
    add_hta_argument,
    add_options,
    filters_of,
    output_path,
)
from ...rank_summary import Figures
from .. import add_compression_argument, note_plain_output


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "annotate",
        help="add analysis tracks to a trace (queue length, memcpy bandwidth, ...)",
        description="Copy a trace, adding the chosen analyses as tracks you see in Perfetto next to "
        "the kernels they explain (some also add args to existing events). Events they do not change are "
        "copied byte for byte.",
    )
    ranks.add_arguments(p, "trace file (.json, .json.gz, .json.zst) or - for stdin")
    p.add_argument("-o", "--output", type=output_path, help="output file; its suffix picks the compression (.json, .json.gz, "
                   ".json.zst), - for stdout. Default: <name>.annotated.json.gz beside the input (.json.zst for a "
                   ".json.zst input, .json for .json). With several inputs (or a directory): a directory (made if "
                   "missing; default DIR/annotated/ for a directory DIR) that gets <name>.annotated.json.gz for "
                   "each input")
    for a in ANALYSES.values():
        p.add_argument(a.flag, dest=a.name, action="store_true", help=a.help)
    p.add_argument("--all", action="store_true", help="every analysis above that needs no option")
    p.add_argument("--copy", action="store_true", help="no analysis: copy the trace as it is (to change its "
                   "compression); without an analysis flag, --all or --copy, annotate stops with the list of flags")
    p.add_argument("--repair", action="store_true", help="also repair the output as 'traceforge repair' does "
                   "(overlapping slices to overlap threads, out-of-range thread ids, flow ends without a start), "
                   "so Perfetto imports it with nothing dropped or moved")
    add_compression_argument(p)
    options = p.add_argument_group("analysis options")
    add_options(options, [o for a in ANALYSES.values() for o in a.options])
    add_hta_argument(options)
    add_filter_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    check_chosen(args)
    if args.output is None and ranks.fans_out(args):
        ranks.check_fan_out(args)
        args.output = ranks.default_output_dir(args.input, "annotated")
    return ranks.run_command(args, annotate_one)


def check_chosen(args: argparse.Namespace) -> None:
    """No silent copy: an analysis flag, ``--all`` or ``--copy`` must be given; an analysis
    option alone (``--op``, ``--rules``, ``--ncu``) names the flag it belongs to."""
    if args.all or args.copy or any(getattr(args, name) for name in ANALYSES):
        return
    owners = [f"{o.cli} is an option of {a.flag}" for a in ANALYSES.values() for o in a.options
              if getattr(args, o.name, o.default) not in (o.default, None, False)]
    if args.repair and not owners:
        raise UsageError(f"annotate --repair with no analysis: to repair alone run 'traceforge repair {args.input[0]}' "
                         "(or add an analysis flag, --all, or --copy to annotate and repair in one run)")
    hint = f" ({'; '.join(dict.fromkeys(owners))})" if owners else ""
    flags = " ".join(a.flag for a in ANALYSES.values())
    raise UsageError(f"annotate: no analysis chosen{hint}; add one or more of: {flags}; or --all (every one that "
                     "needs no option), or --copy (a plain copy)")


def annotate_one(args: argparse.Namespace) -> Figures:
    chosen = [name for name, a in ANALYSES.items() if (args.all and a.in_all) or getattr(args, name)]
    figures: Figures = {}
    options = option_values(vars(args))
    if getattr(args, "rank_figures", True):  # one of several ranks
        options["on_columns"] = lambda cols: figures.update(gpu_figures(cols))
        # The other ranks' runs keep the cores busy (a cluster's workers likewise), unless one at a time.
        options["side_by_side"] = getattr(args, "jobs", None) == 1 and getattr(args, "cluster", None) is None
    note_plain_output(args.output)
    with output_compression(args.compression):
        result = annotate(args.input, args.output, analyses=chosen, options=options, where=filters_of(args),
                          repair=args.repair)
    figures.update(result.figures)
    print(result.text(), file=sys.stderr)
    return figures
