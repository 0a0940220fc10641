"""Where the image a learning process pins is on this node, and the check that it is the pinned one
(docs/executor.md "Images", "Image distribution").

A process's image record names a ``reference``: for the container runtime an engine image tag, for
the sandbox runtime ``bundle:<name>``, a bundle directory under ``<cache>/bundles``. The agent asks
its runtime for the local digest of what the reference names and refuses a task whose image digest
is not the pinned one (:func:`verify_digest`).

A reference by digest into the consortium's registry (``host:port/consortia/NAME@sha256:…``,
:mod:`executor.images.reference`) is fetched when it is not here yet: an image is pulled through the
container engine (:mod:`executor.images.registry`), a bundle (``host:port/consortia/bundles/NAME@sha256:…``)
is fetched and unpacked under ``<cache>/bundles`` (:mod:`executor.images.bundle_archive`); the pinned
digest is then checked exactly as for a local one. ``consortia image pull`` does the same for one
Image record ahead of any process (:func:`pull_record`).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from executor.errors import ImageDigestMismatch
from executor.images.bundle import bundle_digest
from executor.images.bundle_archive import fetch_bundle, pulled_bundle_dir
from executor.images.engine import engine_client, image_file
from executor.images.outputs import DeclarationInvalid, OutputDeclaration
from executor.images.outputs import parse as parse_outputs
from executor.images.outputs import read as read_outputs
from executor.images.recipe import cache_root
from executor.images.reference import ImageTampered, RegistryError, parse_reference
from executor.images.registry import local_or_pulled, pull_image
from executor.runtimes.base import TaskRuntime

if TYPE_CHECKING:
    import docker

    from ledger.client import ImageRecord


def verify_digest(reference: str, pinned: str, local: str | None) -> None:
    """Refuse (ImageDigestMismatch) unless the local digest equals the pinned one."""
    if not pinned.startswith("sha256:"):
        raise ValueError(f"pinned digest must be sha256:<hex>, got {pinned!r}")
    if local != pinned:
        raise ImageDigestMismatch(reference, pinned, local)


IMAGE_JSON_IN_CONTAINER = "/opt/consortia/image/image.json"  #: where a container image holds its recipe's


@dataclass
class ImageResolver:
    """Maps a process's image (ledger record) to what the runtime runs locally.

    Container: the engine image tagged with the record's ``reference``. Sandbox: the bundle
    named by a ``bundle:<dir>`` reference under ``<cache>/bundles``. A registry reference by digest:
    fetched into ``bundles_root`` (bundles) or pulled through the runtime's engine (images)."""

    runtime: TaskRuntime
    bundles_root: Path = field(default_factory=lambda: cache_root() / "bundles")

    def bundle_dir(self, reference: str) -> Path | None:
        """The bundle directory a ``bundle:<name>`` reference names (None: not a bundle reference)."""
        ref = parse_reference(reference)
        if ref is not None:
            return pulled_bundle_dir(self.bundles_root, ref) if ref.is_bundle else None
        if not reference.startswith("bundle:"):
            return None
        name = reference[len("bundle:") :]
        if "/" in name or name.startswith("."):
            return None
        return self.bundles_root / name

    def output_declaration(self, reference: str) -> OutputDeclaration:
        """What the image ``reference`` names declares it sends (its ``image.json``, covered by its
        digest: read from the verified bundle, or from the engine image), :mod:`executor.images.outputs`."""
        bundle = self.bundle_dir(reference)
        if bundle is not None:
            return read_outputs(bundle / "image")
        engine = getattr(self.runtime, "client", None)
        if engine is None:
            return OutputDeclaration()
        raw = image_file(engine, reference, IMAGE_JSON_IN_CONTAINER)
        if raw is None:
            return OutputDeclaration()
        try:
            return parse_outputs(json.loads(raw))
        except ValueError as exc:
            raise DeclarationInvalid(f"image {reference}: image.json is not JSON: {exc}") from None

    def local_digest(self, reference: str) -> str | None:
        """The runtime's digest of what ``reference`` names here (None: absent); a registry
        reference is fetched first when absent."""
        if parse_reference(reference) is not None:
            return self._fetched_digest(reference)
        if reference.startswith("bundle:"):
            d = self.bundle_dir(reference)
            return self.runtime.local_digest(str(d)) if d is not None else None
        return self.runtime.local_digest(reference)

    def _fetched_digest(self, reference: str) -> str | None:
        """The local digest of what a registry ``reference`` names, made local for the runtime first:
        a bundle fetched into ``bundles_root``, an image pulled through the runtime's engine (None
        without one)."""
        ref = parse_reference(reference)
        if ref is None:
            raise RegistryError(f"{reference!r} is not a registry reference by digest")
        if ref.is_bundle:
            d = pulled_bundle_dir(self.bundles_root, ref)
            if not (d / "bundle.json").exists():  # a bundle folder appears whole or not at all
                fetch_bundle(reference, self.bundles_root, refresh=False)
            return self.runtime.local_digest(str(d))
        engine = getattr(self.runtime, "client", None)
        return local_or_pulled(engine, reference) if engine is not None else None


def pull_record(
    record: ImageRecord, engine: docker.DockerClient | None = None, bundles_root: Path | None = None
) -> tuple[str, str]:
    """``consortia image pull``: fetch what the ledger's Image ``record`` names by its registry
    reference and check it against the digest the record pins, before anything runs it.
    Returns (where it is here: the image reference or the bundle directory, its verified digest)."""
    ref = parse_reference(record.reference)
    if ref is None:
        raise RegistryError(
            f"image {record.id}: its reference {record.reference!r} is not in a registry by digest "
            "(its owner publishes it with `consortia image build --registry HOST:PORT`)"
        )
    if not ref.is_bundle:
        if engine is None:
            engine = engine_client()
        return record.reference, pull_image(engine, record.reference, pinned=record.digest)
    d = fetch_bundle(record.reference, bundles_root or cache_root() / "bundles")
    got = bundle_digest(d, fresh=True)  # measured from the files just unpacked
    if got != record.digest:
        shutil.rmtree(d, ignore_errors=True)
        raise ImageTampered(record.reference, record.digest, got, what="fetched bundle")
    return str(d), got
