"""The house's own rules (docs/architecture.md "Layers"), read from the source with ``ast``:

1. the package layer table: which project packages each package may import;
2. no import cycle between modules (a module is one file);
3. layer rules inside packages whose structure is settled (ledger, chaincode, algorithms, api).

Every import in a file counts, wherever it stands: at module level, in a class body, inside a
function, under ``if TYPE_CHECKING:``. A function-level or ``TYPE_CHECKING`` import keeps the
interpreter from tripping over a cycle, but the two modules still need each other (to run, or to be
type-checked and read), so it hides a cycle rather than removing it. Importing ``a.b.c`` is an edge
to the file ``a/b/c.py`` (or ``a/b/c/__init__.py``); ``from a.b import x`` is an edge to ``a.b.x``
when that is a module, else to ``a/b/__init__.py``. Parent packages' ``__init__`` files that Python
runs on the way are not edges of their own.
"""

from __future__ import annotations

import ast
import sys
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# The package layer table (docs/architecture.md), bottom-up: package -> the project packages it may
# import. A package of the table that does not exist (yet) is simply absent from the checks.
LAYERS: dict[str, set[str]] = {
    "wire": set(),
    "chaincode": {"wire"},
    "algorithms": {"wire"},
    "consortia_sdk": {"algorithms", "wire"},  # the public algorithm SDK: a declared surface of algorithms/
    "ledger": {"chaincode", "wire"},
    "exchange": {"ledger", "wire"},  # artifact exchange: store, sealing, service, client, locations
    "executor": {"exchange", "ledger", "consortia_sdk", "algorithms", "wire"},
    "audit": {"executor", "exchange", "ledger", "algorithms", "wire"},
    "network": {"ledger", "chaincode", "wire"},
    "home": {"network", "audit", "executor", "exchange", "ledger", "algorithms", "wire"},
    "api": {
        "home",
        "network",
        "audit",
        "executor",
        "exchange",
        "ledger",
        "consortia_sdk",
        "algorithms",
        "chaincode",
        "wire",
    },
}
LAYERS["benchmarks"] = set(LAYERS)  # benchmarks may import every package; nothing imports them
# Top-level folders that are not Python packages of the layer table.
NOT_PACKAGES = {"tests", "scripts", "docs", "algorithm-images", "fabric-network", "examples"}


@dataclass(frozen=True)
class Import:
    source: str  # importing module, e.g. "ledger.fabric.gateway"
    target: str  # imported project module, e.g. "ledger.fabric.events"
    path: str  # the importing file, relative to the root
    line: int
    where: str  # "module", "function" or "TYPE_CHECKING"

    def __str__(self) -> str:
        at = "" if self.where == "module" else f", {self.where}"
        return f"{self.source} -> {self.target} ({self.path}:{self.line}{at})"


def existing_packages() -> list[str]:
    return [p for p in LAYERS if (ROOT / p / "__init__.py").is_file()]


@cache
def modules() -> dict[str, Path]:
    """Every module of the table's existing packages: dotted name -> file."""
    out: dict[str, Path] = {}
    for package in existing_packages():
        for path in sorted((ROOT / package).rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            parts = path.relative_to(ROOT).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_nodes(body: list[ast.stmt], where: str) -> list[tuple[ast.Import | ast.ImportFrom, str]]:
    """The import statements of ``body`` at any depth, each with where it stands."""
    out: list[tuple[ast.Import | ast.ImportFrom, str]] = []
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            out.append((node, where))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out += _import_nodes(node.body, "function" if where == "module" else where)
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            out += _import_nodes(node.body, "TYPE_CHECKING")
            out += _import_nodes(node.orelse, where)
        else:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.stmt):
                    out += _import_nodes([child], where)
                elif isinstance(child, (ast.ExceptHandler, ast.match_case)):
                    out += _import_nodes(child.body, where)
    return out


def imported_names(path: Path, root: Path = ROOT) -> list[tuple[str, int, str]]:
    """(absolute dotted name, line, where) of everything ``path`` imports; a ``from`` import yields
    ``package.name`` for each imported name, relative imports resolved against ``path``'s place
    under ``root``."""
    tree = ast.parse(path.read_text(), str(path))
    parts = list(path.relative_to(root).with_suffix("").parts)
    package = parts[:-1]
    out: list[tuple[str, int, str]] = []
    for node, where in _import_nodes(tree.body, "module"):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno, where) for a in node.names]
            continue
        base = node.module or ""
        if node.level:
            anchor = package[: len(package) - (node.level - 1)]
            base = ".".join(anchor + ([node.module] if node.module else []))
        out += [(f"{base}.{a.name}" if a.name != "*" else base, node.lineno, where) for a in node.names]
    return out


