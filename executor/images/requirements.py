"""A user algorithm folder's extra requirements: pinned with hashes, downloaded once with hash
checking, installed offline (docs/sdk.md "Build and run your image").

``<folder>/requirements.txt`` lists one distribution a line, each pinned exactly and with the
sha256 of the wheel it may install (what ``pip-compile --generate-hashes`` writes)::

    toolz==1.2.0 --hash=sha256:890f820b1cb8152785aaf9386d8707770110809035800985ca65cb24ce1120ef

Comments and blank lines are allowed, a line may continue with ``\\``; anything else (an unpinned
name, a missing or malformed hash, an index option, an include) is refused with the line named
(:class:`RequirementRefused`). Dependencies are not resolved: the file lists every distribution
the algorithm needs beyond the base (the base carries the project's numeric stack, and torch for the
``torch`` base), as hash-checking mode requires.

Each requirement's wheel is downloaded once (``pip download --require-hashes --only-binary=:all:
--no-deps``, for CPython 3.11 x86-64 Linux) into ``<cache>/images/requirements/<name>-<version>``,
outside any repository, and checked against its hashes again whenever it is used; it is installed
offline (``pip install --no-index --find-links … --require-hashes --no-deps --no-compile --target``)
into the bundle's ``site/`` folder or the container image's ``/opt/consortia/site``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from executor.errors import ImageBuildError
from executor.images.recipe import WHEEL_TARGET, ImageRecipe, cache_root, sha256_file

_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9][A-Za-z0-9.+!_-]*)$")
_HASH = re.compile(r"^--hash=sha256:([0-9a-f]{64})$")


class RequirementRefused(ImageBuildError):
    """A requirement that is not pinned with a hash, or whose wheel does not match its hash."""


@dataclass(frozen=True)
class Requirement:
    """One pinned requirement: ``name==version`` and the sha256 digests its wheel may have."""

    name: str
    version: str
    hashes: tuple[str, ...]  # lower-case hex sha256

    @property
    def pin(self) -> str:
        return f"{self.name}=={self.version}"

    def line(self) -> str:
        """The requirement as a hash-checking requirements line."""
        return " ".join([self.pin, *(f"--hash=sha256:{h}" for h in self.hashes)])


def parse(path: Path) -> tuple[Requirement, ...]:
    """The requirements of ``path`` (none if the file is absent), sorted by name; refused
    (:class:`RequirementRefused`, naming the line) unless each is ``name==version --hash=sha256:…``."""
    if not path.is_file():
        return ()
    logical: list[tuple[int, str]] = []
    pending, start = "", 0
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        text = re.sub(r"(^|\s)#.*$", "", raw).strip()  # a comment starts a line or follows a blank
        if not pending:
            start = number
        if text.endswith("\\"):
            pending += text[:-1] + " "
            continue
        text, pending = (pending + text).strip(), ""
        if text:
            logical.append((start, text))
    reqs: dict[str, Requirement] = {}
    for number, text in logical:
        words = text.split()
        where = f"{path}:{number}: {text!r}"
        pin = _PIN.match(words[0])
        if pin is None:
            raise RequirementRefused(f"{where} is not pinned as name==version (every requirement must be)")
        hashes = []
        for w in words[1:]:
            m = _HASH.match(w)
            if m is None:
                raise RequirementRefused(f"{where}: {w!r} is not --hash=sha256:<64 hex> (no other options)")
            hashes.append(m.group(1))
        if not hashes:
            raise RequirementRefused(
                f"{where} has no --hash=sha256:… (every requirement is installed in hash-checking mode)"
            )
        name = re.sub(r"[-_.]+", "-", pin.group(1)).lower()
        if name in reqs:
            raise RequirementRefused(f"{where}: {name} is required twice")
        reqs[name] = Requirement(name, pin.group(2), tuple(hashes))
    return tuple(reqs[n] for n in sorted(reqs))


def of_recipe(recipe: ImageRecipe) -> tuple[Requirement, ...]:
    """The requirements of an algorithm folder (none without ``requirements.txt``: the built-in
    images' base carries what they import)."""
    return parse(recipe.folder / "requirements.txt")


def lock_text(reqs: Sequence[Requirement]) -> str:
    """The requirements as the hash-checking file pip installs from (one normalised line each)."""
    return "".join(r.line() + "\n" for r in reqs)


def _matching_wheel(req: Requirement, folder: Path) -> Path | None:
    if not folder.is_dir():
        return None
    for p in sorted(folder.glob("*.whl")):
        if sha256_file(p) in req.hashes:
            return p
    return None


def _pip(args: list[str]) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "pip", *args, "-q", "--disable-pip-version-check", "--no-input"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900)


