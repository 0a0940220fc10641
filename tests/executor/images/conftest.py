"""A real docker-registry of the tests' own (scripts/install-registry on a loopback address, over TLS,
own storage and CA), for the image-distribution tests; and what an attacker on the registry host
could do to its storage."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from executor.images.reference import CERTS_DIR
from tests.ci import skip_or_fail

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "scripts" / "install-registry"
HOST = "127.0.9.1"

_HOMES: dict[str, Path] = {}


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def registry_addr(tmp_path_factory):
    """A registry of our own (own storage, own CA) for this session; stopped at the end."""
    if shutil.which("docker-registry") is None and os.geteuid() != 0:
        skip_or_fail("docker-registry is not installed (scripts/install-registry installs it as root)")
    listen = f"{HOST}:{free_port()}"
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
    shutil.rmtree(CERTS_DIR / listen, ignore_errors=True)


def flip_blob(addr: str, digest: str) -> None:
    """Flip one bit of a blob in the registry's filesystem storage."""
    hexd = digest.split(":", 1)[1]
    data = (
        _HOMES[addr]
        / "storage"
        / "docker"
        / "registry"
        / "v2"
        / "blobs"
        / "sha256"
        / hexd[:2]
        / hexd
        / "data"
    )
    raw = bytearray(data.read_bytes())
    raw[len(raw) // 2] ^= 0x01
    data.write_bytes(bytes(raw))
