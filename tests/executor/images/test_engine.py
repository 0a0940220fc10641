"""Container images built through the engine in cached layers (executor.images.engine)."""

from __future__ import annotations

import pytest

from executor.errors import ImageDigestMismatch
from executor.images.engine import build_image, local_image_digest
from executor.images.resolver import verify_digest
from tests.executor.conftest import altered_recipe


@pytest.mark.container
def test_container_image_is_cached_and_a_one_byte_rebuild_is_refused(
    tmp_path, engine, recipe, container_image
):
    assert container_image.digest.startswith("sha256:") and len(container_image.digest) == 71
    assert local_image_digest(engine, recipe.reference) == container_image.digest
    assert build_image(engine, recipe).digest == container_image.digest  # cached, no rebuild
    labels = engine.images.get(container_image.digest).labels
    assert labels["org.consortia.algorithm"] == recipe.algorithm
    # Rebuild under the same reference with one changed byte: the pinned digest no longer matches.
    ref = "consortia/average-consensus-tamper:1.0.0"
    pinned = build_image(engine, recipe, reference=ref).digest
    tampered = build_image(engine, altered_recipe(tmp_path, recipe), reference=ref)
    assert tampered.digest != pinned
    assert local_image_digest(engine, ref) == tampered.digest
    with pytest.raises(ImageDigestMismatch):
        verify_digest(ref, pinned, local_image_digest(engine, ref))
    engine.images.remove(ref)
