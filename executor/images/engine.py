"""Container images of the algorithms, built locally in three cached layers through the engine's
Docker API (docs/executor.md "Images and digests"; the recipe: :mod:`executor.images.recipe`):
``consortia-base:<h>`` (debootstrap), ``consortia-python:<h>`` (the pinned wheels, installed offline),
``consortia/<name>:<version>`` (one per recipe). The image digest is the engine's image id.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from executor.errors import ImageBuildError
from executor.images.recipe import (
    BASE_DIR,
    TORCH_CONTAINER_REFUSED,
    WHEEL_TARGET,
    BuiltImage,
    ImageRecipe,
    cache_root,
    hash_json,
    image_requirements,
    sha256_file,
    tree_listing,
)
from executor.images.requirements import fetch_wheels, of_recipe, stage_wheels
from wire.env import environment

if TYPE_CHECKING:
    import docker

DEFAULT_SOCKET = "unix:///run/consortia/podman.sock"  # the socket scripts/install-container-engine starts

# --------------------------------------------------------------------------- host-side downloads


def download_wheels() -> Path:
    """Wheels for the image requirements (and their dependencies) for CPython 3.11 manylinux
    x86_64, downloaded once into the cache; returns the directory (with requirements.lock)."""
    reqs = image_requirements()
    d = cache_root() / "images" / "wheels" / hash_json(reqs)[:16]
    lock = d / "requirements.lock"
    if lock.exists():
        return d
    d.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "-q",
        "--disable-pip-version-check",
        "--only-binary=:all:",
        *WHEEL_TARGET,
        "-d",
        str(d),
        *reqs,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise ImageBuildError(f"pip download failed: {proc.stderr.strip()[-800:]}")
    lock.write_text("\n".join(reqs) + "\n")
    return d


def base_rootfs() -> Path:
    """The debootstrap tarball of the base image (built once per recipe; ~2 min, ~150 MB)."""
    script = BASE_DIR / "debootstrap.sh"
    tar = cache_root() / "images" / f"rootfs-{sha256_file(script)[:16]}.tar"
    if not tar.exists():
        tar.parent.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run(["bash", str(script), str(tar)], capture_output=True, text=True)
        if proc.returncode != 0 or not tar.exists():
            raise ImageBuildError(f"debootstrap of the base image failed: {proc.stderr.strip()[-800:]}")
    return tar


# --------------------------------------------------------------------------- engine


def engine_client(base_url: str | None = None, timeout: int = 600) -> docker.DockerClient:
    """A ``docker.DockerClient`` for the engine socket (Podman's Docker API, or Docker).

    ``base_url`` defaults to $CONSORTIA_DOCKER_HOST, then $DOCKER_HOST, then the socket
    scripts/install-container-engine starts."""
    import docker

    url = base_url or environment().engine_url or DEFAULT_SOCKET
    return docker.DockerClient(base_url=url, timeout=timeout)


def _image_id(client: docker.DockerClient, ref: str) -> str | None:
    import docker.errors

    try:
        image_id: str = client.images.get(ref).id
        return image_id
    except docker.errors.ImageNotFound:
        return None


def _build(
    client: docker.DockerClient,
    context: Path,
    dockerfile: str,
    tag: str,
    buildargs: dict[str, str],
    labels: dict[str, str],
) -> str:
    import docker.errors

    try:
        # offline (no network during the build), never pulling: every layer is built here
        options = {"rm": True, "network_mode": "none", "pull": False}
        image, _logs = client.images.build(
            path=str(context), dockerfile=dockerfile, tag=tag, buildargs=buildargs, labels=labels, **options
        )
    except docker.errors.BuildError as exc:
        tail = "".join(str(x.get("stream", x.get("error", ""))) for x in list(exc.build_log)[-15:])
        raise ImageBuildError(f"build of {tag} failed: {exc}\n{tail}") from None
    except docker.errors.APIError as exc:
        raise ImageBuildError(f"build of {tag} failed: {exc}") from None
    image_id: str = image.id
    return image_id


def ensure_base_image(client: docker.DockerClient) -> str:
    """Import the debootstrap tarball as ``consortia-base:<h>`` unless present; return the tag."""
    tar = base_rootfs()
    tag = f"consortia-base:{tar.stem.split('-', 1)[1]}"
    if _image_id(client, tag) is None:
        repo, t = tag.split(":")
        out = client.api.import_image_from_file(str(tar), repository=repo, tag=t)
        # Podman's compat API ignores the tag and answers with the new image id: tag it ourselves.
        ids = re.findall(r"sha256:[0-9a-f]{64}", out if isinstance(out, str) else str(out))
        if ids and _image_id(client, tag) is None:
            client.images.get(ids[-1]).tag(repo, t)
        if _image_id(client, tag) is None:
            raise ImageBuildError(f"import of {tar} did not produce {tag}")
    return tag


def ensure_python_image(client: docker.DockerClient) -> str:
    base = ensure_base_image(client)
    wheels = download_wheels()
    recipe = (BASE_DIR / "Containerfile.python").read_bytes()
    h = hash_json(
        [
            base,
            hashlib.sha256(recipe).hexdigest(),
            tree_listing(wheels, [p for p in wheels.iterdir() if p.is_file()]),
        ]
    )[:16]
    tag = f"consortia-python:{h}"
    if _image_id(client, tag) is not None:
        return tag
    ctx = cache_root() / "images" / "contexts" / f"python-{h}"
    if ctx.exists():
        shutil.rmtree(ctx)
    (ctx / "wheels").mkdir(parents=True)
    for p in wheels.iterdir():
        if p.is_file():
            os.link(p, ctx / "wheels" / p.name) if _same_fs(p, ctx) else shutil.copy2(
                p, ctx / "wheels" / p.name
            )
    shutil.copy2(BASE_DIR / "Containerfile.python", ctx / "Containerfile")
    _build(client, ctx, "Containerfile", tag, {"BASE_IMAGE": base}, {"org.consortia.layer": "python"})
    shutil.rmtree(ctx, ignore_errors=True)
    return tag


def _same_fs(a: Path, b: Path) -> bool:
    return os.stat(a).st_dev == os.stat(b).st_dev


def _recipe_hash(recipe: ImageRecipe, parent: str, wheels: list[Path]) -> str:
    parts = [parent, [[dst, sha256_file(src)] for src, dst in recipe.payload_files()]]
    if wheels:
        parts.append([[w.name, sha256_file(w)] for w in wheels])
    return hash_json(parts)


def build_image(
    client: docker.DockerClient, recipe: ImageRecipe, reference: str | None = None, force: bool = False
) -> BuiltImage:
    """Build (or reuse) the container image of ``recipe``; tag it ``reference``. The folder's
    requirements are downloaded with hash checking on the host and installed offline in the build
    (``algorithm-images/base/Containerfile.algorithm``); the torch base is refused
    (:data:`executor.images.recipe.TORCH_CONTAINER_REFUSED`)."""
    if recipe.base == "torch":
        raise ImageBuildError(f"image {recipe.name}: {TORCH_CONTAINER_REFUSED}")
    reqs = of_recipe(recipe)
    wheels = fetch_wheels(reqs)
    parent = ensure_python_image(client)
    ref = reference or recipe.reference
    h = _recipe_hash(recipe, parent, wheels)
    cached = f"consortia-cache/{recipe.name}:{h[:16]}"
    image_id = None if force else _image_id(client, cached)
    if image_id is None:
        ctx = cache_root() / "images" / "contexts" / f"{recipe.name}-{h[:16]}"
        if ctx.exists():
            shutil.rmtree(ctx)
        for src, dst in recipe.payload_files():
            (ctx / dst).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, ctx / dst)
        stage_wheels(reqs, wheels, ctx / "wheels")
        (ctx / "Containerfile").write_text(recipe.containerfile())
        image_id = _build(
            client,
            ctx,
            "Containerfile",
            cached,
            {"PYTHON_IMAGE": parent},
            {
                "org.consortia.image": recipe.name,
                "org.consortia.version": recipe.version,
                "org.consortia.algorithm": recipe.algorithm,
                "org.consortia.recipe": h,
            },
        )
        shutil.rmtree(ctx, ignore_errors=True)
    client.images.get(image_id).tag(*ref.rsplit(":", 1))
    return BuiltImage(reference=ref, digest=image_id, recipe_hash=h, runtime="container")


def local_image_digest(client: docker.DockerClient, reference: str) -> str | None:
    """The engine's content-addressed id of the local image ``reference`` (None if absent)."""
    return _image_id(client, reference)


def image_file(client: docker.DockerClient, reference: str, path: str) -> bytes | None:
    """The bytes of the regular file ``path`` inside the engine image tagged ``reference`` (None: the
    image has no such file), read from a container created and removed again, never started."""
    import io
    import tarfile

    import docker.errors

    container = client.containers.create(reference, entrypoint=["/bin/false"], network_disabled=True)
    try:
        try:
            stream, _ = container.get_archive(path)
        except docker.errors.NotFound:
            return None
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
            member = next((m for m in tar.getmembers() if m.isfile()), None)
            fh = tar.extractfile(member) if member is not None else None
            return fh.read() if fh is not None else None
    finally:
        container.remove(force=True)
