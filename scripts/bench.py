#!/usr/bin/env python3
"""Benchmark traceforge's commands against the cost of merely (de)compressing each trace.

For each trace this measures (a) the wall time, CPU time (all threads) and peak RSS of
traceforge commands (``--jobs``: ``annotate`` with the core tracks or ``--all``, ``patterns``,
``classify``, ``launch-stats``, ``check``, and the other commands: ``info``, ``stats``,
``counters``, ``trim``, ``diff`` of the trace with itself, ``repair``, ``export``),
outputs having the same codec as the trace, and (b) the floor: decompressing TRACE and
re-compressing the same bytes with the codec and level traceforge writes, with the library it
uses (gzip level 1 via isal, zstd level 3; a plain .json is just copied), fastest of three runs,
and (c) each command's own floor, the issue's "decompress input + compress output":
decompressing TRACE and compressing the trace the command wrote (nothing for a command that
writes none), also the fastest of three; and (d) the ratio to that floor the command would have
if its CPU time were spread evenly over all the machine's cores from its first instant ("packed"):
no better overlap of its threads can beat it, only taking CPU time out. Each command runs in
its own child process, and its peak RSS is that child's own (from ``wait4``), so peaks never
carry over between measurements.
Prints a Markdown table; Linux only.

With ``--hta PYTHON`` (a Python that has HTA 0.5 installed: it needs pandas < 3), each job
that HTA has an equivalent of also runs HTA's feature on the same trace (``scripts/hta_job.py``;
HTA reads ``.json`` and ``.json.gz`` only), and the table adds HTA's time, its peak RSS and how
many times faster traceforge was. A run past ``--hta-timeout`` is stopped and shown as such.

With ``--repeat N`` each command runs N times and its fastest run is reported, as the floors'
are (single runs on the VM of docs/benchmarks.md vary by 10-25 %).

    python scripts/bench.py TRACE [TRACE ...] [--jobs tracks,all] [--repeat N] [--out-dir DIR] [--hta PYTHON]

Many ranks (``--ranks N``): N copies of TRACE (``distributedInfo.rank`` 0..N-1 written into
each head; ``--tile K`` first tiles TRACE K times with scripts/tile_trace.py) in a temporary
directory, then ``annotate DIR --all`` and ``stats DIR`` with each ``--jobs`` of
``--jobs-list``, the runs interleaved ``--repeat`` times (fastest kept), and one rank alone.
Each row: wall, CPU s (the process and the workers it reaped), the largest process's peak
RSS, the bound (CPU s of ``--jobs 1`` spread over min(jobs, ranks, cores)) and the ratio to
it (the issue's acceptance: within 1.5x). ``--cluster-workers 1,2`` adds the same commands on
a Dask ``LocalCluster`` of that many one-thread worker processes (CPU s from the workers).
``--rank-commands stats`` (or ``annotate``) measures only that command; ``--rank-commands copy,merge``
measures ``merge DIR`` beside ``annotate DIR --copy`` (issue 51: within 1.5x at the same ``--jobs``).

    python scripts/bench.py --ranks 16 --jobs-list 1,2,4,8,16 --tile 4 --repeat 3 TRACE
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

import zstandard

try:  # what traceforge.io.read.codec uses; not imported from there so the floor's process stays light
    from isal import isal_zlib as gzip_zlib
    from isal.igzip import IGzipFile as GzipReader
except ImportError:
    import zlib as gzip_zlib
    from gzip import GzipFile as GzipReader
_RawGzipReader = getattr(gzip_zlib, "_GzipReader", None)  # as traceforge.io.read.codec reads gzip

GZIP_LEVEL, ZSTD_LEVEL = 1, 3  # traceforge.io.write.output's

CHUNK = 4 << 20  # traceforge.io.read.codec.BLOCK
FLOOR_RUNS = 3
REPO = Path(__file__).resolve().parent.parent
CODECS = (".gz", ".zst")
CORES = len(os.sched_getaffinity(0))


class Compressor(Protocol):
    def compress(self, data: bytes, /) -> bytes: ...
    def flush(self) -> bytes: ...


class Passthrough:
    """The "codec" of an uncompressed trace."""

    def compress(self, data: bytes, /) -> bytes:
        return data

    def flush(self) -> bytes:
        return b""


@dataclass
class Run:
    """One measured child process."""

    seconds: float
    cpu_seconds: float  # user + system, all threads: the VM's slow phases change it less than wall time
    peak_mb: float
    returncode: int
    stdout: bytes


def codec(path: Path) -> str:
    """The trace's compression suffix: ``.gz``, ``.zst`` or ``""``."""
    return path.suffix if path.suffix in CODECS else ""