def fetch_wheel(req: Requirement) -> Path:
    """The wheel of ``req`` from the cache, downloaded with hash checking when it is not there (or
    no longer matches a hash); refused (:class:`RequirementRefused`) when PyPI's wheel does not
    match the requirement's hashes."""
    folder = cache_root() / "images" / "requirements" / f"{req.name}-{req.version}"
    found = _matching_wheel(req, folder)
    if found is not None:
        return found
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="consortia-req-") as tmp:
        lock = Path(tmp) / "requirement.txt"
        lock.write_text(req.line() + "\n")
        proc = _pip(
            ["download", "--require-hashes", "--only-binary=:all:", "--no-deps", *WHEEL_TARGET]
            + ["-d", str(folder), "-r", str(lock)]
        )
    if proc.returncode != 0:
        tail = proc.stderr.strip()[-600:]
        if "HASHES" in proc.stderr.upper():
            raise RequirementRefused(
                f"requirement {req.pin}: the wheel downloaded does not match its --hash "
                f"({', '.join('sha256:' + h[:12] + '…' for h in req.hashes)}); refused\n{tail}"
            )
        raise RequirementRefused(f"requirement {req.pin} cannot be downloaded as a wheel: {tail}")
    found = _matching_wheel(req, folder)
    if found is None:  # pip checked the hash; a file changed underneath it
        raise RequirementRefused(f"requirement {req.pin}: no wheel in {folder} matches its --hash")
    return found


def fetch_wheels(reqs: Sequence[Requirement]) -> list[Path]:
    """The wheel of each requirement (:func:`fetch_wheel`), in the requirements' order."""
    return [fetch_wheel(r) for r in reqs]


def stage_wheels(reqs: Sequence[Requirement], wheels: Sequence[Path], folder: Path) -> None:
    """Copy exactly these wheels and their ``requirements.lock`` into ``folder`` (pip's only index)."""
    folder.mkdir(parents=True, exist_ok=True)
    for w in wheels:
        shutil.copyfile(w, folder / w.name)
    (folder / "requirements.lock").write_text(lock_text(reqs))


def install(reqs: Sequence[Requirement], wheels: Sequence[Path], target: Path) -> None:
    """Install ``wheels`` offline into ``target`` in hash-checking mode (no index, no dependency
    resolution, no bytecode: the bundle compiles it with checked hashes, so two builds are equal)."""
    if not reqs:
        return
    with tempfile.TemporaryDirectory(prefix="consortia-wheels-") as tmp:
        links = Path(tmp) / "wheels"
        stage_wheels(reqs, wheels, links)
        proc = _pip(
            ["install", "--no-index", "--find-links", str(links), "--require-hashes", "--no-deps"]
            + [
                "--no-compile",
                "--no-cache-dir",
                "--target",
                str(target),
                "-r",
                str(links / "requirements.lock"),
            ]
        )
    if proc.returncode != 0:
        raise RequirementRefused(
            f"offline install of {[r.pin for r in reqs]} refused: {proc.stderr.strip()[-600:]}"
        )


def wheel_files(wheel: Path) -> list[tuple[str, str]]:
    """(path under the install target, hex sha256) of every file the wheel's own RECORD lists with a
    hash, except the relocated ``*.data/`` entries: what an offline install of it leaves in ``site/``
    byte for byte (pip rewrites RECORD itself and adds INSTALLER/REQUESTED, which carry no hash)."""
    import base64
    import csv
    import io
    import zipfile

    with zipfile.ZipFile(wheel) as z:
        record = next((n for n in z.namelist() if n.endswith(".dist-info/RECORD")), None)
        if record is None:
            raise RequirementRefused(f"wheel {wheel.name} has no RECORD")
        rows = list(csv.reader(io.StringIO(z.read(record).decode())))
    out = []
    for row in rows:
        if len(row) < 2 or not row[1].startswith("sha256=") or row[0].split("/", 1)[0].endswith(".data"):
            continue
        raw = base64.urlsafe_b64decode(row[1][len("sha256=") :] + "==")
        out.append((row[0], raw.hex()))
    return out