def _project_module(name: str) -> str | None:
    """The project module a dotted import name lands in (the longest existing prefix)."""
    known = modules()
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


@cache
def imports() -> tuple[Import, ...]:
    """Every import of a project module by another, once per statement."""
    out: dict[Import, None] = {}
    for source, path in modules().items():
        for name, line, where in imported_names(path):
            target = _project_module(name)
            if target is not None and target != source:
                out[Import(source, target, str(path.relative_to(ROOT)), line, where)] = None
    return tuple(out)


def _top(module: str) -> str:
    return module.split(".")[0]


# --------------------------------------------------------------------------- 1. package layers


def test_every_top_level_package_is_in_the_layer_table():
    found = {
        p.name
        for p in ROOT.iterdir()
        if p.is_dir() and not p.name.startswith(".") and any(p.glob("*.py")) and p.name not in NOT_PACKAGES
    }
    assert found - set(LAYERS) == set(), "add the new package to LAYERS and docs/architecture.md"
    assert set(existing_packages()) == found


def test_every_package_is_installed_by_pyproject():
    include = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    assert {p.rstrip("*") for p in include["include"]} >= set(existing_packages())


def test_no_package_imports_upward_or_past_its_layer():
    wrong = sorted(
        str(i)
        for i in imports()
        if _top(i.target) != _top(i.source) and _top(i.target) not in LAYERS[_top(i.source)]
    )
    assert wrong == []


def test_test_support_stays_in_tests():
    """No production package imports the test suite (tests/support: the Fabric test network, the probe
    contract, the fault plan); only benchmarks may run on the checkout's test network."""
    wrong = sorted(
        f"{path.relative_to(ROOT)}:{line} imports {name}"
        for module, path in modules().items()
        if _top(module) != "benchmarks"
        for name, line, _ in imported_names(path)
        if name.split(".")[0] == "tests"
    )
    assert wrong == []


def test_wire_imports_only_the_standard_library():
    third_party = sorted(
        f"{path.relative_to(ROOT)}:{line} imports {name}"
        for module, path in modules().items()
        if _top(module) == "wire"
        for name, line, _ in imported_names(path)
        if name.split(".")[0] not in sys.stdlib_module_names and _top(name) != "wire"
    )
    assert third_party == []


# --------------------------------------------------------------------------- 2. no import cycles


def import_cycles(edges: tuple[Import, ...] | None = None) -> list[list[Import]]:
    """The strongly connected groups of modules (Tarjan) of ``edges`` (default: the project's
    imports), each as the imports among its members; groups ordered by name."""
    edges = imports() if edges is None else edges
    graph: dict[str, set[str]] = {}
    for i in edges:
        graph.setdefault(i.source, set()).add(i.target)
        graph.setdefault(i.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def connect(v: str) -> None:  # recursion depth <= number of modules (a few hundred)
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(group)

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return sorted(
        (sorted((i for i in edges if i.source in g and i.target in g), key=str) for g in groups),
        key=lambda edges: edges[0].source,
    )


def test_no_import_cycles():
    cycles = import_cycles()
    report = [f"{len(cycles)} module-level import cycles"]
    for n, edges in enumerate(cycles, 1):
        report.append(f"cycle {n}: " + " <-> ".join(sorted({i.source for i in edges})))
        report += [f"    {i}" for i in edges]
    print("\n".join(report))
    assert cycles == [], "\n".join(report)


def test_the_cycle_finder_sees_hidden_cycles(tmp_path):
    """The finder itself: imports in functions and under TYPE_CHECKING are read, relative imports
    resolved, and a cycle through them is found (with the imports that close it)."""
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "a.py").write_text("from p import b\n")
    (tmp_path / "p" / "b.py").write_text("class K:\n    def f(self):\n        from p.c import x\n")
    (tmp_path / "p" / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import a\nelse:\n    import json\n"
    )
    (tmp_path / "p" / "d.py").write_text("import p.a\n")
    read = {
        f: {(name, where) for name, _, where in imported_names(tmp_path / "p" / f"{f}.py", tmp_path)}
        for f in "abcd"
    }
    assert read == {
        "a": {("p.b", "module")},
        "b": {("p.c.x", "function")},
        "c": {("typing.TYPE_CHECKING", "module"), ("p.a", "TYPE_CHECKING"), ("json", "module")},
        "d": {("p.a", "module")},
    }
    ab, bc, ca, da = (
        Import("p.a", "p.b", "p/a.py", 1, "module"),
        Import("p.b", "p.c", "p/b.py", 3, "function"),
        Import("p.c", "p.a", "p/c.py", 3, "TYPE_CHECKING"),
        Import("p.d", "p.a", "p/d.py", 1, "module"),
    )
    assert import_cycles((ab, bc, ca, da)) == [[ab, bc, ca]]
    assert import_cycles((ab, bc, da)) == []


