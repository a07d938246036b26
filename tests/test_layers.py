"""traceforge's layers: each package imports only from the layers below it, and no module
imports itself back through others (docs/architecture.md draws the layers).

Every import counts, at the top of a module or inside a function, so a lazy import cannot
hide an upward dependency. The two planted tests show the checks failing.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import traceforge

ROOT = Path(traceforge.__file__).parent

# Highest first. A layer may import any layer below it; a tuple holds siblings that may not
# import each other. ``traceforge/*.py`` at the top (the package face, ``api``, ``errors``)
# are outside the layers: every layer may import ``errors`` and ``_version``, none the face
# (``api`` is the layer the face re-exports).
LAYERS: tuple[str | tuple[str, ...], ...] = (
    "cli",
    "report",
    "api",
    "annotator",
    "plan",
    "rewrite",
    "emit",
    ("perfetto", "analyses"),
    "columns",
    "io",
    "util",
    "_native",
)
BASE_MODULES = {"traceforge.errors", "traceforge._version"}  # below every layer
MAX_TOP_LEVEL_MODULES = 6


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in ROOT.rglob("*.py")}


def import_graph() -> dict[str, set[str]]:
    """Module -> the traceforge modules it imports (a package's ``__init__`` by its name)."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                edges.update(a.name for a in node.names if a.name.split(".")[0] == "traceforge")
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                if target.split(".")[0] != "traceforge":
                    continue
                for alias in node.names:  # ``from pkg import submodule`` imports the submodule
                    edges.add(f"{target}.{alias.name}" if f"{target}.{alias.name}" in modules else target)
        graph[name] = {e for e in edges if e != name}
    return graph


def _layer_of(module: str) -> tuple[int, str] | None:
    """(rank, name) of a module's layer: rank 0 is the highest; None outside the layers."""
    parts = module.split(".")
    if len(parts) < 2:
        return None
    for rank, layer in enumerate(LAYERS):
        if parts[1] in (layer if isinstance(layer, tuple) else (layer,)):
            return rank, parts[1]
    return None


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    """Every import that goes up a layer, across siblings, or into the package face."""
    found = []
    for module, targets in sorted(graph.items()):
        mine = _layer_of(module)
        for target in sorted(targets):
            theirs = _layer_of(target)
            if mine is None:
                continue
            if theirs is None:
                if target not in BASE_MODULES:
                    found.append(f"{module} imports {target} (the package face)")
            elif theirs[0] < mine[0] or (theirs[0] == mine[0] and theirs[1] != mine[1]):
                found.append(f"{module} imports {target} (layer {theirs[1]} is not below {mine[1]})")
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles: strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_every_import_points_down_the_layers():
    assert layer_violations(import_graph()) == []


def test_no_module_imports_itself_back():
    assert cycles(import_graph()) == []


def test_a_handful_of_modules_at_the_top():
    top = sorted(p.name for p in ROOT.glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL_MODULES, top


def test_every_package_is_in_a_layer():
    packages = {p.parent.name for p in ROOT.glob("*/__init__.py")} - {"data"}
    named = {n for layer in LAYERS for n in (layer if isinstance(layer, tuple) else (layer,))}
    assert packages <= named, packages - named


def test_a_planted_upward_import_is_found():
    graph = import_graph()
    graph["traceforge.io.read.codec"].add("traceforge.cli.main")
    graph["traceforge.analyses.cross_trace.stats"].add("traceforge.perfetto.rules")  # a sibling
    graph["traceforge.util.search"].add("traceforge")
    assert layer_violations(graph) == [
        "traceforge.analyses.cross_trace.stats imports traceforge.perfetto.rules (layer perfetto is not below analyses)",
        "traceforge.io.read.codec imports traceforge.cli.main (layer cli is not below io)",
        "traceforge.util.search imports traceforge (the package face)",
    ]


def test_a_planted_cycle_is_found():
    graph = import_graph()
    graph["traceforge.util.search"].add("traceforge.util.progress")
    graph["traceforge.util.progress"].add("traceforge.util.search")
    assert ["traceforge.util.progress", "traceforge.util.search"] in cycles(graph)


@pytest.mark.parametrize("module", ["traceforge.columns.scan", "traceforge.annotator.run"])
def test_the_graph_sees_lazy_imports(module):
    assert import_graph()[module], module


# Imports that skip a layer although the layers allow them: the command line reaches the
# analyses only through the API (``api.results`` and the ``Trace``/path functions).
SKIPS_FORBIDDEN = {"cli": ("analyses",)}
MAX_MODULES_PER_FOLDER = 15
# Calls by which a module reads or writes a file itself; the analyses take loaded data.
FILE_CALLS = {"open", "read_text", "read_bytes", "write_text", "write_bytes", "fdopen", "mkstemp"}


def skipped_layers(graph: dict[str, set[str]]) -> list[str]:
    """Every import from a package to a layer it must reach through another (``SKIPS_FORBIDDEN``)."""
    found = []
    for module, targets in sorted(graph.items()):
        parts = module.split(".")
        forbidden = SKIPS_FORBIDDEN.get(parts[1] if len(parts) > 1 else "", ())
        found += [f"{module} imports {t}" for t in sorted(targets) if t.split(".")[1:2] and t.split(".")[1] in forbidden]
    return found


def file_calls(source: str) -> list[str]:
    """The names of the file-opening calls in ``source`` (``open(...)``, ``path.read_text()``...)."""
    calls = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            if name in FILE_CALLS:
                calls.append(name)
    return calls


def test_the_command_line_reaches_the_analyses_through_the_api():
    assert skipped_layers(import_graph()) == []


def test_a_planted_skip_is_found():
    graph = import_graph()
    graph["traceforge.cli.commands.tables.stats"].add("traceforge.analyses.cross_trace.stats")
    assert skipped_layers(graph) == ["traceforge.cli.commands.tables.stats imports traceforge.analyses.cross_trace.stats"]


def test_no_analysis_opens_a_file():
    opening = {str(p.relative_to(ROOT)): file_calls(p.read_text()) for p in (ROOT / "analyses").rglob("*.py")}
    assert {k: v for k, v in opening.items() if v} == {}
    assert sorted(file_calls("with open(p) as f: pass\nPath(p).read_text()\n")) == ["open", "read_text"]


def test_no_folder_is_crowded():
    folders = {p.parent for p in ROOT.rglob("*.py")}
    crowded = {str(d.relative_to(ROOT)): n for d in folders
               if (n := sum(1 for f in d.glob("*.py") if f.name != "__init__.py")) > MAX_MODULES_PER_FOLDER}
    assert crowded == {}
