"""Shared fixtures and the suite's two tiers.

Unit tier: traces the tests make themselves (``tests/support/make_sample.py`` through the
``sample`` fixtures, and hand-written events). Integration tier: the real traces under
``$TRACEFORGE_TRACES`` or else ``../shared/traces`` beside the checkout, read in place
(``scripts/fetch_traces.py`` fetches the public ones). A test that reads a real trace
through ``TRACES``, directly, through a helper or through a fixture, is marked
``integration`` at collection (found by reading its code: ``pytest_collection_modifyitems``
below) and skipped, saying why, where the traces are absent; ``pytest -m "not integration"``
runs the unit tier alone. A test the reading misses fails on its first ``TRACES[...]``,
asking for ``@pytest.mark.integration``, rather than reading real traces in the unit tier.
"""

from __future__ import annotations

import dis
import gzip
import importlib.util
import inspect
import io
import os
import pty
import subprocess
import sys
import traceback
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import CodeType, ModuleType
from typing import Any

import pytest

from tests.support import make_sample as make_sample_module

ROOT = Path(__file__).resolve().parent.parent
TESTS = Path(__file__).resolve().parent
TRACES_ENV = "TRACEFORGE_TRACES"
MISSING = ("real traces not found: set TRACEFORGE_TRACES or place ../shared/traces "
           "(scripts/fetch_traces.py fetches the public ones)")


def traces_dir() -> Path:
    """Where the real traces are: ``$TRACEFORGE_TRACES``, else ``../shared/traces`` beside the checkout."""
    where = os.environ.get(TRACES_ENV)
    return Path(where).expanduser().resolve() if where else ROOT.parent / "shared" / "traces"


TRACES_DIR = traces_dir()

# name: the trace's path under TRACES_DIR. hta/: HTA's public test data (scripts/fetch_traces.py fetches
# them); h100/: captured on an H100 for this project (../shared/traces/README.md), not fetchable.
TRACE_FILES = {
    "negative_queue": "hta/negative_queue_length_values_check/rank0.json.gz",
    "df_index": "hta/df_index_resolver/df_index_resolver.json.gz",
    "trace_diff": "hta/trace_diff/test/test.json.gz",
    "nccl": "hta/nccl_parser_config/nccl_data.json.gz",
    "ns_resolution": "hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
    "cupti": "hta/cupti_profiler/benchmark_result_924719_1679055439_trace.json.gz",
    "alexnet": "hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz",
    "event_sync": "hta/critical_path/cuda_event_sync_multi_stream/event_sync_trace.json.gz",
    "amd": "hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
    "triton": "hta/triton_example/triton_example.json.gz",
    "h100_resnet50": "h100/resnet50_train.json.gz",
    "h100_cudagraph": "h100/cudagraph_infer.json.gz",
    "h100_ddp": "h100/ddp_nccl_1rank.json.gz",
    "h100_ncu_target": "h100/ncu_target_trace.json.gz",
}
FETCHED = {name: rel for name, rel in TRACE_FILES.items() if rel.startswith("hta/")}  # scripts/fetch_traces.py's
PRESENT = frozenset(name for name, rel in TRACE_FILES.items() if (TRACES_DIR / rel).is_file())


class _Running:
    """The test being run (set before its fixtures), for the check in ``RealTraces``."""

    item: pytest.Item | None = None


class RealTraces(Mapping):
    """name -> path of a real trace. Iterating gives the names (for parametrize) and reads
    nothing; looking a path up is reading the trace: only an integration test may, and it
    is skipped, saying why, where the file is absent."""

    def __getitem__(self, name: str) -> Path:
        path = TRACES_DIR / TRACE_FILES[name]  # KeyError for other names: TRACES.get(x) is None
        item = _Running.item
        if item is None:
            raise RuntimeError(f"real trace {name!r} looked up outside a test: read it in a test or fixture, "
                               "so the test is marked integration and skipped where the traces are absent")
        if item.get_closest_marker("integration") is None:
            pytest.fail(f"{item.nodeid} reads the real trace {name!r} but is not marked integration "
                        "(the collection hook did not see it): add @pytest.mark.integration", pytrace=False)
        if name not in PRESENT:
            pytest.skip(f"{MISSING} (no {path})")
        return path

    def __iter__(self) -> Iterator[str]:
        return iter(TRACE_FILES)

    def __len__(self) -> int:
        return len(TRACE_FILES)


TRACES = RealTraces()
SAMPLE = "sample"  # in a test's trace names: the bundled sample, made by scripts/make_sample.py (unit tier)


def raw_json(path: Path | str) -> bytes:
    """The decompressed bytes of a trace file."""
    data = Path(path).read_bytes()
    if data[:2] == b"\x1f\x8b":
        return gzip.decompress(data)
    if data[:4] == b"\x28\xb5\x2f\xfd":
        import zstandard

        return zstandard.ZstdDecompressor().decompressobj().decompress(data)
    return data


class _Bytes(io.BytesIO):
    def close(self) -> None:  # main() closes stderr on a broken pipe; the bytes are still wanted
        pass


