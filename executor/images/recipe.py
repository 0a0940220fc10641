"""Algorithm image recipes: what goes into an image, and the hashes its layers are cached by
(docs/executor.md "Images and digests").

One folder of ``algorithm-images/`` is one recipe (Containerfile, image.json, entrypoint, algorithm
module); an image carries it plus the project's ``algorithms`` package and the leaf package ``wire``
(canonical JSON, digests) it imports. The container image is built through the engine
(:mod:`executor.images.engine`), the sandbox's bundle from the same files
(:mod:`executor.images.bundle`); both need the project's ``==`` pins (:func:`project_pins`) and
hash what goes into them here.
"""

from __future__ import annotations

import hashlib
import json
import os
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from algorithms.numeric_profile import NumericProfile, named
from executor.errors import ImageBuildError
from wire.env import environment

PROJECT_ROOT = Path(__file__).resolve().parents[2]
IMAGES_DIR = PROJECT_ROOT / "algorithm-images"
BASE_DIR = IMAGES_DIR / "base"


def cache_root() -> Path:
    """``$CONSORTIA_CACHE`` (default ``~/.cache/consortia``)."""
    return environment().cache_root


def sha256_file(path: Path) -> str:
    """Hex SHA-256 of a file, read in 1 MiB chunks (bounded memory)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def tree_listing(root: Path, files: Iterable[Path]) -> list[list[str]]:
    return sorted([str(p.relative_to(root)), sha256_file(p)] for p in files)


def hash_json(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _source_files(root: Path) -> list[Path]:
    """Files that belong in an image from a source folder (no caches, no bytecode)."""
    out = []
    for p in sorted(root.rglob("*")):
        if (
            p.is_file()
            and "__pycache__" not in p.parts
            and p.suffix not in (".pyc", ".pyo")
            and not p.name.startswith(".")
        ):
            out.append(p)
    return out


# --------------------------------------------------------------------------- recipes


@dataclass(frozen=True)
class ImageRecipe:
    """One folder of ``algorithm-images/``: Containerfile, image.json, entrypoint.py, module(s).

    ``numeric_profile``: the profile ``image.json`` declares (``"numeric_profile": "x86-64-v2/1"``,
    :mod:`algorithms.numeric_profile`); its environment is the image's (container) or the sandbox's,
    and its tasks refuse to run where it is not in effect."""

    folder: Path
    name: str
    version: str
    algorithm: str
    numeric_profile: NumericProfile

    @classmethod
    def load(cls, folder: str | os.PathLike[str]) -> ImageRecipe:
        folder = Path(folder)
        try:
            meta = json.loads((folder / "image.json").read_text())
        except FileNotFoundError:
            raise ImageBuildError(f"{folder} is not an image recipe (no image.json)") from None
        for f in ("Containerfile", "entrypoint.py"):
            if not (folder / f).is_file():
                raise ImageBuildError(f"image recipe {folder} lacks {f}")
        for k in ("name", "version", "algorithm", "numeric_profile"):
            if not isinstance(meta.get(k), str) or not meta[k]:
                raise ImageBuildError(f"{folder}/image.json: {k!r} must be a non-empty string")
        try:
            profile = named(meta["numeric_profile"])
        except ValueError as exc:
            raise ImageBuildError(f"{folder}/image.json: {exc}") from None
        return cls(folder, meta["name"], meta["version"], meta["algorithm"], profile)

    @classmethod
    def named(cls, name: str) -> ImageRecipe:
        return cls.load(IMAGES_DIR / name)

    @property
    def reference(self) -> str:
        return f"consortia/{self.name}:{self.version}"

    def containerfile(self) -> str:
        """The folder's Containerfile with the declared numeric profile's environment and label
        appended: the image's configuration (so its digest) carries the profile, and every container
        of it starts under it whatever the engine's environment."""
        profile = self.numeric_profile
        env = " \\\n    ".join(f"{k}={json.dumps(v)}" for k, v in sorted(profile.environ().items()))
        return (
            (self.folder / "Containerfile").read_text().rstrip("\n")
            + f"\n# the numeric profile image.json declares (algorithms.numeric_profile)\nENV {env}\n"
            + f'LABEL org.consortia.numeric_profile="{profile.id}" '
            + f'org.consortia.numeric_profile_digest="{profile.digest}"\n'
        )

    def payload_files(self) -> list[tuple[Path, str]]:
        """(source file, path inside the build context / bundle) for the ``algorithms`` package,
        the leaf package ``wire`` it imports, the public SDK ``consortia_sdk`` (what an algorithm
        written outside the repository imports) and the folder."""
        files = [
            (p, f"{package}/" + str(p.relative_to(PROJECT_ROOT / package)))
            for package in ("algorithms", "wire", "consortia_sdk")
            for p in _source_files(PROJECT_ROOT / package)
            if p.suffix == ".py"
        ]
        files += [(p, "image/" + str(p.relative_to(self.folder))) for p in _source_files(self.folder)]
        return files


def project_pins(pyproject: Path = PROJECT_ROOT / "pyproject.toml") -> dict[str, str]:
    """Exact ``==`` pins of the project's dependencies, by lower-case distribution name."""
    deps = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    pins = {}
    for d in deps:
        if "==" in d:
            name, version = d.split("==", 1)
            pins[name.strip().lower()] = version.strip()
    return pins


def image_requirements() -> list[str]:
    """``name==version`` for each distribution of algorithm-images/base/requirements.txt."""
    pins = project_pins()
    reqs = []
    for line in (BASE_DIR / "requirements.txt").read_text().splitlines():
        name = line.split("#", 1)[0].strip().lower()
        if not name:
            continue
        if name not in pins:
            raise ImageBuildError(f"{name} is not pinned with == in pyproject.toml")
        reqs.append(f"{name}=={pins[name]}")
    return reqs


@dataclass(frozen=True)
class BuiltImage:
    reference: str  # consortia/<name>:<version>
    digest: str  # sha256:<engine image id>
    recipe_hash: str  # hash of everything that went in (cache key)
    runtime: str  # "container" or "sandbox"
    location: str = ""  # sandbox: the bundle directory
