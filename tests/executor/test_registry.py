"""Image distribution by digest (executor.registry, executor.bundle_archive) through a real
docker-registry started by scripts/install-registry on a loopback address, over TLS.

The container tests push and pull small images made here (one layer each, unique to the session),
never the algorithm images other tests use, so removing them locally touches nothing else.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import socket
import subprocess
import tarfile
import uuid
from pathlib import Path

import docker.errors
import pytest

from executor import bundle_archive, registry
from executor.errors import ImageDigestMismatch
from executor.image_resolver import ImageResolver
from executor.images import bundle_digest, verify_digest
from tests.ci import skip_or_fail

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "install-registry"
HOST = "127.0.9.1"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def registry_addr(tmp_path_factory):
    """A registry of our own (own storage, own CA) for this module; stopped at the end."""
    if shutil.which("docker-registry") is None and os.geteuid() != 0:
        skip_or_fail("docker-registry is not installed (scripts/install-registry installs it as root)")
    listen = f"{HOST}:{_free_port()}"
    home = tmp_path_factory.mktemp("registry")
    env = dict(os.environ, CONSORTIA_REGISTRY_HOME=str(home))
    proc = subprocess.run(
        [str(SCRIPT), "--listen", listen], capture_output=True, text=True, timeout=900, env=env
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().splitlines()[-1] == listen
    # idempotent: a second run finds it serving and only prints the address
    again = subprocess.run([str(SCRIPT), "--listen", listen], capture_output=True, text=True, env=env)
    assert again.returncode == 0 and again.stdout.strip() == listen and "starting" not in again.stderr
    _HOMES[listen] = home
    yield listen
    subprocess.run([str(SCRIPT), "--listen", listen, "--stop"], capture_output=True, env=env, timeout=60)
    shutil.rmtree(registry.CERTS_DIR / listen, ignore_errors=True)


def _storage(addr: str) -> Path:
    """The registry's filesystem storage (what an attacker on the registry host could edit)."""
    return _HOMES[addr] / "storage" / "docker" / "registry" / "v2"


_HOMES: dict[str, Path] = {}


