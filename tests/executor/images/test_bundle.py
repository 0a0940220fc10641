"""Sandbox bundles and their digests (executor.images.bundle): stable, changed by one byte, measured
from the interpreter that runs them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from executor.errors import ImageBuildError, ImageDigestMismatch
from executor.images import bundle as bundles
from executor.images.bundle import build_bundle, bundle_digest, interpreter_identity
from executor.images.resolver import verify_digest
from tests.executor.conftest import altered_recipe


def test_bundle_digest_is_stable_and_changes_with_one_byte(tmp_path, recipe, bundle):
    again = build_bundle(recipe)
    assert again.digest == bundle.digest and again.reference == bundle.reference
    assert bundle_digest(bundle.location) == bundle.digest
    other = build_bundle(altered_recipe(tmp_path, recipe))
    assert other.digest != bundle.digest
    with pytest.raises(ImageDigestMismatch):
        verify_digest(recipe.reference, bundle.digest, other.digest)


def test_bundle_digest_notices_an_in_place_change(tmp_path, bundle):
    copy = tmp_path / "bundle"
    shutil.copytree(bundle.location, copy)
    before = bundle_digest(copy)
    assert before == bundle.digest
    target = copy / "algorithms" / "codec.py"
    copy.chmod(0o755)
    target.parent.chmod(0o755)
    target.chmod(0o644)
    data = target.read_bytes()
    target.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))  # one byte, same size, same file
    assert bundle_digest(copy) != before


def test_a_fresh_digest_ignores_what_was_remembered(tmp_path, bundle, monkeypatch):
    copy = tmp_path / "bundle"
    shutil.copytree(bundle.location, copy)
    assert bundle_digest(copy) == bundle.digest
    key = str(copy.resolve())
    signature, _ = bundles._BUNDLE_DIGESTS[key]
    monkeypatch.setitem(bundles._BUNDLE_DIGESTS, key, (signature, "sha256:" + "0" * 64))
    assert bundle_digest(copy) == "sha256:" + "0" * 64  # remembered for the same files
    assert bundle_digest(copy, fresh=True) == bundle.digest  # measured again


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
    assert data["interpreter"] == interpreter_identity()
    data["interpreter"] = {"python": "3.9.0", "packages": {"numpy": "1.0.0"}}
    meta.write_text(json.dumps(data))
    assert bundle_digest(copy) == bundle.digest
    # a different library version under the running interpreter changes the digest
    real_version = importlib.metadata.version
    monkeypatch.setattr(
        importlib.metadata, "version", lambda name: "0.0.1" if name == "numpy" else real_version(name)
    )
    monkeypatch.setattr(bundles, "_IDENTITY", None, raising=False)
    assert interpreter_identity()["packages"]["numpy"] == "0.0.1"
    assert bundle_digest(copy) != bundle.digest


def test_interpreter_identity_of_another_interpreter_is_asked_of_it():
    import sys

    assert interpreter_identity(sys.executable) == interpreter_identity()
    assert bundles._foreign_interpreter_identity(sys.executable) == interpreter_identity()
    with pytest.raises(ImageBuildError, match="cannot ask interpreter"):
        interpreter_identity("/nonexistent/python3")


def test_the_c_library_and_the_numeric_profile_are_part_of_a_bundle(tmp_path, bundle, monkeypatch):
    """The sandbox runs the host's libm (exp, log, pow for numpy and torch): another C library is
    another bundle digest. The bundle declares its numeric profile (image/image.json, covered by the
    digest), which the sandbox runtime applies."""
    import platform

    from algorithms.numeric_profile import PROFILE
    from executor.images.bundle import bundle_profile

    assert bundle_profile(bundle.location) is PROFILE
    assert json.loads((Path(bundle.location) / "bundle.json").read_text())["numeric_profile"] == PROFILE.id
    assert interpreter_identity()["libc"] == " ".join(platform.libc_ver())
    monkeypatch.setattr(platform, "libc_ver", lambda *a, **k: ("glibc", "2.31"))
    monkeypatch.setattr(bundles, "_IDENTITY", None, raising=False)
    assert interpreter_identity()["libc"] == "glibc 2.31"
    assert bundle_digest(bundle.location) != bundle.digest
    copy = tmp_path / "bundle"
    shutil.copytree(bundle.location, copy)
    declared = copy / "image" / "image.json"
    declared.parent.chmod(0o755)
    declared.chmod(0o644)
    declared.write_text(json.dumps({**json.loads(declared.read_text()), "numeric_profile": "x86-64-v4/1"}))
    with pytest.raises(ImageBuildError, match="declares no known numeric profile"):
        bundle_profile(copy)
