"""Algorithm image recipes: what goes into an image, and the hashes its layers are cached by
(docs/executor.md "Images and digests").

Every image has one recipe: a folder with ``image.json`` (name, version, ``"sdk"``, ``"base"``, the
algorithm ``module:Class``, the numeric profile), the algorithm's module(s) and, optionally,
``requirements.txt`` pinned with hashes. The built-in images are such folders in ``algorithm-images/``
(their algorithms live in the project's ``algorithms`` package); a **user algorithm folder**
(docs/sdk.md) is one anywhere else. An image carries the folder under ``image/``, the platform's
entrypoint (``algorithm-images/base/entrypoint.py``), the task runtime (``algorithms``), the leaf
package ``wire`` (canonical JSON, digests) it imports, the SDK (``consortia_sdk``), and its
requirements' wheels installed offline (:mod:`executor.images.requirements`) into ``site/``. The
container image is built through the engine (:mod:`executor.images.engine`) from
``algorithm-images/base/Containerfile.algorithm``, the sandbox's bundle from the same files
(:mod:`executor.images.bundle`); both need the project's ``==`` pins (:func:`project_pins`) and hash
what goes into them here.
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

#: the bases a user algorithm folder may declare in image.json ("base"): the project's Python layer
#: (numpy, scipy, scikit-learn) or the same with torch
BASES = ("python", "torch")
#: why the torch base has no container image (the sandbox runs it with the host interpreter's torch)
TORCH_CONTAINER_REFUSED = (
    "the torch base runs with the sandbox runtime only: PyPI's only torch 2.15.0 wheel for this platform "
    "is the CUDA build, which does not import without its ~3 GB of nvidia-* wheels, and no CPU-only "
    'build of that version is on PyPI; build it with --runtime sandbox (docs/audited-process.md "Images")'
)
#: the interpreter and platform every wheel of an image is downloaded for (CPython 3.11, x86-64 Linux)
WHEEL_TARGET = (
    "--python-version",
    "3.11",
    "--implementation",
    "cp",
    "--platform",
    "manylinux_2_28_x86_64",
    "--platform",
    "manylinux_2_17_x86_64",
    "--platform",
    "manylinux2014_x86_64",
    "--platform",
    "any",
)


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
    """Files that belong in an image from a source folder (no caches, no bytecode, nothing hidden)."""
    out = []
    for p in sorted(root.rglob("*")):
        parts = p.relative_to(root).parts
        if (
            p.is_file()
            and "__pycache__" not in parts
            and p.suffix not in (".pyc", ".pyo")
            and not any(part.startswith(".") for part in parts)
        ):
            out.append(p)
    return out


# --------------------------------------------------------------------------- recipes


@dataclass(frozen=True)
class ImageRecipe:
    """One algorithm folder: a built-in one of ``algorithm-images/`` or a user's (image.json,
    module(s), optionally requirements.txt); the platform supplies the Containerfile and entrypoint.

    ``numeric_profile``: the profile ``image.json`` declares (``"numeric_profile": "x86-64-v2/1"``,
    :mod:`algorithms.numeric_profile`); its environment is the image's (container) or the sandbox's,
    and its tasks refuse to run where it is not in effect. ``base``: what the image builds on
    (:data:`BASES`, default ``python``)."""

    folder: Path
    name: str
    version: str
    algorithm: str
    numeric_profile: NumericProfile
    base: str = "python"

    @classmethod
    def load(cls, folder: str | os.PathLike[str]) -> ImageRecipe:
        folder = Path(folder)
        try:
            meta = json.loads((folder / "image.json").read_text())
        except FileNotFoundError:
            raise ImageBuildError(f"{folder} is not an image recipe (no image.json)") from None
        except ValueError as exc:
            raise ImageBuildError(f"{folder}/image.json is not JSON: {exc}") from None
        if "sdk" not in meta:
            raise ImageBuildError(
                f'{folder} is not an algorithm folder: its image.json names no "sdk" version (docs/sdk.md)'
            )
        for own in ("Containerfile", "entrypoint.py"):
            if (folder / own).exists():
                raise ImageBuildError(
                    f"{folder}/{own}: an algorithm folder has no {own} (the platform's "
                    f"algorithm-images/base/{'Containerfile.algorithm' if own == 'Containerfile' else own} "
                    "builds and runs every image); remove or rename it"
                )
        for k in ("name", "version", "algorithm", "numeric_profile"):
            if not isinstance(meta.get(k), str) or not meta[k]:
                raise ImageBuildError(f"{folder}/image.json: {k!r} must be a non-empty string")
        base = meta.get("base", "python")
        if base not in BASES:
            raise ImageBuildError(f"{folder}/image.json: base {base!r} is not one of {list(BASES)}")
        try:
            profile = named(meta["numeric_profile"])
        except ValueError as exc:
            raise ImageBuildError(f"{folder}/image.json: {exc}") from None
        return cls(folder, meta["name"], meta["version"], meta["algorithm"], profile, base)

    @classmethod
    def named(cls, name: str) -> ImageRecipe:
        return cls.load(IMAGES_DIR / name)

    @property
    def reference(self) -> str:
        return f"consortia/{self.name}:{self.version}"

    def containerfile(self) -> str:
        """The platform's Containerfile with the declared numeric profile's environment and label
        appended: the image's configuration (so its digest) carries the profile, and every container
        of it starts under it whatever the engine's environment."""
        profile = self.numeric_profile
        env = " \\\n    ".join(f"{k}={json.dumps(v)}" for k, v in sorted(profile.environ().items()))
        return (
            (BASE_DIR / "Containerfile.algorithm").read_text().rstrip("\n")
            + f"\n# the numeric profile image.json declares (algorithms.numeric_profile)\nENV {env}\n"
            + f'LABEL org.consortia.numeric_profile="{profile.id}" '
            + f'org.consortia.numeric_profile_digest="{profile.digest}"\n'
        )

    def payload_files(self) -> list[tuple[Path, str]]:
        """(source file, path inside the build context / bundle) for the task runtime
        (``algorithms``), the leaf package ``wire`` it imports, the SDK (``consortia_sdk``), the
        folder, and the platform's entrypoint."""
        files = [
            (p, f"{package}/" + str(p.relative_to(PROJECT_ROOT / package)))
            for package in ("algorithms", "wire", "consortia_sdk")
            for p in _source_files(PROJECT_ROOT / package)
            if p.suffix == ".py"
        ]
        files += [(p, "image/" + str(p.relative_to(self.folder))) for p in _source_files(self.folder)]
        files.append((BASE_DIR / "entrypoint.py", "image/entrypoint.py"))
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
