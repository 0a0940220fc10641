"""Image distribution by digest through a real docker-registry started by scripts/install-registry on a
loopback address, over TLS (executor.images.registry): container images pushed, pulled by digest and
verified; the registry script itself.

The container tests push and pull small images made here (one layer each, unique to the session),
never the algorithm images other tests use, so removing them locally touches nothing else.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import tarfile
import uuid

import docker.errors
import pytest

from executor.errors import ImageDigestMismatch
from executor.images import registry
from executor.images.reference import CERTS_DIR, ImageTampered, RegistryError, parse_reference
from executor.images.resolver import ImageResolver, verify_digest
from tests.ci import skip_or_fail
from tests.executor.images.conftest import HOST, SCRIPT, flip_blob, free_port


def test_install_registry_refuses_a_non_loopback_address(tmp_path):
    env = dict(os.environ, CONSORTIA_REGISTRY_HOME=str(tmp_path))
    for bad in ("0.0.0.0:5000", "192.168.1.1:5000", "127.0.0.1:5000", "localhost:5000"):
        proc = subprocess.run([str(SCRIPT), "--listen", bad], capture_output=True, text=True, env=env)
        assert proc.returncode == 2 and "127.0.N.1" in proc.stderr


# --------------------------------------------------------------------------- container images


def _tiny_image(engine, content: bytes) -> str:
    """A one-layer image of a single file, made by import (no build); returns its id."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("payload.txt")
        info.size, info.mtime = len(content), 0
        tar.addfile(info, io.BytesIO(content))
    out = engine.api.import_image_from_data(buf.getvalue(), repository="consortia-registry-test/tiny")
    image_id = re.findall(r"sha256:[0-9a-f]{64}", str(out))[-1]
    return engine.images.get(image_id).id


@pytest.fixture(scope="module")
def tiny(engine):
    """Two distinct images (A, B), removed at the end with every tag they got."""
    token = uuid.uuid4().hex
    ids = [_tiny_image(engine, f"{name} {token}\n".encode()) for name in ("A", "B")]
    yield ids
    for i in ids + _extra_ids:
        try:
            engine.images.remove(i, force=True)
        except docker.errors.NotFound:  # Podman's "image not known": removed by the test that made it
            pass


_extra_ids: list[str] = []


def _remove_local(engine, image_id: str) -> None:
    import docker.errors

    engine.images.remove(image_id, force=True)
    with pytest.raises(docker.errors.ImageNotFound):
        engine.images.get(image_id)


@pytest.mark.container
def test_push_then_pull_by_digest_into_a_clean_state(engine, registry_addr, tiny):
    from executor.runtimes.container import ContainerRuntime

    a = tiny[0]
    ref = registry.push_image(engine, a, registry_addr, "tiny-a", "1.0")
    assert parse_reference(ref).registry == registry_addr
    _remove_local(engine, a)
    # what the node agent does before a run: resolve the ledger's reference (pulling it) and verify
    resolver = ImageResolver(ContainerRuntime(engine))
    local = resolver.local_digest(ref)
    assert local == a
    verify_digest(ref, a, local)
    assert registry.pull_image(engine, ref, pinned=a) == a


@pytest.mark.container
def test_moved_tag_does_not_change_what_the_digest_pulls(engine, registry_addr, tiny):
    a, b = tiny
    ref_a = registry.push_image(engine, a, registry_addr, "moving", "latest")
    ref_b = registry.push_image(engine, b, registry_addr, "moving", "latest")  # same tag, other bytes
    assert ref_a != ref_b
    _remove_local(engine, a)
    _remove_local(engine, b)
    assert registry.pull_image(engine, ref_a, pinned=a) == a
    assert registry.pull_image(engine, ref_b, pinned=b) == b


@pytest.mark.container
def test_digest_mismatch_is_refused(engine, registry_addr, tiny):
    a, b = tiny
    ref_b = registry.push_image(engine, b, registry_addr, "swapped", "1.0")
    # the ledger pins A, the reference delivers B: refused, naming both digests
    with pytest.raises(ImageTampered) as caught:
        registry.pull_image(engine, ref_b, pinned=a)
    assert a in str(caught.value) and b in str(caught.value) and caught.value.code == "IMAGE_TAMPERED"
    # a manifest altered in the registry's storage: the engine's pull by digest refuses it
    manifest = parse_reference(ref_b).digest
    flip_blob(registry_addr, manifest)
    _remove_local(engine, b)
    with pytest.raises(RegistryError):
        registry.pull_image(engine, ref_b, pinned=b)


@pytest.mark.container
def test_rebuild_with_another_digest_is_refused(engine, registry_addr, tiny):
    from executor.runtimes.container import ContainerRuntime

    a = tiny[0]
    rebuilt = _tiny_image(engine, f"rebuilt {uuid.uuid4().hex}\n".encode())  # same recipe, other bytes
    _extra_ids.append(rebuilt)
    engine.images.get(rebuilt).tag("consortia-registry-test/rebuilt", "1.0")
    with pytest.raises(ImageTampered, match="locally rebuilt image"):
        registry.verify_rebuild("consortia-registry-test/rebuilt:1.0", a, rebuilt)
    registry.verify_rebuild("consortia-registry-test/rebuilt:1.0", rebuilt, rebuilt)  # same digest: fine
    # and the node agent's check before a run refuses the local rebuild it resolves
    local = ImageResolver(ContainerRuntime(engine)).local_digest("consortia-registry-test/rebuilt:1.0")
    with pytest.raises(ImageDigestMismatch):
        verify_digest("consortia-registry-test/rebuilt:1.0", a, local)


def test_install_registry_with_the_consortium_tls_ca(consortium, tmp_path):
    """--ca CERT KEY: the server certificate is issued by the consortium's TLS CA for 127.0.N.1 only,
    the CA's key is not copied, and a restart without --ca keeps that CA."""
    import ssl
    import urllib.request

    if shutil.which("docker-registry") is None and os.geteuid() != 0:
        skip_or_fail("docker-registry is not installed (scripts/install-registry installs it as root)")
    org = consortium.organisation("Org1MSP")
    ca = org.path / "tlsca" / f"tlsca.{org.domain}-cert.pem"
    listen = f"{HOST}:{free_port()}"
    env = dict(os.environ, CONSORTIA_REGISTRY_HOME=str(tmp_path / "reg"))
    try:
        for args in (["--ca", str(ca), str(ca.parent / "priv_sk")], ["--stop"], []):
            proc = subprocess.run(
                [str(SCRIPT), "--listen", listen, *args], capture_output=True, text=True, env=env, timeout=300
            )
            assert proc.returncode == 0, proc.stderr[-2000:]
            assert proc.stdout.strip().splitlines()[-1] == listen
        ctx = ssl.create_default_context(cafile=str(ca))
        with urllib.request.urlopen(f"https://{listen}/v2/", context=ctx, timeout=10) as r:
            assert r.status == 200
        assert not (tmp_path / "reg" / "ca.key").exists()
        assert (CERTS_DIR / listen / "ca.crt").read_bytes() == ca.read_bytes()
    finally:
        subprocess.run([str(SCRIPT), "--listen", listen, "--stop"], capture_output=True, env=env, timeout=60)
        shutil.rmtree(CERTS_DIR / listen, ignore_errors=True)
