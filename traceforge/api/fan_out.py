"""One job per trace, in parallel: processes on this machine or a Dask cluster, results in
the order of the items. Every many-file command and the API's many-rank functions
(``stats``, ``report``, ``critical-path``, ``annotate DIR``, ...) fan out through ``run_jobs``.

Locally the workers are forked from this process where that is safe (one Python thread
here): they start with every module already imported, in milliseconds, where a fresh
interpreter imports numpy and pandas again (~0.2 CPU s each). Elsewhere (other threads
running, no fork on the platform) they fork from a forkserver that has imported the job's
module once. The largest traces are started first, so a big one does not start last and
run alone; a pool has no more workers than jobs, and with one job or ``jobs=1`` the jobs run
here, one after another, exactly as a single-file run.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from ..errors import TraceforgeError, UsageError
from ..io.read.limits import ReadLimits, read_limits, reading_limits
from ..io.read.rank_files import file_ranks, one_per_rank, trace_paths
from ..util import progress, signals

T = TypeVar("T")
R = TypeVar("R")

CONNECT_TIMEOUT_S = 30
# What a worker would import on its own after the fork: pandas (lazy in traceforge: ~0.3 CPU s), which the
# parent imports anyway to gather the results (the summaries across ranks are DataFrames).
PRELOAD = ("pandas",)
PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])  # the directory that holds this traceforge package


def cores() -> int:
    """The CPU cores this process may run on: the default number of jobs (``--jobs``)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def ranked(inputs: Sequence[str], job: Callable[[str, int], R], *, jobs: int | None = 1,
           cluster: str | None = None) -> Iterator[tuple[int, str, R]]:
    """(rank, path, ``job(path, rank)``) for each trace of ``inputs`` (files or directories), in
    input order. Ranks follow the one rule of every many-file command (``io.rank_files.file_ranks``,
    from the traces' heads and names, before any job runs); two traces of one rank are an error.
    With one job at a time (``jobs=1``, the default, or one trace) each trace is read when its
    turn comes, so only one result need be held; else the jobs run in parallel (``run_jobs``:
    ``jobs`` processes, None for the cores, or on the Dask scheduler at ``cluster``, given
    absolute paths): ``job`` and its result must then pickle, and be small."""
    paths = trace_paths(list(inputs))
    if cluster is not None:  # the workers' working directories are not ours
        paths = [os.path.abspath(p) for p in paths]
    items = [(path, rank) for path, (rank, _) in zip(paths, file_ranks(paths))]
    one_per_rank((rank, path) for path, rank in items)
    if cluster is None and min(jobs or cores(), len(paths)) <= 1:
        done: Iterator[R] = (job(path, rank) for path, rank in items)
    else:
        done = iter(run_jobs(partial(_pair, job), items, paths, jobs=jobs, cluster=cluster))
    for (path, rank), result in zip(items, done):
        yield rank, path, result


def _pair(job: Callable[[str, int], R], item: tuple[str, int]) -> R:
    path, rank = item
    return job(path, rank)


def run_jobs(job: Callable[[T], R], items: Sequence[T], paths: Sequence[str], *, jobs: int | None = None,
             cluster: str | None = None) -> list[R]:
    """``job`` on every item (``paths[i]`` is item i's trace: its size orders the jobs, and
    counts for progress), results in item order.

    Locally with ``jobs`` processes (default: the cores; 1 runs here), or on the Dask
    scheduler at ``cluster``. A bar counts the traces' compressed bytes as jobs finish.
    Where jobs fail, the error raised is that of the first failing item, as one job at a
    time gives (not of the first to fail): once the items before it are done, the jobs not
    yet started are cancelled (those running finish first).
    """
    sizes = [_size(p) for p in paths]
    total = sum(sizes)
    results: list[Any] = [None] * len(items)
    finished = [False] * len(items)
    failed: dict[int, str] = {}
    done = 0
    bar = progress.active()
    guarded = partial(_guarded, job)
    largest_first = sorted(range(len(items)), key=lambda i: -sizes[i])  # stable: ties in item order
    completed = (_on_cluster(guarded, items, largest_first, cluster) if cluster is not None
                 else _here(guarded, items, largest_first, jobs or cores()))
    try:
        for i, result in completed:
            finished[i] = True
            if isinstance(result, _Failed):
                failed[i] = result.message
            else:
                results[i] = result
                done += sizes[i]
                if bar is not None:
                    bar(f"{len(items)} traces", done, total)
            if failed and all(finished[:min(failed)]):
                break
    except BaseException as e:
        if not isinstance(e, Exception):  # a signal (KeyboardInterrupt, Terminated): the workers stop now
            _stop(completed, e)
        raise
    finally:
        completed.close()  # the jobs not yet started are cancelled
    if failed:
        raise TraceforgeError(failed[min(failed)])
    return results


