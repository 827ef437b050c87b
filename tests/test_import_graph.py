"""The package's modules form no import cycle: no two modules import each other, directly or through others.

Imports are read from the source (every ``import`` / ``from ... import`` statement, including those inside
functions), so a cycle hidden behind a function-level import counts too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import lsnpc

PACKAGE_ROOT = Path(lsnpc.__file__).parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE_ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def import_graph() -> dict[str, set[str]]:
    """module -> the lsnpc modules it imports (a ``from pkg import name`` counts pkg.name when that is a module)."""
    modules = {_module_name(p): p for p in PACKAGE_ROOT.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(name, path.name == "__init__.py", node)
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            for target in targets:
                while target and target not in modules:  # lsnpc.x.y.attr -> lsnpc.x.y
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph[name].add(target)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
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

    for v in graph:
        if v not in index:
            visit(v)
    return found


def _is_parent_package(a: str, b: str) -> bool:
    return b.startswith(a + ".") or a.startswith(b + ".")


def test_no_import_cycles() -> None:
    graph = import_graph()
    # a package's __init__ re-exporting its own submodules is not a cycle between modules: drop the
    # edges from a package to its children (the children may import siblings through the package)
    acyclic_view = {m: {t for t in ts if not (t.startswith(m + ".") )} for m, ts in graph.items()}
    assert _cycles(acyclic_view) == []


def test_the_checker_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]


def test_the_corrector_modules_import_one_way() -> None:
    graph = import_graph()
    assert "lsnpc.corrector.estimator" not in set().union(*(graph[m] for m in graph if m != "lsnpc.corrector"))
    assert "lsnpc.corrector.inference" not in graph["lsnpc.corrector.model"]
