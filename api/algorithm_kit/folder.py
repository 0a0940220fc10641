"""An algorithm folder (docs/sdk.md "An algorithm folder"): its declaration, and its class loaded the way
its image loads it -- the folder first on ``sys.path``, ``"<module>:<Class>"`` of ``image.json``
imported by name (as ``algorithms.task_runtime.load_algorithm`` does inside the image)."""

from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from executor.images.declarations import ImageDeclaration

#: the project's own packages: an algorithm imports ``consortia_sdk``, never these (docs/sdk.md)
INTERNAL_PACKAGES = (
    "algorithms",
    "api",
    "audit",
    "benchmarks",
    "chaincode",
    "exchange",
    "executor",
    "home",
    "ledger",
    "network",
    "wire",
)


class FolderError(ValueError):
    """The folder's algorithm cannot be loaded; the message says why."""


@dataclass(frozen=True)
class ImportSite:
    """Where a module of the folder imports a package."""

    path: Path
    line: int
    package: str

    def where(self, folder: Path) -> str:
        return f"{self.path.relative_to(folder)}:{self.line}"


def source_files(folder: Path) -> Iterator[Path]:
    """The folder's Python files, its tests aside (a test may import what it likes)."""
    for p in sorted(Path(folder).rglob("*.py")):
        rel = p.relative_to(folder).parts
        if rel[0] not in ("tests", "build") and not any(part.startswith(".") for part in rel):
            yield p


def internal_imports(folder: Path) -> list[ImportSite]:
    """Every import of one of the project's internal packages in the folder's modules (file and line)."""
    found = []
    for path in source_files(folder):
        try:
            tree = ast.parse(path.read_text(), str(path))
        except SyntaxError:
            continue  # loading reports it with its line
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            else:
                continue
            for m in modules:
                top = m.split(".")[0]
                if top in INTERNAL_PACKAGES:
                    found.append(ImportSite(path, node.lineno, m))
    return found


def _inside(path: str | None, folder: Path) -> bool:
    if not path:
        return False
    try:
        Path(path).resolve().relative_to(folder)
        return True
    except ValueError:
        return False


#: folders whose modules this process has loaded (their modules are unloaded when another folder's
#: module of the same name is loaded)
_LOADED: set[Path] = set()


@contextmanager
def importable(folder: Path) -> Iterator[Path]:
    """``folder`` first on ``sys.path`` (as in its image) while the algorithm loads and runs, so its
    modules import each other, at load time or later."""
    entry = str(Path(folder).resolve())
    sys.path.insert(0, entry)
    try:
        yield Path(entry)
    finally:
        sys.path.remove(entry)


def load_class(folder: Path, algorithm: str) -> type:
    """The class ``"<module>:<Class>"`` of ``folder`` (its module imported from the folder, as in the
    image; call it within :func:`importable`); :class:`FolderError` when it cannot be."""
    folder = Path(folder).resolve()
    module_name, _, class_name = algorithm.partition(":")
    if not module_name or not class_name:
        raise FolderError(f'image.json "algorithm" must be "<module>:<Class>", got {algorithm!r}')
    top = module_name.split(".")[0]
    if not ((folder / f"{top}.py").is_file() or (folder / top / "__init__.py").is_file()):
        raise FolderError(f"{folder} has no module {top!r} ({top}.py or {top}/__init__.py)")
    for name in [n for n in sys.modules if n == top or n.startswith(top + ".")]:
        loaded = getattr(sys.modules[name], "__file__", None)
        if _inside(loaded, folder):
            continue
        if not any(_inside(loaded, other) for other in _LOADED):
            raise FolderError(
                f"module {top!r} of {folder} has the name of the installed module {loaded}; rename it"
            )
        del sys.modules[name]  # another algorithm folder's module of the same name
    if str(folder) not in sys.path:
        raise FolderError(f"load_class needs {folder} on sys.path (within importable())")
    importlib.invalidate_caches()
    module = importlib.import_module(module_name)
    _LOADED.add(folder)
    if not _inside(getattr(module, "__file__", None), folder):
        raise FolderError(f"module {module_name!r} was imported from {module.__file__}, not from {folder}")
    cls = getattr(module, class_name, None)
    if not isinstance(cls, type):
        raise FolderError(f"module {module_name!r} of {folder} has no class {class_name!r}")
    return cls


def declaration(folder: Path) -> ImageDeclaration:
    """The folder's declaration (:class:`executor.images.declarations.InvalidDeclaration` if it cannot
    run here; :class:`FolderError` if there is no image.json)."""
    folder = Path(folder).resolve()
    if not (folder / "image.json").is_file():
        raise FolderError(f"{folder} is not an algorithm folder: it has no image.json")
    return ImageDeclaration.from_folder(folder)
