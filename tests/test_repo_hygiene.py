"""The README's own virtual environment is ignored by git, and the README says how long the tests
take and how to run the fast tier."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="not a git checkout")
def test_readme_venv_is_ignored():
    venv = re.search(r"python3 -m venv (\S+)", (ROOT / "README.md").read_text(encoding="utf-8")).group(1)
    done = subprocess.run(["git", "check-ignore", "-q", f"{venv}/bin/python"], cwd=ROOT)
    assert done.returncode == 0, f"{venv}/ (the README's venv) is not in .gitignore"


def test_readme_says_test_time_and_fast_tier():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert re.search(r"about\s+\d+\s+minutes\s+on\s+2\s+cores", readme)
    assert 'python3 -m pytest -q -m "not integration"' in readme
    assert 'python3 -m pytest -q -n 2 -m "not slow and not integration"' in readme


def test_ci_runs_the_readme_command_and_can_install_chromium():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    command = "python3 -m pip install -q -e '.[test]' && python3 -m pytest -q"
    assert command in readme
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert ci[-1] == command  # exactly the README's command, last
    assert any("apt-get install" in line and "chromium" in line for line in ci)


# -- no measurements in code comments and docstrings -----------------------------------------------
# A measured figure (a time, a size, a share, a speed-up) goes stale as the code changes: it belongs
# in docs/benchmarks.md (current numbers) or a commit message (history), never in a comment. What
# the pattern cannot tell from a measurement is a definition or a limit the code enforces; those are
# ALLOWED, each by its words. Text in ``...`` or "..." is an example of a format (what
# a user types, what a command prints) and is not read.
MEASUREMENT = re.compile(
    r"(?<![\w.])(?<!e-)\d+(?:[.,]\d+)*\s*(?:MB|GB|KB|MiB|GiB|KiB|TB|ms|µs|us|s|sec|seconds|minutes)\b"
    r"|(?<![\w.])\d+(?:\.\d+)?\s*%"
    r"|\d\s*x\s+(?:faster|slower|smaller|larger)\b|\bx\s+faster\b")
LITERALS = re.compile(r"``.*?``|\"[^\"\n]*\"")
ALLOWED = (  # the words that hold a definition or a limit, not a measurement (any file, so moves keep them)
    "passes 100 %", "pass 100 %", "up to 100 %",  # a share's whole (and "add up to 100 %")
    "top 1/5/10 %", "(25, 50, 75, 100 %)",  # the tails and quantiles reported
    "100 % if some kernel exceeds 50 %", "else 50 %",  # counters/derived: the tensor peak's rule
    "it is 100 %", "it is 50 %",  # the classify track's definition
    "(10 %)", "more than 10 %",  # STRAGGLER_SHARE
    "Default 30 µs", "acts as 30 µs", "below 30 µs", "shorter than 10 µs",  # defaults (HTA's)
    "above 50 µs", "above 100 µs",  # HTA's launch outlier cutoffs, the defaults
    "from 1 ms up",  # the launch delay label's format
    "40 GB parts",  # a GPU model's name
    "1683564901548726 us", "every 100 s",  # _counter_text.c: which digits of a time change
)


def comment_lines(path: Path):
    """(line number, text) of each comment and each line of each docstring of ``path`` (a Python or
    C source)."""
    import ast
    import io
    import tokenize

    source = path.read_text(encoding="utf-8")
    if path.suffix in (".c", ".h"):
        for m in re.finditer(r"/\*.*?\*/|//[^\n]*", source, re.S):
            first = source.count("\n", 0, m.start()) + 1
            for i, line in enumerate(m.group().splitlines()):
                yield first + i, line
        return
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            yield tok.start[0], tok.string
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = node.body[0] if node.body else None
            if isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant) and isinstance(doc.value.value, str):
                for i, line in enumerate(doc.value.value.splitlines()):
                    yield doc.lineno + i, line


def measurements(path: Path, allowed=()) -> list[str]:
    """``path:line: text`` for each comment or docstring line of ``path`` with a measurement-like
    number, less the ``allowed`` words."""
    found = []
    for number, line in comment_lines(path):
        text = LITERALS.sub("", line)
        for words in allowed:
            text = text.replace(words, "")
        if MEASUREMENT.search(text):
            found.append(f"{path}:{number}: {line.strip()}")
    return found


def test_code_comments_keep_no_measurements():
    package = ROOT / "traceforge"
    sources = sorted(p for p in package.rglob("*") if p.suffix in (".py", ".c", ".h") and p.is_file())
    assert len(sources) > 100  # the walk found the package
    found = [hit for p in sources for hit in measurements(p, ALLOWED)]
    assert not found, "measurements in comments (move them to docs/benchmarks.md):\n" + "\n".join(found)


def test_every_allowed_phrase_is_still_there():
    package = ROOT / "traceforge"
    text = "\n".join(line for p in sorted(package.rglob("*")) if p.suffix in (".py", ".c", ".h")
                     for _, line in comment_lines(p))
    gone = [words for words in ALLOWED if words not in text]
    assert not gone, f"no longer in any comment, drop them from ALLOWED: {gone}"


@pytest.mark.parametrize("snippet", [
    '# the merge held ~80 MB at 2 GB\nx = 1\n',
    'def f():\n    """Sorting takes 0.04 s against 4 CPU s for hashing."""\n',
    '# 2-6x faster than numpy\n',
    '"""Importing pandas is a third (33 %) of a run."""\n',
    '# a 1,242.5 MiB peak\n',
])
def test_a_planted_measurement_is_found(tmp_path, snippet):
    planted = tmp_path / "planted.py"
    planted.write_text(snippet, encoding="utf-8")
    assert len(measurements(planted)) == 1


def test_a_planted_measurement_in_c_is_found(tmp_path):
    planted = tmp_path / "planted.c"
    planted.write_text("/* As a Python loop\n * the walk took ~1 µs an event. */\nint x; // 5 ms\n", encoding="utf-8")
    assert [hit.split(":")[1] for hit in measurements(planted)] == ["2", "3"]


@pytest.mark.parametrize("snippet", [
    '# int64 ns, 1e-6 GB/s units\n',
    '"""Bytes from ``"8GB"``, ``"500MB"``; ``scan  42% [###] 2,104.6 MB JSON``."""\n',
    'LABEL = "took 3 s"  # a string of the code, not a comment\n',
    '# the rate units of 1e-6 GB/s; zstd blocks expand 32,768x\n',
])
def test_definitions_and_formats_pass(tmp_path, snippet):
    planted = tmp_path / "planted.py"
    planted.write_text(snippet, encoding="utf-8")
    assert measurements(planted) == []
