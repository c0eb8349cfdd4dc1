"""Imports in ``codegen`` go one way: no cycles, nothing reaching back up (issue #16).

Every module under ``codegen/`` is parsed with ``ast`` (nothing is imported); every import
statement counts, at module level or inside a function, relative or absolute. Importing
``codegen.a.b`` runs ``codegen/a/__init__.py`` first, so an import of a module also counts as
an import of each package above it that the importer is not itself inside.

Two rules:

- **No cycles**, between modules or between packages (a top-level module such as
  ``codegen/board.py`` is a package of its own here).
- **Stages go one way.** ARCHITECTURE.md's picture: frontend ─► ir.Graph ─► quant ─►
  train ─► backends ─► schedule ─► memplan ─► render ─► build ─► run. A later stage may
  import an earlier one (it consumes its output), never the reverse. ``RANKS`` encodes that
  order; a module may import modules of its own rank or lower.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "codegen"

TOP = 100
# Package (or top-level module) of codegen -> stage rank. Lower ranks are earlier stages; a
# module may import only from its own rank or lower ones.
RANKS = {
    # The floor: shared by every stage, importing nothing of the stages.
    "codegen": 0,  # codegen/__init__.py: __version__ only
    "errors": 0,
    "resources": 0,
    "safe_yaml": 0,
    "progress": 0,  # the terminal progress bar
    "board": 0,  # board files are data (read with safe_yaml), like specs
    "models": 0,  # the demo model and data files
    # ir.Graph is what every stage hands on, so it sits beneath them all.
    "ir": 1,
    "validate": 1,  # checks of a Graph
    "data": 1,  # user data brought to a Graph's input
    # The importers/writers, and golden: the NumPy oracle of every graph (quant, train and
    # backends compute their numbers with it).
    "frontend": 2,
    "golden": 2,
    "quant": 3,
    "train": 4,
    "stream": 4,  # the stream pass: fuses frozen chains of a (training) graph before lowering
    "blocks": 4,  # the blocked-update pass: splits weight gradients of a training graph
    "partial": 4,  # the partial-weight pass: trained channels in RAM, frozen ones in flash
    "pool_grads": 4,  # the pooled-backward pass: a classifier head's backward fused
    "summary": 4,  # layer and MAC counts of a (training) graph
    "backends": 5,
    "schedule": 6,
    "memplan": 7,
    "render": 8,
    "model_store": 8,  # the model file a project carries (render writes it, serial reads it)
    # build
    "toolchain": 9,
    "targets": 9,
    "run": 10,
    "serial": 11,
    # The top layer: the commands and the pipeline that drives every stage.
    "pipeline": TOP,
    "cli": TOP,
    "__main__": TOP,
    "fit": TOP,
    "demo": TOP,
    "report": TOP,
    "search": TOP,  # drives fit and the planner, like fit
    "fleet": TOP,  # drives fit, the engines and the serial client under Flower
}

# Imports that go against the stage order on purpose, each with its reason. Keep it short.
ALLOWED_BACK_EDGES: dict[tuple[str, str], str] = {}

# Known, to fix (issue #16): cycles and back edges not yet removed. Empty when done; the
# tests fail when one of them disappears, so that the list only shrinks.
#
# (Fixed: render <-> targets. The board build records, compiler, board_cflags/ldflags/libs,
# runtime_root/parts, live in render/board_build.py and the linker script in
# render/linker.py; targets builds with them and re-exports them, and only targets imports
# render. serial -> pipeline: the first stages, load and quantize, live with the model file
# in model_store, which pull's graph resolution and fit's prepare_model use too.)
KNOWN_CYCLES: list[set[str]] = []
KNOWN_BACK_EDGES: set[tuple[str, str]] = set()


def _modules() -> dict[str, tuple[Path, bool]]:
    modules = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        modules[".".join(parts)] = (path, is_package)
    return modules


MODULES = _modules()


def _owner(name: str) -> str | None:
    """The codegen module that ``name`` (a module or a name inside one) lives in."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _targets(module: str, is_package: bool, node: ast.Import | ast.ImportFrom) -> list[str]:
    names = []
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        if node.level:
            base = module.split(".")
            if not is_package:
                base.pop()
            base = base[: len(base) - (node.level - 1)]
            stem = ".".join(base + ([node.module] if node.module else []))
        else:
            stem = node.module or ""
        names = [f"{stem}.{alias.name}" for alias in node.names]
    found = []
    for name in names:
        owner = _owner(name)
        if owner is None or not owner.startswith("codegen"):
            continue
        found.append(owner)
        # Importing a.b.c runs a/__init__ and a/b/__init__ first (those the importer is
        # not itself inside, which are already running).
        parts = owner.split(".")
        for depth in range(2, len(parts)):
            package = ".".join(parts[:depth])
            if not (module == package or module.startswith(package + ".")):
                found.append(package)
    return found


