"""The sandbox bundle as a content-addressed archive in the registry (executor.images.bundle_archive):
deterministic bytes, only plain members unpacked, fetched by digest and re-hashed."""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import tarfile
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from executor.errors import ImageDigestMismatch
from executor.images import bundle_archive
from executor.images.bundle import bundle_digest
from executor.images.reference import ImageTampered, parse_reference
from executor.images.resolver import ImageResolver, verify_digest
from tests.executor.images.conftest import flip_blob


def test_archive_is_deterministic(bundle, tmp_path):
    a = bundle_archive.write_archive(bundle.location, tmp_path / "a.tar")
    copy = tmp_path / "copy"  # the same files, written later (other mtimes, inodes, directory order)
    shutil.copytree(bundle.location, copy)
    for p in copy.rglob("*"):
        os.utime(p, (12345, 12345))
    assert bundle_archive.write_archive(copy, tmp_path / "b.tar") == a
    assert (tmp_path / "a.tar").read_bytes() == (tmp_path / "b.tar").read_bytes()
    with tarfile.open(tmp_path / "a.tar") as tar:
        members = tar.getmembers()
    assert [m.name for m in members] == sorted(m.name for m in members)
    assert {(m.mtime, m.uid, m.gid, m.uname, m.gname) for m in members} == {(0, 0, 0, "", "")}


def _crafted(tmp_path, name: str, kind: bytes) -> tuple[Path, str]:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        ok = tarfile.TarInfo("bundle.json")
        ok.size = 2
        tar.addfile(ok, io.BytesIO(b"{}"))
        bad = tarfile.TarInfo(name)
        bad.type = kind
        bad.linkname = "/etc/passwd" if kind == tarfile.SYMTYPE else ""
        tar.addfile(bad, io.BytesIO(b"") if kind == tarfile.REGTYPE else None)
    path = tmp_path / "crafted.tar"
    path.write_bytes(buf.getvalue())
    return path, "sha256:" + hashlib.sha256(buf.getvalue()).hexdigest()


@pytest.mark.parametrize("filters", [True, False], ids=["python-filters", "no-python-filters"])
@pytest.mark.parametrize(
    "name,kind", [("escape", tarfile.SYMTYPE), ("../outside", tarfile.REGTYPE), ("dev", tarfile.CHRTYPE)]
)
def test_archive_with_anything_but_plain_members_is_refused(tmp_path, monkeypatch, filters, name, kind):
    # the digest matches (the owner signed a hostile archive): the members are still refused, also on a
    # Python without tarfile's extraction filters (Debian 12's 3.11.2)
    if not filters:
        monkeypatch.delattr(tarfile, "data_filter", raising=False)
    archive, digest = _crafted(tmp_path, name, kind)
    with pytest.raises(ImageDigestMismatch, match="not a plain file or directory"):
        bundle_archive.unpack_archive(archive, digest, tmp_path / "out")
    assert not (tmp_path / "out").exists() and not (tmp_path / "outside").exists()


class _SandboxDigest:
    """The sandbox runtime's digest of a bundle directory (no bubblewrap needed to compute it)."""

    def local_digest(self, reference: str) -> str | None:
        d = Path(reference)
        return bundle_digest(d) if (d / "bundle.json").exists() else None


def test_bundle_round_trips_by_digest(registry_addr, bundle, tmp_path):
    ref = bundle_archive.push_bundle(bundle.location, registry_addr, "average-consensus", "t1")
    parsed = parse_reference(ref)
    assert parsed and parsed.is_bundle and parsed.registry == registry_addr
    # another organisation: an empty bundles folder, the reference and the pinned digest from the ledger
    resolver = ImageResolver(_SandboxDigest(), tmp_path / "bundles")
    local = resolver.local_digest(ref)
    assert local == bundle.digest
    verify_digest(ref, bundle.digest, local)
    d = resolver.bundle_dir(ref)
    assert d is not None and (d / "bundle.json").is_file() and d.parent == tmp_path / "bundles"
    assert sorted(p.relative_to(d) for p in d.rglob("*")) == sorted(
        p.relative_to(bundle.location) for p in Path(bundle.location).rglob("*")
    )


def test_agents_fetching_one_bundle_at_once_all_measure_the_pinned_digest(registry_addr, bundle, tmp_path):
    """Several fetchers on one host, one bundle cache (the agents of a process's organisations on one
    machine, an auditor's replay beside them), all asking for the bundle before any has it: each one
    measures the digest the ledger pins. Unpacking in place let one fetcher remove or half-write the
    folder another was measuring (a missing file, or another digest than the registered one)."""
    ref = bundle_archive.push_bundle(bundle.location, registry_addr, "average-consensus", "t1")

    def fetch(root: Path, gate: threading.Barrier) -> str | None:
        gate.wait()
        return ImageResolver(_SandboxDigest(), root).local_digest(ref)

    for attempt in range(3):
        root = tmp_path / f"bundles-{attempt}"
        gate = threading.Barrier(6)
        with ThreadPoolExecutor(6) as pool:
            digests = [f.result() for f in [pool.submit(fetch, root, gate) for _ in range(6)]]
        assert digests == [bundle.digest] * 6
        assert [p.name for p in root.iterdir() if not p.name.startswith(".")] == [
            bundle_archive.pulled_bundle_dir(root, parse_reference(ref)).name
        ]
        assert not [p for p in root.iterdir() if p.is_dir() and p.name.startswith(".")]  # no leftovers


def test_flipped_byte_in_archive_is_refused(registry_addr, bundle, tmp_path):
    digest = bundle_archive.write_archive(bundle.location, tmp_path / "b.tar")
    raw = bytearray((tmp_path / "b.tar").read_bytes())
    raw[700] ^= 0x01
    (tmp_path / "b.tar").write_bytes(bytes(raw))
    with pytest.raises(ImageTampered, match=digest.split(":")[1]):
        bundle_archive.unpack_archive(tmp_path / "b.tar", digest, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    # the same flip in the registry's own storage: the fetch re-hashes and refuses it
    own = tmp_path / "own"  # a bundle of its own: blobs are shared by digest across repositories
    shutil.copytree(bundle.location, own)
    own.chmod(0o755)
    (own / "marker").write_text(str(uuid.uuid4()))
    ref = bundle_archive.push_bundle(own, registry_addr, "flipped", "t1")
    flip_blob(registry_addr, parse_reference(ref).digest)
    with pytest.raises(ImageTampered) as caught:
        bundle_archive.fetch_bundle(ref, tmp_path / "bundles")
    assert caught.value.pinned == parse_reference(ref).digest and caught.value.local != caught.value.pinned
    assert not any((tmp_path / "bundles").glob("registry-*"))