def run_cli(*args: str, stdin: bytes | None = None, process: bool = False) -> subprocess.CompletedProcess:
    """``traceforge ARGS``: exit code, stdout and stderr bytes. Run in this process
    (``cli.main.main``, what ``python -m traceforge`` runs, less the CPU of starting an
    interpreter); in a ``python -m traceforge`` process with ``process=True``, or where stdin or
    stdout is the trace (``-``: read and written through file descriptors). An exception that
    escapes main() is a traceback on stderr and exit code 1, as in a process."""
    if process or stdin is not None or "-" in args:
        return subprocess.run(
            [sys.executable, "-m", "traceforge", *args], input=stdin, capture_output=True, cwd=ROOT, timeout=600
        )
    from traceforge.cli.main import main

    out, err = _Bytes(), _Bytes()
    saved = sys.stdout, sys.stderr
    sys.stdout = io.TextIOWrapper(out, encoding="utf-8", write_through=True)
    sys.stderr = io.TextIOWrapper(err, encoding="utf-8", errors="backslashreplace", write_through=True)
    try:
        code = main(list(args))
    except SystemExit as e:  # argparse's usage errors (2), --help and --version (0)
        code = e.code if isinstance(e.code, int) else 0 if e.code is None else 1
        if isinstance(e.code, str):
            print(e.code, file=sys.stderr)
    except Exception:
        traceback.print_exc()
        code = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        sys.stdout, sys.stderr = saved
    return subprocess.CompletedProcess(["traceforge", *args], code, out.getvalue(), err.getvalue())


@pytest.fixture(scope="session")
def trace_path(sample):
    """``trace_path(name)``: the bundled sample's path for ``SAMPLE``, else the real trace's
    (``TRACES[name]``), so one test can take both in its parameters."""
    return lambda name: sample.path if name == SAMPLE else TRACES[name]


@pytest.fixture(scope="session")
def annotated_all(trace_path, tmp_path_factory):
    """``annotated_all(name)``: the trace (``SAMPLE`` or a real one) through ``annotate --all``,
    as .json.gz, made once per session for the tests that check that output."""
    where = tmp_path_factory.mktemp("annotated")
    made: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in made:
            out = where / f"{name}.all.json.gz"
            r = run_cli("annotate", str(trace_path(name)), "--all", "-o", str(out))
            assert r.returncode == 0, r.stderr
            made[name] = out
        return made[name]

    return get


@pytest.fixture(scope="session")
def columns(trace_path):
    """Scan each trace (``SAMPLE`` or a real one) once per test session: ``columns(name)``."""
    from traceforge.columns.scan import scan

    cache: dict = {}

    def get(name: str):
        if name not in cache:
            cache[name] = scan(str(trace_path(name)))
        return cache[name]

    return get


# -- the tiers: which tests read real traces -------------------------------------------------

def _function(obj: Any) -> Any:
    """The plain function behind a test, method or fixture definition (else ``obj``)."""
    if type(obj).__name__ == "FixtureFunctionDefinition":  # what @pytest.fixture makes (pytest 8.4+)
        obj = obj._fixture_function
    if inspect.ismethod(obj):
        obj = obj.__func__
    return inspect.unwrap(obj) if inspect.isfunction(obj) else obj


def _in_tests(obj: Any) -> bool:
    """A function defined in the test suite (its helpers are followed; the library's are not)."""
    code = getattr(obj, "__code__", None) if inspect.isfunction(obj) else None
    return code is not None and code.co_filename.startswith(str(TESTS))


_FACTS: dict[CodeType, tuple[bool, list[Any]]] = {}


def _facts(func: Any) -> tuple[bool, list[Any]]:
    """Whether ``func``'s own code (nested functions and comprehensions included) loads
    ``TRACES`` or imports it; and the test-suite functions (and methods of test-suite classes)
    it loads by name."""
    code = func.__code__
    if code not in _FACTS:
        names, uses, calls = func.__globals__, False, []
        codes = [code]
        while codes:
            c = codes.pop()
            codes += [const for const in c.co_consts if isinstance(const, CodeType)]
            for ins in dis.get_instructions(c):
                if ins.opname == "IMPORT_FROM" and ins.argval == "TRACES":
                    uses = True
                elif ins.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
                    value = names.get(ins.argval)
                    if value is TRACES:
                        uses = True
                    elif inspect.isclass(value) and value.__module__ == func.__module__:
                        calls += [f for f in map(_function, vars(value).values()) if _in_tests(f)]
                    elif _in_tests(value := _function(value)):
                        calls.append(value)
        _FACTS[code] = uses, calls
    return _FACTS[code]


def _reach(roots: list[Any]) -> bool:
    """Whether the code of ``roots``, or of the test-suite functions, classes and fixtures it
    names (and so on), uses ``TRACES``."""
    seen: set[CodeType] = set()
    todo = [f for f in map(_function, roots) if hasattr(f, "__code__")]
    while todo:
        func = todo.pop()
        if func.__code__ in seen:
            continue
        seen.add(func.__code__)
        uses, calls = _facts(func)
        if uses:
            return True
        todo += calls
    return False


