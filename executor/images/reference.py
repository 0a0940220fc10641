"""References by digest into the consortium's OCI registry, and the errors of image distribution
(docs/executor.md "Image distribution").

An image is named ``<host:port>/consortia/<name>@sha256:<manifest digest>`` (pulled through the
container engine, :mod:`executor.images.registry`), a sandbox bundle
``<host:port>/consortia/bundles/<name>@sha256:<archive digest>`` (fetched over HTTPS,
:mod:`executor.images.bundle_archive`) -- never by a tag, so a tag moved to other bytes changes
nothing. What was delivered is checked against the digest the ledger pins; anything else is
:class:`ImageTampered`, naming both digests.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from executor.errors import ExecutorError, ImageDigestMismatch
from wire.env import environment

#: ``host[:port]/repository@sha256:<64 hex>`` -- the only form an image is pulled by
_REFERENCE = re.compile(
    r"(?P<registry>[A-Za-z0-9.-]+(?::[0-9]{1,5})?)/(?P<repository>consortia/[a-z0-9]+(?:[._/-][a-z0-9]+)*)"
    r"@(?P<digest>sha256:[0-9a-f]{64})"
)
BUNDLES = "consortia/bundles/"  #: repository prefix of sandbox bundles (archives, not images)
CERTS_DIR = Path("/etc/containers/certs.d")


class ImageTampered(ImageDigestMismatch):
    """What the registry (or a local rebuild) delivered is not the image the ledger pins: never run."""

    code = "IMAGE_TAMPERED"

    def __init__(
        self,
        reference: str,
        pinned: str,
        local: str | None,
        what: str = "pulled image",
        by: str = "the ledger",
    ):
        super().__init__(reference, pinned, local)
        self.args = (
            f"{reference}: the {what} has digest {local or '(none)'}, but {by} pins {pinned}; refused",
        )


class RegistryError(ExecutorError):
    """The registry cannot be reached, refuses a push, or does not hold what a reference names."""

    code = "REGISTRY_ERROR"


@dataclass(frozen=True)
class RegistryReference:
    registry: str  # host:port
    repository: str  # consortia/<name> or consortia/bundles/<name>
    digest: str  # sha256:<hex> of the manifest (images) or of the archive (bundles)

    def __str__(self) -> str:
        return f"{self.registry}/{self.repository}@{self.digest}"

    @property
    def is_bundle(self) -> bool:
        return self.repository.startswith(BUNDLES)

    @property
    def name(self) -> str:
        return self.repository.rsplit("/", 1)[1]


def parse_reference(reference: str) -> RegistryReference | None:
    """The parts of a registry reference by digest (None: not one, e.g. a local tag or ``bundle:``)."""
    m = _REFERENCE.fullmatch(reference)
    return RegistryReference(m["registry"], m["repository"], m["digest"]) if m else None


def registry_ca(registry: str) -> Path:
    """The CA certificate the registry's server certificate is checked with: $CONSORTIA_REGISTRY_CA,
    else the one scripts/install-registry gave Podman (``/etc/containers/certs.d/<host:port>/ca.crt``)."""
    return Path(environment().registry_ca or CERTS_DIR / registry / "ca.crt")


def repository_name(name: str) -> str:
    repo = name.lower()
    if not re.fullmatch(r"[a-z0-9]+(?:[._-][a-z0-9]+)*", repo):
        raise RegistryError(f"{name!r} is not a repository name (lower-case letters, digits, . _ -)")
    return repo
