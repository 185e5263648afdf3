"""The package's imports flow one way, from values and rules up to the public facades."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "sparkqueue"

# Lower layers never import higher ones; a module may import its own layer.
LAYERS = [
    {"errors", "limits", "clock", "model", "attributes", "testing", "rules"},
    {"store"},
    {"engine"},
    {"services", "datasource"},
    {"queue", "broker"},
    {"__init__", "session", "bench", "demo", "notebook", "where", "cli", "endpoint", "console"},
]


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(name: str) -> bool:
    relative = Path(*name.split(".")[1:])
    return (PACKAGE / relative).with_suffix(".py").exists() or (PACKAGE / relative).is_dir()


def imports(path: Path) -> set[str]:
    """The sparkqueue modules `path` imports (a submodule when `from package import module`)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            if not target.startswith("sparkqueue"):
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.add(sub if is_module(sub) else target)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("sparkqueue"))
    return found - {name}


def graph() -> dict[str, set[str]]:
    return {module_name(p): imports(p) for p in PACKAGE.rglob("*.py")}


def layer(module: str) -> int:
    parts = module.split(".")
    key = parts[1] if len(parts) > 1 else "__init__"
    return next(i for i, names in enumerate(LAYERS) if key in names)


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every import cycle, each reported once from the first module that closes it."""
    found: list[list[str]] = []
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> None:
        if node in path:
            found.append([*path[path.index(node) :], node])
            return
        if node in done:
            return
        for target in sorted(edges.get(node, ())):
            visit(target, [*path, node])
        done.add(node)

    for start in sorted(edges):
        visit(start, [])
    return found


def test_there_is_no_import_cycle():
    assert cycles(graph()) == []


def test_the_cycle_finder_finds_one():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]


def test_imports_never_reach_a_higher_layer():
    upward = [
        f"{source} -> {target}"
        for source, targets in graph().items()
        for target in targets
        if target != "sparkqueue" and layer(target) > layer(source)
    ]
    assert upward == []


def test_nothing_below_the_facades_takes_a_broker():
    offenders = [
        str(path.relative_to(PACKAGE))
        for layer_dir in ("rules", "store", "engine", "services")
        for path in (PACKAGE / layer_dir).rglob("*.py")
        if any(
            (isinstance(node, ast.Name) and node.id == "Broker")
            or (isinstance(node, ast.alias) and node.name.endswith("Broker"))
            or (isinstance(node, ast.Constant) and node.value == "Broker")
            for node in ast.walk(ast.parse(path.read_text()))
        )
    ]
    assert offenders == []


def test_no_module_is_over_400_lines():
    long = {
        str(p.relative_to(PACKAGE)): n
        for p in PACKAGE.rglob("*.py")
        if (n := len(p.read_text().splitlines())) > 400
    }
    assert long == {}