@dataclass(frozen=True)
class _Failed:
    message: str


def _guarded(job: Callable[[T], R], item: T) -> R | _Failed:
    """One job, with no per-read progress (the caller draws one bar over all); errors come
    back as text: TraceFormatError's keyword arguments do not survive pickling."""
    try:
        with progress.hidden():
            return job(item)
    except TraceforgeError as e:
        return _Failed(str(e))


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _stop(completed: Generator, signal_error: BaseException) -> None:
    """Hand ``signal_error`` to the jobs' generator where it waits, so that it stops its workers
    (the generator may have raised it itself: then they are stopped already)."""
    try:
        completed.throw(signal_error)
    except BaseException:
        pass


def _here(job: Callable[[T], R], items: Sequence[T], order: list[int], jobs: int) -> Generator[tuple[int, R]]:
    if min(jobs, len(items)) <= 1:
        for i, item in enumerate(items):
            yield i, job(item)
        return
    # imported here: multiprocessing is ~10 ms of every command's start-up, needed only for files in parallel
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    limits = read_limits()  # the workers do not see this thread's context: they get the limits in force here
    pool = ProcessPoolExecutor(max_workers=min(jobs, len(items)), mp_context=_context(job), initializer=worker_started)
    workers: list[Any] = []
    try:
        pending = {pool.submit(_limited, limits, job, items[i]): i for i in order}
        workers = list((getattr(pool, "_processes", None) or {}).values())  # a broken pool forgets them
        while pending:
            ready, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in ready:
                yield pending.pop(future), future.result()
    except GeneratorExit:  # the caller has what it needs: the jobs running finish, the others are cancelled
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    except BaseException as e:  # a signal (or a worker gone): every worker stops now, unwinding as this process does
        codes = stop_workers(pool, workers)
        if type(e).__name__ == "BrokenProcessPool":
            _pass_on_stop(codes)  # a worker told to stop first (a group's SIGTERM): this run stops as told
        raise
    pool.shutdown(wait=True)


STOP_GRACE_S = 10  # how long a stopped worker has to unwind (remove its temporary files) before it is killed


def worker_started() -> None:
    """Runs first in each worker process: SIGTERM and SIGHUP unwind its job (its temporary
    files are removed) and end the worker quietly with 128 + the signal (``_limited``), or end
    it at once between jobs (it may be sending a result: an exception there would be sent back
    instead of ending it); SIGINT, which a terminal's Ctrl-C sends to the worker too, is left
    to the parent, which then stops the workers; and a worker ends when its parent does,
    however the parent ended."""
    import signal

    def stop(signum: int, frame: object) -> None:
        signals.ignore()  # the parent's SIGTERM after a group's one does not cut the unwinding short
        if not _in_job:
            os._exit(128 + signum)
        raise WorkerStopped(128 + signum)

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for name in ("SIGTERM", "SIGHUP"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), stop)
    _end_with_parent()