def _trace_argnames(item: pytest.Item) -> set[str]:
    """The parameters of ``item``'s function that take trace names (in any of its cases)."""
    found = set()
    for mark in item.iter_markers("parametrize"):
        argnames = mark.args[0] if mark.args else mark.kwargs.get("argnames", "")
        argnames = [a.strip() for a in argnames.split(",")] if isinstance(argnames, str) else list(argnames)
        values = mark.args[1] if len(mark.args) > 1 else mark.kwargs.get("argvalues", ())
        for value in values:
            value = getattr(value, "values", value)  # pytest.param(...)
            row = value if len(argnames) > 1 else (value,)
            found |= {a for a, v in zip(argnames, row) if isinstance(v, str) and v in TRACE_FILES}
    return found


def reads_real_traces(item: pytest.Item) -> bool:
    """Whether a test reads a real trace: its code or its fixtures' uses ``TRACES`` and, where
    it is parametrized over trace names, this case's value is one (so the ``SAMPLE`` case, or
    a synthetic one, of such a test is unit tier)."""
    if item.get_closest_marker("integration") is not None:
        return True
    roots = [getattr(item, "function", None)]
    info = getattr(item, "_fixtureinfo", None)
    for defs in getattr(info, "name2fixturedefs", {}).values():
        roots += [d.func for d in defs]
    if not _reach([r for r in roots if r is not None]):
        return False
    argnames = _trace_argnames(item)
    if argnames:
        params = getattr(getattr(item, "callspec", None), "params", {})
        return any(params.get(a) in TRACE_FILES for a in argnames)
    return True


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    absent = pytest.mark.skip(reason=f"{MISSING} (looked in {TRACES_DIR})")
    for item in items:
        if reads_real_traces(item):
            item.add_marker(pytest.mark.integration)
            if not PRESENT:
                item.add_marker(absent)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    _Running.item = item


def pytest_report_header(config: pytest.Config) -> str:
    found = f"{len(PRESENT)} of {len(TRACE_FILES)} found" if PRESENT else "not found: the integration tier is skipped"
    return f"real traces ({TRACES_ENV}): {TRACES_DIR}: {found}"


def pytest_terminal_summary(terminalreporter: Any) -> None:
    skipped = [r for r in terminalreporter.stats.get("skipped", []) if MISSING in str(r.longrepr)]
    if skipped:
        terminalreporter.write_line(f"integration tier: {len(skipped)} tests skipped: {MISSING} "
                                    f"(looked in {TRACES_DIR})")


# -- unit-tier traces: made by tests/support/make_sample.py----------------------------------------

def load_script(name: str) -> ModuleType:
    """``scripts/<name>.py`` as a module (scripts/ is not a package)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class Sample:
    """A synthetic trace written by make_sample, and what it recorded: ``rec.cpu_side`` and
    ``rec.gpu_side`` hold every span and flow end with exact integer-ns times."""

    path: Path
    raw: bytes  # the JSON text
    rec: Any  # make_sample.Recorder


@pytest.fixture(scope="session")
def make_sample(tmp_path_factory):
    """``make_sample(steps=5, seed=0, old_kineto=False, suffix=".json.gz") -> Sample``, each
    made once per session (the defaults are ``samples/train_step.json.gz``)."""
    module = make_sample_module
    made: dict[tuple, Sample] = {}
    where = tmp_path_factory.mktemp("samples")

    def get(steps: int = 5, seed: int = 0, old_kineto: bool = False, suffix: str = ".json.gz") -> Sample:
        key = (steps, seed, old_kineto, suffix)
        if key not in made:
            raw, rec = module.make(steps, seed, old_kineto)
            path = where / f"steps{steps}_seed{seed}{'_old' if old_kineto else ''}{suffix}"
            module.write(path, raw)
            made[key] = Sample(path, raw, rec)
        return made[key]

    return get


@pytest.fixture(scope="session")
def sample(make_sample) -> Sample:
    """The bundled sample (5 steps, seed 0, today's Kineto vocabulary), gzipped."""
    return make_sample()


@pytest.fixture(params=["c", "python"])
def backend(request):
    """The test once on traceforge's C kernels and once on their Python fallbacks (each kernel
    that has one; the others stay C); the kernels are put back as they were afterwards."""
    from traceforge import _native

    kernels = [k for k in _native.KERNELS if request.param == "c" or _native.has_fallback(k)]
    try:
        switched = _native.using(request.param, kernels)
        switched.__enter__()
    except ImportError as e:
        pytest.skip(str(e))
    try:
        yield request.param
    finally:
        switched.__exit__(None, None, None)


def stderr_on_a_terminal(*args: str) -> str:
    """Run the CLI with stderr on a pseudo-terminal; what it drew there."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "traceforge", *args], stdout=subprocess.DEVNULL, stderr=follower,
                            cwd=ROOT)
    os.close(follower)
    drawn = b""
    while True:
        try:
            chunk = os.read(leader, 1 << 16)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        drawn += chunk
    os.close(leader)
    assert proc.wait(timeout=120) == 0
    return drawn.decode()
