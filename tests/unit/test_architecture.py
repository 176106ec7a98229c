"""The layering of docs/architecture.md, enforced: imports only go down, modules stay small.

Every ``import`` of the package counts, at module level or inside a function (a lazy
import is still a dependency).  A module may import from a lower layer or from its own
package; within a package the module-level imports must not form a cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

#: Bottom to top; units on one line share a layer and must not import each other.
LAYERS: list[set[str]] = [
    {"zarr_vectors.errors", "zarr_vectors.config"},
    {"zarr_vectors.encoding"},
    {"zarr_vectors.format"},
    {"zarr_vectors.store"},
    {"zarr_vectors.execution"},
    {"zarr_vectors.reconcile"},
    {"zarr_vectors.write", "zarr_vectors.read", "zarr_vectors.links_api"},
    {"zarr_vectors.pyramid", "zarr_vectors.core"},
    {"zarr_vectors.sharding", "zarr_vectors.validation"},
    {"zarr_vectors.io", "zarr_vectors.conformance", "zarr_vectors.plot"},
    {"zarr_vectors"},  # the package's public API
    {"pipeline"},
]
MAX_LINES = 800


def _unit(module: str) -> str:
    """The layering unit a module belongs to: its first-level package or top module."""
    parts = module.split(".")
    if parts[0] == "pipeline":
        return "pipeline"
    return ".".join(parts[:2]) if len(parts) > 1 else parts[0]


def _rank(unit: str) -> int:
    for rank, units in enumerate(LAYERS):
        if unit in units:
            return rank
    raise AssertionError(f"{unit} is in no layer of LAYERS: place it (and document it in docs/architecture.md)")


def _modules() -> dict[str, Path]:
    out = {}
    for root in ("zarr_vectors", "pipeline"):
        for path in sorted((REPO / root).rglob("*.py")):
            rel = path.relative_to(REPO).with_suffix("")
            parts = list(rel.parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


MODULES = _modules()


def _imports(module: str, path: Path, *, top_level_only: bool = False) -> set[str]:
    """Project modules ``module`` imports (``from a import b`` counts ``a.b`` when that is a module)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            # ``from a import b`` imports module ``a.b`` when there is one, else names from ``a``
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        else:
            continue
        found |= {n for n in names if n in MODULES and n != module}
    return found


def test_every_module_is_placed_in_a_layer():
    for module in MODULES:
        _rank(_unit(module))


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_only_go_down(module):
    unit = _unit(module)
    rank = _rank(unit)
    upward = sorted(
        target for target in _imports(module, MODULES[module])
        if _unit(target) != unit and _rank(_unit(target)) >= rank
    )
    assert not upward, f"{module} (layer {rank}, {unit}) imports {upward}, which are not below it"


def test_no_import_cycles_inside_a_package():
    graph = {m: {t for t in _imports(m, p, top_level_only=True) if _unit(t) == _unit(m)} for m, p in MODULES.items()}
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycle = trail[trail.index(nxt):] + [nxt] if nxt in trail else [node, nxt]
                raise AssertionError(f"import cycle: {' -> '.join(cycle)}")
            if nxt not in state:
                visit(nxt, trail + [nxt])
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])


@pytest.mark.parametrize("module", sorted(MODULES))
def test_modules_stay_small(module):
    lines = len(MODULES[module].read_text().splitlines())
    assert lines <= MAX_LINES, f"{module} has {lines} lines (at most {MAX_LINES}): split it by job"


def test_the_checks_can_fail():
    """The import scan sees what it must: a known downward import and a known lazy import."""
    assert "zarr_vectors.store.backend" in _imports("zarr_vectors.store.grid", MODULES["zarr_vectors.store.grid"])
    assert _rank("zarr_vectors.format") < _rank("zarr_vectors.store") < _rank("pipeline")
    assert any(
        _unit(t) == "zarr_vectors" for t in _imports("pipeline.jobs", MODULES["pipeline.jobs"])
    ), "pipeline.jobs uses the public API (import zarr_vectors as zv)"