def output_path(trace: Path, out_dir: Path, tag: str) -> Path:
    """``out_dir/NAME.TAG.json[.gz|.zst]`` for a trace ``NAME.json[.gz|.zst]``."""
    name = trace.name.removesuffix(codec(trace)).removesuffix(".json")
    return out_dir / f"{name}.{tag}.json{codec(trace)}"


def compressor(suffix: str) -> Compressor:
    """A streaming compressor with traceforge's settings and library for a codec suffix."""
    if suffix == ".gz":
        return gzip_zlib.compressobj(GZIP_LEVEL, gzip_zlib.DEFLATED, 31)  # wbits 31: gzip container
    if suffix == ".zst":
        return zstandard.ZstdCompressor(level=ZSTD_LEVEL).compressobj()
    return Passthrough()


def decompressing_reader(f, path: Path):
    """A file-like reader of the decompressed bytes (every gzip member, every zstd frame)."""
    if codec(path) == ".gz":
        return GzipReader(fileobj=f) if _RawGzipReader is None else _RawGzipReader(f, 256 << 10)
    return zstandard.ZstdDecompressor().stream_reader(f, read_across_frames=True)


def decompressed_chunks(path: Path) -> Iterator[memoryview]:
    """The trace's uncompressed bytes, a chunk at a time, decompressed as traceforge does:
    into one block of memory, reused (fresh output buffers page-fault)."""
    block = bytearray(CHUNK)
    with path.open("rb") as f:
        reader = decompressing_reader(f, path) if codec(path) else f
        while n := reader.readinto(block):
            yield memoryview(block)[:n]


def floor(src: Path, dst: Path) -> int:
    """Decompress ``src`` and re-compress the same bytes into ``dst``; returns the raw byte count."""
    return compressed(decompressed_chunks(src), codec(src), dst)


def job_floor(src: Path, output: Path, dst: Path) -> float:
    """The issue's floor for one command: decompress ``src``, then compress into ``dst`` the
    bytes of the trace the command wrote (``output``, read back; an empty file for a command
    that writes none). Returns the seconds spent reading ``output`` back, which are not the
    floor's: the caller takes them off the process's time."""
    for _ in decompressed_chunks(src):
        pass
    reading = [0.0]
    compressed(timed(decompressed_chunks(output), reading), codec(src), dst)
    return reading[0]


def compressed(chunks: Iterator[memoryview], suffix: str, dst: Path) -> int:
    """Compress ``chunks`` into ``dst`` with the codec of ``suffix``; returns their byte count."""
    raw = 0
    comp = compressor(suffix)
    with dst.open("wb") as out:
        for chunk in chunks:
            raw += len(chunk)
            out.write(comp.compress(chunk))
        out.write(comp.flush())
    return raw


def timed(items: Iterator[memoryview], spent: list[float]) -> Iterator[memoryview]:
    """``items``, adding the seconds spent making each to ``spent[0]``."""
    while True:
        started = time.perf_counter()
        item = next(items, None)
        spent[0] += time.perf_counter() - started
        if item is None:
            return
        yield item