def _graph() -> dict[str, dict[str, int]]:
    """module -> {imported module: line of the first such import}."""
    graph: dict[str, dict[str, int]] = defaultdict(dict)
    for module, (path, is_package) in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in _targets(module, is_package, node):
                    if target != module:
                        graph[module].setdefault(target, node.lineno)
    return graph


GRAPH = _graph()


def _group(module: str) -> str:
    """The package of a module (a top-level module is its own)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "codegen"


def _cycles(edges: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components with more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(edges.get(node, ())):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = set()
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.add(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(component)

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def _describe(component: set[str], edges: dict[str, set[str]]) -> str:
    inner = sorted(f"{a} -> {b}" for a in component for b in edges.get(a, ()) if b in component)
    return "{" + ", ".join(sorted(component)) + "}: " + "; ".join(inner)


def _module_edges() -> dict[str, set[str]]:
    return {module: set(targets) for module, targets in GRAPH.items()}


def _package_edges() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = defaultdict(set)
    for module, targets in GRAPH.items():
        for target in targets:
            a, b = _group(module), _group(target)
            # codegen/__init__.py holds only __version__: every package may read it.
            if a != b and b != "codegen":
                edges[a].add(b)
    return edges


def _frozen(cycles: list[set[str]]) -> list[frozenset[str]]:
    return sorted((frozenset(c) for c in cycles), key=sorted)


def test_every_group_has_a_rank():
    groups = {_group(module) for module in MODULES}
    assert sorted(groups - RANKS.keys()) == [], "give these packages a rank in RANKS"
    assert sorted(RANKS.keys() - groups) == [], "RANKS names packages that do not exist"


def test_imports_resolve():
    # The walk sees the imports: a few that must be there.
    assert "codegen.ir" in GRAPH["codegen.schedule.problem"]  # from ..ir import ...
    ref_args = GRAPH["codegen.backends.ref_args"]
    assert "codegen.golden.numerics" in ref_args  # from ..golden import numerics as nx
    assert "codegen.golden" in ref_args  # the package's __init__ runs first
    assert "codegen.golden.training" in GRAPH["codegen.backends.params"]  # inside a function
    assert "codegen.errors" in GRAPH["codegen.board"]


def test_no_module_cycles():
    edges = _module_edges()
    cycles = _cycles(edges)
    known = [frozenset(c) for c in KNOWN_CYCLES]
    new = [c for c in cycles if frozenset(c) not in known]
    assert not new, "import cycles between modules:\n" + "\n".join(
        _describe(c, edges) for c in new
    )
    fixed = [c for c in known if next(iter(c)).startswith("codegen") and c not in _frozen(cycles)]
    assert not fixed, f"fixed, remove from KNOWN_CYCLES: {fixed}"


def test_no_package_cycles():
    edges = _package_edges()
    cycles = _cycles(edges)
    detail = []
    for component in cycles:
        lines = sorted(
            f"  {module}:{line} imports {target}"
            for module, targets in GRAPH.items()
            for target, line in targets.items()
            if _group(module) in component
            and _group(target) in component
            and _group(module) != _group(target)
        )
        detail.append(_describe(component, edges) + "\n" + "\n".join(lines))
    known = [frozenset(c) for c in KNOWN_CYCLES]
    new = [d for c, d in zip(cycles, detail) if frozenset(c) not in known]
    assert not new, "import cycles between packages:\n" + "\n".join(new)
    fixed = [c for c in known if len(next(iter(c)).split(".")) == 1 and c not in _frozen(cycles)]
    assert not fixed, f"fixed, remove from KNOWN_CYCLES: {fixed}"


def _back_edges() -> dict[tuple[str, str], str]:
    found = {}
    for module, targets in GRAPH.items():
        for target, line in targets.items():
            a, b = _group(module), _group(target)
            if RANKS[b] > RANKS[a]:
                found[(module, target)] = (f"{module}:{line} ({a}, rank {RANKS[a]}) imports "
                                           f"{target} ({b}, rank {RANKS[b]})")
    return found


def test_no_back_edges():
    found = _back_edges()
    excepted = ALLOWED_BACK_EDGES.keys() | KNOWN_BACK_EDGES
    unexpected = sorted(text for key, text in found.items() if key not in excepted)
    assert not unexpected, "imports reaching back up the stages:\n" + "\n".join(unexpected)
    stale = sorted(excepted - found.keys())
    assert not stale, f"these exceptions no longer happen, remove them: {stale}"
