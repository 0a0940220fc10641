"""Image distribution by digest through the consortium's OCI registry (docs/executor.md
"Image distribution").

The image owner builds the algorithm image (:mod:`executor.images.engine`) and **pushes** it to the
registry ``scripts/install-registry`` runs (Debian's ``docker-registry``, distribution 2.8, TLS);
the ledger's Image record then names it by its registry reference
``<host:port>/consortia/<name>@sha256:<manifest digest>`` and pins the image's identity, the
engine's image id (the sha256 of the image's config, which names every layer's uncompressed
digest). Every other organisation **pulls by that reference** -- never by a tag, so a tag moved to
other bytes changes nothing -- and checks, before any run, that the pulled image's id is the digest
pinned on the ledger; anything else is :class:`ImageTampered`, naming both digests.

The sandbox runtime's bundle travels as a **content-addressed archive**
(:mod:`executor.images.bundle_archive`): one deterministic tar stored as a blob of the same registry;
see that module for why. References and the errors of distribution: :mod:`executor.images.reference`;
fetching what a process pins (image or bundle): :mod:`executor.images.resolver`.

An organisation that builds the image itself instead must arrive at the pinned digest
(:func:`verify_rebuild`), or its build is refused.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from executor.images.reference import ImageTampered, RegistryError, parse_reference, repository_name

if TYPE_CHECKING:
    import docker


def push_image(engine: docker.DockerClient, image: str, registry: str, name: str, tag: str = "latest") -> str:
    """Push the local image ``image`` (a tag or an id) as ``<registry>/consortia/<name>:<tag>`` through
    the engine's Docker API; return its reference by the manifest digest the registry stored."""
    import docker.errors

    repo = f"{registry}/consortia/{repository_name(name)}"
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


def pull_image(engine: docker.DockerClient, reference: str, pinned: str | None = None) -> str:
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
        got: str = engine.images.get(reference).id
    except docker.errors.APIError as exc:
        raise RegistryError(f"pull of {reference} failed: {exc}") from None
    if pinned is not None and got != pinned:
        raise ImageTampered(reference, pinned, got)
    return got


def local_or_pulled(engine: docker.DockerClient, reference: str) -> str | None:
    """The engine's id of the image ``reference`` names, pulling it first when it is not here (the
    caller compares it with the pinned digest before any run)."""
    import docker.errors

    try:
        local: str = engine.images.get(reference).id
        return local
    except docker.errors.ImageNotFound:
        pass
    except docker.errors.APIError:
        return None
    return pull_image(engine, reference)


def verify_rebuild(reference: str, pinned: str, rebuilt: str | None) -> None:
    """An image an organisation built itself stands in for the pinned one only with the same digest."""
    if rebuilt != pinned:
        raise ImageTampered(reference, pinned, rebuilt, what="locally rebuilt image")
