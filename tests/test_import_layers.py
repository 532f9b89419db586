"""The import contract: the package's modules form layers, and every import points down them (or stays level).

Read from the source (no import of the package, no dependency): every `import` and `from ... import` anywhere in a
module, inside functions too, relative ones resolved; `importlib.import_module("tabrelease....")` with a literal
name counts as an import. Imports under `if TYPE_CHECKING:` are annotations only and are ignored. Names imported
from the top-level package (`from tabrelease import builtin_table`) are resolved through its lazy export table
(`_EXPORTS` in tabrelease/__init__.py) to the module that defines them.

The layers (docs: /work/shared/design/layers.md has the picture) are LAYERS below: a module may import its own
layer or lower. Every module must be placed: a new top-level module (or package) fails this test until it is
given a layer; a new module inside a listed package takes that package's layer.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "src" / "tabrelease"
PACKAGE = "tabrelease"

VALUES, DATA, MATHEMATICS, MECHANISMS, ESTIMATION, PIPELINE, WORKFLOW, PRESENTATION, EXPERIMENTS, CLI = range(10)

# module (or package: its submodules too) -> layer
LAYERS = {
    # 0 values: records and rules that import nothing above them.
    "tabrelease": VALUES,  # only __version__ and a lazy export table (resolved per name, see the docstring)
    "tabrelease.errors": VALUES,
    "tabrelease._hooks": VALUES,  # the modules above that the package __init__ names for the hooks below
    "tabrelease.privacy": VALUES,
    # The loss conversions are pure mathematics that import nothing of the package; the privacy value reads its
    # group privacy and zCDP rho from them, so they sit beside it (the design's table has them with mathematics).
    "tabrelease.accounting": VALUES,
    "tabrelease.measurements": VALUES,
    "tabrelease.postprocessing": VALUES,  # names of estimators and roundings, the Estimate record
    "tabrelease.schemas": VALUES,
    "tabrelease.spec": VALUES,
    "tabrelease._files": VALUES,
    "tabrelease._limits": VALUES,
    "tabrelease._numbers": VALUES,
    "tabrelease._cpus": VALUES,
    "tabrelease._signals": VALUES,
    "tabrelease._highs": VALUES,
    "tabrelease._optional": VALUES,
    "tabrelease._display": VALUES,  # the renderer registry records show themselves through
    # 1 data
    "tabrelease.tables": DATA,
    # 2 mathematics
    "tabrelease.bases": MATHEMATICS,
    "tabrelease.bounds": MATHEMATICS,
    "tabrelease.planning": MATHEMATICS,
    "tabrelease._minimise": MATHEMATICS,  # the planner's L-BFGS (numpy alone: scipy.optimize's import is slow)
    "tabrelease._sparse": MATHEMATICS,  # sparse matrices over numpy alone (any scipy import loads its array-API layer)
    "tabrelease.junction": MATHEMATICS,
    "tabrelease.models": MATHEMATICS,
    "tabrelease.loglinear": MATHEMATICS,
    # The relaxed dataset's mathematics (its fit by L-BFGS): RAP's adaptive measurement selects margins with it,
    # and the relaxed-projection estimator fits with it, so it sits below both (the design's table has it with
    # estimation).
    "tabrelease.relaxed": MATHEMATICS,
    # 3 mechanisms
    "tabrelease.mechanisms": MECHANISMS,
    "tabrelease.noise": MECHANISMS,
    # 4 estimation
    "tabrelease.estimate": ESTIMATION,
    "tabrelease.rounding": ESTIMATION,
    "tabrelease.consistency": ESTIMATION,
    "tabrelease.copula": ESTIMATION,
    # 5 pipeline
    "tabrelease.planner": PIPELINE,
    "tabrelease.pipeline": PIPELINE,
    "tabrelease.evaluation": PIPELINE,
    "tabrelease.disclosure": PIPELINE,
    "tabrelease.forecast": PIPELINE,
    "tabrelease.error_model": PIPELINE,
    # 6 workflow
    "tabrelease.workflow": WORKFLOW,
    "tabrelease.ledger": WORKFLOW,
    "tabrelease.bundle": WORKFLOW,  # the bundle transaction (staging, atomic publish, clean-up)
    # 7 presentation
    "tabrelease.reports": PRESENTATION,
    "tabrelease.figures": PRESENTATION,
    "tabrelease.charts": PRESENTATION,  # the SVG charts every figure is drawn with
    "tabrelease.notebook": PRESENTATION,
    "tabrelease.workbook": PRESENTATION,
    # 8 experiments
    "tabrelease.sweeps": EXPERIMENTS,
    "tabrelease.frontier": EXPERIMENTS,
    "tabrelease.paper": EXPERIMENTS,
    "tabrelease.batch": EXPERIMENTS,
    "tabrelease.testing": EXPERIMENTS,  # the mechanism contract checks (they plan, measure and release)
    # A model tested on a public bundle: a simulation study through the pipeline (the sweeps' worker pool).
    "tabrelease.inference": EXPERIMENTS,
    # 9 command line
    "tabrelease.cli": CLI,
    "tabrelease._entry": CLI,  # the console script's first step: an interrupt while `cli` is imported is one line
    "tabrelease.__main__": CLI,
}

# Imports forbidden although they point down: estimators read measurements and a plan's fields, never a mechanism
# (a plan names its estimator; tabrelease.planner, above both, resolves it).
FORBIDDEN = {
    ("tabrelease.estimate", "tabrelease.mechanisms"),
    ("tabrelease.rounding", "tabrelease.mechanisms"),
    ("tabrelease.consistency", "tabrelease.mechanisms"),
    ("tabrelease.copula", "tabrelease.mechanisms"),
}

# The upward imports allowed, both by name (importlib) on first use, where the presentation layer registers itself
# onto what is below it: `_display.html_for` loads the notebook renderers (a record shown in Jupyter before anything
# imported tabrelease.notebook), `bundle.report_writer` the report writer (publish_release called by a program that
# never imported tabrelease.reports). See the two modules' docstrings.
DYNAMIC_HOOKS: set[tuple[str, str]] = set()  # none: the package __init__ wires the hooks (_hooks)

# Upward edges in modules being rewritten elsewhere, kept until fixed there: each must still be present (remove
# the entry when it is fixed). Empty: none is known.
KNOWN_EXCEPTIONS: set[tuple[str, str]] = set()


def module_files() -> dict[str, tuple[Path, bool]]:
    """{dotted module name: (file, is a package's __init__)} for every module under src/tabrelease."""
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        out[".".join(parts)] = (path, is_package)
    return out


MODULES = module_files()


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _nodes(tree: ast.AST):
    """Every node, except the bodies of `if TYPE_CHECKING:` blocks (their `else` is kept)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.If) and _is_type_checking(node):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))


def _owner(name: str) -> str | None:
    """The package module a dotted name lives in (a module, or the module an attribute belongs to)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _root_exports() -> dict[str, str]:
    """{name: module} of the top-level package's lazy exports (its `_EXPORTS` literal)."""
    tree = ast.parse(MODULES[PACKAGE][0].read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "_EXPORTS" for t in node.targets):
            exports = ast.literal_eval(node.value)
            return {name: f"{PACKAGE}.{module}" for module, names in exports.items() for name in names}
    return {}


EXPORTS = _root_exports()


def imports_of(module: str) -> dict[str, tuple[int, str]]:
    """{imported package module: (line, how)} for one module (how: "import" or "import_module")."""
    path, is_package = MODULES[module]
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module if is_package else module.rpartition(".")[0]
    found: dict[str, tuple[int, str]] = {}

    def add(name: str, line: int, how: str) -> None:
        if name != PACKAGE and not name.startswith(PACKAGE + "."):
            return
        target = _owner(name)
        if target is not None and target != module:
            found.setdefault(target, (line, how))

    for node in _nodes(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, node.lineno, "import")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                if submodule in MODULES:
                    add(submodule, node.lineno, "import")
                elif source == PACKAGE and alias.name in EXPORTS:
                    add(EXPORTS[alias.name], node.lineno, "import")
                else:
                    add(source, node.lineno, "import")
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name == "import_module" and node.args and isinstance(node.args[0], ast.Constant) \
                    and isinstance(node.args[0].value, str):
                literal = node.args[0].value
                if literal.startswith(".") and len(node.args) > 1:
                    continue  # relative to a computed package: not a literal target
                add(literal, node.lineno, "import_module")
    return found


GRAPH = {module: imports_of(module) for module in MODULES}


def layer_of(module: str) -> int | None:
    name = module
    while name:
        if name in LAYERS:
            return LAYERS[name]
        name = name.rpartition(".")[0]
    return None


def upward_edges(graph=GRAPH) -> dict[tuple[str, str], str]:
    """{(importer, imported): description} of every import that points up a layer, or is forbidden."""
    out = {}
    for module, targets in graph.items():
        for target, (line, how) in targets.items():
            if (module, target) in DYNAMIC_HOOKS:
                continue
            low, high = layer_of(module), layer_of(target)
            if low is None or high is None:
                continue  # reported by test_every_module_has_a_layer
            forbidden = any(module.startswith(a) and (target == b or target.startswith(b + "."))
                            for a, b in FORBIDDEN)
            if high > low or forbidden:
                why = "forbidden" if forbidden and high <= low else f"layer {low} imports layer {high}"
                out[(module, target)] = f"{module}:{line} -> {target} ({how}; {why})"
    return out


def find_cycle(graph) -> list[str] | None:
    """One import cycle of the graph (a list of modules, the first repeated at the end), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                cycle = visit(nxt)
                if cycle:
                    return cycle
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state:
            cycle = visit(start)
            if cycle:
                return cycle
    return None


def test_every_module_has_a_layer():
    missing = sorted(m for m in MODULES if layer_of(m) is None)
    assert not missing, f"give these modules a layer in LAYERS: {missing}"
    stale = sorted(name for name in LAYERS if name not in MODULES and name != "tabrelease.spec")
    assert not stale, f"LAYERS names modules that do not exist: {stale}"


def test_the_import_graph_has_no_cycle():
    graph = {m: {t for t in targets if (m, t) not in DYNAMIC_HOOKS} for m, targets in GRAPH.items()}
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_every_import_points_down_the_layers():
    found = upward_edges()
    unexpected = sorted(why for edge, why in found.items() if edge not in KNOWN_EXCEPTIONS)
    assert not unexpected, "imports that point up the layers:\n" + "\n".join(unexpected)
    fixed = sorted(f"{a} -> {b}" for a, b in KNOWN_EXCEPTIONS if (a, b) not in found)
    assert not fixed, f"these known exceptions are fixed: remove them from KNOWN_EXCEPTIONS: {fixed}"


def test_the_registration_hooks_are_the_only_dynamic_imports_up():
    dynamic = sorted((m, t) for m, targets in GRAPH.items() for t, (_, how) in targets.items()
                     if how == "import_module" and layer_of(t) > layer_of(m))
    assert dynamic == sorted(DYNAMIC_HOOKS)


def test_the_contract_catches_an_upward_import():
    """The checks themselves: an import of the presentation layer from a record, and a cycle, are found."""
    graph = {m: dict(t) for m, t in GRAPH.items()}
    graph["tabrelease.pipeline"]["tabrelease.notebook"] = (1, "import")
    assert ("tabrelease.pipeline", "tabrelease.notebook") in upward_edges(graph)
    cyclic = {m: set(t) for m, t in graph.items()}
    cyclic["tabrelease.notebook"] = cyclic.get("tabrelease.notebook", set()) | {"tabrelease.pipeline"}
    assert find_cycle(cyclic) is not None


@pytest.mark.parametrize("source, expected", [
    ("from .notebook import release_html\n", {"tabrelease.notebook"}),
    ("def f():\n    from . import reports\n", {"tabrelease.reports"}),
    ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .notebook import x\n", set()),
    ("import importlib\nimportlib.import_module('tabrelease.notebook')\n", {"tabrelease.notebook"}),
    ("from . import builtin_table\n", {"tabrelease.tables"}),
])
def test_imports_are_read_from_anywhere_in_a_module(tmp_path, source, expected, monkeypatch):
    path = tmp_path / "probe.py"
    path.write_text(source, encoding="utf-8")
    monkeypatch.setitem(MODULES, "tabrelease.probe", (path, False))
    assert set(imports_of("tabrelease.probe")) == expected