def floor_runs(args: list[str], trace: Path, env: dict[str, str]) -> list[Run]:
    """This script as a floor's child process (``--floor ...`` or ``--job-floor ...``),
    ``FLOOR_RUNS`` times: floors are cheap and the yardstick of every row."""
    runs = [run_child([sys.executable, str(Path(__file__).resolve()), *args], env) for _ in range(FLOOR_RUNS)]
    failed = [run.returncode for run in runs if run.returncode]
    if failed:
        raise RuntimeError(f"{args[0]} failed for {trace} (exit {failed[0]})")
    return runs


def fastest(cmd: list[str], env: dict[str, str], repeat: int) -> Run:
    """``cmd`` run ``repeat`` times: the fastest run (as the floors are taken), with the highest
    peak RSS of all of them; the first failure if one fails."""
    runs = []
    for _ in range(repeat):
        runs.append(run_child(cmd, env))
        if runs[-1].returncode:
            return runs[-1]
    best = min(runs, key=lambda run: run.seconds)
    return replace(best, peak_mb=max(run.peak_mb for run in runs))


def run_child(cmd: list[str], env: dict[str, str], timeout: float | None = None) -> Run:
    """Run ``cmd``, capturing its stdout; time it and take its peak RSS from ``wait4``.
    Past ``timeout`` seconds the child is killed (its return code is then -SIGKILL)."""
    read_fd, write_fd = os.pipe()
    start = time.perf_counter()
    pid = os.posix_spawn(cmd[0], cmd, env, file_actions=[(os.POSIX_SPAWN_DUP2, write_fd, 1)])
    os.close(write_fd)
    killer = threading.Timer(timeout, os.kill, (pid, signal.SIGKILL)) if timeout else None
    if killer:
        killer.start()
    with os.fdopen(read_fd, "rb") as pipe:
        stdout = pipe.read()
    _, status, usage = os.wait4(pid, 0)
    seconds = time.perf_counter() - start
    if killer:
        killer.cancel()
    return Run(seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status),
               stdout)


def child_env() -> dict[str, str]:
    """The environment the measured processes run in: ``-m traceforge`` runs this checkout,
    and Python may keep its compiled bytecode (``PYTHONDONTWRITEBYTECODE`` dropped)."""
    pythonpath = [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(pythonpath))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def compile_package(env: dict[str, str]) -> None:
    """Compile the package's bytecode before any measured run, as ``pip install`` does. Where
    the environment sets ``PYTHONDONTWRITEBYTECODE``, each run of a checkout otherwise compiled
    the ~95 modules the CLI imports before doing anything: ~0.13 s of every row."""
    run = run_child([sys.executable, "-m", "compileall", "-q", str(REPO / "traceforge")], env)
    if run.returncode:
        print(f"bench: could not compile {REPO / 'traceforge'} (exit {run.returncode}): the rows include "
              "compiling it", file=sys.stderr)


def warm_page_cache(path: Path) -> None:
    """Read the file once so that the first measurement does not pay for a cold disk."""
    with path.open("rb") as f:
        while f.read(CHUNK):
            pass


OPERATOR = "aten::addmm"  # the operator whose kernel sequences `patterns` looks for

# name -> traceforge command line after the trace ({out} is replaced by an output path,
# {in} by the trace again)
JOBS = {
    "tracks": "annotate --queue-length --memcpy-bw -o {out}",
    "all": "annotate --all -o {out}",
    "patterns": f"patterns --op {OPERATOR}",
    "classify": "classify",
    "launch-stats": "launch-stats",
    "check": "check -q",
    "info": "info",
    "stats": "stats",
    "counters": "counters",
    "trim": "trim --window +5s:+10s -o {out}",
    "export": "export --csv {out}",
    "diff": "diff {in}",
    "repair": "repair -o {out}",
}
# exit codes that are results, not failures: check's 1 is "Perfetto would lose something"
RESULT_CODES = {"check": (0, 1)}

