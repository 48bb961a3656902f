"""gclab's modules import one way: no import circle between modules (docs/design.md,
"Architecture").

The graph counts every import statement of gclab's own modules, those inside functions
and under ``TYPE_CHECKING`` too: a circle hidden in a function still ties two modules
into one. Without circles any import order works, so no test depends on which module a
process happens to import first.
"""

from __future__ import annotations

import ast
from pathlib import Path

import gclab

PACKAGE = Path(gclab.__file__).parent


def module_names() -> dict[str, Path]:
    """``gclab.coding.linear`` -> its file, for every module of the package."""
    names = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def import_graph(names: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the gclab modules it imports (``from pkg import mod`` names ``pkg.mod``)."""
    graph: dict[str, set[str]] = {}
    for name, path in names.items():
        found = graph.setdefault(name, set())
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names if alias.name in names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    found.update({sub} & names.keys() or {node.module} & names.keys())
        found.discard(name)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while component[-1:] != [node]:
                component.append(stack.pop())
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_module_imports_one_that_imports_it_back():
    assert circles(import_graph(module_names())) == []


def test_the_graph_sees_imports_in_functions_and_type_checking_blocks(tmp_path):
    # the check itself: a circle through a function-level and a TYPE_CHECKING import
    (tmp_path / "a.py").write_text("def f():\n    from pkg import b\n")
    (tmp_path / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import f\n"
    )
    (tmp_path / "c.py").write_text("import pkg.a\n")
    names = {f"pkg.{m}": tmp_path / f"{m}.py" for m in "abc"}
    graph = import_graph(names)
    assert graph == {"pkg.a": {"pkg.b"}, "pkg.b": {"pkg.a"}, "pkg.c": {"pkg.a"}}
    assert circles(graph) == [["pkg.a", "pkg.b"]]
