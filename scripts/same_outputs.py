#!/usr/bin/env python3
"""Prove that two source trees of traceforge behave the same on the command line.

Take a snapshot of each tree, then compare the two snapshots:

    python scripts/same_outputs.py snapshot --tree /tmp/tf-baseline --out /tmp/snap-a
    python scripts/same_outputs.py snapshot --tree . --out /tmp/snap-b
    python scripts/same_outputs.py compare /tmp/snap-a /tmp/snap-b

``snapshot`` runs every command (annotate with each analysis alone and with --all, check,
repair, trim, open, info, launch-stats, patterns, classify, counters, stats, export, diff),
in each --format, on every ``*.json.gz`` under --traces (default ``../shared/traces`` of
this checkout) and on the tree's ``samples/train_step.json.gz``, plus option variants,
several-trace (per-rank) runs, stdin input, --help texts and expected errors. Each run is
``python -m traceforge ...`` in a subprocess with ``PYTHONPATH=TREE`` (checked to import
traceforge from TREE), so only the command line is used and the tree's layout does not
matter. Every run has its own working directory in which ``in/`` holds copies of the
traces; arguments are relative paths, so the two trees' runs have identical argv.

Per run the manifest (``SNAPDIR/manifest.json``) records argv, exit code, the sha256 of
stdout and stderr, and for every file the run wrote the sha256 and size of its content:
``.gz`` and ``.zst`` files are decompressed first (their compressed bytes may differ from
run to run), other files (CSV, HTML, plain JSON) are hashed as written. Only what varies
between identical runs is normalised in stdout and stderr: elapsed seconds ("checked in
0.6 s", "(0.5 s)", ``"seconds": 0.612``), the tree's and the scratch directory's absolute
paths, and the port ``open`` serves on. The normalised texts (and small text outputs) are
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
COMMANDS = ("annotate", "check", "repair", "trim", "open", "info", "launch-stats", "patterns", "classify",
            "counters", "stats", "export", "diff")
ANALYSIS_FLAGS = ("--queue-length", "--memcpy-bw", "--launch-delay", "--classify", "--counters", "--patterns")
PATTERN_OPS = ("aten::addmm", "aten::conv2d", "aten::linear", "aten::mm", "aten::bmm", "aten::convolution")
CHECK_CODES = (0, 1, 2)  # check: nothing lost, something lost, Perfetto would refuse the trace
RUN_TIMEOUT_S = 600
TEXT_KEPT_BYTES = 1 << 20  # stdout/stderr/output texts up to this size are kept for diffs
DIFF_LINES = 40

# What legitimately varies between two runs of the same code: elapsed seconds.
TIMING_PATTERNS = (
    (re.compile(r"\bchecked in \d+(?:\.\d+)? s\b"), "checked in <T> s"),  # check, text
    (re.compile(r'"seconds": \d+(?:\.\d+)?(?:[eE][-+]?\d+)?'), '"seconds": <T>'),  # check, json
    (re.compile(r"(\(|, )\d+(?:\.\d+)? s\)$", re.MULTILINE), r"\1<T> s)"),  # "(0.6 s)", "appended, 0.5 s)"
)


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


def read_facts(label: str, path: Path) -> TraceFacts:
    doc = orjson.loads(gzip.decompress(path.read_bytes()))
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
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
                      tuple(op for op in PATTERN_OPS if op in names))


def per_trace_runs(t: TraceFacts, other: str) -> list[Run]:
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
    ]
    for fmt in ("csv", "json"):
        runs += [
            Run(f"launch-stats --format {fmt}" + at, ("launch-stats", p, "--format", fmt)),
            Run(f"patterns --format {fmt}" + at, ("patterns", p, "--format", fmt)),
            Run(f"classify --format {fmt}" + at, ("classify", p, "--format", fmt)),
            Run(f"stats --format {fmt}" + at, ("stats", p, "--format", fmt)),
        ]
    for flag in (*ANALYSIS_FLAGS, "--all"):
        runs.append(Run(f"annotate {flag}" + at, ("annotate", p, flag, "-o", "out.json.gz")))
    if t.span_ns >= 10:
        lo, hi = t.span_ns * 3 // 10, t.span_ns * 6 // 10
        runs.append(Run("trim --window middle" + at, ("trim", p, "-o", "out.json.gz", "--window", f"+{lo}ns:+{hi}ns")))
        runs.append(Run("trim --window head" + at, ("trim", p, "-o", "out.json.gz", "--window", f":+{lo}ns")))
    if t.steps:
        middle = t.steps[len(t.steps) // 2]
        runs.append(Run("trim --steps one" + at, ("trim", p, "-o", "out.json.gz", "--steps", str(middle))))
        if len(t.steps) > 1:
            span = f"{t.steps[0]}-{t.steps[-1]}"
            runs.append(Run("trim --steps all" + at, ("trim", p, "-o", "out.json.gz", "--steps", span)))
    for i, op in enumerate(t.ops[:2]):
        runs.append(Run(f"patterns --op {op}" + at, ("patterns", p, "--op", op)))
        if i == 0:
            runs += [
                Run(f"patterns --op {op} --format {fmt}" + at, ("patterns", p, "--op", op, "--format", fmt))
                for fmt in ("csv", "json")
            ]
            runs.append(Run(f"annotate --patterns --op {op}" + at,
                            ("annotate", p, "--patterns", "--op", op, "-o", "out.json.gz")))
    if t.label.startswith(CUPTI_TRACE_DIR) or t.label == NCU_TRACE:
        runs += counter_runs(t.label, ())
    if t.label == NCU_TRACE:
        ncu = ("--ncu", f"in/{NCU_CSV}")
        runs += counter_runs(t.label, ncu)
        runs.append(Run("annotate --counters --ncu" + at, ("annotate", p, "--counters", *ncu, "-o", "out.json.gz")))
        runs.append(Run("annotate --all --ncu" + at, ("annotate", p, "--all", *ncu, "-o", "out.json.gz")))
    return runs


def counter_runs(label: str, ncu: tuple[str, ...]) -> list[Run]:
    p, at = f"in/{label}", (" --ncu" if ncu else "") + f" @ {label}"
    runs = [Run("counters --format json" + at, ("counters", p, *ncu, "--format", "json"))]
    if ncu:
        runs.append(Run("counters" + at, ("counters", p, *ncu)))
    for table in ("kernels", "operators", "problems"):
        runs.append(Run(f"counters --format csv --table {table}" + at,
                        ("counters", p, *ncu, "--format", "csv", "--table", table)))
    return runs


def sample_runs(facts: TraceFacts) -> list[Run]:
    """Output codecs, stdin and stdout, the default output path, and the options' variants,
    on the small bundled sample."""
    p, at = f"in/{SAMPLE}", f" @ {SAMPLE}"
    op = facts.ops[0] if facts.ops else None
    runs = [
        Run("annotate --all -o .json.zst" + at, ("annotate", p, "--all", "-o", "out.json.zst")),
        Run("annotate --all -o .json" + at, ("annotate", p, "--all", "-o", "out.json")),
        Run("annotate --all --compression small" + at,
            ("annotate", p, "--all", "--compression", "small", "-o", "out.json.gz")),
        Run("annotate --all -o - (stdout)" + at, ("annotate", p, "--all", "-o", "-")),
        Run("annotate --all (default output)" + at, ("annotate", SAMPLE.rsplit("/", 1)[1], "--all"), own_copy=SAMPLE),
        Run("annotate --all from stdin" + at, ("annotate", "-", "--all", "-o", "out.json.gz"), stdin=SAMPLE),
        Run("annotate --all -q" + at, ("-q", "annotate", p, "--all", "-o", "out.json.gz")),
        Run("annotate --launch-delay --delay-cutoff 10us" + at,
            ("annotate", p, "--launch-delay", "--delay-cutoff", "10us", "-o", "out.json.gz")),
        Run("annotate --classify --rules hta" + at, ("annotate", p, "--classify", "--rules", "hta", "-o", "out.json.gz")),
        Run("annotate --patterns --min-len 2 --top-k 3" + at,
            ("annotate", p, "--patterns", "--min-len", "2", "--top-k", "3", "-o", "out.json.gz")),
        Run("check from stdin" + at, ("check", "-"), CHECK_CODES, stdin=SAMPLE),
        Run("check --max-examples 0" + at, ("check", p, "--max-examples", "0"), CHECK_CODES),
        Run("repair --compression small -o .json.zst" + at,
            ("repair", p, "-o", "out.json.zst", "--compression", "small")),
        Run("trim -o .json.zst" + at, ("trim", p, "-o", "out.json.zst", "--window", "+1ms:")),
        Run("trim -o .json" + at, ("trim", p, "-o", "out.json", "--window", "+1ms:")),
        Run("launch-stats cutoffs" + at,
            ("launch-stats", p, "--runtime-cutoff", "5us", "--delay-cutoff", "10us", "--top", "3")),
        Run("launch-stats --format json cutoffs" + at,
            ("launch-stats", p, "--runtime-cutoff", "5us", "--delay-cutoff", "10us", "--top", "0", "--format", "json")),
        Run("patterns --min-len 2 --max-len 4 --top-k 3" + at,
            ("patterns", p, "--min-len", "2", "--max-len", "4", "--top-k", "3")),
        Run("patterns -o --tag-kernels" + at, ("patterns", p, "-o", "out.json.gz", "--tag-kernels")),
        Run("patterns -o - (stdout)" + at, ("patterns", p, "-o", "-")),
        Run("patterns from stdin" + at, ("patterns", "-"), stdin=SAMPLE),
        Run("classify --html" + at, ("classify", p, "--html", "chart.html")),
        Run("classify --elapsed-s 1.5" + at, ("classify", p, "--elapsed-s", "1.5")),
        Run("stats --table summary" + at, ("stats", p, "--table", "summary")),
        Run("stats --format csv --table top_kernels --top 3" + at,
            ("stats", p, "--format", "csv", "--table", "top_kernels", "--top", "3")),
        Run("stats --kernel-wait-us 5" + at, ("stats", p, "--kernel-wait-us", "5")),
        Run("stats --top 0" + at, ("stats", p, "--top", "0")),
        Run("diff itself --format csv" + at, ("diff", p, p, "--format", "csv")),
        Run("diff --top 0" + at, ("diff", p, p, "--top", "0")),
        Run("open" + at, ("open", p, "--no-browser"), serve=True),
    ]
    for rules in ("hta", "vllm-llama", "vllm-ds", "vllm-gpt-oss"):
        runs.append(Run(f"classify --rules {rules}" + at, ("classify", p, "--rules", rules)))
    if op is not None:
        runs += [
            Run(f"patterns --op {op} --nested" + at, ("patterns", p, "--op", op, "--nested")),
            Run(f"patterns --op-regex {op}" + at, ("patterns", p, "--op-regex", f"^{re.escape(op)}$")),
        ]
    return runs


def several_trace_runs(labels: Sequence[str]) -> list[Run]:
    """Per-rank runs: a directory of traces or several files, each run as on its own, then a summary."""
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
            # stats numbers a trace without distributedInfo.rank by its position: ddp_nccl_1rank's rank 0 first
            Run("stats (directory; a rank twice is an error) @ h100", ("stats", d), (1,)),
        ]
        ranked = [f"in/{label}" for label in ("h100/ddp_nccl_1rank.json.gz", "h100/cudagraph_infer.json.gz",
                                               "h100/ncu_target_trace.json.gz") if label in h100]
        runs += [Run(f"stats --format {fmt} (files) @ h100", ("stats", *ranked, "--format", fmt))
                 for fmt in ("text", "csv", "json")]
    files = [f"in/{label}" for label in labels if label.startswith("hta/")][:3]
    if len(files) >= 2:
        names = ", ".join(f[3:] for f in files)
        runs += [
            Run(f"annotate --queue-length (files) @ {names}",
                ("annotate", *files, "--queue-length", "-o", "outdir", "--jobs", "2")),
            Run(f"patterns -o (files) @ {names}", ("patterns", *files, "-o", "outdir", "--jobs", "2")),
            Run(f"classify --html --format csv (files) @ {names}",
                ("classify", *files, "--html", "chart.html", "--format", "csv", "--jobs", "2")),
            Run(f"classify --format json --elapsed-s (files) @ {names}",
                ("classify", *files, "--format", "json", "--elapsed-s", *(["2"] * len(files)), "--jobs", "2")),
        ]
    return runs


def error_runs(labels: Sequence[str]) -> list[Run]:
    """Runs that must fail, with the message and exit code they fail with today."""
    p = f"in/{SAMPLE}"
    runs = [
        Run("error: no command", (), (2,)),
        Run("error: unknown command", ("nonsense",), (2,)),
        Run("error: missing input", ("info", "in/missing.json.gz"), (1,)),
        Run("error: trim unknown step", ("trim", p, "-o", "out.json.gz", "--steps", "9999"), (1,)),
        Run("error: trim bad window", ("trim", p, "-o", "out.json.gz", "--window", "5"), (1,)),
        Run("error: export without --csv", ("export", p), (2,)),
        Run("error: patterns --tag-kernels without -o", ("patterns", p, "--tag-kernels"), (1,)),
        Run("error: annotate -o missing directory", ("annotate", p, "--all", "-o", "no/such/dir/out.json.gz"), (1,)),
        Run("error: launch-stats bad cutoff", ("launch-stats", p, "--delay-cutoff", "fast"), (2,)),
        Run("error: classify unknown rules", ("classify", p, "--rules", "no-such-preset"), (1,)),
        Run("error: classify --elapsed-s count", ("classify", p, p, "--elapsed-s", "1", "2", "3"), (1,)),
        Run("error: annotate -o - with two inputs", ("annotate", p, p, "--all", "-o", "-"), (1,)),
        Run("error: not a trace", ("info", "in/h100/ncu_raw.csv"), (1,)) if NCU_CSV in labels else None,
    ]
    return [r for r in runs if r is not None]


def help_runs() -> list[Run]:
    runs = [Run("--version", ("--version",)), Run("--help", ("--help",))]
    runs += [Run(f"{command} --help", (command, "--help")) for command in COMMANDS]
    return runs


def plan(facts: Sequence[TraceFacts], extra_inputs: Sequence[str]) -> list[Run]:
    """Every run, the slowest (largest traces) first."""
    labels = [f.label for f in facts]
    runs: list[tuple[int, Run]] = []
    for i, t in enumerate(facts):
        other = labels[(i + 1) % len(labels)]
        runs += [(t.size, r) for r in per_trace_runs(t, other)]
        if t.label == SAMPLE:
            runs += [(t.size, r) for r in sample_runs(t)]
    big = max(f.size for f in facts)
    runs += [(big, r) for r in several_trace_runs(labels)]
    runs += [(0, r) for r in error_runs([*labels, *extra_inputs]) + help_runs()]
    runs.sort(key=lambda pair: -pair[0])
    ordered = [r for _, r in runs]
    names = [r.name for r in ordered]
    duplicates = {n for n in names if names.count(n) > 1}
    if duplicates:
        raise SystemExit(f"same_outputs: duplicate run names: {sorted(duplicates)}")
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
    err = normalise(err.decode("utf-8", "replace"), setup, port).encode()
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
        return take_snapshot(tree, out, traces, text_dir, scratch, args.jobs, args.keep_scratch)
    finally:
        if args.keep_scratch:
            print(f"scratch kept in {scratch}", file=sys.stderr)
        else:
            shutil.rmtree(scratch, ignore_errors=True)


def take_snapshot(tree: Path, out: Path, traces: Path, text_dir: Path, scratch: Path, jobs: int,
                  keep_scratch: bool) -> int:
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
    (scratch / "tmp").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "TRACEFORGE"))}
    env.update(PYTHONPATH=str(tree), PYTHONHASHSEED="0", PYTHONIOENCODING="utf-8", COLUMNS="100", LC_ALL="C.UTF-8",
               TZ="UTC", TMPDIR=str(scratch / "tmp"))
    setup = Setup(sys.executable, tree, scratch, text_dir, env, keep_scratch)
    imported_from = check_import(setup)

    with concurrent.futures.ProcessPoolExecutor(max_workers=jobs) as pool:
        facts = list(pool.map(read_facts, sources, [inputs / label for label in sources]))
    runs = plan(facts, extra)
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
    p.set_defaults(func=snapshot)
    c = sub.add_parser("compare", help="print every difference between two snapshots; exit 1 if any")
    c.add_argument("a", metavar="SNAPDIR_A")
    c.add_argument("b", metavar="SNAPDIR_B")
    c.set_defaults(func=compare)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