# job -> HTA's feature computing the same (scripts/hta_job.py); HTA's sequences also write
# an overlay trace, which `patterns` does only with -o
HTA_FEATURES = {"tracks": "counters", "patterns": "sequences", "classify": "breakdown", "launch-stats": "launch-stats"}
HTA_CODECS = (".gz", "")


def hta_columns(hta: Path, trace: Path, job: str, out_dir: Path, timeout: float, seconds: float | None) -> list[str]:
    """HTA's time, peak RSS and traceforge's speed-up (``seconds``) on one job, where HTA has it."""
    if job not in HTA_FEATURES or codec(trace) not in HTA_CODECS:
        return ["–", "–", "–"]
    with tempfile.TemporaryDirectory(dir=out_dir) as work:
        run = run_child([str(hta), str(REPO / "scripts" / "hta_job.py"), HTA_FEATURES[job], str(trace), work, OPERATOR],
                        dict(os.environ), timeout)
    if run.returncode == -signal.SIGKILL and run.seconds >= timeout:
        return [f"> {timeout:.0f} (stopped)", f"> {run.peak_mb:.0f}", "–"]
    if run.returncode:
        return [f"failed after {run.seconds:.0f} (exit {run.returncode})", f"{run.peak_mb:.0f}", "–"]
    speedup = f"{run.seconds / seconds:.0f}" if seconds else "–"
    return [f"{run.seconds:.1f}", f"{run.peak_mb:.0f}", speedup]


def bench(trace: Path, out_dir: Path, jobs: list[str], env: dict[str, str], hta: Path | None = None,
          hta_timeout: float = 0, repeat: int = 1) -> tuple[list[list[str]], bool]:
    """Measure one trace: the floor, then each job (and HTA's equivalent, given ``hta``), run
    in ``env`` (``child_env``); returns table rows and whether all traceforge runs succeeded."""
    warm_page_cache(trace)
    floor_out = output_path(trace, out_dir, "floor")
    base = min(floor_runs(["--floor", str(trace), str(floor_out)], trace, env), key=lambda run: run.seconds)
    raw_mb = int(base.stdout) / 1e6
    rows, ok = [], True
    for job in jobs:
        out = output_path(trace, out_dir, job)
        words = JOBS[job].replace("{out}", str(out)).replace("{in}", str(trace)).split()
        run = fastest([sys.executable, "-m", "traceforge", words[0], str(trace), *words[1:]], env, repeat)
        failed = run.returncode not in RESULT_CODES.get(job, (0,))
        if failed:
            measured = [f"failed (exit {run.returncode})", *["–"] * 4, f"{base.seconds:.1f}", "–", "–", "–"]
            ok = False
        else:
            output = out if out.is_file() else Path(os.devnull)
            own = min(run.seconds - float(run.stdout)  # less reading the output back
                      for run in floor_runs(["--job-floor", str(trace), str(output), str(floor_out)], trace, env))
            measured = [f"{run.seconds:.1f}", f"{run.cpu_seconds:.1f}", f"{raw_mb / run.seconds:.1f}",
                        f"{run.peak_mb:.0f}", f"{run.seconds / base.seconds:.2f}", f"{base.seconds:.1f}",
                        f"{run.seconds / own:.2f}", f"{own:.1f}", f"{run.cpu_seconds / (CORES * own):.2f}"]
        row = [trace.name, f"{raw_mb:.0f}", f"`{JOBS[job].split(' -o')[0]}`", *measured]
        if hta:
            row += hta_columns(hta, trace, job, out_dir, hta_timeout, None if failed else run.seconds)
        rows.append(row)
    return rows, ok


RANK_COMMANDS = {"annotate --all": "annotate {dir} --all -o {out}", "stats": "stats {dir}",
                 "annotate --copy": "annotate {dir} --copy -o {out}", "merge": "merge {dir} -o {out}.merged.json.gz"}
