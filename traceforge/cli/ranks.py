"""Many traces at once, one per rank: find each file's rank, run one job per file in parallel
(processes on this machine, or a Dask cluster), and gather the results in rank order.

A directory stands for its trace files. A file's rank is ``distributedInfo.rank`` among the
top-level keys before ``traceEvents`` (where Kineto writes it; only the head is
decompressed: ``io.rank_files.head_rank``), else a number in its name (``rank3``, ``rank-3``, ``rank_3``); files with neither
are numbered after the highest rank found, in the order given.
Each job is the command's own single-file function, so every rank's output is exactly
what a run on that file alone prints or writes; the summary across ranks is made from the
figures each job returns, never by reading a trace again. The jobs run through
``api.fan_out.run_jobs``, as the API's many-rank functions do.
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import sys
from collections.abc import Callable, Sequence
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import orjson

from ..annotator.run import default_output
from ..api.fan_out import cores, run_jobs
from ..errors import TraceforgeError, UsageError
from ..io.read.rank_files import file_ranks, one_per_rank, trace_paths
from ..io.write import run_outputs
from .output import json_text
from .rank_summary import Figures, Summary, summarize


@dataclass(frozen=True)
class RankFile:
    path: str
    rank: int
    source: str  # where the rank came from: "distributedInfo", "file name" or "order"


def rank_files(inputs: Sequence[str], *, by_rank: bool = True) -> list[RankFile]:
    """The files of ``inputs`` (directories expanded) with their ranks. ``by_rank``: the files are
    one trace per rank, in rank order, and two of one rank are an error (``one_per_rank``, as for
    ``stats``). Else they are files to compare in the order given (classify pairs them with
    --elapsed-s values and draws them as bars: two runs' rank-0 traces side by side)."""
    paths = trace_paths(inputs)
    files = [RankFile(path, rank, source) for path, (rank, source) in zip(paths, file_ranks(paths))]
    if by_rank:
        files.sort(key=lambda f: f.rank)
        one_per_rank((f.rank, f.path) for f in files)
    return files


# -- the command line -------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser, input_help: str) -> None:
    """The inputs (one or more files or directories) and how to fan out over them."""
    parser.add_argument("input", nargs="+", metavar="IN", help=f"{input_help}; or several, or a directory of rank "
                        "traces: each runs as on its own, in parallel, followed by a summary across ranks")
    add_fan_out_arguments(parser)


def add_fan_out_arguments(parser: argparse.ArgumentParser) -> None:
    """``--jobs`` and ``--cluster``: how the traces of several ranks are processed in parallel."""
    group = parser.add_argument_group("several traces (one per rank)")
    group.add_argument("--jobs", type=_positive, metavar="N",
                       help=f"traces processed at once on this machine (default: the CPU cores, {cores()})")
    group.add_argument("--cluster", metavar="ADDRESS",
                       help="run the per-trace jobs on this Dask distributed scheduler (e.g. tcp://head:8786) "
                       "instead; the traces (and any -o directory) must be on storage every worker reaches at "
                       "the same path, and the workers need traceforge (pip install 'traceforge[cluster]')")


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be 1 or more")
    return value


def fans_out(args: argparse.Namespace) -> bool:
    """Several inputs, a directory or a cluster: one job per trace and a summary."""
    return len(args.input) > 1 or args.cluster is not None or any(Path(p).is_dir() for p in args.input)


def check_fan_out(args: argparse.Namespace, inputs: Sequence[str] | None = None) -> None:
    if "-" in (args.input if inputs is None else inputs):
        raise UsageError("- (standard input) works with one input only")
    if args.cluster is not None and args.jobs is not None:
        raise UsageError("--jobs is for this machine; with --cluster the cluster's workers decide")


def fan_out_of(args: argparse.Namespace, inputs: Sequence[str]) -> dict[str, Any]:
    """``jobs`` and ``cluster`` for the API's many-rank functions (``api.fan_out.ranked``):
    ``--jobs`` (default the cores) or ``--cluster``, checked as for every many-file command.
    With ``--cluster`` the paths given must be ones the workers reach (absolute)."""
    if len(inputs) > 1 or args.cluster is not None:
        check_fan_out(args, inputs)
    return {"jobs": args.jobs, "cluster": args.cluster}


@dataclass
class RankRun:
    """One trace's job: what it printed, its figures for the summary, or the error that stopped it."""

    rank: int
    path: str
    out: str = ""
    err: str = ""
    figures: Figures = field(default_factory=dict)
    error: str | None = None


def run_command(args: argparse.Namespace, one: Callable[[argparse.Namespace], Figures]) -> int:
    """Run a command's single-file function ``one`` (reads ``args.input``, prints, returns
    figures unless ``args.rank_figures`` is False) on each input; with several, print each
    rank's output then the summary."""
    if not fans_out(args):  # one file: no summary across ranks, so no figures to compute for it
        one(argparse.Namespace(**{**vars(args), "input": args.input[0], "rank_figures": False}))
        return 0
    check_fan_out(args)
    paths = trace_paths(args.input)
    out_dir = getattr(args, "output", None)
    if args.cluster is not None:  # the workers' working directories are not ours
        paths = [os.path.abspath(p) for p in paths]
        out_dir = os.path.abspath(out_dir) if out_dir not in (None, "-") else out_dir
    made = out_dir if out_dir not in (None, "-") and not os.path.exists(out_dir) else None
    if made is not None:
        run_outputs.watch(made)  # made here: gone again if the run leaves nothing in it
    output_of = dict(zip(paths, output_paths(out_dir, paths)))  # before any trace (or head) is read
    for out in output_of.values():
        if out is not None:
            run_outputs.watch(out)  # written by a worker: withdrawn here if the run is stopped
    try:
        files = rank_files(paths)
        jobs = []
        for f in files:
            job_args = {**vars(args), "input": f.path}
            if "output" in job_args:
                job_args["output"] = output_of[f.path]
            jobs.append((f.rank, argparse.Namespace(**job_args)))
        runs = run_jobs(partial(_captured, one), jobs, [f.path for f in files], jobs=args.jobs, cluster=args.cluster)
    except Exception:
        _remove_if_empty(made)
        raise
    if all(r.error for r in runs):
        _remove_if_empty(made)
    _print_runs(runs, getattr(args, "format", "text"))
    return 1 if any(r.error for r in runs) else 0


def _remove_if_empty(directory: str | None) -> None:
    """An output directory the run made but wrote nothing into (every job failed) is not left behind."""
    if directory is None:
        return
    try:
        os.rmdir(directory)
    except OSError:  # not empty (or not made here, or gone)
        pass


def default_output_dir(inputs: Sequence[str], kind: str) -> str | None:
    """Where a run over a directory writes without ``-o``: one directory, ``DIR/<kind>/`` in the
    (first) directory given, announced on stderr; None (each output beside its input) for files."""
    directory = next((p for p in inputs if Path(p).is_dir()), None)
    if directory is None:
        return None
    out = str(Path(directory) / kind)
    print(f"traceforge: writing the {kind} traces to {out}/ (-o DIR to choose)", file=sys.stderr)
    return out


def output_paths(out_dir: str | None, paths: list[str]) -> list[str | None]:
    """With several inputs ``-o`` is a directory: ``<name>.annotated.json.gz`` per input in it
    (compressed as the input is)."""
    if out_dir is None:
        return [None] * len(paths)
    if out_dir == "-":
        raise UsageError("-o -: several outputs cannot go to standard output; give a directory")
    directory = Path(out_dir)
    if directory.exists() and not directory.is_dir():
        raise UsageError(f"{out_dir}: with several inputs -o names a directory, and this is a file")
    outputs = outputs_in(out_dir, paths)
    seen: dict[str, str] = {}
    for p, out in zip(paths, outputs):
        if out in seen:
            raise UsageError(f"{p} and {seen[out]} would both be written to {out}: rename one")
        seen[out] = p
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"{out_dir}: cannot make the directory: {e.strerror or e}") from None
    return outputs