def _end_with_parent() -> None:
    """Ask Linux to send this process SIGTERM when its parent ends (``prctl(PR_SET_PDEATHSIG)``)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM), 0, 0, 0)  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class WorkerStopped(SystemExit):
    """A worker told to stop (SIGTERM): raised in its job, which unwinds; ``_limited`` then ends
    the worker. A SystemExit, so a worker stopped between jobs ends without a traceback."""


def stop_workers(pool: Any, started: Sequence[Any] = ()) -> list[int | None]:
    """SIGTERM every worker of ``pool`` (and those ``started``) and wait for each to end
    (``STOP_GRACE_S``, then SIGKILL), another signal meanwhile ignored; then the pool is let go.
    Returns the workers' exit codes."""
    with signals.ignored():
        processes = list({id(p): p for p in (*started, *(getattr(pool, "_processes", None) or {}).values())}.values())
        for p in processes:
            if p.is_alive():
                p.terminate()
        for p in processes:
            p.join(STOP_GRACE_S)
            if p.is_alive():
                p.kill()
                p.join()
        pool.shutdown(wait=False, cancel_futures=True)
    return [p.exitcode for p in processes]


def _pass_on_stop(codes: list[int | None]) -> None:
    """Where a worker ended as told by a signal (128 + SIGTERM or SIGHUP from ``worker_started``,
    or killed by it), raise that signal here: the run stops as its parent would have been told to
    (a process group's signal reaches the workers and the parent together)."""
    import signal

    for code in codes:
        for s in signals.STOPPING:
            if s != signal.SIGINT and code in (128 + s, -s):
                signal.raise_signal(s)
                return


def _context(job: Callable) -> Any:
    """Fork where this process runs one Python thread (nothing can hold a lock across the
    fork; ProcessPoolExecutor forks all its workers before starting its own thread), else a
    forkserver that imports the job's module once, before it forks the workers."""
    import importlib
    import multiprocessing

    for module in PRELOAD:  # imported once here, not again in each worker
        importlib.import_module(module)
    if "fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1:
        sys.stdout.flush()  # a forked worker flushes the streams it inherits as it exits: not ours twice
        sys.stderr.flush()
        return multiprocessing.get_context("fork")
    from multiprocessing import forkserver

    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([*PRELOAD, "traceforge.api", *_modules(job)])
    saved = os.environ.get("PYTHONPATH")
    # the server imports this traceforge, whatever the working directory is now (it is started with -c)
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (PACKAGE_ROOT, saved) if p)
    try:
        forkserver.ensure_running()
    finally:
        if saved is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = saved
    return context


def _modules(job: Any) -> list[str]:
    """The modules of the functions in ``job`` (a function, or partials of functions)."""
    if isinstance(job, partial):
        return [m for part in (job.func, *job.args) for m in _modules(part)]
    module = getattr(job, "__module__", None) if callable(job) else None
    return [module] if isinstance(module, str) and module.startswith("traceforge.") else []


_in_job = False  # in a worker: a job is running (a signal unwinds it)


def _limited(limits: ReadLimits, job: Callable[[T], R], item: T) -> R:
    global _in_job
    try:
        _in_job = True
        with reading_limits(limits):
            return job(item)
    except WorkerStopped as e:  # the job has unwound: the worker ends here, sending nothing back
        os._exit(e.code if isinstance(e.code, int) else 1)
    finally:
        _in_job = False


def _on_cluster(job: Callable[[T], R], items: Sequence[T], order: list[int], address: str
                ) -> Generator[tuple[int, R]]:
    try:
        from distributed import Client, as_completed
    except ImportError:
        raise UsageError("--cluster needs Dask distributed: pip install 'traceforge[cluster]'") from None
    try:
        client = Client(address, timeout=CONNECT_TIMEOUT_S)
    except (OSError, TimeoutError, ValueError) as e:
        raise UsageError(f"--cluster {address}: cannot connect: {e}") from None
    with client:
        futures = client.map(partial(_limited, read_limits(), job), [items[i] for i in order], pure=False)
        index = {f.key: i for i, f in zip(order, futures)}
        for future in as_completed(futures):
            yield index[future.key], future.result()
