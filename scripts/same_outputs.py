#!/usr/bin/env python3
"""Prove that two source trees of traceforge behave the same on the command line.

Take a snapshot of each tree, then compare the two snapshots:

    python scripts/same_outputs.py snapshot --tree /tmp/tf-baseline --out /tmp/snap-a
    python scripts/same_outputs.py snapshot --tree . --out /tmp/snap-b
    python scripts/same_outputs.py compare /tmp/snap-a /tmp/snap-b

``snapshot`` runs every command that the tree's ``traceforge --help`` lists, with each
``--format`` and each ``--table`` its --help names, annotate with each analysis alone and with
--all, ``--hta``/``--hta-version`` and the filters (--steps, --window, --kernel, --op) wherever a
command has them, on every ``*.json.gz`` under --traces (default ``../shared/traces`` of this
checkout) and on the tree's ``samples/train_step.json.gz``, plus option variants, several-trace
(per-rank) runs with --jobs 2, the commands across ranks (collectives, merge, report) on the
trace_filter pair and on ranks made by ``make_ranks.py`` (this script's), stdin input, --help
texts and expected errors; it stops before running if a command, an analysis or a table of
--help would not run. ``--only REGEX`` runs just the runs whose name matches. Each run is
``python -m traceforge ...`` in a subprocess with ``PYTHONPATH=TREE`` (checked to import
traceforge from TREE), so only the command line is used and the tree's layout does not
matter. Every run has its own working directory in which ``in/`` holds copies of the
traces; arguments are relative paths, so the two trees' runs have identical argv.

Per run the manifest (``SNAPDIR/manifest.json``) records argv, exit code, the sha256 of
stdout and stderr, and for every file the run wrote the sha256 and size of its content:
``.gz`` and ``.zst`` files are decompressed first (their compressed bytes may differ from
run to run), other files (CSV, HTML, plain JSON) are hashed as written, except that in HTML
every uuid (the random element ids of report's Bokeh plots) becomes ``<UUID-k>``, numbered in
order of first use. Only what varies between identical runs is normalised in stdout and
stderr: elapsed seconds ("checked in 0.6 s", "(0.5 s)", ``"seconds": 0.612``), the tree's and
the scratch directory's absolute paths, and the port ``open`` serves on. The normalised texts (and small text outputs) are
kept in ``SNAPDIR/text/`` for the diffs ``compare`` prints.

``compare`` prints every difference (a missing run, argv, exit code, stdout, stderr, an
output file) with a short unified diff, and exits 1 if there is any, else prints
"N runs identical" and exits 0. ``snapshot`` exits 1 when a run's exit code is not the
one expected of it (the snapshot is written anyway; such runs are listed).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import difflib
import gzip
import hashlib
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import orjson
import zstandard

HERE = Path(__file__).resolve().parent
DEFAULT_TRACES = HERE.parent.parent / "shared" / "traces"
SAMPLE = "samples/train_step.json.gz"
NCU_TRACE = "h100/ncu_target_trace.json.gz"
NCU_CSV = "h100/ncu_raw.csv"
CUPTI_TRACE_DIR = "hta/cupti_profiler/"
RANK_PAIR = ("hta/trace_filter/sampled_rank-0.json.gz", "hta/trace_filter/sampled_rank-1.json.gz")
MADE_RANKS_BASE = "hta/nccl_parser_config/nccl_data.json.gz"  # has NCCL kernels with their collectives' args
MADE_RANKS = "ranks"  # under in/: rank<R>.json.gz made by make_ranks.py from MADE_RANKS_BASE
MADE_RANKS_ARGS = ("--ranks", "3", "--seed", "1")
GPU_LIMITS = "gpu_limits.json"  # under in/: a --gpu-limits file naming the GPU of GPU_LIMITS_TRACE
GPU_LIMITS_TRACE = "hta/triton_example/triton_example.json.gz"
GPU_LIMITS_TEXT = ('{"NVIDIA A100-PG509-200": {"memory_gbps": 1555, '
                   '"tflops": {"fp32": 19.5, "tf32_tensor": 156, "bf16_tensor": 312}}}\n')
TABLES_TRACE = "h100/resnet50_train.json.gz"  # every stats table in CSV here too, beside the sample
PATTERN_OPS = ("aten::addmm", "aten::conv2d", "aten::linear", "aten::mm", "aten::bmm", "aten::convolution")
KERNEL_REGEX = "(?i)gemm|conv"  # --kernel filter runs
CHECK_CODES = (0, 1, 2)  # check: nothing lost, something lost, Perfetto would refuse the trace
TRACE_PROCESSOR = HERE.parent.parent / "shared" / "bin" / "trace_processor"
RUN_TIMEOUT_S = 600
TEXT_KEPT_BYTES = 1 << 20  # stdout/stderr/output texts up to this size are kept for diffs
DIFF_LINES = 40

# What legitimately varies between two runs of the same code: elapsed seconds.
TIMING_PATTERNS = (
    (re.compile(r"\bchecked in \d+(?:\.\d+)? s\b"), "checked in <T> s"),  # check, text
    (re.compile(r'"seconds": \d+(?:\.\d+)?(?:[eE][-+]?\d+)?'), '"seconds": <T>'),  # check, json
    (re.compile(r"(\(|, )\d+(?:\.\d+)?\s+s\)", re.MULTILINE), r"\1<T> s)"),  # "(0.6 s)", "appended, 0.5 s)"
    (re.compile(r"\bappended in \d+(?:\.\d+)?\s+s\b"), "appended in <T> s"),  # annotate's last line
    (re.compile(r"\(\d[\d,.]*\s+/\s+s\)"), "(<R> / s)"),  # a rate over the elapsed time
)
# stderr's notes are wrapped to a width, so a time of another length moves the line breaks after
# it: stderr is compared with each run of blanks as one space (stdout and files stay exact).
BLANKS = re.compile(r"[ \t]*\n[ \t]*|[ \t]{2,}")
# What varies between two runs in a written file: the random element ids (uuid4) an HTML page's
# plots are made with (report's Bokeh document); each becomes <UUID-k>, k in order of first use.
UUID = re.compile(rb"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")


# -- the command line under test ----------------------------------------------------------------


@dataclass(frozen=True)
class Cli:
    """What the tree's ``--help`` texts say: the commands and, per command, its options, its
    --format and --table choices. The plan follows them, so every command, format and table runs."""

    commands: tuple[str, ...]
    helps: dict[str, str]  # command -> its --help text, whitespace collapsed

    def has(self, command: str, option: str) -> bool:
        return re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", self.helps.get(command, "")) is not None

    def formats(self, command: str) -> tuple[str, ...]:
        m = re.search(r"--format \{([^}]*)\}", self.helps.get(command, ""))
        return tuple(m.group(1).split(",")) if m else ()

    def tables(self, command: str) -> tuple[str, ...]:
        text = self.helps.get(command, "")
        m = re.search(r"--table \{([^}]*)\}", text)
        if m:
            return tuple(m.group(1).split(","))
        m = re.search(r"only this table \(again for more\): (.*?) \(default", text)
        return tuple(t.strip() for t in m.group(1).split(",")) if m else ()

    def table_in_text(self, command: str) -> bool:
        """--table also picks what text (and json) print; else it is only for --format csv."""
        m = re.search(r"(?<!\[)--table (?:\{[^}]*\}|[A-Z]+) (.{0,60})", self.helps.get(command, ""))
        return m is not None and re.match(r"(the|which) table --format csv", m.group(1)) is None

    def has_filters(self, command: str) -> bool:
        return "filters: analyse only part of the trace" in self.helps.get(command, "")

    def analyses(self) -> tuple[str, ...]:
        """annotate's analysis flags: its usage's bare flags between -o and --all."""
        usage = self.helps.get("annotate", "").split("positional arguments:")[0]
        m = re.search(r"\[-o OUTPUT\](.*?)\[--all\]", usage)
        return tuple(re.findall(r"\[(--[a-z][a-z0-9-]*)\]", m.group(1))) if m else ()

    def hta_versions(self) -> tuple[str, ...]:
        for text in self.helps.values():
            m = re.search(r"HTA's choices of this version \(([^)]*)\)", text)
            if m:
                return tuple(v.strip() for v in m.group(1).split(","))
        return ()


def read_cli(setup: Setup, jobs: int) -> Cli:
    def helptext(command: str | None) -> str:
        argv = [setup.python, "-m", "traceforge", *([command] if command else []), "--help"]
        done = subprocess.run(argv, cwd=setup.scratch, env=setup.env, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"same_outputs: {' '.join(argv[2:])} exited {done.returncode}: {done.stderr[-500:]}")
        return done.stdout
    top = helptext(None)
    listing = top.split("COMMAND", 2)[-1].split("options:")[0]
    commands = tuple(re.findall(r"^ {4}([a-z][a-z-]+)(?=\s|$)", listing, re.MULTILINE))
    if not commands:
        raise SystemExit("same_outputs: found no command in traceforge --help")
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        texts = list(pool.map(helptext, commands))
    return Cli(commands, {c: " ".join(t.split()) for c, t in zip(commands, texts)})


# -- the runs ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    """One command line. ``argv`` follows ``python -m traceforge``; its paths are relative to
    the run's directory, where ``in/`` holds the traces."""

    name: str
    argv: tuple[str, ...]
    expect: tuple[int, ...] = (0,)
    stdin: str | None = None  # a file under in/ fed on stdin
    own_copy: str | None = None  # a trace under in/ copied into the run's directory (for outputs beside it)
    serve: bool = False  # ``open``: probed over HTTP, then interrupted

    @property
    def slug(self) -> str:
        digest = hashlib.sha1(self.name.encode()).hexdigest()[:10]
        return re.sub(r"[^A-Za-z0-9._-]+", "_", self.name)[:90].strip("_") + "-" + digest


