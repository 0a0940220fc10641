"""The layering rule of docs/architecture.md (issue 18), read from the source: which project packages
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
    "executor": {"ledger", "algorithms", "wire"},  # contract errors through ledger.errors
    "api": {"executor", "ledger", "algorithms", "wire"},
    "benchmarks": {"api", "executor", "ledger", "chaincode", "algorithms", "wire"},  # everything
}


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
