"""References by digest into the registry, and the refusal that names both digests
(executor.images.reference)."""

from __future__ import annotations

from executor.errors import ImageDigestMismatch
from executor.images.reference import ImageTampered, parse_reference


def test_reference_parsing():
    d = "sha256:" + "a" * 64
    ref = parse_reference(f"127.0.9.1:5000/consortia/dpsda@{d}")
    assert ref and ref.registry == "127.0.9.1:5000" and ref.name == "dpsda" and not ref.is_bundle
    assert str(ref) == f"127.0.9.1:5000/consortia/dpsda@{d}"
    bundle = parse_reference(f"127.0.9.1:5000/consortia/bundles/dpsda@{d}")
    assert bundle is not None and bundle.is_bundle
    for not_one in ("consortia/dpsda:1.0", "bundle:dpsda-0123", f"127.0.9.1:5000/other/x@{d}", "x@sha256:ab"):
        assert parse_reference(not_one) is None
    err = ImageTampered("r", d, "sha256:" + "b" * 64)
    assert isinstance(err, ImageDigestMismatch) and d in str(err) and "b" * 64 in str(err)
