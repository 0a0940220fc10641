"""Algorithm images: build locally, identify by digest, verify before every run.

The image owner builds images locally (docs/executor.md "Images and digests"; other organisations pull
them by digest, :mod:`executor.registry`), in three cached layers,

1. ``consortia-base:<h>`` -- ``debootstrap --variant=minbase bookworm`` (python3 3.11) written
   to a tarball under the cache (``algorithm-images/base/debootstrap.sh``) and imported;
2. ``consortia-python:<h>`` -- the project's pinned numpy/scipy/scikit-learn/cryptography,
   installed offline (``--network none``) from wheels the host downloaded with ``pip download``
   at the exact versions of pyproject.toml;
3. ``consortia/<name>:<version>`` -- one per folder of ``algorithm-images/`` (Containerfile,
   image.json, entrypoint, algorithm module) plus the project's ``algorithms`` package and the leaf
   package ``wire`` (canonical JSON, digests) it imports.

``<h>`` is a hash of what goes into the layer, so a layer is rebuilt only when its recipe, the
wheels or its parent change. The **image digest** is the engine's content-addressed image id
(``sha256:...``) -- what the ledger's Image record and a learning process pin.

For the sandbox runtime (no engine) the same folder + ``algorithms`` + ``wire`` is materialised as a
**bundle** directory; its digest is the sha256 of the canonical JSON listing of its files'
digests plus the interpreter and pinned package versions it runs with.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from executor.errors import ImageBuildError, ImageDigestMismatch
from wire.env import environment

PROJECT_ROOT = Path(__file__).resolve().parent.parent
IMAGES_DIR = PROJECT_ROOT / "algorithm-images"
BASE_DIR = IMAGES_DIR / "base"
DEFAULT_SOCKET = "unix:///run/consortia/podman.sock"


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
    """One folder of ``algorithm-images/``: Containerfile, image.json, entrypoint.py, module(s)."""

    folder: Path
    name: str
    version: str
    algorithm: str

    @classmethod
    def load(cls, folder: str | os.PathLike) -> ImageRecipe:
        folder = Path(folder)
        try:
            meta = json.loads((folder / "image.json").read_text())
        except FileNotFoundError:
            raise ImageBuildError(f"{folder} is not an image recipe (no image.json)") from None
        for f in ("Containerfile", "entrypoint.py"):
            if not (folder / f).is_file():
                raise ImageBuildError(f"image recipe {folder} lacks {f}")
        for k in ("name", "version", "algorithm"):
            if not isinstance(meta.get(k), str) or not meta[k]:
                raise ImageBuildError(f"{folder}/image.json: {k!r} must be a non-empty string")
        return cls(folder, meta["name"], meta["version"], meta["algorithm"])

    @classmethod
    def named(cls, name: str) -> ImageRecipe:
        return cls.load(IMAGES_DIR / name)

    @property
    def reference(self) -> str:
        return f"consortia/{self.name}:{self.version}"

    def payload_files(self) -> list[tuple[Path, str]]:
        """(source file, path inside the build context / bundle) for the ``algorithms`` package,
        the leaf package ``wire`` it imports, and the folder."""
        files = [
            (p, f"{package}/" + str(p.relative_to(PROJECT_ROOT / package)))
            for package in ("algorithms", "wire")
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


# --------------------------------------------------------------------------- sandbox bundles


def interpreter_identity(python: str | os.PathLike | None = None) -> dict[str, Any]:
    """What a bundle runs with: the Python version and the installed version of every ``==``-pinned
    project dependency (numpy, scipy, scikit-learn, torch, ...), so that a bundle's digest changes
    if the interpreter or any library an algorithm may import changes.

    Always measured from the interpreter itself, never read from a file: ``python`` None (or the
    running interpreter's path) is the running interpreter, recomputed whenever a directory of its
    ``sys.path`` changed (an install or upgrade adds/removes a ``*.dist-info`` entry); another
    path is asked in a subprocess."""
    if python is not None and os.path.abspath(python) != os.path.abspath(sys.executable):
        return _foreign_interpreter_identity(str(python))
    signature = (sys.version, tuple(_mtime(p) for p in sys.path))
    global _IDENTITY
    if _IDENTITY is None or _IDENTITY[0] != signature:
        _IDENTITY = (signature, _running_identity(sorted(project_pins())))
    return json.loads(json.dumps(_IDENTITY[1]))  # a copy: callers may not alter the cached one


_IDENTITY: tuple[tuple, dict[str, Any]] | None = None


def _mtime(path: str) -> tuple[str, int]:
    try:
        return path, os.stat(path or ".").st_mtime_ns
    except OSError:
        return path, -1


def _running_identity(names: list[str]) -> dict[str, Any]:
    from importlib.metadata import PackageNotFoundError, version

    packages = {}
    for name in names:
        try:
            packages[name] = version(name)
        except PackageNotFoundError:
            continue
    return {"python": ".".join(map(str, sys.version_info[:3])), "packages": packages}


_IDENTITY_SCRIPT = """
import json, sys
from importlib.metadata import PackageNotFoundError, version
packages = {}
for name in sys.argv[1:]:
    try:
        packages[name] = version(name)
    except PackageNotFoundError:
        pass
print(json.dumps({"python": ".".join(map(str, sys.version_info[:3])), "packages": packages}))
"""


def _foreign_interpreter_identity(python: str) -> dict[str, Any]:
    try:
        out = subprocess.run(
            [python, "-I", "-c", _IDENTITY_SCRIPT, *sorted(project_pins())],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
        return json.loads(out)
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        raise ImageBuildError(f"cannot ask interpreter {python} for its identity: {exc}") from None


def _bundle_files(d: Path) -> list[Path]:
    """Every file of a bundle, bytecode included (it is what runs), except bundle.json."""
    return [p for p in sorted(d.rglob("*")) if p.is_file() and p.name != "bundle.json"]


_BUNDLE_DIGESTS: dict[str, tuple[tuple, str]] = {}


def bundle_digest(bundle_dir: str | os.PathLike, python: str | os.PathLike | None = None) -> str:
    """Digest of a bundle as run by ``python`` (default: the running interpreter): sha256 of
    canonical JSON ``{files: [[path, sha256]...], interpreter}``.

    ``interpreter`` is :func:`interpreter_identity` of the interpreter that will run the bundle --
    measured, not read from the bundle's own ``bundle.json`` (a bundle built for another
    interpreter must not carry that interpreter's digest onto this one).
    Recomputed whenever any file's (inode, size, mtime, ctime), the file set or the interpreter
    identity changed since the last computation in this process (as git's index does); ctime
    cannot be set back by a writer."""
    d = Path(bundle_dir)
    files = _bundle_files(d)
    interp = interpreter_identity(python)
    signature = (
        tuple(
            (str(p), st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
            for p in files
            for st in [p.stat()]
        ),
        hash_json(interp),
    )
    cached = _BUNDLE_DIGESTS.get(str(d.resolve()))
    if cached is not None and cached[0] == signature:
        return cached[1]
    digest = "sha256:" + hash_json({"files": tree_listing(d, files), "interpreter": interp})
    _BUNDLE_DIGESTS[str(d.resolve())] = (signature, digest)
    return digest


def build_bundle(recipe: ImageRecipe, reference: str | None = None) -> BuiltImage:
    """Materialise the sandbox bundle of ``recipe`` (same files as the image's /opt/consortia).

    Its reference is ``bundle:<directory name>`` (resolved under ``<cache>/bundles``)."""
    interp = interpreter_identity()
    h = hash_json(["bundle-v3", [[dst, sha256_file(src)] for src, dst in recipe.payload_files()], interp])
    d = cache_root() / "bundles" / f"{recipe.name}-{h[:16]}"
    if not (d / "bundle.json").exists():
        tmp = d.with_name(d.name + ".partial")
        if tmp.exists():
            shutil.rmtree(tmp)
        for src, dst in recipe.payload_files():
            (tmp / dst).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, tmp / dst)
        (tmp / "bundle.json").write_text(
            json.dumps(
                {"image": recipe.reference, "interpreter": interp, "algorithm": recipe.algorithm},
                sort_keys=True,
            )
        )
        # bytecode for the host interpreter, checked against its source hash (see Containerfile)
        import compileall
        import py_compile

        if not compileall.compile_dir(
            str(tmp), quiet=1, invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH
        ):
            raise ImageBuildError(f"bundle {recipe.name} does not compile")
        for p in tmp.rglob("*"):
            p.chmod(0o555 if p.is_dir() else 0o444)
        tmp.chmod(0o555)
        if d.exists():
            shutil.rmtree(d)
        os.replace(tmp, d)
    ref = reference or f"bundle:{d.name}"
    return BuiltImage(
        reference=ref, digest=bundle_digest(d), recipe_hash=h, runtime="sandbox", location=str(d)
    )


# --------------------------------------------------------------------------- verification


def verify_digest(reference: str, pinned: str, local: str | None) -> None:
    """Refuse (ImageDigestMismatch) unless the local digest equals the pinned one."""
    if not pinned.startswith("sha256:"):
        raise ValueError(f"pinned digest must be sha256:<hex>, got {pinned!r}")
    if local != pinned:
        raise ImageDigestMismatch(reference, pinned, local)


def register(
    client, recipe: ImageRecipe, built: BuiltImage, image_id: str | None = None, description: str = ""
):
    """Write a built image (or bundle) to the ledger's Image contract: name, version, algorithm,
    digest and reference; the owner is the caller's organisation (from its certificate).
    ``client`` is a :class:`ledger.client.ConsortiaClient`; returns the ImageRecord."""
    return client.register_image(
        recipe.name,
        recipe.version,
        recipe.algorithm,
        built.digest,
        reference=built.reference,
        image_id=image_id,
        description=description or f"{built.runtime} image of {recipe.name}",
    )


# --------------------------------------------------------------------------- container images

_ENGINE_NAMES = frozenset(
    {
        "base_rootfs",
        "build_image",
        "download_wheels",
        "engine_client",
        "ensure_base_image",
        "ensure_python_image",
        "local_image_digest",
    }
)


def __getattr__(name: str) -> Any:
    """The container image builders live in :mod:`executor.engine_images` (which imports this
    module); they stay reachable here, e.g. ``executor.images.build_image``."""
    if name in _ENGINE_NAMES:
        from executor import engine_images

        return getattr(engine_images, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
