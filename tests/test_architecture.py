"""The layering and file-size rules of docs/architecture.md (issue 18), read from the source: which
project packages each package imports (at any depth, function-level imports included), and no source
file over 450 lines."""

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
    "exchange": {"ledger", "wire"},  # artifact exchange: store, sealing, service, client, locations
    "executor": {"exchange", "ledger", "algorithms", "wire"},  # contract errors through ledger.errors
    "api": {"executor", "exchange", "ledger", "algorithms", "wire"},
    "benchmarks": {"api", "executor", "exchange", "ledger", "algorithms", "wire"},
}
MAX_LINES = 450


def sources(package: str) -> list[Path]:
    return sorted(p for p in (ROOT / package).rglob("*.py") if "__pycache__" not in p.parts)


def imported_packages(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return {n.split(".")[0] for n in names} & set(ALLOWED)


def test_no_package_imports_upward_or_past_its_layer():
    wrong = [
        f"{path.relative_to(ROOT)} imports {other}"
        for package, allowed in ALLOWED.items()
        for path in sources(package)
        for other in sorted(imported_packages(path) - allowed - {package})
    ]
    assert wrong == []


def test_no_source_file_over_450_lines():
    long = [
        f"{path.relative_to(ROOT)}: {n} lines"
        for package in ALLOWED
        for path in sources(package)
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    ]
    assert long == []