# --rank-commands' words; copy,merge: issue 51's merge beside annotate --copy of the same ranks
RANK_COMMAND_NAMES = {"annotate": "annotate --all", "stats": "stats", "copy": "annotate --copy", "merge": "merge"}
DEFAULT_RANK_COMMANDS = "annotate,stats"
DISTRIBUTED_KEY = b'"distributedInfo"'


def rank_copies(trace: Path, ranks: int, tile: int, work: Path) -> Path:
    """``ranks`` copies of ``trace`` (tiled ``tile`` times first) in ``work/ranks``, each with
    ``distributedInfo.rank`` set in its head, compressed as ``trace`` is."""
    if tile > 1:  # tile_trace reads the compressed trace itself
        tiled = work / "tiled.json"
        subprocess.run([sys.executable, str(REPO / "scripts" / "tile_trace.py"), str(trace), "-o", str(tiled),
                        "--copies", str(tile)], check=True, capture_output=True)
        text = tiled.read_bytes()
        tiled.unlink()
    else:
        text = b"".join(bytes(c) for c in decompressed_chunks(trace))
    events = text.index(b'"traceEvents"')
    head, body = text[:events], text[events:]
    at = head.find(DISTRIBUTED_KEY)
    if at >= 0:  # drop the old key and its object (nested: torch 2.x has a pg_config list of objects)
        value = head.index(b":", at) + 1
        value += len(head[value:]) - len(head[value:].lstrip())
        _, end = json.JSONDecoder().raw_decode(head.decode("latin-1"), value)  # a char per byte
        head = head[:at] + head[end:].lstrip().removeprefix(b",").lstrip()
    brace = head.index(b"{") + 1
    directory = work / "ranks"
    directory.mkdir()
    suffix = "".join(trace.suffixes[-2:]) if trace.suffix in CODECS else trace.suffix
    for rank in range(ranks):
        named = head[:brace] + b'\n  "distributedInfo": {"rank": %d, "world_size": %d},' % (rank, ranks) + head[brace:]
        out = directory / f"rank{rank}{suffix}"
        compressed(iter([memoryview(named), memoryview(body)]), trace.suffix, out)
    return directory


def serve_cluster(workers: int) -> None:
    """``--serve-cluster W``: a Dask LocalCluster of ``W`` one-thread worker processes, its
    address on stdout; each line read from stdin answers the workers' CPU s so far; EOF ends it.
    Its own process, so that the bench's stays small: a child's peak RSS from ``wait4`` is at
    least the bench's own (spawning shares its memory until exec)."""
    import resource

    from distributed import Client, LocalCluster

    def used() -> float:
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime

    sys.path.insert(0, str(REPO))  # the scheduler, here, unpickles the jobs: this checkout's
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        client.run(lambda: __import__("traceforge.cli.main"))  # the workers' imports are not the run's
        print(cluster.scheduler_address, flush=True)
        for _ in sys.stdin:
            print(sum(client.run(used).values()), flush=True)


def cluster_run(workers: int, cmd: list[str], env: dict[str, str]) -> Run:
    """``cmd`` with ``--cluster`` on a fresh ``serve_cluster`` of ``workers``; CPU s is the
    command's plus what the workers used meanwhile."""
    server = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--serve-cluster", str(workers)],
                              env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              text=True)
    assert server.stdin is not None and server.stdout is not None

    def workers_cpu() -> float:
        server.stdin.write("cpu\n")
        server.stdin.flush()
        return float(server.stdout.readline())

    try:
        address = server.stdout.readline().strip()
        before = workers_cpu()
        run = run_child([*cmd, "--cluster", address], env)
        after = workers_cpu()
    finally:
        server.stdin.close()
        server.wait()
    return replace(run, cpu_seconds=run.cpu_seconds + after - before)


