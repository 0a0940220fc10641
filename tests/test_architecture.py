"""The layering rules of docs/architecture.md (issue 18), read from the source: which project packages
each package imports (at any depth, function-level imports included). A module's size follows its
concept: there is no line cap (issue 30)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# package -> the project packages it may import (wire/ is the leaf of shared conventions)
ALLOWED = {
    "wire": set(),
    "chaincode": {"wire"},
    "algorithms": {"wire"},
    "ledger": {"chaincode", "wire"},
    "network": {"ledger", "chaincode", "wire"},  # the native Fabric network launcher
    "executor": {"ledger", "algorithms", "wire"},  # contract errors through ledger.errors
    "audit": {"executor", "exchange", "ledger", "algorithms", "wire"},
    # the Consortia home: consortia.toml, the layout, open_ledger, init/join
    "home": {"network", "audit", "executor", "exchange", "ledger", "algorithms", "wire"},
    "api": {"home", "network", "audit", "executor", "ledger", "algorithms", "wire"},
    "benchmarks": {"api", "home", "network", "audit", "executor", "ledger", "algorithms", "wire"},
}
# Files allowed one import past their package's layer, until the node agent's builder moves to home/
# (issue 30, item 5, after the executor re-house): the node's and the artifact service's command lines
# and Platform.from_home still read the home (load / open_ledger) themselves.
PENDING = {
    "executor/node/cli.py": {"home"},
    "executor/process.py": {"home"},
    "executor/artifact_service.py": {"home"},
}


def sources(package: str) -> list[Path]:
    return sorted(p for p in (ROOT / package).rglob("*.py") if "__pycache__" not in p.parts)


def imported_top_level(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return {n.split(".")[0] for n in names}


def imported_packages(path: Path) -> set[str]:
    return imported_top_level(path) & set(ALLOWED)


def test_no_package_imports_upward_or_past_its_layer():
    wrong = [
        f"{path.relative_to(ROOT)} imports {other}"
        for package, allowed in ALLOWED.items()
        for path in sources(package)
        for other in sorted(
            imported_packages(path)
            - allowed
            - {package}
            - PENDING.get(path.relative_to(ROOT).as_posix(), set())
        )
    ]
    assert wrong == []


def test_test_support_stays_in_tests():
    """No production package imports the test suite's support (tests/support: the Fabric test network,
    the probe contract); only benchmarks may run on the checkout's test network."""
    wrong = [
        str(path.relative_to(ROOT))
        for package in ALLOWED
        if package != "benchmarks"
        for path in sources(package)
        if "tests" in imported_top_level(path)
    ]
    assert wrong == []