@dataclass(frozen=True)
class TraceFacts:
    """What the plan needs to know of a trace, read by this script (not by the tree under test)."""

    label: str  # path under in/
    size: int  # compressed bytes, to start the slow runs first
    steps: tuple[int, ...]  # ProfilerStep numbers
    span_ns: int  # from the first non-negative ts to the last event end
    ops: tuple[str, ...]  # PATTERN_OPS present in the trace, in PATTERN_OPS order
    rank: int | None = None  # distributedInfo.rank


def read_facts(label: str, path: Path) -> TraceFacts:
    doc = orjson.loads(gzip.decompress(path.read_bytes()))
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    info = doc.get("distributedInfo") if isinstance(doc, dict) else None
    rank = info.get("rank") if isinstance(info, dict) and isinstance(info.get("rank"), int) else None
    steps: set[int] = set()
    names: set[str] = set()
    first, last = None, None
    for e in events:
        if not isinstance(e, dict) or e.get("ph") == "M":
            continue
        name = e.get("name")
        if isinstance(name, str):
            names.add(name)
            m = re.fullmatch(r"ProfilerStep#(\d+)", name)
            if m:
                steps.add(int(m.group(1)))
        ts = e.get("ts")
        if not isinstance(ts, (int, float)) or ts < 0:
            continue
        dur = e.get("dur")
        end = ts + (dur if isinstance(dur, (int, float)) and dur > 0 else 0)
        first = ts if first is None else min(first, ts)
        last = end if last is None else max(last, end)
    span_ns = int(round((last - first) * 1000)) if first is not None and last is not None else 0
    return TraceFacts(label, path.stat().st_size, tuple(sorted(steps)), span_ns,
                      tuple(op for op in PATTERN_OPS if op in names), rank)


def base_argv(command: str, p: str, other: str) -> tuple[str, ...]:
    """The least a command needs to do its work on trace ``p`` (``other``: a second trace)."""
    return {
        "annotate": ("annotate", p, "--all", "-o", "out.json.gz"),
        "export": ("export", p, "--csv", "csv"),
        "diff": ("diff", p, other),
        "merge": ("merge", p, "-o", "merged.json.gz"),
        "report": ("report", p, "-o", "report.html"),
        "trim": ("trim", p, "-o", "out.json.gz"),
    }.get(command, (command, p))


def format_runs(cli: Cli, command: str, argv: tuple[str, ...], at: str, text: bool = True) -> list[Run]:
    """``argv`` in each --format of the command, CSV once per --table; where --table also picks
    the text and JSON tables: text once per table and JSON with every table."""
    runs = [Run(f"{command}" + at, argv)] if text else []
    tables = cli.tables(command)
    for fmt in cli.formats(command):
        if fmt == "text":
            continue
        if fmt == "csv" and tables:
            runs += [Run(f"{command} --format csv --table {t}" + at, (*argv, "--format", "csv", "--table", t))
                     for t in tables]
        else:
            runs.append(Run(f"{command} --format {fmt}" + at, (*argv, "--format", fmt)))
    if tables and cli.table_in_text(command):
        runs += [Run(f"{command} --table {t}" + at, (*argv, "--table", t)) for t in tables]
        every = tuple(x for t in tables for x in ("--table", t))
        if "json" in cli.formats(command):
            runs.append(Run(f"{command} --format json every --table" + at, (*argv, "--format", "json", *every)))
    return runs


