"""``consortia image build NAME``: build an algorithm image, check its digest, register it -- one step.

:func:`build_and_register` builds the sandbox bundle (:func:`executor.images.bundle.build_bundle`) or
the container image (:func:`executor.images.engine.build_image`) of a recipe folder
(``algorithm-images/<NAME>`` or a path), then checks that what is on disk is what the recipe makes
before anything reaches the ledger:

* sandbox: every source file of the recipe (and of the ``algorithms`` package) is in the bundle
  byte for byte, so is every file of a user folder's requirements' wheels, and the bundle's digest recomputed from its files (no cache) equals the digest
  the build reported -- a cached bundle someone edited is refused, not registered;
* container: the engine's id of the tagged image equals the digest the build reported.

With ``registry`` (``host:port`` of the consortium's registry, scripts/install-registry) the checked
image is pushed there (a bundle as its archive, :mod:`executor.images.bundle_archive`) and the record's
reference is the registry reference by digest, which every organisation pulls
(:mod:`executor.images.resolver`).

Then it registers the digest (or, when that image id is already registered, requires the same
digest) and checks the ledger record carries exactly the digest that was built.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from executor.errors import ImageBuildError, ImageDigestMismatch
from executor.images.bundle import build_bundle, bundle_digest
from executor.images.bundle_archive import push_bundle
from executor.images.engine import build_image, engine_client, local_image_digest
from executor.images.recipe import IMAGES_DIR, BuiltImage, ImageRecipe, sha256_file
from executor.images.registry import push_image
from executor.images.requirements import fetch_wheels, of_recipe, wheel_files


@dataclass(frozen=True)
class BuildResult:
    record: object  # ledger.client.ImageRecord
    digest: str
    reference: str
    runtime: str
    recipe: ImageRecipe
    registered: bool  # False: the same digest was already registered under that id

    def to_dict(self) -> dict:
        return {
            "id": self.record.id,
            "digest": self.digest,
            "reference": self.reference,
            "runtime": self.runtime,
            "algorithm": self.recipe.algorithm,
            "owner": self.record.owner,
            "registered": self.registered,
            "recipe": str(self.recipe.folder),
        }


def recipe_from(name_or_path: str | os.PathLike) -> ImageRecipe:
    p = Path(name_or_path)
    if p.is_dir():
        return ImageRecipe.load(p)
    if not (IMAGES_DIR / str(name_or_path) / "image.json").is_file():
        known = sorted(d.name for d in IMAGES_DIR.iterdir() if (d / "image.json").is_file())
        raise ImageBuildError(
            f"no image recipe {str(name_or_path)!r} (a folder with image.json, or one of {known})"
        )
    return ImageRecipe.named(str(name_or_path))


def check_bundle(recipe: ImageRecipe, built: BuiltImage) -> None:
    """The bundle on disk is what ``recipe`` makes (its requirements' installed files are those of
    their hash-checked wheels), and its digest is ``built.digest``."""
    d = Path(built.location)
    for src, dst in recipe.payload_files():
        copy = d / dst
        if not copy.is_file() or sha256_file(copy) != sha256_file(src):
            raise ImageBuildError(
                f"bundle {d} was altered: {dst} differs from the recipe's {src} "
                f"(delete that folder and build again)"
            )
    for wheel in fetch_wheels(of_recipe(recipe)):  # hash-checked again; its files as installed
        for path, digest in wheel_files(wheel):
            copy = d / "site" / path
            if not copy.is_file() or sha256_file(copy) != digest:
                raise ImageBuildError(
                    f"bundle {d} was altered: site/{path} differs from the wheel {wheel.name} "
                    f"(delete that folder and build again)"
                )
    fresh = bundle_digest(d, fresh=True)  # recomputed from the files, not remembered
    if fresh != built.digest:
        raise ImageDigestMismatch(built.reference, built.digest, fresh)


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


def recipe_runtimes(recipe: Any) -> tuple[str, ...]:
    """Runtimes an image folder declares in ``image.json`` (default: both)."""
    meta = json.loads((Path(recipe.folder) / "image.json").read_text())
    return tuple(meta.get("runtimes", ("container", "sandbox")))


def _push(registry: str, recipe: ImageRecipe, built: BuiltImage, engine) -> str:
    if built.runtime == "sandbox":
        return push_bundle(built.location, registry, recipe.name, recipe.version)
    return push_image(engine, built.digest, registry, recipe.name, recipe.version)


def build_and_register(
    client,
    name_or_path: str | os.PathLike,
    runtime: str = "sandbox",
    image_id: str | None = None,
    engine=None,
    default_id: Callable[[ImageRecipe, BuiltImage], str] | None = None,
    registry: str | None = None,
) -> BuildResult:
    """Build ``name_or_path`` for ``runtime``, check the digest of what was built, and register it under
    ``image_id`` (default ``default_id(recipe, built)``, else ``NAME:VERSION``); an id already registered
    with the same digest is reused, with another digest refused (:class:`ImageBuildError`)."""
    from ledger.errors import NotFound

    recipe = recipe_from(name_or_path)
    if runtime not in recipe_runtimes(recipe):
        raise ImageBuildError(
            f"image {recipe.name} runs with {list(recipe_runtimes(recipe))} only, not {runtime!r}"
        )
    if runtime == "sandbox":
        built = build_bundle(recipe)
        check_bundle(recipe, built)
    elif runtime == "container":
        engine = engine or engine_client()
        built = build_image(engine, recipe)
        local = local_image_digest(engine, built.reference)
        if local != built.digest:
            raise ImageDigestMismatch(built.reference, built.digest, local)
    else:
        raise ImageBuildError(f"unknown runtime {runtime!r} (sandbox or container)")
    if registry:
        built = dataclasses.replace(built, reference=_push(registry, recipe, built, engine))
    image_id = image_id or (default_id(recipe, built) if default_id else f"{recipe.name}:{recipe.version}")
    try:
        rec = client.get_image(image_id)
        if rec.digest != built.digest:
            raise ImageBuildError(
                f"image {image_id} is registered with digest {rec.digest}, this build is "
                f"{built.digest}: register it under another id (--id NAME:VERSION)"
            )
        registered = False
    except NotFound:
        rec = register(client, recipe, built, image_id=image_id)
        registered = True
    if rec.digest != built.digest:  # what the ledger holds is what was built
        raise ImageDigestMismatch(image_id, built.digest, rec.digest)
    return BuildResult(rec, built.digest, built.reference, runtime, recipe, registered)
