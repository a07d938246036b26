"""``traceforge classify``: GPU time per kernel category, for one or more traces or nsys CSVs."""

from __future__ import annotations

import argparse
import sys
from functools import partial

from ....api.files import classified
from ....api.results import DEFAULT_RULES, PRESETS, Classified, Filters, RuleSet, load_rules
from ....errors import UsageError
from ....io.write.output import check_writable, write_file
from ... import ranks
from ...classify_report import render_csv, render_html, render_json, render_text
from ...options import add_filter_arguments, add_hta_argument, filters_of, output_path
from ...rank_summary import classified_figures, summarize

_RENDER = {"text": render_text, "csv": render_csv, "json": render_json}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "classify",
        help="GPU time per kernel category (gemm, attention, nccl, ...), non-overlapped, per file and GPU",
        description="Label every GPU op by ordered regex rules (first match wins, a catch-all last) and split "
        "each GPU's time by label: summed duration, non-overlapped time (each instant counted once, given to "
        "the op that started first; vLLM's 'elapsed') and non-GPU time up to the window. Inputs are Kineto "
        "traces or `nsys stats -r cuda_gpu_trace --format csv` output, told apart by content.",
        epilog="Example: traceforge classify rank0.json.gz rank1.json.gz --rules default --html report.html",
    )
    ranks.add_arguments(p, "trace (.json, .json.gz, .json.zst) or nsys CSV")
    p.add_argument("--rules", default=DEFAULT_RULES, metavar="PRESET|FILE",
                   help=f"a preset ({', '.join(PRESETS)}) or a JSON/TOML rules file (default: default)")
    p.add_argument("--format", choices=tuple(_RENDER), default="text", help="output on stdout (default: text)")
    p.add_argument("--kernels", action="store_true", help="one row per (GPU, kernel name) instead of per category")
    p.add_argument("--elapsed-s", action="extend", type=_seconds_list, metavar="S[,S...]",
                   help="real (un-profiled) elapsed seconds, one for all inputs or one per input (comma-separated "
                   "or the option repeated): the window non-GPU time is measured to (default: each file's GPU span)")
    p.add_argument("--html", type=output_path, metavar="FILE", help="also write a stacked bar chart (standalone HTML, inline SVG)")
    add_hta_argument(p)
    add_filter_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    many = ranks.fans_out(args)
    if many:
        ranks.check_fan_out(args)
        files = ranks.rank_files(args.input, by_rank=False)  # in the order given, as --elapsed-s and the bars
    else:
        files = [ranks.RankFile(args.input[0], 0, "order")]
    elapsed = args.elapsed_s or [None]
    if len(elapsed) not in (1, len(files)):
        raise UsageError(f"--elapsed-s: give one value or one per input ({len(files)}), not {len(elapsed)}")
    elapsed = elapsed * len(files) if len(elapsed) == 1 else elapsed
    rules = load_rules(args.rules)
    paths = [f.path for f in files]
    if args.html:
        check_writable(args.html, paths)  # said now, not after every trace is read
    results = ranks.run_jobs(partial(_classify, rules, filters_of(args), bool(args.hta)), list(zip(paths, elapsed)),
                             paths, jobs=args.jobs, cluster=args.cluster)
    for r in results:
        for warning in r.warnings:
            print(f"traceforge: warning: {warning}", file=sys.stderr)
    sys.stdout.write(_RENDER[args.format](results, kernels=args.kernels))
    sys.stdout.flush()
    if args.html:
        write_file(args.html, render_html(results).encode("utf-8", "backslashreplace"), paths)
        print(f"{args.html}: stacked bar chart of {len(results)} input(s)", file=sys.stderr)
    if many:
        ranks.print_summary(summarize([(f.rank, f.path, classified_figures(r)) for f, r in zip(files, results)]),
                            args.format)
    return 0


def _seconds_list(text: str) -> list[str]:
    """``--elapsed-s 0.2`` or ``--elapsed-s 0.2,0.3``: one value per comma (so the option never
    takes the input paths after it)."""
    return [v.strip() for v in text.split(",")]


def _classify(rules: RuleSet, where: Filters | None, hta: bool, job: tuple[str, str | None]) -> Classified:
    path, elapsed_s = job
    return classified(path, rules, elapsed_s=elapsed_s, where=where, hta=hta)
