"""The sandbox runtime's bundle as a content-addressed archive in the consortium's registry
(docs/executor.md "Image distribution"; images travel as OCI images, :mod:`executor.images.registry`).

A bundle directory (:func:`executor.images.bundle.build_bundle`) is packed into one **deterministic tar**:
entries sorted by path, every mtime 0, uid/gid 0 with no user or group names, the bundle's own
modes (0555 folders, 0444 files), no compression -- so the same bundle always makes the same bytes
and the same sha256, on any host. That archive is stored in the registry as a blob (the registry
checks the digest of every upload) under ``consortia/bundles/<name>``, referenced by a one-layer
OCI artifact manifest so that it is listed and kept like any image. It is fetched by its digest
(``<host:port>/consortia/bundles/<name>@sha256:<archive>``): the download is re-hashed as it
streams to disk and refused unless it hashes to that digest; it is unpacked (tarfile's ``data``
filter: no links out, no devices, no absolute paths) and the unpacked bundle's own digest -- the one
the ledger pins, :func:`executor.images.bundle.bundle_digest` -- is then checked by whoever runs it.

Why an archive and not an OCI image for bundles: a sandbox host has no container engine to pull
an image with, and a bundle is a plain folder run by the host's interpreter; a single tar fetched
over HTTPS with Python's standard library needs nothing more, and storing it in the same registry
keeps one service, one CA and one kind of reference for both runtimes.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import http.client
import io
import json
import os
import shutil
import ssl
import tarfile
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from executor.errors import ImageBuildError
from executor.images.reference import (
    BUNDLES,
    ImageTampered,
    RegistryError,
    RegistryReference,
    parse_reference,
    registry_ca,
    repository_name,
)

ARCHIVE_TYPE = "application/vnd.consortia.bundle.v1.tar"
CONFIG_TYPE = "application/vnd.consortia.bundle.config.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
CHUNK = 1 << 20


def write_archive(bundle_dir: str | os.PathLike[str], out: str | os.PathLike[str]) -> str:
    """Pack ``bundle_dir`` into the deterministic tar ``out``; return ``sha256:<hex>`` of its bytes."""
    root = Path(bundle_dir)
    entries = sorted(p for p in root.rglob("*") if p.is_dir() or p.is_file())
    with open(out, "wb") as f:
        with tarfile.open(fileobj=f, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for p in entries:
                info = tarfile.TarInfo(str(p.relative_to(root)))
                info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
                info.mode = p.stat().st_mode & 0o777
                if p.is_dir():
                    info.type = tarfile.DIRTYPE
                    tar.addfile(info)
                else:
                    info.size = p.stat().st_size
                    with open(p, "rb") as src:
                        tar.addfile(info, src)
    h = hashlib.sha256()
    with open(out, "rb") as f:
        for chunk in iter(lambda: f.read(CHUNK), b""):
            h.update(chunk)
    return "sha256:" + h.hexdigest()


def pulled_bundle_dir(bundles_root: Path, ref: RegistryReference) -> Path:
    """Where a bundle fetched from the registry is unpacked (one folder per archive digest)."""
    return Path(bundles_root) / f"registry-{ref.name}-{ref.digest.split(':', 1)[1][:16]}"


# --------------------------------------------------------------------------- registry HTTP API


def _context(registry: str) -> ssl.SSLContext:
    ca = registry_ca(registry)
    if not ca.is_file():
        raise RegistryError(f"no CA certificate for registry {registry} at {ca} (scripts/install-registry)")
    return ssl.create_default_context(cafile=str(ca))


def _request(
    registry: str,
    method: str,
    path: str,
    data: bytes | IO[bytes] | None = None,
    headers: dict[str, str] | None = None,
    timeout: float = 120,
) -> http.client.HTTPResponse:
    url = path if path.startswith("https://") else f"https://{registry}{path}"
    req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    try:
        response: http.client.HTTPResponse = urllib.request.urlopen(
            req, context=_context(registry), timeout=timeout
        )
        return response
    except urllib.error.HTTPError as exc:
        raise RegistryError(f"registry {registry}: {method} {path} -> {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise RegistryError(f"registry {registry} unreachable: {exc}") from None


def _upload_blob(registry: str, repo: str, path: Path | None, data: bytes | None, digest: str) -> None:
    with _request(registry, "POST", f"/v2/{repo}/blobs/uploads/") as r:
        location = r.headers["Location"]
    if not location.startswith("https://"):
        location = f"https://{registry}{location}"
    sep = "&" if "?" in location else "?"
    size = path.stat().st_size if path is not None else len(data or b"")
    headers = {"Content-Type": "application/octet-stream", "Content-Length": str(size)}
    if path is not None:
        with open(path, "rb") as body:  # streamed from the file, not read into memory
            _request(registry, "PUT", f"{location}{sep}digest={digest}", body, headers).close()
    else:
        _request(registry, "PUT", f"{location}{sep}digest={digest}", data, headers).close()


def push_bundle(bundle_dir: str | os.PathLike[str], registry: str, name: str, tag: str = "latest") -> str:
    """Pack ``bundle_dir``, upload it to ``registry`` under ``consortia/bundles/<name>:<tag>`` and
    return its reference by archive digest."""
    repo = BUNDLES + repository_name(name)
    bundle_json = Path(bundle_dir) / "bundle.json"
    if not bundle_json.is_file():
        raise ImageBuildError(f"{bundle_dir} is not a bundle (no bundle.json)")
    with tempfile.TemporaryDirectory(prefix="consortia-bundle-") as tmp:
        archive = Path(tmp) / "bundle.tar"
        digest = write_archive(bundle_dir, archive)
        config = bundle_json.read_bytes()
        config_digest = "sha256:" + hashlib.sha256(config).hexdigest()
        _upload_blob(registry, repo, None, config, config_digest)
        _upload_blob(registry, repo, archive, None, digest)
        manifest = {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {"mediaType": CONFIG_TYPE, "digest": config_digest, "size": len(config)},
            "layers": [{"mediaType": ARCHIVE_TYPE, "digest": digest, "size": archive.stat().st_size}],
        }
        body = json.dumps(manifest, sort_keys=True).encode()
        _request(registry, "PUT", f"/v2/{repo}/manifests/{tag}", body, {"Content-Type": OCI_MANIFEST}).close()
    return f"{registry}/{repo}@{digest}"


def download_archive(reference: str, out: str | os.PathLike[str]) -> str:
    """Stream the archive ``reference`` names into ``out``, re-hashing it; refuse other bytes."""
    ref = parse_reference(reference)
    if ref is None or not ref.is_bundle:
        raise RegistryError(f"{reference!r} is not a bundle reference (host:port/{BUNDLES}NAME@sha256:…)")
    h = hashlib.sha256()
    with _request(ref.registry, "GET", f"/v2/{ref.repository}/blobs/{ref.digest}") as r, open(out, "wb") as f:
        for chunk in iter(lambda: r.read(CHUNK), b""):
            h.update(chunk)
            f.write(chunk)
    got = "sha256:" + h.hexdigest()
    if got != ref.digest:
        raise ImageTampered(reference, ref.digest, got, what="fetched bundle archive", by="its reference")
    return got


def _plain_members(tar: tarfile.TarFile) -> list[tarfile.TarInfo]:
    """The archive's members if every one is a regular file or a directory with a relative path inside
    the archive (what ``bundle_archive`` writes); anything else (links, devices, absolute paths, ``..``)
    is refused, whatever the Python's own extraction filters do."""
    members = tar.getmembers()
    for m in members:
        parts = Path(m.name).parts
        if not (m.isfile() or m.isdir()) or m.name.startswith("/") or ".." in parts or not parts:
            raise tarfile.TarError(f"member {m.name!r} is not a plain file or directory inside the archive")
    return members


