"""The artifact-store interface: content addressed, every read verified against its digest."""

from __future__ import annotations

import pytest

from api.artifacts import (
    ArtifactMissing,
    ArtifactStore,
    DigestMismatch,
    DirectoryArtifactStore,
    fetch_verified,
    sha256_digest,
)


def test_put_get_verified(tmp_path):
    store = DirectoryArtifactStore(tmp_path)
    d = store.put(b"payload")
    assert d == sha256_digest(b"payload") and isinstance(store, ArtifactStore)
    assert fetch_verified(store, d) == b"payload"
    assert store.put(b"payload") == d


def test_tampered_missing_and_malformed(tmp_path):
    store = DirectoryArtifactStore(tmp_path)
    d = store.put(b"payload")
    store._path(d).write_bytes(b"other")
    with pytest.raises(DigestMismatch):
        fetch_verified(store, d)
    with pytest.raises(ArtifactMissing):
        fetch_verified(store, sha256_digest(b"absent"))
    with pytest.raises(ValueError):
        fetch_verified(store, "sha256:../../etc/passwd")


def test_any_object_with_get_plugs_in():
    class Memory:
        def __init__(self):
            self.blobs = {sha256_digest(b"x"): b"x"}

        def get(self, digest):
            return self.blobs[digest]

    assert fetch_verified(Memory(), sha256_digest(b"x")) == b"x"


def test_the_executors_store_plugs_in_and_shares_the_layout(tmp_path):
    from api.artifacts import store_at
    from executor.artifacts import ArtifactStore as ExecutorStore

    ex = ExecutorStore(tmp_path, "Org1MSP")
    ref = ex.put(b"model bytes")
    assert fetch_verified(ex, ref.digest) == b"model bytes"
    assert fetch_verified(DirectoryArtifactStore(tmp_path / "Org1MSP"), ref.digest) == b"model bytes"
    assert fetch_verified(store_at(ref.location), ref.digest) == b"model bytes"
    assert store_at("https://example.org/x") is None
    with pytest.raises(ArtifactMissing):
        fetch_verified(ex, sha256_digest(b"absent"))
    path = DirectoryArtifactStore(tmp_path / "Org1MSP")._path(ref.digest)
    path.chmod(0o644)
    path.write_bytes(b"altered")
    with pytest.raises(DigestMismatch):
        fetch_verified(ex, ref.digest)


def test_directory_store_writes_0600_files_in_0700_directories(tmp_path):
    """Issue 14 item 6: the gateway's store is as private as the executor's."""
    store = DirectoryArtifactStore(tmp_path / "Org1MSP")
    digest = store.put(b"ciphertext")
    path = store._path(digest)
    assert path.stat().st_mode & 0o777 == 0o600
    for d in (tmp_path / "Org1MSP", tmp_path / "Org1MSP" / "sha256", path.parent):
        assert d.stat().st_mode & 0o777 == 0o700, d
    assert store.delete(digest) and not path.exists() and not store.delete(digest)
