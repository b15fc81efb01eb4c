"""The shape of ``parser/``'s imports, read with ``ast`` (nothing is imported): no cycle between
its sub-packages, and no import of a parser module placed inside a function (the usual way a cycle
hides). Layers, lowest first: structs, config, runtime <- data, eval <- models, constraints,
objectives, view <- tagger <- inference <- train <- cli."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "parser"

# Imports that may sit inside a function: optional heavy dependencies outside the project, loaded
# only by the code that needs them. Never a parser module.
LAZY_ALLOWED = {
    "matplotlib",  # plots, an optional extra ([plot])
    "torch.utils.tensorboard",  # imports tensorboard (slow), only when a run writes events
    "torch.nn.parallel",  # DistributedDataParallel, only under torchrun
    "udtools",  # the official scorer and validator (regex, udapi): not a prediction's start-up cost
}

# The intended order (a package may import only from packages before it).
LAYERS = [
    {"parser.structs", "parser.config", "parser.runtime"},
    {"parser.data", "parser.eval"},
    {"parser.models", "parser.constraints", "parser.objectives", "parser.view"},
    {"parser.tagger", "parser.tokenize"},
    {"parser.inference"},
    {"parser.train"},
    {"parser.cli", "parser.pipeline", "parser.serve"},
]


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        return [".".join(base + ([node.module] if node.module else []))]
    return [node.module or ""]


def _imports() -> list[tuple[str, str, bool, str]]:
    """``(module, target, inside_function, "file:line")`` for every import under parser/."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module_name(path)
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        inner = {
            id(node)
            for function in ast.walk(tree)
            if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            for node in ast.walk(function)
            if isinstance(node, (ast.Import, ast.ImportFrom))
        }
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in _targets(node, module, path.name == "__init__.py"):
                    where = f"{path.relative_to(PACKAGE.parent)}:{node.lineno}"
                    found.append((module, target, id(node) in inner, where))
    return found


def _package(module: str) -> str:
    return ".".join(module.split(".")[:2])


def _edges() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {}
    for module, target, _, _ in _imports():
        if target.startswith("parser.") and _package(module) != _package(target):
            edges.setdefault(_package(module), set()).add(_package(target))
    return edges


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one package (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
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

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_the_checker_sees_a_cycle_and_a_chain():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": {"c"}}) == []


def test_the_checker_resolves_relative_imports():
    node = ast.parse("from ..data import batch").body[0]
    assert _targets(node, "parser.train.loop", False) == ["parser.data"]
    node = ast.parse("from .loop import Trainer").body[0]
    assert _targets(node, "parser.train", True) == ["parser.train.loop"]


def test_no_cycle_between_the_sub_packages_of_parser():
    edges = _edges()
    assert "parser.structs" in edges or edges  # the walk found imports at all
    assert _cycles(edges) == []


def test_every_arrow_points_down_the_layers():
    rank = {package: level for level, group in enumerate(LAYERS) for package in group}
    upward = [
        f"{where}: {module} imports {target}"
        for module, target, _, where in _imports()
        if target.startswith("parser.") and _package(module) != _package(target)
        and _package(module) in rank and _package(target) in rank
        and rank[_package(target)] > rank[_package(module)]
    ]
    assert upward == []


def test_every_sub_package_has_a_layer():
    packages = {_package(module) for module, *_ in _imports() if module.startswith("parser.")}
    assert packages - {p for group in LAYERS for p in group} == set()


def _local_parser_imports(*, in_structs: bool) -> list[str]:
    return [f"{where}: {target}" for module, target, inside, where in _imports()
            if inside and (target == "parser" or target.startswith("parser."))
            and (_package(module) == "parser.structs") == in_structs]


def test_no_parser_import_inside_a_function():
    assert _local_parser_imports(in_structs=False) == []


def test_no_parser_import_inside_a_function_of_structs():
    assert _local_parser_imports(in_structs=True) == []


def test_only_allowed_heavy_dependencies_are_imported_lazily():
    lazy = {(target, where) for _, target, inside, where in _imports()
            if inside and not target.startswith("parser")}
    unexpected = sorted(f"{where}: {target}" for target, where in lazy
                        if not any(target == a or target.startswith(a + ".") for a in LAZY_ALLOWED))
    assert unexpected == []


@pytest.mark.parametrize("module", ["parser.train", "parser.eval", "parser.predict", "parser.tagger"])
def test_no_python_dash_m_entry_outside_cli(module):
    """``python -m parser.cli.<name>`` and the console scripts are the entry points."""
    path = PACKAGE.parent / Path(*module.split("."))
    assert not (path / "__main__.py").exists() and not path.with_suffix(".py").exists()