def bench_ranks(trace: Path, ranks: int, jobs_list: list[int], cluster_workers: list[int], tile: int,
                repeat: int, env: dict[str, str],
                commands: tuple[str, ...] = tuple(RANK_COMMAND_NAMES[c] for c in DEFAULT_RANK_COMMANDS.split(","))
                ) -> list[list[str]]:
    """The many-ranks table's rows for ``trace`` (see the module's docstring)."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        made = run_child([sys.executable, str(Path(__file__).resolve()), "--make-ranks", str(trace), str(ranks),
                          str(tile), str(work)], env)  # in a child: the bench's own memory stays small
        if made.returncode:
            raise RuntimeError(f"could not make the rank copies of {trace}")
        directory = work / "ranks"
        one = next(directory.iterdir())
        for path in directory.iterdir():
            warm_page_cache(path)
        for name, line in ((n, RANK_COMMANDS[n]) for n in commands):
            def cmd(target: Path, tag: str) -> list[str]:
                out = work / f"out_{tag}"
                out = out.with_suffix(".json.gz") if target.is_file() else out
                words = line.replace("{dir}", str(target)).replace("{out}", str(out)).split()
                return [sys.executable, "-m", "traceforge", *words]

            best: dict[str, Run] = {}
            # (label, processes that can run at once or None for one rank alone, how to run it)
            variants = [("1 rank alone", None, lambda: run_child(cmd(one, "alone"), env))]
            variants += [(f"--jobs {j}", min(j, ranks, CORES),
                          lambda j=j: run_child(cmd(directory, f"j{j}") + ["--jobs", str(j)], env)) for j in jobs_list]
            variants += [(f"Dask {w} worker{'s' if w > 1 else ''}", min(w, ranks),
                          lambda w=w: cluster_run(w, cmd(directory, f"c{w}"), env)) for w in cluster_workers]
            parallel_of = {label: parallel for label, parallel, _ in variants}
            for _ in range(repeat):  # interleaved: load from other work spreads over every variant
                for label, _, measure in variants:
                    run = measure()
                    if run.returncode:
                        raise RuntimeError(f"{name} {label} failed (exit {run.returncode})")
                    if label not in best or run.seconds < best[label].seconds:
                        best[label] = replace(run, peak_mb=max(run.peak_mb, best.get(label, run).peak_mb))
            serial_cpu = best["--jobs 1"].cpu_seconds if "--jobs 1" in best else None
            for label, run in best.items():
                parallel = parallel_of[label]
                bound = serial_cpu / parallel if serial_cpu is not None and parallel is not None else None
                rows.append([name, str(ranks), label, f"{run.seconds:.2f}", f"{run.cpu_seconds:.2f}", f"{run.peak_mb:.0f}",
                             "–" if bound is None else f"{bound:.2f}",
                             "–" if bound is None else f"{run.seconds / bound:.2f}"])
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("traces", nargs="*", type=Path, metavar="TRACE", help=".json, .json.gz or .json.zst")
    parser.add_argument("--jobs", default="tracks,all", help=f"comma-separated, from: {', '.join(JOBS)} (default: tracks,all)")
    parser.add_argument("--out-dir", type=Path, help="keep outputs here (default: a temporary directory)")
    parser.add_argument("--hta", type=Path, metavar="PYTHON", help="also run HTA's equivalents with this Python")
    parser.add_argument("--repeat", type=int, default=1, metavar="N",
                        help="run each command N times and report its fastest run, as the floors are (fastest "
                        "of three), with the highest peak RSS of the N (default: 1)")
    parser.add_argument("--hta-timeout", type=float, default=3600, metavar="S",
                        help="stop an HTA run after S seconds (default: 3600)")
    parser.add_argument("--ranks", type=int, metavar="N", help="many-ranks mode: N rank copies of each TRACE")
    parser.add_argument("--jobs-list", default="1,2,4", metavar="J,J",
                        help="many-ranks mode: the --jobs values to run (default 1,2,4)")
    parser.add_argument("--cluster-workers", default="", metavar="W,W",
                        help="many-ranks mode: also on a Dask LocalCluster of W worker processes (e.g. 1,2)")
    parser.add_argument("--tile", type=int, default=1, metavar="K", help="many-ranks mode: tile TRACE K times first")
    parser.add_argument("--rank-commands", default=DEFAULT_RANK_COMMANDS, metavar="C,C",
                        help=f"many-ranks mode: the commands to run, from {', '.join(RANK_COMMAND_NAMES)} "
                        f"(default: {DEFAULT_RANK_COMMANDS}; copy,merge compares merge with annotate --copy)")
    parser.add_argument("--make-ranks", nargs=4, metavar=("TRACE", "N", "TILE", "DIR"), help=argparse.SUPPRESS)
    parser.add_argument("--serve-cluster", type=int, metavar="W", help=argparse.SUPPRESS)
    parser.add_argument("--floor", nargs=2, type=Path, metavar=("SRC", "DST"), help=argparse.SUPPRESS)
    parser.add_argument("--job-floor", nargs=3, type=Path, metavar=("SRC", "OUTPUT", "DST"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.floor:
        print(floor(*args.floor))
        return 0
    if args.make_ranks:
        trace, ranks, tile, work = args.make_ranks
        rank_copies(Path(trace), int(ranks), int(tile), Path(work))
        return 0
    if args.serve_cluster:
        serve_cluster(args.serve_cluster)
        return 0
    if args.job_floor:
        print(job_floor(*args.job_floor))
        return 0
    if not args.traces:
        parser.error("at least one TRACE is required")
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    if args.ranks:
        return main_ranks(args)
    jobs = args.jobs.split(",")
    unknown = [j for j in jobs if j not in JOBS]
    if unknown:
        parser.error(f"unknown job(s): {', '.join(unknown)}")
    header = ["file", "raw MB", "command", "s", "CPU s", "MB/s", "peak RSS MB", "x floor", "floor s",
              "x job floor", "job floor s", f"packed x job floor ({CORES} cores)"]
    if args.hta:
        header += ["HTA s", "HTA peak RSS MB", "x faster than HTA"]
    rows, ok = [], True
    env = child_env()
    compile_package(env)
    with tempfile.TemporaryDirectory() as tmp:
        out_dir = args.out_dir or Path(tmp)
        out_dir.mkdir(parents=True, exist_ok=True)
        for trace in args.traces:
            trace_rows, succeeded = bench(trace, out_dir, jobs, env, args.hta, args.hta_timeout, args.repeat)
            rows.extend(trace_rows)
            ok &= succeeded
            for row in trace_rows:
                print("  " + " | ".join(row), file=sys.stderr, flush=True)
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join(" --- " for _ in header) + "|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    return 0 if ok else 1


def main_ranks(args: argparse.Namespace) -> int:
    """The many-ranks mode: a Markdown table, the machine's cores and load in its title."""
    env = child_env()
    compile_package(env)
    jobs_list = [int(j) for j in args.jobs_list.split(",") if j]
    workers = [int(w) for w in args.cluster_workers.split(",") if w]
    try:
        commands = tuple(RANK_COMMAND_NAMES[c] for c in args.rank_commands.split(",") if c)
    except KeyError as e:
        raise SystemExit(f"bench: --rank-commands: no command {e.args[0]!r} (there are {', '.join(RANK_COMMAND_NAMES)})")
    print(f"{args.ranks} ranks, {CORES} cores, load average {os.getloadavg()[0]:.2f} at the start "
          f"(python {sys.version.split()[0]})")
    header = ["command", "ranks", "run", "wall s", "CPU s", "peak RSS MB (largest process)",
              f"bound s (CPU s of --jobs 1 / min(jobs, ranks, {CORES} cores))", "x bound"]
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join(" --- " for _ in header) + "|")
    for trace in args.traces:
        for row in bench_ranks(trace, args.ranks, jobs_list, workers, args.tile, args.repeat, env, commands):
            print("| " + " | ".join(row) + " |", flush=True)
    print(f"load average {os.getloadavg()[0]:.2f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
