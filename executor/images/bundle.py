"""The sandbox runtime's image: a read-only **bundle** directory of the recipe's files, run by the
host interpreter (docs/executor.md "Images and digests").

Its digest is the sha256 of the canonical JSON listing of its files' digests plus the interpreter
and pinned package versions it runs with (:func:`bundle_digest`), measured from the interpreter
that runs it, never read from the bundle itself.
"""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from algorithms.numeric_profile import NumericProfile, named
from executor.errors import ImageBuildError
from executor.images.recipe import (
    BuiltImage,
    ImageRecipe,
    cache_root,
    hash_json,
    project_pins,
    sha256_file,
    tree_listing,
)
from executor.images.requirements import fetch_wheels, install, of_recipe

#: where every sandbox mounts a bundle (the container image's /opt/consortia): its bytecode names its
#: sources there, whatever folder it was built in, so two builders' bundles are byte-identical
BUNDLE_MOUNT = "/opt/consortia"


def interpreter_identity(python: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """What a bundle runs with: the Python version, the C library (glibc's libm computes ``exp``,
    ``log``, ``pow`` ... for numpy and torch) and the installed version of every ``==``-pinned
    project dependency (numpy, scipy, scikit-learn, torch, ...), so that a bundle's digest changes
    if the interpreter, its C library or any library an algorithm may import changes.

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
    copy: dict[str, Any] = json.loads(json.dumps(_IDENTITY[1]))  # callers may not alter the cached one
    return copy


# (the interpreter's version and each sys.path entry's mtime, what they identify)
_IDENTITY: tuple[tuple[str, tuple[tuple[str, int], ...]], dict[str, Any]] | None = None


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
    return {
        "python": ".".join(map(str, sys.version_info[:3])),
        "libc": " ".join(platform.libc_ver()),
        "packages": packages,
    }


_IDENTITY_SCRIPT = """
import json, platform, sys
from importlib.metadata import PackageNotFoundError, version
packages = {}
for name in sys.argv[1:]:
    try:
        packages[name] = version(name)
    except PackageNotFoundError:
        pass
print(json.dumps({"python": ".".join(map(str, sys.version_info[:3])), "libc": " ".join(platform.libc_ver()),
                  "packages": packages}))
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
        identity: dict[str, Any] = json.loads(out)
        return identity
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        raise ImageBuildError(f"cannot ask interpreter {python} for its identity: {exc}") from None


def _bundle_files(d: Path) -> list[Path]:
    """Every file of a bundle, bytecode included (it is what runs), except bundle.json."""
    return [p for p in sorted(d.rglob("*")) if p.is_file() and p.name != "bundle.json"]


# a file's (path, inode, size, mtime, ctime): what bundle_digest remembers a bundle's digest by
_FileStamp = tuple[str, int, int, int, int]
# bundle directory -> ((its files' stamps, the interpreter identity's hash), its digest)
_BUNDLE_DIGESTS: dict[str, tuple[tuple[tuple[_FileStamp, ...], str], str]] = {}


def bundle_digest(
    bundle_dir: str | os.PathLike[str], python: str | os.PathLike[str] | None = None, *, fresh: bool = False
) -> str:
    """Digest of a bundle as run by ``python`` (default: the running interpreter): sha256 of
    canonical JSON ``{files: [[path, sha256]...], interpreter}``.

    ``interpreter`` is :func:`interpreter_identity` of the interpreter that will run the bundle --
    measured, not read from the bundle's own ``bundle.json`` (a bundle built for another
    interpreter must not carry that interpreter's digest onto this one).
    Recomputed whenever any file's (inode, size, mtime, ctime), the file set or the interpreter
    identity changed since the last computation in this process (as git's index does); ctime
    cannot be set back by a writer. ``fresh``: measured from the files whatever was remembered (a
    bundle just built, checked or unpacked)."""
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
    if cached is not None and cached[0] == signature and not fresh:
        return cached[1]
    digest = "sha256:" + hash_json({"files": tree_listing(d, files), "interpreter": interp})
    _BUNDLE_DIGESTS[str(d.resolve())] = (signature, digest)
    return digest


def bundle_profile(bundle_dir: str | os.PathLike[str]) -> NumericProfile:
    """The numeric profile a bundle's ``image/image.json`` declares (the sandbox runs it under that
    profile's environment); :class:`ImageBuildError` if it declares none this platform knows."""
    path = Path(bundle_dir) / "image" / "image.json"
    try:
        return named(json.loads(path.read_text())["numeric_profile"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ImageBuildError(f"{path} declares no known numeric profile: {exc}") from None


def _install(tmp: Path, d: Path) -> None:
    """Rename the finished bundle ``tmp`` to ``d``; if another builder put the same bundle there first
    (same recipe files, same interpreter: same name), keep that one. A broken ``d`` (no bundle.json)
    is renamed aside, then removed."""
    if not (d / "bundle.json").exists() and d.exists():
        aside = Path(tempfile.mkdtemp(prefix=f".{d.name}.old-", dir=d.parent))
        os.replace(d, aside / d.name)
        shutil.rmtree(aside, ignore_errors=True)
    try:
        os.replace(tmp, d)
    except OSError:
        if not (d / "bundle.json").exists():
            raise
        shutil.rmtree(tmp, ignore_errors=True)


def build_bundle(recipe: ImageRecipe, reference: str | None = None) -> BuiltImage:
    """Materialise the sandbox bundle of ``recipe`` (same files as the image's /opt/consortia) and the
    folder's requirements, installed offline from their hash-checked wheels into
    ``site/`` (:mod:`executor.images.requirements`); the torch base needs torch in this interpreter.

    Its reference is ``bundle:<directory name>`` (resolved under ``<cache>/bundles``)."""
    if recipe.base == "torch" and importlib.util.find_spec("torch") is None:
        raise ImageBuildError(
            f"image {recipe.name} builds on the torch base: the sandbox runs it with this interpreter "
            f"({sys.executable}), which has no torch"
        )
    interp = interpreter_identity()
    reqs = of_recipe(recipe)
    wheels = fetch_wheels(reqs)
    parts: list[Any] = ["bundle-v5", [[dst, sha256_file(src)] for src, dst in recipe.payload_files()], interp]
    if wheels:
        parts.append([[w.name, sha256_file(w)] for w in wheels])
    h = hash_json(parts)
    d = cache_root() / "bundles" / f"{recipe.name}-{h[:16]}"
    if not (d / "bundle.json").exists():
        # built in a folder of its own and renamed into place whole: builders of one recipe at once
        # (several organisations' agents on one host) never write into or remove each other's files
        d.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{d.name}.partial-", dir=d.parent))
        for src, dst in recipe.payload_files():
            (tmp / dst).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, tmp / dst)
        install(reqs, wheels, tmp / "site")
        (tmp / "bundle.json").write_text(
            json.dumps(
                {
                    "image": recipe.reference,
                    "interpreter": interp,
                    "algorithm": recipe.algorithm,
                    "numeric_profile": recipe.numeric_profile.id,
                    "base": recipe.base,
                    "requirements": [r.line() for r in reqs],
                },
                sort_keys=True,
            )
        )
        # bytecode for the host interpreter, checked against its source hash (see Containerfile)
        import compileall
        import py_compile

        if not compileall.compile_dir(
            str(tmp),
            quiet=1,
            ddir=BUNDLE_MOUNT,
            invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH,
        ):
            shutil.rmtree(tmp, ignore_errors=True)
            raise ImageBuildError(f"bundle {recipe.name} does not compile")
        for p in tmp.rglob("*"):
            p.chmod(0o555 if p.is_dir() else 0o444)
        tmp.chmod(0o555)
        _install(tmp, d)
    ref = reference or f"bundle:{d.name}"
    return BuiltImage(
        reference=ref, digest=bundle_digest(d), recipe_hash=h, runtime="sandbox", location=str(d)
    )
