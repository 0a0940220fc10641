"""Image recipes, pinned wheels, bundles and digests; a rebuilt image with one changed byte is refused."""

from __future__ import annotations

import json
import shutil

import pytest

from executor import images
from executor.errors import ImageBuildError, ImageDigestMismatch


def test_image_requirements_use_the_project_pins():
    pins = images.project_pins()
    reqs = images.image_requirements()
    assert "numpy==" + pins["numpy"] in reqs and "scikit-learn==" + pins["scikit-learn"] in reqs
    assert all("==" in r for r in reqs)


def test_recipe_loads_and_validates(tmp_path, recipe):
    assert recipe.name == "average-consensus" and recipe.algorithm == "average_consensus:AverageConsensus"
    dsts = [d for _, d in recipe.payload_files()]
    assert "algorithms/task_runtime.py" in dsts and "image/entrypoint.py" in dsts
    assert not any("__pycache__" in d for d in dsts)
    with pytest.raises(ImageBuildError, match="no image.json"):
        images.ImageRecipe.load(tmp_path)
    (tmp_path / "image.json").write_text(json.dumps({"name": "x", "version": "1", "algorithm": "a:B"}))
    with pytest.raises(ImageBuildError, match="lacks Containerfile"):
        images.ImageRecipe.load(tmp_path)


def test_verify_digest():
    d = "sha256:" + "1" * 64
    images.verify_digest("ref", d, d)
    with pytest.raises(ImageDigestMismatch, match="does not match the pinned digest"):
        images.verify_digest("ref", d, "sha256:" + "2" * 64)
    with pytest.raises(ImageDigestMismatch, match="no such local image"):
        images.verify_digest("ref", d, None)
    with pytest.raises(ValueError):
        images.verify_digest("ref", "md5:1", d)


def _altered_recipe(tmp_path, recipe):
    folder = tmp_path / "altered"
    shutil.copytree(recipe.folder, folder, ignore=shutil.ignore_patterns("__pycache__"))
    mod = folder / "average_consensus.py"
    mod.write_bytes(mod.read_bytes() + b" ")  # one byte more
    return images.ImageRecipe.load(folder)


def test_bundle_digest_is_stable_and_changes_with_one_byte(tmp_path, recipe, bundle):
    again = images.build_bundle(recipe)
    assert again.digest == bundle.digest and again.reference == bundle.reference
    assert images.bundle_digest(bundle.location) == bundle.digest
    other = images.build_bundle(_altered_recipe(tmp_path, recipe))
    assert other.digest != bundle.digest
    with pytest.raises(ImageDigestMismatch):
        images.verify_digest(recipe.reference, bundle.digest, other.digest)


@pytest.mark.container
def test_container_image_is_cached_and_a_one_byte_rebuild_is_refused(
    tmp_path, engine, recipe, container_image
):
    assert container_image.digest.startswith("sha256:") and len(container_image.digest) == 71
    assert images.local_image_digest(engine, recipe.reference) == container_image.digest
    assert images.build_image(engine, recipe).digest == container_image.digest  # cached, no rebuild
    labels = engine.images.get(container_image.digest).labels
    assert labels["org.consortia.algorithm"] == recipe.algorithm
    # Rebuild under the same reference with one changed byte: the pinned digest no longer matches.
    ref = "consortia/average-consensus-tamper:1.0.0"
    pinned = images.build_image(engine, recipe, reference=ref).digest
    tampered = images.build_image(engine, _altered_recipe(tmp_path, recipe), reference=ref)
    assert tampered.digest != pinned
    assert images.local_image_digest(engine, ref) == tampered.digest
    with pytest.raises(ImageDigestMismatch):
        images.verify_digest(ref, pinned, images.local_image_digest(engine, ref))
    engine.images.remove(ref)


def test_register_writes_the_digest_to_the_ledger(tmp_path, consortium, recipe, bundle):
    from ledger.client import ConsortiaClient
    from ledger.embedded import EmbeddedLedger

    with EmbeddedLedger(tmp_path / "ledger.sqlite", consortium) as ledger:
        client = ConsortiaClient(ledger, consortium.identity("Org2"))
        rec = images.register(client, recipe, bundle, image_id="avg-bundle:1")
        assert rec.digest == bundle.digest and rec.reference == bundle.reference and rec.owner == "Org2MSP"
        assert client.get_image("avg-bundle:1").algorithm == recipe.algorithm


def test_bundle_digest_notices_an_in_place_change(tmp_path, bundle):
    copy = tmp_path / "bundle"
    shutil.copytree(bundle.location, copy)
    before = images.bundle_digest(copy)
    assert before == bundle.digest
    target = copy / "algorithms" / "codec.py"
    copy.chmod(0o755)
    target.parent.chmod(0o755)
    target.chmod(0o644)
    data = target.read_bytes()
    target.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))  # one byte, same size, same file
    assert images.bundle_digest(copy) != before


def test_bundle_digest_measures_the_interpreter_instead_of_reading_bundle_json(tmp_path, bundle, monkeypatch):
    """Issue 14, item 9: the interpreter identity in a bundle's digest is the running interpreter's.
    A bundle whose bundle.json names another interpreter (as one built elsewhere would) still digests
    as a bundle for this interpreter, so a digest pinned for another interpreter cannot match here."""
    import importlib.metadata

    copy = tmp_path / "bundle"
    shutil.copytree(bundle.location, copy)
    copy.chmod(0o755)
    meta = copy / "bundle.json"
    meta.chmod(0o644)
    data = json.loads(meta.read_text())
    assert data["interpreter"] == images.interpreter_identity()
    data["interpreter"] = {"python": "3.9.0", "packages": {"numpy": "1.0.0"}}
    meta.write_text(json.dumps(data))
    assert images.bundle_digest(copy) == bundle.digest
    # a different library version under the running interpreter changes the digest
    real_version = importlib.metadata.version
    monkeypatch.setattr(
        importlib.metadata, "version", lambda name: "0.0.1" if name == "numpy" else real_version(name)
    )
    monkeypatch.setattr(images, "_IDENTITY", None, raising=False)
    assert images.interpreter_identity()["packages"]["numpy"] == "0.0.1"
    assert images.bundle_digest(copy) != bundle.digest


def test_interpreter_identity_of_another_interpreter_is_asked_of_it():
    import sys

    assert images.interpreter_identity(sys.executable) == images.interpreter_identity()
    assert images._foreign_interpreter_identity(sys.executable) == images.interpreter_identity()
    with pytest.raises(ImageBuildError, match="cannot ask interpreter"):
        images.interpreter_identity("/nonexistent/python3")
