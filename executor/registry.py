"""Image distribution by digest through the consortium's OCI registry (docs/executor.md
"Image distribution").

The image owner builds the algorithm image (:mod:`executor.engine_images`) and **pushes** it to the
registry ``scripts/install-registry`` runs (Debian's ``docker-registry``, distribution 2.8, TLS);
the ledger's Image record then names it by its registry reference
``<host:port>/consortia/<name>@sha256:<manifest digest>`` and pins the image's identity, the
engine's image id (the sha256 of the image's config, which names every layer's uncompressed
digest). Every other organisation **pulls by that reference** -- never by a tag, so a tag moved to
other bytes changes nothing -- and checks, before any run, that the pulled image's id is the digest
pinned on the ledger; anything else is :class:`ImageTampered`, naming both digests.

The sandbox runtime's bundle travels as a **content-addressed archive** (:mod:`executor.bundle_archive`):
one deterministic tar stored as a blob of the same registry; see that module for why.

An organisation that builds the image itself instead must arrive at the pinned digest
(:func:`verify_rebuild`), or its build is refused.
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


def _repository_name(name: str) -> str:
    repo = name.lower()
    if not re.fullmatch(r"[a-z0-9]+(?:[._-][a-z0-9]+)*", repo):
        raise RegistryError(f"{name!r} is not a repository name (lower-case letters, digits, . _ -)")
    return repo


# --------------------------------------------------------------------------- container images


def push_image(engine, image: str, registry: str, name: str, tag: str = "latest") -> str:
    """Push the local image ``image`` (a tag or an id) as ``<registry>/consortia/<name>:<tag>`` through
    the engine's Docker API; return its reference by the manifest digest the registry stored."""
    import docker.errors

    repo = f"{registry}/consortia/{_repository_name(name)}"
    try:
        engine.images.get(image).tag(repo, tag)
        lines = list(engine.api.push(repo, tag=tag, stream=True, decode=True))
    except docker.errors.APIError as exc:
        raise RegistryError(f"push of {image} to {repo}:{tag} failed: {exc}") from None
    digest = None
    for line in lines:
        if line.get("error") or line.get("errorDetail"):
            raise RegistryError(f"push of {image} to {repo}:{tag} failed: {line.get('error', line)}")
        found = re.search(r"digest: (sha256:[0-9a-f]{64})", str(line.get("status", "")))
        digest = (line.get("aux") or {}).get("Digest") or (found[1] if found else digest)
    if not digest:
        raise RegistryError(f"push of {image} to {repo}:{tag}: the engine reported no manifest digest")
    return f"{repo}@{digest}"


def pull_image(engine, reference: str, pinned: str | None = None) -> str:
    """Pull ``reference`` (by digest) through the engine and return the pulled image's id; with
    ``pinned`` (the ledger's digest) refuse (:class:`ImageTampered`) an id that is not it."""
    import docker.errors

    ref = parse_reference(reference)
    if ref is None or ref.is_bundle:
        raise RegistryError(
            f"{reference!r} is not an image reference by digest (host:port/consortia/NAME@sha256:…)"
        )
    try:
        for line in engine.api.pull(
            f"{ref.registry}/{ref.repository}", tag=ref.digest, stream=True, decode=True
        ):
            if line.get("error") or line.get("errorDetail"):
                raise RegistryError(f"pull of {reference} failed: {line.get('error', line)}")
        got = engine.images.get(reference).id
    except docker.errors.APIError as exc:
        raise RegistryError(f"pull of {reference} failed: {exc}") from None
    if pinned is not None and got != pinned:
        raise ImageTampered(reference, pinned, got)
    return got


def local_or_pulled(engine, reference: str) -> str | None:
    """The engine's id of the image ``reference`` names, pulling it first when it is not here (the
    caller compares it with the pinned digest before any run)."""
    import docker.errors

    try:
        return engine.images.get(reference).id
    except docker.errors.ImageNotFound:
        pass
    except docker.errors.APIError:
        return None
    return pull_image(engine, reference)


def verify_rebuild(reference: str, pinned: str, rebuilt: str | None) -> None:
    """An image an organisation built itself stands in for the pinned one only with the same digest."""
    if rebuilt != pinned:
        raise ImageTampered(reference, pinned, rebuilt, what="locally rebuilt image")


def fetch(reference: str, runtime, bundles_root: Path) -> tuple[Path | None, str | None]:
    """What a registry ``reference`` names, made local for ``runtime``: (bundle directory or None,
    local digest or None). Images are pulled through the container runtime's engine; bundles are
    fetched into ``bundles_root`` (:func:`executor.bundle_archive.fetch_bundle`)."""
    ref = parse_reference(reference)
    if ref is None:
        raise RegistryError(f"{reference!r} is not a registry reference by digest")
    if ref.is_bundle:
        from executor.bundle_archive import fetch_bundle, pulled_bundle_dir

        d = pulled_bundle_dir(bundles_root, ref)
        if not (d / "bundle.json").exists():
            fetch_bundle(reference, bundles_root)
        return d, runtime.local_digest(str(d))
    engine = getattr(runtime, "client", None)
    return None, local_or_pulled(engine, reference) if engine is not None else None


def pull_record(record, engine=None, bundles_root: Path | None = None) -> tuple[str, str]:
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
            from executor.engine_images import engine_client

            engine = engine_client()
        return record.reference, pull_image(engine, record.reference, pinned=record.digest)
    import shutil

    from executor.bundle_archive import fetch_bundle
    from executor.images import _BUNDLE_DIGESTS, bundle_digest, cache_root

    d = fetch_bundle(record.reference, bundles_root or cache_root() / "bundles")
    _BUNDLE_DIGESTS.pop(str(d.resolve()), None)  # measured from the files just unpacked
    got = bundle_digest(d)
    if got != record.digest:
        shutil.rmtree(d, ignore_errors=True)
        raise ImageTampered(record.reference, record.digest, got, what="fetched bundle")
    return str(d), got