def per_trace_runs(cli: Cli, t: TraceFacts, other: str) -> list[Run]:
    """The runs every trace gets; ``other`` is the trace it is diffed against."""
    p, at = f"in/{t.label}", f" @ {t.label}"
    runs = [
        Run("info" + at, ("info", p)),
        Run("info --format json" + at, ("info", p, "--format", "json")),
        Run("check" + at, ("check", p), CHECK_CODES),
        Run("check --format json" + at, ("check", p, "--format", "json"), CHECK_CODES),
        Run("repair" + at, ("repair", p, "-o", "out.json.gz")),
        Run("repair --rebase-time" + at, ("repair", p, "-o", "out.json", "--rebase-time")),
        Run("launch-stats" + at, ("launch-stats", p)),
        Run("patterns" + at, ("patterns", p)),
        Run("classify" + at, ("classify", p)),
        Run("classify --kernels" + at, ("classify", p, "--kernels")),
        Run("counters" + at, ("counters", p)),
        Run("stats" + at, ("stats", p)),
        Run("export --csv" + at, ("export", p, "--csv", "csv")),
        Run(f"diff {other}" + at, ("diff", p, f"in/{other}")),
        Run("roofline" + at, ("roofline", p)),
        # a trace without ProfilerStep#N: the whole trace is the one instance
        Run("critical-path" + at, ("critical-path", p) if t.steps else ("critical-path", p, "--annotation", "")),
    ]
    for fmt in ("csv", "json"):
        runs += [
            Run(f"launch-stats --format {fmt}" + at, ("launch-stats", p, "--format", fmt)),
            Run(f"classify --format {fmt}" + at, ("classify", p, "--format", fmt)),
        ]
    runs.append(Run("patterns --format json" + at, ("patterns", p, "--format", "json")))
    runs += [Run("stats --format json" + at, ("stats", p, "--format", "json")),
             Run("stats --format csv --table summary" + at, ("stats", p, "--format", "csv", "--table", "summary"))]
    for flag in (*cli.analyses(), "--all"):
        runs.append(Run(f"annotate {flag}" + at, ("annotate", p, flag, "-o", "out.json.gz")))
    if t.span_ns >= 10:
        lo, hi = t.span_ns * 3 // 10, t.span_ns * 6 // 10
        runs.append(Run("trim --window middle" + at, ("trim", p, "-o", "out.json.gz", "--window", f"+{lo}ns:+{hi}ns")))
        if t.label == SAMPLE:
            runs.append(Run("trim --window head" + at, ("trim", p, "-o", "out.json.gz", "--window", f":+{lo}ns")))
    if t.steps:
        middle = t.steps[len(t.steps) // 2]
        runs.append(Run("trim --steps one" + at, ("trim", p, "-o", "out.json.gz", "--steps", str(middle))))
        if len(t.steps) > 1 and t.label == SAMPLE:
            span = f"{t.steps[0]}-{t.steps[-1]}"
            runs.append(Run("trim --steps all" + at, ("trim", p, "-o", "out.json.gz", "--steps", span)))
    for i, op in enumerate(t.ops[:1 if t.label != SAMPLE else 2]):
        runs.append(Run(f"patterns --op {op}" + at, ("patterns", p, "--op", op)))
        if i == 0 and t.label == SAMPLE:
            runs += [
                Run(f"patterns --op {op} --format {fmt}" + at, ("patterns", p, "--op", op, "--format", fmt))
                for fmt in ("csv", "json")
            ]
            runs.append(Run(f"annotate --patterns --op {op}" + at,
                            ("annotate", p, "--patterns", "--op", op, "-o", "out.json.gz")))
    if t.label.startswith(CUPTI_TRACE_DIR) or t.label == NCU_TRACE:
        runs += format_runs(cli, "counters", ("counters", p), at, text=False)
    if t.label == NCU_TRACE:
        ncu = ("--ncu", f"in/{NCU_CSV}")
        at_ncu = " --ncu" + at
        runs += format_runs(cli, "counters", ("counters", p, *ncu), at_ncu)
        runs += [
            Run("counters --rules default" + at_ncu, ("counters", p, *ncu, "--rules", "default")),
            Run("counters --ncu-skip 0 --peak-dram-gbps 2000 --peak-tensor-pct 50" + at_ncu,
                ("counters", p, *ncu, "--ncu-skip", "0", "--peak-dram-gbps", "2000", "--peak-tensor-pct", "50")),
            Run("annotate --counters --ncu" + at, ("annotate", p, "--counters", *ncu, "-o", "out.json.gz")),
            Run("annotate --all --ncu" + at, ("annotate", p, "--all", *ncu, "-o", "out.json.gz")),
        ]
        csv_at = f" @ {NCU_CSV}"
        runs += format_runs(cli, "counters", ("counters", f"in/{NCU_CSV}"), csv_at)
    if t.label == GPU_LIMITS_TRACE:
        limits = ("--gpu-limits", f"in/{GPU_LIMITS}")
        runs += [
            Run("roofline --gpu-limits" + at, ("roofline", p, *limits)),
            Run("roofline --gpu-limits --format json" + at, ("roofline", p, *limits, "--format", "json")),
            Run("annotate --roofline --gpu-limits" + at, ("annotate", p, "--roofline", *limits, "-o", "out.json.gz")),
        ]
    if t.label == TABLES_TRACE:
        runs += [Run(f"stats --format csv --table {table}" + at, ("stats", p, "--format", "csv", "--table", table))
                 for table in cli.tables("stats") if table != "summary"]
    return runs


def sample_runs(cli: Cli, facts: TraceFacts) -> list[Run]:
    """Output codecs, stdin and stdout, the default output path, and the options' variants,
    on the small bundled sample: every --format and --table, --hta, the filters."""
    p, at = f"in/{SAMPLE}", f" @ {SAMPLE}"
    op = facts.ops[0] if facts.ops else None
    step = facts.steps[len(facts.steps) // 2] if facts.steps else None
    runs = [
        Run("annotate --all -o .json.zst" + at, ("annotate", p, "--all", "-o", "out.json.zst")),
        Run("annotate --all -o .json" + at, ("annotate", p, "--all", "-o", "out.json")),
        Run("annotate --all --compression small" + at,
            ("annotate", p, "--all", "--compression", "small", "-o", "out.json.gz")),
        Run("annotate --all -o - (stdout)" + at, ("annotate", p, "--all", "-o", "-")),
        Run("annotate --all (default output)" + at, ("annotate", SAMPLE.rsplit("/", 1)[1], "--all"), own_copy=SAMPLE),
        Run("annotate --all from stdin" + at, ("annotate", "-", "--all", "-o", "out.json.gz"), stdin=SAMPLE),
        Run("annotate --all -q" + at, ("-q", "annotate", p, "--all", "-o", "out.json.gz")),
        Run("annotate --all --repair" + at, ("annotate", p, "--all", "--repair", "-o", "out.json.gz")),
        Run("annotate --copy" + at, ("annotate", p, "--copy", "-o", "out.json.gz")),
        Run("annotate --launch-delay --delay-cutoff 10us" + at,
            ("annotate", p, "--launch-delay", "--delay-cutoff", "10us", "-o", "out.json.gz")),
        Run("annotate --classify --rules hta" + at, ("annotate", p, "--classify", "--rules", "hta", "-o", "out.json.gz")),
        Run("annotate --patterns --min-len 2 --top-k 3" + at,
            ("annotate", p, "--patterns", "--min-len", "2", "--top-k", "3", "-o", "out.json.gz")),
        Run("annotate --patterns --tag-kernels" + at, ("annotate", p, "--patterns", "--tag-kernels", "-o", "out.json.gz")),
        Run("annotate --idle-gaps --idle-gaps-min 50us" + at,
            ("annotate", p, "--idle-gaps", "--idle-gaps-min", "50us", "-o", "out.json.gz")),
        Run("annotate --critical-path --critical-path-annotation ''" + at,
            ("annotate", p, "--critical-path", "--critical-path-annotation", "", "-o", "out.json.gz")),
        Run("annotate --critical-path --critical-path-hta" + at,
            ("annotate", p, "--critical-path", "--critical-path-hta", "-o", "out.json.gz")),
        Run("check from stdin" + at, ("check", "-"), CHECK_CODES, stdin=SAMPLE),
        Run("check --max-examples 0" + at, ("check", p, "--max-examples", "0"), CHECK_CODES),
        Run("repair --compression small -o .json.zst" + at,
            ("repair", p, "-o", "out.json.zst", "--compression", "small")),
        Run("trim -o .json.zst" + at, ("trim", p, "-o", "out.json.zst", "--window", "+1ms:")),
        Run("trim -o .json" + at, ("trim", p, "-o", "out.json", "--window", "+1ms:")),
        Run("trim --compression small" + at, ("trim", p, "-o", "out.json.gz", "--window", "+1ms:", "--compression", "small")),
        Run("launch-stats cutoffs" + at,
            ("launch-stats", p, "--runtime-cutoff", "5us", "--delay-cutoff", "10us", "--top", "3")),
        Run("launch-stats --format json cutoffs" + at,
            ("launch-stats", p, "--runtime-cutoff", "5us", "--delay-cutoff", "10us", "--top", "0", "--format", "json")),
        Run("patterns --min-len 2 --max-len 4 --top-k 3" + at,
            ("patterns", p, "--min-len", "2", "--max-len", "4", "--top-k", "3")),
        Run("patterns -o --tag-kernels" + at, ("patterns", p, "-o", "out.json.gz", "--tag-kernels")),
        Run("patterns -o --compression small" + at, ("patterns", p, "-o", "out.json.gz", "--compression", "small")),
        Run("patterns -o - (stdout)" + at, ("patterns", p, "-o", "-")),
        Run("patterns from stdin" + at, ("patterns", "-"), stdin=SAMPLE),
        Run("classify --html" + at, ("classify", p, "--html", "chart.html")),
        Run("classify --elapsed-s 1.5" + at, ("classify", p, "--elapsed-s", "1.5")),
        Run("stats --kernel-wait-us 5" + at, ("stats", p, "--kernel-wait-us", "5")),
        Run("stats --top 0" + at, ("stats", p, "--top", "0")),
        Run("stats --format csv --table top_kernels --top 3" + at,
            ("stats", p, "--format", "csv", "--table", "top_kernels", "--top", "3")),
        Run("diff --top 0" + at, ("diff", p, p, "--top", "0")),
        Run("diff --per-step" + at, ("diff", p, p, "--per-step")),
        Run("diff --no-per-step" + at, ("diff", p, p, "--no-per-step")),
        Run("diff --rules hta" + at, ("diff", p, p, "--rules", "hta")),
        Run("roofline --top 3" + at, ("roofline", p, "--top", "3")),
        Run("critical-path --annotation ''" + at, ("critical-path", p, "--annotation", "")),
        Run("critical-path --annotation ProfilerStep" + at, ("critical-path", p, "--annotation", "ProfilerStep")),
        Run("report (default output) --points 50" + at, ("report", p, "--points", "50")),
        Run("export --csv (filtered out)" + at, ("export", p, "--csv", "csv", "--kernel", "^no such kernel$")),
        Run("open" + at, ("open", p, "--no-browser"), serve=True),
    ]
    if TRACE_PROCESSOR.exists():
        runs.append(Run("check --trace-processor" + at, ("check", p, "--trace-processor", str(TRACE_PROCESSOR)),
                        CHECK_CODES))
    if step is not None:
        runs.append(Run("critical-path --step" + at, ("critical-path", p, "--step", str(step))))
    for rules in ("hta", "vllm-llama", "vllm-ds", "vllm-gpt-oss"):
        runs.append(Run(f"classify --rules {rules}" + at, ("classify", p, "--rules", rules)))
    if op is not None:
        runs += [
            Run(f"patterns --op {op} --nested" + at, ("patterns", p, "--op", op, "--nested")),
            Run(f"patterns --op-regex {op}" + at, ("patterns", p, "--op-regex", f"^{re.escape(op)}$")),
        ]
    # every format and table
    for command in ("launch-stats", "stats", "roofline", "critical-path"):
        runs += format_runs(cli, command, (command, p), " (formats)" + at, text=False)
    runs += format_runs(cli, "diff", ("diff", p, p), " itself" + at)
    # HTA's choices, and the filters, on every command that has them
    other = p
    for command in cli.commands:
        argv = base_argv(command, p, other)
        if command in ("annotate", "patterns") and op is not None:
            argv = (*argv, "--op", op)  # --hta counts nested operators: patterns need an operator
        if cli.has(command, "--hta"):
            runs.append(Run(f"{command} --hta" + at, (*argv, "--hta")))
            runs += [Run(f"{command} --hta-version {v}" + at, (*argv, "--hta-version", v)) for v in cli.hta_versions()]
        if cli.has_filters(command):
            if step is not None:
                runs.append(Run(f"{command} --steps {step}" + at, (*argv, "--steps", str(step))))
            if facts.span_ns >= 10:
                lo, hi = facts.span_ns * 2 // 10, facts.span_ns * 7 // 10
                runs.append(Run(f"{command} --window" + at, (*argv, "--window", f"{lo}ns:{hi}ns")))
            runs.append(Run(f"{command} --kernel" + at, (*argv, "--kernel", KERNEL_REGEX)))
            if op is not None and cli.has(command, "--op") and command not in ("annotate", "patterns"):
                runs.append(Run(f"{command} --op" + at, (*argv, "--op", f"^{re.escape(op)}$")))
            if step is not None and op is not None:
                runs.append(Run(f"{command} --steps --kernel" + at, (*argv, "--steps", str(step), "--kernel", KERNEL_REGEX)))
    return runs


def distinct_ranks(facts: Sequence[TraceFacts], prefix: str) -> list[str]:
    """The smallest trace under ``prefix`` of each distributedInfo.rank: several files, one per rank."""
    chosen: dict[int, TraceFacts] = {}
    for t in sorted(facts, key=lambda t: (t.size, t.label)):
        if t.label.startswith(prefix) and t.rank is not None and t.rank not in chosen:
            chosen[t.rank] = t
    return [f"in/{chosen[r].label}" for r in sorted(chosen)]


def several_trace_runs(cli: Cli, facts: Sequence[TraceFacts], made_ranks: bool) -> list[Run]:
    """Per-rank runs: a directory of traces or several files, each run as on its own, then a
    summary; the commands across ranks (collectives, merge, report) on a real pair of ranks and
    on ranks made from one trace."""
    labels = [t.label for t in facts]
    runs: list[Run] = []
    h100 = [label for label in labels if label.startswith("h100/")]
    if h100:
        d = "in/h100"
        runs += [
            Run("annotate --all (directory) @ h100", ("annotate", d, "--all", "-o", "outdir", "--jobs", "2")),
            Run("launch-stats (directory) @ h100", ("launch-stats", d, "--jobs", "2")),
            Run("launch-stats --format csv (directory) @ h100", ("launch-stats", d, "--jobs", "2", "--format", "csv")),
            Run("launch-stats --format json (directory) @ h100", ("launch-stats", d, "--jobs", "2", "--format", "json")),
            Run("patterns (directory) @ h100", ("patterns", d, "--jobs", "2")),
            Run("patterns --format json (directory) @ h100", ("patterns", d, "--jobs", "1", "--format", "json")),
            Run("classify (directory) @ h100", ("classify", d, "--jobs", "2")),
            Run("stats (directory) @ h100", ("stats", d, "--jobs", "2")),
            Run("roofline (directory) @ h100", ("roofline", d, "--jobs", "2")),
            Run("roofline --format json (directory) @ h100", ("roofline", d, "--jobs", "2", "--format", "json")),
            Run("critical-path (directory) @ h100", ("critical-path", d, "--jobs", "2", "--annotation", "")),
        ]
        ranked = [f"in/{label}" for label in ("h100/ddp_nccl_1rank.json.gz", "h100/cudagraph_infer.json.gz",
                                               "h100/ncu_target_trace.json.gz") if label in h100]
        runs += [Run(f"stats --format {fmt} (files) @ h100", ("stats", *ranked, "--format", fmt, *table))
                 for fmt, table in (("text", ()), ("csv", ("--table", "devices")), ("json", ()))]
    files = distinct_ranks(facts, "hta/")
    if len(files) >= 2:
        names = ", ".join(f[3:] for f in files)
        runs += [
            Run(f"annotate --queue-length (files) @ {names}",
                ("annotate", *files, "--queue-length", "-o", "outdir", "--jobs", "2")),
            Run(f"patterns -o (files) @ {names}", ("patterns", *files, "-o", "outdir", "--jobs", "2")),
            Run(f"classify --html --format csv (files) @ {names}",
                ("classify", *files, "--html", "chart.html", "--format", "csv", "--jobs", "2")),
            Run(f"classify --format json --elapsed-s (files) @ {names}",
                ("classify", *files, "--format", "json", "--elapsed-s", ",".join(["2"] * len(files)), "--jobs", "2")),
            Run(f"critical-path --format json (files) @ {names}",
                ("critical-path", *files, "--format", "json", "--annotation", "")),
        ]
    pair = [f"in/{label}" for label in RANK_PAIR if label in labels]
    if len(pair) == 2:
        at = " @ trace_filter pair"
        runs += format_runs(cli, "collectives", ("collectives", *pair), at)
        runs.append(Run("collectives --no-align" + at, ("collectives", *pair, "--no-align")))
        runs.append(Run("collectives --jobs 2" + at, ("collectives", *pair, "--jobs", "2")))
        merge = ("merge", *pair, "-o", "merged.json.gz")
        pair_steps = next(t.steps for t in facts if t.label == RANK_PAIR[0])
        runs += [
            Run("merge" + at, merge),
            Run("merge --collectives" + at, (*merge, "--collectives")),
            Run("merge --all" + at, (*merge, "--all")),
            Run("merge --no-align" + at, (*merge, "--no-align")),
            Run("merge --ranks 1" + at, (*merge, "--ranks", "1")),
            Run("merge --window" + at, (*merge, "--window", "+100ms:+300ms")),
            Run("merge --compression small" + at, (*merge, "--compression", "small")),
            Run("merge -o .json.zst --jobs 2" + at, ("merge", *pair, "-o", "merged.json.zst", "--jobs", "2")),
            Run("merge -o .json" + at, ("merge", *pair, "-o", "merged.json")),
            Run("report --points 100" + at, ("report", *pair, "-o", "report.html", "--points", "100")),
            Run("stats --compare" + at, ("stats", *pair, "--compare")),
            Run("stats --compare --format json" + at, ("stats", *pair, "--compare", "--format", "json")),
            Run("stats (files)" + at, ("stats", *pair, "--jobs", "2")),
        ]
        if pair_steps:
            runs.append(Run("merge --steps" + at, (*merge, "--steps", str(pair_steps[0]))))
    if made_ranks:
        d, at = f"in/{MADE_RANKS}", f" @ made ranks ({MADE_RANKS_BASE} {' '.join(MADE_RANKS_ARGS)})"
        runs += [
            Run("collectives" + at, ("collectives", d, "--jobs", "2")),
            Run("collectives --format json" + at, ("collectives", d, "--format", "json")),
            Run("collectives --table waits" + at, ("collectives", d, "--table", "waits")),
            Run("collectives --format csv --table clocks" + at, ("collectives", d, "--format", "csv", "--table", "clocks")),
            Run("merge --all" + at, ("merge", d, "-o", "merged.json.gz", "--all", "--jobs", "2")),
            Run("report --jobs 2" + at, ("report", d, "-o", "report.html", "--jobs", "2")),
        ]
    return runs


def error_runs(labels: Sequence[str]) -> list[Run]:
    """Runs that must fail, with the message and exit code they fail with today."""
    p = f"in/{SAMPLE}"
    runs = [
        Run("error: no command", (), (1,)),
        Run("error: unknown command", ("nonsense",), (1,)),
        Run("error: unknown option", ("info", p, "--no-such-option"), (1,)),
        Run("error: missing input", ("info", "in/missing.json.gz"), (1,)),
        Run("error: trim unknown step", ("trim", p, "-o", "out.json.gz", "--steps", "9999"), (1,)),
        Run("error: trim bad window", ("trim", p, "-o", "out.json.gz", "--window", "5"), (1,)),
        Run("error: trim without --window or --steps", ("trim", p, "-o", "out.json.gz"), (1,)),
        Run("error: export without --csv", ("export", p), (1,)),
        Run("error: patterns --tag-kernels without -o", ("patterns", p, "--tag-kernels"), (1,)),
        Run("error: annotate without an analysis", ("annotate", p, "-o", "out.json.gz"), (1,)),
        Run("error: annotate -o missing directory", ("annotate", p, "--all", "-o", "no/such/dir/out.json.gz"), (1,)),
        Run("error: launch-stats bad cutoff", ("launch-stats", p, "--delay-cutoff", "fast"), (1,)),
        Run("error: classify unknown rules", ("classify", p, "--rules", "no-such-preset"), (1,)),
        Run("error: classify --elapsed-s count", ("classify", p, p, "--elapsed-s", "1,2,3"), (1,)),
        Run("error: annotate -o - with two inputs", ("annotate", p, p, "--all", "-o", "-"), (1,)),
        Run("error: stats --format csv without --table", ("stats", p, "--format", "csv"), (1,)),
        Run("error: diff --format csv without --table", ("diff", p, p, "--format", "csv"), (1,)),
        Run("error: stats unknown table", ("stats", p, "--table", "no_such_table"), (1,)),
        Run("error: critical-path --format csv two tables",
            ("critical-path", p, "--format", "csv", "--table", "summary", "--table", "segments"), (1,)),
        Run("error: merge without -o", ("merge", p), (1,)),
        Run("error: stats a rank twice", ("stats", p, p), (1,)),
        Run("error: --max-size", ("info", p, "--max-size", "1KB"), (1,)),
        Run("error: not a trace", ("info", "in/h100/ncu_raw.csv"), (1,)) if NCU_CSV in labels else None,
    ]
    return [r for r in runs if r is not None]


def help_runs(cli: Cli) -> list[Run]:
    runs = [Run("--version", ("--version",)), Run("--help", ("--help",))]
    runs += [Run(f"{command} --help", (command, "--help")) for command in cli.commands]
    return runs


def plan(cli: Cli, facts: Sequence[TraceFacts], extra_inputs: Sequence[str]) -> list[Run]:
    """Every run, the slowest (largest traces) first. Stops if a command of --help, an analysis
    of annotate or a --table of a command would not run."""
    labels = [f.label for f in facts]
    runs: list[tuple[int, Run]] = []
    for i, t in enumerate(facts):
        other = labels[(i + 1) % len(labels)]
        runs += [(t.size, r) for r in per_trace_runs(cli, t, other)]
        if t.label == SAMPLE:
            runs += [(t.size, r) for r in sample_runs(cli, t)]
    big = max(f.size for f in facts)
    runs += [(big, r) for r in several_trace_runs(cli, facts, MADE_RANKS in extra_inputs)]
    runs += [(0, r) for r in error_runs([*labels, *extra_inputs]) + help_runs(cli)]
    runs.sort(key=lambda pair: -pair[0])
    ordered = [r for _, r in runs]
    names = [r.name for r in ordered]
    duplicates = {n for n in names if names.count(n) > 1}
    if duplicates:
        raise SystemExit(f"same_outputs: duplicate run names: {sorted(duplicates)}")
    working = [r.argv[1:] if r.argv[:1] == ("-q",) else r.argv for r in ordered if r.expect != (1,)]
    missing = [c for c in cli.commands if not any(a[:1] == (c,) and "--help" not in a for a in working)]
    missing += [f"annotate {f}" for f in cli.analyses() if not any(a[:1] == ("annotate",) and f in a for a in working)]
    missing += [f"{c} --table {t}" for c in cli.commands for t in cli.tables(c)
                if not any(a[:1] == (c,) and "--table" in a and t in a for a in working)]
    if missing:
        raise SystemExit(f"same_outputs: the plan does not run: {', '.join(missing)}")
    return ordered


# -- running ----------------------------------------------------------------------------------


@dataclass
class Result:
    name: str
    argv: list[str]
    rc: int | None  # None: timed out
    expected: bool
    expect: list[int]
    stdout_sha256: str
    stdout_bytes: int
    stderr_sha256: str
    files: dict[str, dict[str, object]]
    http: list[str] = field(default_factory=list)  # ``open``: what the server answered
    seconds: float = 0.0  # not compared
    slug: str = ""


@dataclass(frozen=True)
class Setup:
    python: str
    tree: Path
    scratch: Path
    text_dir: Path
    env: dict[str, str]
    keep_scratch: bool


def normalise(text: str, setup: Setup, port: int | None = None) -> str:
    for path in sorted({str(setup.tree), str(setup.tree.resolve())}, key=len, reverse=True):
        text = text.replace(path, "<TREE>")
    for path in sorted({str(setup.scratch), str(setup.scratch.resolve())}, key=len, reverse=True):
        text = text.replace(path, "<SCRATCH>")
    for pattern, replacement in TIMING_PATTERNS:
        text = pattern.sub(replacement, text)
    if port is not None:
        text = text.replace(f"127.0.0.1:{port}", "127.0.0.1:<PORT>")
        text = text.replace(f"on port {port} ", "on port <PORT> ")
    return text


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def content(path: Path) -> tuple[bytes, str]:
    """A written file's content: decompressed if it is gzip or zstd (told by magic bytes)."""
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        return gzip.decompress(data), "gzip"
    if data[:4] == b"\x28\xb5\x2f\xfd":
        with zstandard.ZstdDecompressor().stream_reader(data) as reader:
            return reader.read(), "zstd"
    return data, "none"


def number_uuids(data: bytes) -> bytes:
    """Each distinct uuid in ``data`` replaced by <UUID-k>, k counting from 0 in order of first use."""
    seen: dict[bytes, bytes] = {}
    return UUID.sub(lambda m: seen.setdefault(m.group(0), b"<UUID-%d>" % len(seen)), data)


def keep_text(setup: Setup, name: str, data: bytes) -> bool:
    """Keep a text (normalised stdout/stderr, a small output) for compare's diffs."""
    if len(data) > TEXT_KEPT_BYTES or b"\0" in data[:4096]:
        return False
    target = setup.text_dir / name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    return True


def record_files(run: Run, workdir: Path, setup: Setup) -> dict[str, dict[str, object]]:
    written = []
    for root, _, names in os.walk(workdir):  # in/, a link to the inputs, is not followed
        written += [Path(root, n) for n in names]
    files: dict[str, dict[str, object]] = {}
    for path in sorted(written):
        rel = path.relative_to(workdir).as_posix()
        if run.own_copy is not None and rel == Path(run.own_copy).name:
            continue  # the input copied in
        try:
            data, codec = content(path)
            if path.suffix == ".html":
                data = number_uuids(data)
            entry: dict[str, object] = {"sha256": sha256(data), "bytes": len(data), "codec": codec}
        except (OSError, EOFError, zstandard.ZstdError, gzip.BadGzipFile) as e:
            entry = {"error": f"{type(e).__name__}: {e}"}
            data = b""
        if data and not path.name.endswith((".json.gz", ".json.zst", ".json")):
            entry["text"] = keep_text(setup, f"{run.slug}/files/{rel}", data)
        files[rel] = entry
    return files


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def probe_server(port: int, name: str) -> list[str]:
    """What ``open``'s server answers: the trace (hashed), a wrong path, the CORS preflight."""
    lines = []
    path = "/" + urllib.parse.quote(name)
    kept = ("Access-Control-Allow-Origin", "Access-Control-Allow-Private-Network", "Access-Control-Allow-Methods",
            "Access-Control-Allow-Headers", "Cache-Control", "Content-Type", "Content-Length")
    for method, target in (("GET", path), ("GET", "/other.json"), ("OPTIONS", path)):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        try:
            conn.request(method, target)
            response = conn.getresponse()
            body = response.read()
            headers = "; ".join(f"{h}: {response.getheader(h)}" for h in kept if response.getheader(h) is not None)
            digest = f" body sha256 {sha256(body)}" if response.status == 200 else ""
            lines.append(f"{method} {target}: {response.status} {headers}{digest}")
        except OSError as e:
            lines.append(f"{method} {target}: {type(e).__name__}: {e}")
        finally:
            conn.close()
    return lines


def serve_and_probe(cmd: list[str], run: Run, workdir: Path, setup: Setup) -> tuple[int | None, bytes, bytes, list[str], int]:
    port = free_port()
    proc = subprocess.Popen([*cmd, "--port", str(port)], cwd=workdir, env=setup.env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    first = proc.stdout.readline()  # the URL, printed once the server listens
    http_lines = probe_server(port, Path(run.argv[1]).name) if first else []
    proc.send_signal(signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        return None, first + out, err, http_lines, port
    return proc.returncode, first + out, err, http_lines, port


def execute(run: Run, setup: Setup) -> Result:
    workdir = setup.scratch / "runs" / run.slug
    workdir.mkdir(parents=True)
    (workdir / "in").symlink_to(setup.scratch / "in", target_is_directory=True)
    if run.own_copy is not None:
        shutil.copyfile(setup.scratch / "in" / run.own_copy, workdir / Path(run.own_copy).name)
    cmd = [setup.python, "-m", "traceforge", *run.argv]
    started = time.perf_counter()
    port: int | None = None
    http_lines: list[str] = []
    if run.serve:
        rc, out, err, http_lines, port = serve_and_probe(cmd, run, workdir, setup)
    else:
        stdin = open(setup.scratch / "in" / run.stdin, "rb") if run.stdin else subprocess.DEVNULL
        try:
            done = subprocess.run(cmd, cwd=workdir, env=setup.env, stdin=stdin, capture_output=True,
                                  timeout=RUN_TIMEOUT_S)
            rc, out, err = done.returncode, done.stdout, done.stderr
        except subprocess.TimeoutExpired as e:
            rc, out, err = None, e.stdout or b"", (e.stderr or b"") + b"\n<timed out>\n"
        finally:
            if run.stdin:
                stdin.close()
    seconds = time.perf_counter() - started
    if b"\0" not in out[:4096]:
        out = normalise(out.decode("utf-8", "replace"), setup, port).encode()
    err = BLANKS.sub(" ", normalise(err.decode("utf-8", "replace"), setup, port)).encode()
    keep_text(setup, f"{run.slug}/stdout", out)
    keep_text(setup, f"{run.slug}/stderr", err)
    files = record_files(run, workdir, setup)
    if not setup.keep_scratch:
        shutil.rmtree(workdir)
    argv = [*run.argv, "--port", "<PORT>"] if run.serve else list(run.argv)
    return Result(run.name, argv, rc, rc in run.expect, list(run.expect), sha256(out), len(out),
                  sha256(err), files, http_lines, round(seconds, 2), run.slug)


def check_import(setup: Setup) -> str:
    """The file traceforge is imported from in the runs' environment; it must be under the tree."""
    probe = subprocess.run([setup.python, "-c", "import os, traceforge; print(os.path.realpath(traceforge.__file__))"],
                           cwd=setup.scratch, env=setup.env, capture_output=True, text=True)
    where = probe.stdout.strip()
    tree = str(setup.tree.resolve())
    if probe.returncode != 0 or not where.startswith(tree + os.sep):
        raise SystemExit(f"same_outputs: with PYTHONPATH={setup.tree} traceforge is imported from {where or '?'} "
                         f"instead of {tree} ({probe.stderr.strip()[-500:]}); build the tree's C extensions "
                         "(python3 setup.py build_ext --inplace) and check that nothing shadows it")
    return where


def git_state(tree: Path) -> dict[str, str]:
    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(tree), *args], capture_output=True, text=True)
        return done.stdout.strip() if done.returncode == 0 else ""
    return {"commit": git("rev-parse", "HEAD"), "status": git("status", "--short", "--untracked-files=no")}


def find_traces(traces: Path) -> list[Path]:
    return sorted(traces.rglob("*.json.gz"))


def snapshot(args: argparse.Namespace) -> int:
    tree = Path(args.tree).absolute()
    out = Path(args.out).absolute()
    traces = Path(args.traces).absolute()
    if not (tree / "traceforge").is_dir():
        raise SystemExit(f"same_outputs: {tree} has no traceforge/ package")
    if out.exists():
        if any(out.iterdir()) and not (out / "manifest.json").exists():
            raise SystemExit(f"same_outputs: {out} exists and is not a snapshot: not overwriting it")
        shutil.rmtree(out)
    text_dir = out / "text"
    text_dir.mkdir(parents=True)
    scratch = Path(tempfile.mkdtemp(prefix="same-outputs-"))
    try:
        return take_snapshot(tree, out, traces, text_dir, scratch, args.jobs, args.keep_scratch, args.only)
    finally:
        if args.keep_scratch:
            print(f"scratch kept in {scratch}", file=sys.stderr)
        else:
            shutil.rmtree(scratch, ignore_errors=True)


def make_ranks(inputs: Path) -> list[str]:
    """Rank traces made from MADE_RANKS_BASE by make_ranks.py (this script's, so both trees read
    the same files), gzipped again without a time stamp so that their bytes are the same each time."""
    maker = HERE / "make_ranks.py"
    if not maker.exists():
        raise SystemExit(f"same_outputs: {maker} is missing: it makes the rank traces")
    target = inputs / MADE_RANKS
    subprocess.run([sys.executable, str(maker), str(inputs / MADE_RANKS_BASE), "-o", str(target), *MADE_RANKS_ARGS],
                   check=True, capture_output=True)
    for path in sorted(target.glob("*.gz")):
        path.write_bytes(gzip.compress(gzip.decompress(path.read_bytes()), compresslevel=6, mtime=0))
    return sorted(path.relative_to(inputs).as_posix() for path in target.iterdir())


def take_snapshot(tree: Path, out: Path, traces: Path, text_dir: Path, scratch: Path, jobs: int,
                  keep_scratch: bool, only: str | None = None) -> int:
    started = time.perf_counter()
    inputs = scratch / "in"
    sources: dict[str, Path] = {SAMPLE: tree / SAMPLE}
    for path in find_traces(traces):
        sources[path.relative_to(traces).as_posix()] = path
    extra = [NCU_CSV] if (traces / NCU_CSV).exists() else []
    for label in [*sources, *extra]:
        target = inputs / label
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(sources.get(label, traces / label), target)
    (inputs / GPU_LIMITS).write_text(GPU_LIMITS_TEXT, encoding="utf-8")
    extra.append(GPU_LIMITS)
    if MADE_RANKS_BASE in sources:
        extra += make_ranks(inputs)
    (scratch / "tmp").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "TRACEFORGE"))}
    env.update(PYTHONPATH=str(tree), PYTHONHASHSEED="0", PYTHONIOENCODING="utf-8", COLUMNS="100", LC_ALL="C.UTF-8",
               TZ="UTC", TMPDIR=str(scratch / "tmp"))
    setup = Setup(sys.executable, tree, scratch, text_dir, env, keep_scratch)
    imported_from = check_import(setup)

    cli = read_cli(setup, jobs)
    with concurrent.futures.ProcessPoolExecutor(max_workers=jobs) as pool:
        facts = list(pool.map(read_facts, sources, [inputs / label for label in sources]))
    runs = plan(cli, facts, [MADE_RANKS if label.startswith(MADE_RANKS + "/") else label for label in extra])
    if only is not None:
        print(f"{len(runs)} runs planned; only those matching {only!r} run", file=sys.stderr)
        runs = [r for r in runs if re.search(only, r.name)]
    print(f"{len(runs)} runs on {len(facts)} traces, {jobs} at a time, tree {tree}", file=sys.stderr)

    results: list[Result] = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(execute, run, setup) for run in runs]
        for i, future in enumerate(concurrent.futures.as_completed(futures), 1):
            results.append(future.result())
            if i % 50 == 0 or i == len(runs):
                print(f"  {i}/{len(runs)} runs ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    results.sort(key=lambda r: r.name)

    manifest = {
        "tree": str(tree),
        "imported_from": imported_from,
        "git": git_state(tree),
        "python": sys.version.split()[0],
        "traces": str(traces),
        "inputs": {label: sha256((inputs / label).read_bytes()) for label in [*sources, *extra]},
        "facts": [asdict(f) for f in facts],
        "seconds": round(time.perf_counter() - started, 1),
        "runs": [asdict(r) for r in results],
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    unexpected = [r for r in results if not r.expected]
    nonzero = [r for r in results if r.expected and r.rc != 0]
    print(f"snapshot of {len(results)} runs in {out} ({manifest['seconds']} s); "
          f"{len(nonzero)} exited non-zero as expected (check's findings, error cases)", file=sys.stderr)
    for r in unexpected:
        print(f"  UNEXPECTED exit {r.rc} (expected {r.expect}): {r.name}: see {text_dir / r.slug / 'stderr'}",
              file=sys.stderr)
    return 1 if unexpected else 0


# -- comparing --------------------------------------------------------------------------------


def load(snapdir: Path) -> tuple[dict, dict[str, dict]]:
    manifest = json.loads((snapdir / "manifest.json").read_text(encoding="utf-8"))
    return manifest, {r["name"]: r for r in manifest["runs"]}


def text_of(snapdir: Path, rel: str) -> list[str] | None:
    path = snapdir / "text" / rel
    if not path.exists():
        return None
    return path.read_text(encoding="utf-8", errors="replace").splitlines(keepends=True)


def short_diff(a_dir: Path, b_dir: Path, a_rel: str, b_rel: str) -> Iterable[str]:
    a, b = text_of(a_dir, a_rel), text_of(b_dir, b_rel)
    if a is None or b is None:
        yield "    (no text kept: binary or over 1 MB)\n"
        return
    lines = list(difflib.unified_diff(a, b, "A/" + a_rel, "B/" + b_rel, n=2))
    for line in lines[:DIFF_LINES]:
        yield "    " + (line if line.endswith("\n") else line + "\n")
    if len(lines) > DIFF_LINES:
        yield f"    ... {len(lines) - DIFF_LINES} more diff lines\n"


def differences(a_dir: Path, b_dir: Path, a: dict, b: dict) -> list[str]:
    """What differs between one run in snapshot A and the same run in snapshot B."""
    found: list[str] = []
    if a["argv"] != b["argv"]:
        found.append(f"  argv: {a['argv']} != {b['argv']}\n")
    if a["rc"] != b["rc"]:
        found.append(f"  exit code: {a['rc']} != {b['rc']}\n")
    for stream in ("stdout", "stderr"):
        if a[f"{stream}_sha256"] != b[f"{stream}_sha256"]:
            found.append(f"  {stream} differs\n")
            found += short_diff(a_dir, b_dir, f"{a['slug']}/{stream}", f"{b['slug']}/{stream}")
    if a.get("http") != b.get("http"):
        found.append("  server answers differ\n")
        found += ["    " + line + "\n" for line in difflib.unified_diff(a["http"], b["http"], "A", "B", n=0, lineterm="")]
    for rel in sorted(set(a["files"]) | set(b["files"])):
        fa, fb = a["files"].get(rel), b["files"].get(rel)
        if fa is None or fb is None:
            found.append(f"  file {rel}: only in {'B' if fa is None else 'A'}\n")
        elif (fa.get("sha256"), fa.get("error")) != (fb.get("sha256"), fb.get("error")):
            found.append(f"  file {rel}: content differs ({fa.get('bytes', fa.get('error'))} vs "
                         f"{fb.get('bytes', fb.get('error'))} bytes, decompressed)\n")
            if fa.get("text") and fb.get("text"):
                found += short_diff(a_dir, b_dir, f"{a['slug']}/files/{rel}", f"{b['slug']}/files/{rel}")
    return found


def compare(args: argparse.Namespace) -> int:
    a_dir, b_dir = Path(args.a), Path(args.b)
    a_manifest, a_runs = load(a_dir)
    b_manifest, b_runs = load(b_dir)
    for label, m in (("A", a_manifest), ("B", b_manifest)):
        git = m["git"]
        print(f"{label}: {m['tree']} ({git['commit'][:12] or 'no git'}{', modified' if git['status'] else ''}), "
              f"{len(m['runs'])} runs in {m['seconds']} s")
    different = 0
    if a_manifest["inputs"] != b_manifest["inputs"]:
        print("inputs differ (the traces or the sample are not the same files):")
        for label in sorted(set(a_manifest["inputs"]) | set(b_manifest["inputs"])):
            if a_manifest["inputs"].get(label) != b_manifest["inputs"].get(label):
                print(f"  {label}")
        different += 1
    for name in sorted(set(a_runs) | set(b_runs)):
        if name not in b_runs or name not in a_runs:
            print(f"{name}: only in {'A' if name not in b_runs else 'B'}")
            different += 1
            continue
        found = differences(a_dir, b_dir, a_runs[name], b_runs[name])
        if found:
            different += 1
            sys.stdout.write(f"{name}: {' '.join(a_runs[name]['argv'])}\n" + "".join(found))
    if different:
        print(f"{different} of {len(set(a_runs) | set(b_runs))} runs differ")
        return 1
    print(f"{len(a_runs)} runs identical")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("snapshot", help="run every command on the traces with TREE's traceforge, record the results")
    p.add_argument("--tree", required=True, help="source tree whose traceforge/ package runs (C extensions built)")
    p.add_argument("--out", required=True, help="snapshot directory to write (replaced if it is a snapshot)")
    p.add_argument("--traces", default=str(DEFAULT_TRACES), help=f"traces directory (default {DEFAULT_TRACES})")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="runs at once (default: the cores)")
    p.add_argument("--keep-scratch", action="store_true", help="keep the runs' working directories")
    p.add_argument("--only", metavar="REGEX", help="only the runs whose name matches (re.search): to try the plan")
    p.set_defaults(func=snapshot)
    c = sub.add_parser("compare", help="print every difference between two snapshots; exit 1 if any")
    c.add_argument("a", metavar="SNAPDIR_A")
    c.add_argument("b", metavar="SNAPDIR_B")
    c.set_defaults(func=compare)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
