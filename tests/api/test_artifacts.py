"""The one content-addressed store (executor.artifacts; api.artifacts re-exports it): every read
verified against its digest, one error hierarchy."""

from __future__ import annotations

import pytest

from api.artifacts import (
    ArtifactMissing,
    ArtifactSource,
    ArtifactStore,
    DigestMismatch,
    fetch_verified,
    sha256_digest,
    store_at,
)
from executor.errors import ArtifactCorrupted, ArtifactError, ArtifactNotFound


def test_put_get_verified(tmp_path):
    store = ArtifactStore.at(tmp_path / "Org1MSP")
    d = store.put(b"payload").digest
    assert d == sha256_digest(b"payload") and isinstance(store, ArtifactSource)
    assert fetch_verified(store, d) == b"payload" == store.get(d)
    assert store.put(b"payload").digest == d


def test_one_error_hierarchy():
    assert ArtifactMissing is ArtifactNotFound and DigestMismatch is ArtifactCorrupted
    assert issubclass(ArtifactNotFound, (ArtifactError, LookupError))
    assert issubclass(ArtifactCorrupted, (ArtifactError, ValueError))


def test_tampered_missing_and_malformed(tmp_path):
    store = ArtifactStore.at(tmp_path / "Org1MSP")
    d = store.put(b"payload").digest
    path = store._path(d)
    path.chmod(0o600)
    path.write_bytes(b"other")
    with pytest.raises(DigestMismatch):
        fetch_verified(store, d)
    with pytest.raises(ArtifactMissing):
        fetch_verified(store, sha256_digest(b"absent"))
    with pytest.raises(ValueError):
        fetch_verified(store, "sha256:../../etc/passwd")


def test_any_object_with_get_plugs_in():
    class Memory:
        def __init__(self):
            self.blobs = {sha256_digest(b"x"): b"x", sha256_digest(b"y"): b"z"}

        def get(self, digest):
            return self.blobs[digest]

    assert fetch_verified(Memory(), sha256_digest(b"x")) == b"x"
    with pytest.raises(ArtifactMissing):
        fetch_verified(Memory(), sha256_digest(b"absent"))
    with pytest.raises(DigestMismatch):
        fetch_verified(Memory(), sha256_digest(b"y"))


def test_a_location_opens_the_same_store_without_creating_it(tmp_path):
    ex = ArtifactStore(tmp_path, "Org1MSP")
    ref = ex.put(b"model bytes")
    assert fetch_verified(store_at(ref.location), ref.digest) == b"model bytes"
    assert ArtifactStore.fetch(ref) == b"model bytes"
    assert store_at("https://example.org/x") is None
    ghost = store_at((tmp_path / "Org9MSP").as_uri())
    assert not (tmp_path / "Org9MSP").exists()
    with pytest.raises(ArtifactMissing):
        fetch_verified(ghost, ref.digest)


def test_store_writes_0600_files_in_0700_directories(tmp_path):
    """Issue 14 item 6: the gateway's store is as private as the executor's."""
    store = ArtifactStore.at(tmp_path / "Org1MSP", create=False)
    digest = store.put(b"ciphertext").digest
    path = store._path(digest)
    assert path.stat().st_mode & 0o777 == 0o600
    for d in (tmp_path / "Org1MSP", tmp_path / "Org1MSP" / "sha256", path.parent):
        assert d.stat().st_mode & 0o777 == 0o700, d
    assert store.delete(digest) and not path.exists() and not store.delete(digest)