def unpack_archive(archive: str | os.PathLike[str], expected: str, dest: Path) -> Path:
    """Unpack a verified archive into ``dest``; ``expected`` is its digest, checked again on the bytes
    opened (the file may have changed since it was downloaded).

    The archive is unpacked into a folder of its own next to ``dest`` and only the finished folder is
    renamed into place, so that a reader of ``dest`` (another agent on this host measuring its digest
    or running a task from it) sees either no bundle or the whole one, never a half-written or
    half-removed one; an older ``dest`` is first renamed aside, then removed."""
    data = Path(archive).read_bytes()
    got = "sha256:" + hashlib.sha256(data).hexdigest()
    if got != expected:
        raise ImageTampered(str(archive), expected, got, what="bundle archive", by="its reference")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.partial-", dir=dest.parent))
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
            members = _plain_members(tar)
            if hasattr(tarfile, "data_filter"):  # Python >= 3.11.4 (Debian 12's 3.11.2 has no filters)
                tar.extractall(tmp, members=members, filter="data")
            else:
                tar.extractall(tmp, members=members)
    except (tarfile.TarError, OSError) as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise ImageTampered(
            str(archive), expected, f"{got} (unreadable: {exc})", what="bundle archive", by="its reference"
        ) from None
    for p in sorted(tmp.rglob("*"), reverse=True):  # read-only, as built (the data filter may widen)
        p.chmod(0o555 if p.is_dir() else 0o444)
    tmp.chmod(0o555)
    if dest.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{dest.name}.old-", dir=dest.parent))
        os.replace(dest, old / dest.name)
        shutil.rmtree(old, ignore_errors=True)
    os.replace(tmp, dest)
    return dest


@contextlib.contextmanager
def _fetching(dest: Path) -> Iterator[None]:
    """Hold the lock on fetching into ``dest``: one fetch at a time per bundle folder on this host,
    whether the fetchers are threads of one process (the agents of several organisations, an
    auditor's replay) or processes sharing a bundle cache."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    with open(dest.parent / f".{dest.name}.lock", "a+b") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def fetch_bundle(reference: str, bundles_root: str | os.PathLike[str], *, refresh: bool = True) -> Path:
    """Fetch the bundle ``reference`` names by its archive digest and unpack it under
    ``bundles_root``; return the bundle directory (its bundle digest is checked by the runner).

    Fetchers of one bundle on this host take turns (:func:`_fetching`); without ``refresh`` a bundle
    already there is not fetched again -- what a second agent finds once the first one has fetched it
    (a bundle folder only ever appears whole, :func:`unpack_archive`)."""
    ref = parse_reference(reference)
    if ref is None or not ref.is_bundle:
        raise RegistryError(f"{reference!r} is not a bundle reference (host:port/{BUNDLES}NAME@sha256:…)")
    dest = pulled_bundle_dir(Path(bundles_root), ref)
    with _fetching(dest):
        if not refresh and (dest / "bundle.json").is_file():
            return dest
        with tempfile.TemporaryDirectory(prefix=".consortia-bundle-", dir=dest.parent) as tmp:
            archive = Path(tmp) / "bundle.tar"
            digest = download_archive(reference, archive)
            return unpack_archive(archive, digest, dest)