# --------------------------------------------------------------------------- 3. rules inside packages


def _within(prefixes: set[str], module: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def _violations(sources: set[str], forbidden: set[str]) -> list[str]:
    return sorted(
        str(i)
        for i in imports()
        if _within(sources, i.source) and _within(forbidden, i.target) and not _within(sources, i.target)
    )


def test_ledger_hosts_never_import_each_other():
    assert _violations({"ledger.embedded"}, {"ledger.fabric"}) == []
    assert _violations({"ledger.fabric"}, {"ledger.embedded"}) == []


def test_ledger_interface_identity_and_errors_are_below_the_client_and_the_hosts():
    core = {"ledger.interface", "ledger.errors", "ledger.identity", "ledger.cryptogen"}
    wrong = sorted(
        str(i)
        for i in imports()
        if i.source in core and _top(i.target) == "ledger" and i.target not in core | {"ledger"}
    )
    assert wrong == []
    # the typed client works over the interface, on either host
    assert _violations({"ledger.client"}, {"ledger.embedded", "ledger.fabric"}) == []


CONTRACTS = {
    "chaincode.image",
    "chaincode.learning_process",
    "chaincode.execution_record",
    "chaincode.membership",
    "chaincode.model",
    "chaincode.disclosure",
}


def test_contracts_do_not_import_dispatch_and_support_imports_no_contract():
    """dispatch -> the contracts -> everything else in chaincode (context, stub, errors, limits,
    canonical JSON, records): a module that is neither a contract nor dispatch imports neither."""
    assert _violations(CONTRACTS, {"chaincode.dispatch"}) == []
    support = {
        m for m in modules() if _top(m) == "chaincode" and not _within(CONTRACTS | {"chaincode.dispatch"}, m)
    }
    assert _violations(support, CONTRACTS | {"chaincode.dispatch"}) == []


FAMILIES = {"algorithms.collabdict", "algorithms.dpsda", "algorithms.collab_rf"}
# what the families are built on (and the simulator and the task runtime above them)
ALGORITHM_BASE = {
    "algorithms.step",
    "algorithms.topologies",
    "algorithms.codec",
    "algorithms.consensus",
    "algorithms.datasets",
}


def test_algorithm_families_are_independent_and_build_only_on_the_base():
    wrong = sorted(
        str(i)
        for i in imports()
        for family in FAMILIES
        if _within({family}, i.source)
        and _top(i.target) == "algorithms"
        and not _within({family} | ALGORITHM_BASE, i.target)
        and i.target != "algorithms"
    )
    assert wrong == []


def test_the_algorithm_base_imports_nothing_above_it():
    wrong = sorted(
        str(i)
        for i in imports()
        if _within(ALGORITHM_BASE, i.source)
        and _top(i.target) == "algorithms"
        and not _within(ALGORITHM_BASE, i.target)
        and i.target != "algorithms"
    )
    assert wrong == []


def test_the_gateway_does_not_import_the_cli():
    assert _violations({"api.gateway"}, {"api.cli"}) == []


def test_the_rules_name_modules_that_exist():
    """A rule about a renamed or removed module would pass for nothing: every module the rules of
    section 3 name exists."""
    named = {
        "ledger.embedded",
        "ledger.fabric",
        "ledger.client",
        "chaincode.dispatch",
        "api.gateway",
        "api.cli",
    }
    named |= {"ledger.interface", "ledger.errors", "ledger.identity", "ledger.cryptogen"}
    named |= CONTRACTS | FAMILIES | ALGORITHM_BASE
    assert sorted(named - set(modules())) == []


def test_example_algorithms_import_only_the_sdk_of_the_project():
    """An algorithm in examples/ is written as a user outside the repository writes one: of this
    project it imports ``consortia_sdk`` only (docs/sdk.md); torch, numpy and the like are its own."""
    project = set(LAYERS) | NOT_PACKAGES - {"examples"}
    found = []
    for path in sorted((ROOT / "examples").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            found += [
                f"{path.relative_to(ROOT)}:{node.lineno} imports {n}"
                for n in names
                if n.split(".")[0] in project and n.split(".")[0] != "consortia_sdk"
            ]
    assert list((ROOT / "examples").rglob("*.py")), "no example algorithm found"
    assert found == []