def outputs_in(out_dir: str, paths: Sequence[str]) -> list[str]:
    """The file each input is written to when ``-o`` names a directory (several inputs)."""
    return [str(Path(out_dir) / Path(default_output(p)).name) for p in paths]


def _captured(one: Callable[[argparse.Namespace], Figures], job: tuple[int, argparse.Namespace]) -> RankRun:
    """Runs in a worker: ``one`` on a file, its stdout and stderr kept as text."""
    rank, args = job
    run = RankRun(rank, args.input)
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            run.figures = one(args)
        except TraceforgeError as e:  # reported with the other ranks' results
            run.error = str(e)
    run.out, run.err = out.getvalue(), err.getvalue()
    return run


def _print_runs(runs: list[RankRun], fmt: str) -> None:
    """Each rank's output in rank order, then the summary (on stderr for csv/json, so stdout parses)."""
    for r in runs:
        sys.stderr.write(r.err)
        if r.error:
            print(f"traceforge: error: rank {r.rank}: {r.error}", file=sys.stderr)
    summary = summarize([(r.rank, r.path, r.figures) for r in runs if not r.error])
    if fmt == "json":
        doc = {"ranks": [{"rank": r.rank, "path": r.path, **({"error": r.error} if r.error else
                                                               {"result": orjson.loads(r.out)})} for r in runs],
               "summary": summary.to_dict()}
        sys.stdout.write(json_text(doc) + "\n")
    elif fmt == "csv":
        sys.stdout.write(_ranked_csv(runs))
    else:
        for r in runs:
            if r.out:
                sys.stdout.write(f"== rank {r.rank}: {r.path} ==\n{r.out}\n")
    print_summary(summary, fmt)


def print_summary(summary: Summary, fmt: str) -> None:
    """As text: on stdout after the results, or on stderr when stdout holds csv/json."""
    out = sys.stdout if fmt == "text" else sys.stderr
    out.write("\n".join(summary.lines()) + "\n")
    out.flush()


def _ranked_csv(runs: list[RankRun]) -> str:
    """The ranks' CSV tables as one, with a ``rank`` column first."""
    rows: list[dict[str, Any]] = []
    columns: dict[str, None] = {"rank": None}
    for r in runs:
        if r.error:
            continue
        reader = csv.DictReader(io.StringIO(r.out))
        columns.update(dict.fromkeys(reader.fieldnames or ()))
        rows += [{"rank": r.rank, **row} for row in reader]
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(columns), restval="", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()
