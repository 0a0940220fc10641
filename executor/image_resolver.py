"""Where the image a learning process pins is on this node (docs/executor.md "Images").

A process's image record names a ``reference``: for the container runtime an engine image tag, for
the sandbox runtime ``bundle:<name>``, a bundle directory under ``<cache>/bundles``. The agent asks
its runtime for the local digest of what the reference names and refuses a task whose image digest
is not the pinned one (:func:`executor.images.verify_digest`).

A reference by digest into the consortium's registry (``host:port/consortia/NAME@sha256:…``,
:mod:`executor.registry`) is fetched when it is not here yet: an image is pulled through the
container engine, a bundle (``host:port/consortia/bundles/NAME@sha256:…``) is fetched and unpacked
under ``<cache>/bundles``; the pinned digest is then checked exactly as for a local one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from executor import registry
from executor.images import cache_root
from executor.runtimes.base import TaskRuntime


@dataclass
class ImageResolver:
    """Maps a process's image (ledger record) to what the runtime runs locally.

    Container: the engine image tagged with the record's ``reference``. Sandbox: the bundle
    named by a ``bundle:<dir>`` reference under ``<cache>/bundles``."""

    runtime: TaskRuntime
    bundles_root: Path = field(default_factory=lambda: cache_root() / "bundles")

    def bundle_dir(self, reference: str) -> Path | None:
        """The bundle directory a ``bundle:<name>`` reference names (None: not a bundle reference)."""
        ref = registry.parse_reference(reference)
        if ref is not None:
            from executor.bundle_archive import pulled_bundle_dir

            return pulled_bundle_dir(self.bundles_root, ref) if ref.is_bundle else None
        if not reference.startswith("bundle:"):
            return None
        name = reference[len("bundle:") :]
        if "/" in name or name.startswith("."):
            return None
        return self.bundles_root / name

    def local_digest(self, reference: str) -> str | None:
        """The runtime's digest of what ``reference`` names here (None: absent); a registry
        reference is fetched first when absent."""
        if registry.parse_reference(reference) is not None:
            return registry.fetch(reference, self.runtime, self.bundles_root)[1]
        if reference.startswith("bundle:"):
            d = self.bundle_dir(reference)
            return self.runtime.local_digest(str(d)) if d is not None else None
        return self.runtime.local_digest(reference)