def _flip_blob(addr: str, digest: str) -> None:
    hexd = digest.split(":", 1)[1]
    data = _storage(addr) / "blobs" / "sha256" / hexd[:2] / hexd / "data"
    raw = bytearray(data.read_bytes())
    raw[len(raw) // 2] ^= 0x01
    data.write_bytes(bytes(raw))


# --------------------------------------------------------------------------- references


def test_reference_parsing():
    d = "sha256:" + "a" * 64
    ref = registry.parse_reference(f"127.0.9.1:5000/consortia/dpsda@{d}")
    assert ref and ref.registry == "127.0.9.1:5000" and ref.name == "dpsda" and not ref.is_bundle
    assert registry.parse_reference(f"127.0.9.1:5000/consortia/bundles/dpsda@{d}").is_bundle
    for not_one in ("consortia/dpsda:1.0", "bundle:dpsda-0123", f"127.0.9.1:5000/other/x@{d}", "x@sha256:ab"):
        assert registry.parse_reference(not_one) is None
    err = registry.ImageTampered("r", d, "sha256:" + "b" * 64)
    assert isinstance(err, ImageDigestMismatch) and d in str(err) and "b" * 64 in str(err)


def test_install_registry_refuses_a_non_loopback_address(tmp_path):
    env = dict(os.environ, CONSORTIA_REGISTRY_HOME=str(tmp_path))
    for bad in ("0.0.0.0:5000", "192.168.1.1:5000", "127.0.0.1:5000", "localhost:5000"):
        proc = subprocess.run([str(SCRIPT), "--listen", bad], capture_output=True, text=True, env=env)
        assert proc.returncode == 2 and "127.0.N.1" in proc.stderr


# --------------------------------------------------------------------------- sandbox bundles


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
    import hashlib

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


def test_bundle_round_trips_by_digest(registry_addr, bundle, tmp_path):
    ref = bundle_archive.push_bundle(bundle.location, registry_addr, "average-consensus", "t1")
    parsed = registry.parse_reference(ref)
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


def test_flipped_byte_in_archive_is_refused(registry_addr, bundle, tmp_path):
    digest = bundle_archive.write_archive(bundle.location, tmp_path / "b.tar")
    raw = bytearray((tmp_path / "b.tar").read_bytes())
    raw[700] ^= 0x01
    (tmp_path / "b.tar").write_bytes(bytes(raw))
    with pytest.raises(registry.ImageTampered, match=digest.split(":")[1]):
        bundle_archive.unpack_archive(tmp_path / "b.tar", digest, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    # the same flip in the registry's own storage: the fetch re-hashes and refuses it
    own = tmp_path / "own"  # a bundle of its own: blobs are shared by digest across repositories
    shutil.copytree(bundle.location, own)
    own.chmod(0o755)
    (own / "marker").write_text(str(uuid.uuid4()))
    ref = bundle_archive.push_bundle(own, registry_addr, "flipped", "t1")
    _flip_blob(registry_addr, registry.parse_reference(ref).digest)
    with pytest.raises(registry.ImageTampered) as caught:
        bundle_archive.fetch_bundle(ref, tmp_path / "bundles")
    assert (
        caught.value.pinned == registry.parse_reference(ref).digest
        and caught.value.local != caught.value.pinned
    )
    assert not any((tmp_path / "bundles").glob("registry-*"))


class _SandboxDigest:
    """The sandbox runtime's digest of a bundle directory (no bubblewrap needed to compute it)."""

    def local_digest(self, reference: str) -> str | None:
        d = Path(reference)
        return bundle_digest(d) if (d / "bundle.json").exists() else None


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
    assert registry.parse_reference(ref).registry == registry_addr
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
    with pytest.raises(registry.ImageTampered) as caught:
        registry.pull_image(engine, ref_b, pinned=a)
    assert a in str(caught.value) and b in str(caught.value) and caught.value.code == "IMAGE_TAMPERED"
    # a manifest altered in the registry's storage: the engine's pull by digest refuses it
    manifest = registry.parse_reference(ref_b).digest
    _flip_blob(registry_addr, manifest)
    _remove_local(engine, b)
    with pytest.raises(registry.RegistryError):
        registry.pull_image(engine, ref_b, pinned=b)


@pytest.mark.container
def test_rebuild_with_another_digest_is_refused(engine, registry_addr, tiny):
    from executor.runtimes.container import ContainerRuntime

    a = tiny[0]
    rebuilt = _tiny_image(engine, f"rebuilt {uuid.uuid4().hex}\n".encode())  # same recipe, other bytes
    _extra_ids.append(rebuilt)
    engine.images.get(rebuilt).tag("consortia-registry-test/rebuilt", "1.0")
    with pytest.raises(registry.ImageTampered, match="locally rebuilt image"):
        registry.verify_rebuild("consortia-registry-test/rebuilt:1.0", a, rebuilt)
    registry.verify_rebuild("consortia-registry-test/rebuilt:1.0", rebuilt, rebuilt)  # same digest: fine
    # and the node agent's check before a run refuses the local rebuild it resolves
    local = ImageResolver(ContainerRuntime(engine)).local_digest("consortia-registry-test/rebuilt:1.0")
    with pytest.raises(ImageDigestMismatch):
        verify_digest("consortia-registry-test/rebuilt:1.0", a, local)


def test_owner_publishes_and_another_organisation_pulls_by_the_ledger_digest(
    registry_addr, consortium, tmp_path
):
    """Org1 builds the sandbox bundle and publishes it (image build --registry); Org2 reads the record
    and pulls what it pins (image pull); a record pinning another digest is refused."""
    from executor.image_build import build_and_register
    from ledger.client import ConsortiaClient
    from ledger.embedded import EmbeddedLedger

    with EmbeddedLedger(tmp_path / "ledger.sqlite", consortium) as ledger:
        owner = ConsortiaClient(ledger, consortium.identity("Org1"))
        done = build_and_register(owner, "average-consensus", "sandbox", "avg:reg", registry=registry_addr)
        ref = registry.parse_reference(done.record.reference)
        assert ref and ref.is_bundle and ref.registry == registry_addr and done.record.digest == done.digest
        other = ConsortiaClient(ledger, consortium.identity("Org2"))
        rec = other.get_image("avg:reg")
        where, digest = registry.pull_record(rec, bundles_root=tmp_path / "org2-bundles")
        assert digest == rec.digest and Path(where).parent == tmp_path / "org2-bundles"
        forged = owner.register_image(
            "average-consensus",
            "9",
            "average-consensus",
            "sha256:" + "0" * 64,
            rec.reference,
            image_id="forged",
        )
        with pytest.raises(registry.ImageTampered) as caught:
            registry.pull_record(forged, bundles_root=tmp_path / "org3-bundles")
        assert "0" * 64 in str(caught.value) and rec.digest in str(caught.value)
        assert not any((tmp_path / "org3-bundles").glob("registry-*"))


def test_cli_image_build_registry_then_image_pull(registry_addr, tmp_path, monkeypatch):
    """The documented commands: the owner's `image build --registry`, another organisation's `image pull`."""
    import json

    from typer.testing import CliRunner

    from api.cli import app
    from api.cli.output import EXIT_NOT_FOUND

    monkeypatch.setenv("CONSORTIA_CACHE", str(tmp_path / "cache"))
    runner, home = CliRunner(), str(tmp_path / "home")
    assert runner.invoke(app, ["init", "--orgs", "Org1,Org2", "--home", home]).exit_code == 0
    r = runner.invoke(
        app, ["image", "build", "average-consensus", "--registry", registry_addr, "--home", home, "--json"]
    )
    assert r.exit_code == 0, r.stderr
    built = json.loads(r.stdout)
    assert built["reference"].startswith(f"{registry_addr}/consortia/bundles/average-consensus@sha256:")
    r = runner.invoke(app, ["image", "pull", built["id"], "--org", "Org2", "--home", home, "--json"])
    assert r.exit_code == 0, r.stderr
    pulled = json.loads(r.stdout)
    assert pulled["digest"] == built["digest"] and pulled["local"].startswith(str(tmp_path / "cache"))
    r = runner.invoke(app, ["image", "pull", "nope:1", "--org", "Org2", "--home", home, "--json"])
    assert r.exit_code == EXIT_NOT_FOUND and "image nope:1 does not exist" in r.stderr


def test_process_runs_the_bundle_each_organisation_pulled_by_digest(registry_addr, consortium, tmp_path):
    """The node agents of three organisations, each with an empty bundles folder, fetch the bundle the
    record names from the registry and verify it before running: bit-identical to the simulator.
    A second process after the archive was altered in the registry is refused by every agent."""
    from executor.image_build import build_and_register
    from executor.process import Platform, ProcessSpec, launch, map_dataset, run_process
    from executor.runtimes.sandbox import SandboxRuntime
    from ledger.embedded import EmbeddedLedger
    from tests.e2e.conftest import ORGS3, dpsda_case
    from tests.e2e.test_process import assert_bit_identical, simulated

    case = dpsda_case()
    path = tmp_path / "ledger.sqlite"
    platform = Platform(EmbeddedLedger(path, consortium), consortium, tmp_path, ledger_path=path)
    try:
        client = platform.client(ORGS3[0])
        done = build_and_register(client, case.image, "sandbox", "dpsda:reg", registry=registry_addr)
        for o in ORGS3:
            map_dataset(platform.data_root, o, "train", case.datasets[o])

        def launch_and_run(pid: str, roots: str):
            spec = ProcessSpec(pid, "dpsda:reg", ORGS3, case.topology, case.params, case.rounds, "train")
            launch(client, spec)
            for o in ORGS3:
                platform.bundles_roots[o] = tmp_path / roots / o
            return run_process(platform, pid, SandboxRuntime)

        out = launch_and_run("p-reg", "bundles")
        assert out.status == "completed", (out.reason, out.agent_errors)
        assert_bit_identical(platform, client, "p-reg", simulated(case))
        for o in ORGS3:
            assert len(list((tmp_path / "bundles" / o).glob("registry-dpsda-*"))) == 1
        _flip_blob(registry_addr, registry.parse_reference(done.record.reference).digest)
        out = launch_and_run("p-tampered", "fresh")
        assert out.status == "failed" and "image refused" in out.reason
        refused = [r for r in client.query_executions("p-tampered") if r.status == "failed"]
        assert refused and all(r.failure_details["code"] == "IMAGE_TAMPERED" for r in refused)
        assert all(r.public_key == "" and r.result is None for r in refused)  # never ran: no task key
        assert not any(r.status == "completed" for r in client.query_executions("p-tampered"))
    finally:
        platform.ledger.close()


def test_install_registry_with_the_consortium_tls_ca(consortium, tmp_path):
    """--ca CERT KEY: the server certificate is issued by the consortium's TLS CA for 127.0.N.1 only,
    the CA's key is not copied, and a restart without --ca keeps that CA."""
    import ssl
    import urllib.request

    if shutil.which("docker-registry") is None and os.geteuid() != 0:
        skip_or_fail("docker-registry is not installed (scripts/install-registry installs it as root)")
    org = consortium.organisation("Org1MSP")
    ca = org.path / "tlsca" / f"tlsca.{org.domain}-cert.pem"
    listen = f"{HOST}:{_free_port()}"
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
        assert (registry.CERTS_DIR / listen / "ca.crt").read_bytes() == ca.read_bytes()
    finally:
        subprocess.run([str(SCRIPT), "--listen", listen, "--stop"], capture_output=True, env=env, timeout=60)
        shutil.rmtree(registry.CERTS_DIR / listen, ignore_errors=True)
