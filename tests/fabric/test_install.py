"""fabric-network/install.sh: the archive route (archive and per-file sha256 checked), the
re-check of what is installed on every run, and official release binaries (issue 13); the tools and
Fabric CA components (issue 27)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from tests.ci import skip_or_fail

ROOT = Path(__file__).resolve().parents[2]
INSTALL = ROOT / "fabric-network" / "install.sh"
ARCHIVE_NAME = "fabric-3.1.5-linux-amd64.tar.xz"


def _archive() -> Path:
    named = os.environ.get("CONSORTIA_FABRIC_ARCHIVE")
    path = Path(named) if named else ROOT.parent / "shared" / "fabric" / ARCHIVE_NAME
    if not path.is_file():
        skip_or_fail(f"no Fabric 3.1.5 archive at {path}")
    return path


def _install(home: Path, **env) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if k != "CONSORTIA_FABRIC_ARCHIVE"}
    e.update(FABRIC_HOME=str(home), PATH="/usr/bin:/bin", **env)
    return subprocess.run(["bash", str(INSTALL)], env=e, capture_output=True, text=True, timeout=300)


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def test_archive_installs_checked_files_and_a_rerun_repairs_a_changed_binary(tmp_path):
    archive = _archive()
    home = tmp_path / "fabric"
    r = _install(home, CONSORTIA_FABRIC_ARCHIVE=str(archive))
    assert r.returncode == 0, r.stderr
    assert "from the archive" in r.stdout
    peer = home / "bin" / "peer"
    good = _sha(peer)
    assert good == "2c0b7c37997510007862dc5bc7262ba7ae30ff991828d4457e6da736ed39f2d0"
    assert "Version: 3.1.5" in subprocess.run([str(peer), "version"], capture_output=True, text=True).stdout

    r = _install(home, CONSORTIA_FABRIC_ARCHIVE=str(archive))  # nothing to do
    assert r.returncode == 0 and "found" in r.stdout

    (home / "config" / "core.yaml").write_text("tampered: true\n")  # no stamp file is trusted
    r = _install(home, CONSORTIA_FABRIC_ARCHIVE=str(archive))
    assert r.returncode == 0 and "from the archive" in r.stdout, r.stderr
    assert (
        _sha(home / "config" / "core.yaml")
        == "ec6b65f5ac155c1f977a66b64772488977ca03bb89cf6e7cb5bd6e3777144107"
    )


def test_archive_with_a_wrong_sha256_installs_nothing(tmp_path):
    bad = tmp_path / ARCHIVE_NAME
    shutil.copyfile(_archive(), bad)
    with bad.open("ab") as f:
        f.write(b"\0")
    home = tmp_path / "fabric"
    r = _install(home, CONSORTIA_FABRIC_ARCHIVE=str(bad))
    assert r.returncode == 5
    assert "expected 3fb604d4ec7360042dcd0a377863fc1ddab12c34cc8ef4a92406287fc21f88e0" in r.stderr
    assert not (home / "bin" / "peer").exists()


def test_named_archive_that_does_not_exist_is_an_error(tmp_path):
    r = _install(tmp_path / "fabric", CONSORTIA_FABRIC_ARCHIVE=str(tmp_path / "missing.tar.xz"))
    assert r.returncode == 4 and "does not exist" in r.stderr


def test_official_release_binaries_are_accepted(tmp_path):
    """Release builds print `Version: v3.1.5`; they are kept as they are (not replaced)."""
    home = tmp_path / "fabric"
    (home / "bin").mkdir(parents=True)
    (home / "config").mkdir()
    for b in ("peer", "orderer", "configtxgen", "osnadmin"):
        script = home / "bin" / b
        script.write_text("#!/bin/sh\nprintf 'peer:\\n Version: v3.1.5\\n Commit SHA: 86c1172\\n'\n")
        script.chmod(0o755)
    for f in ("core.yaml", "orderer.yaml"):
        (home / "config" / f).write_text("x: 1\n")
    r = _install(home, CONSORTIA_FABRIC_ARCHIVE=str(tmp_path / "not-needed.tar.xz"))
    assert r.returncode == 0 and "found" in r.stdout, r.stderr


def test_other_versions_are_not_accepted(tmp_path):
    home = tmp_path / "fabric"
    (home / "bin").mkdir(parents=True)
    (home / "config").mkdir()
    for b in ("peer", "orderer", "configtxgen", "osnadmin"):
        script = home / "bin" / b
        script.write_text("#!/bin/sh\nprintf 'peer:\\n Version: v2.5.9\\n'\n")
        script.chmod(0o755)
    for f in ("core.yaml", "orderer.yaml"):
        (home / "config" / f).write_text("x: 1\n")
    r = _install(home, CONSORTIA_FABRIC_ARCHIVE=str(tmp_path / "missing.tar.xz"))
    assert r.returncode == 4  # went on to the archive route: v2.5.9 is not kept


def test_fabric_home_defaults_to_the_consortia_cache(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("FABRIC_HOME", "CONSORTIA_FABRIC_ARCHIVE")}
    env.update(
        CONSORTIA_CACHE=str(tmp_path / "cache"),
        CONSORTIA_FABRIC_ARCHIVE=str(_archive()),
        PATH="/usr/bin:/bin",
    )
    r = subprocess.run(["bash", str(INSTALL)], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "cache" / "fabric" / "bin" / "peer").is_file()


TOOLS_ARCHIVE, CA_ARCHIVE = "fabric-tools-3.1.5-linux-amd64.tar.xz", "fabric-ca-1.5.21-linux-amd64.tar.xz"


def _named_archive(variable: str, name: str) -> Path:
    named = os.environ.get(variable)
    path = Path(named) if named else ROOT.parent / "shared" / "fabric" / name
    if not path.is_file():
        skip_or_fail(f"no {name} at {path} (set {variable})")
    return path


def test_tools_and_ca_archives_install_checked_files(tmp_path):
    """`install.sh tools ca`: configtxlator & co. and Fabric CA from their archives, every sha256 checked."""
    tools = _named_archive("CONSORTIA_FABRIC_TOOLS_ARCHIVE", TOOLS_ARCHIVE)
    ca = _named_archive("CONSORTIA_FABRIC_CA_ARCHIVE", CA_ARCHIVE)
    home = tmp_path / "fabric"
    env = {"CONSORTIA_FABRIC_TOOLS_ARCHIVE": str(tools), "CONSORTIA_FABRIC_CA_ARCHIVE": str(ca)}
    e = {k: v for k, v in os.environ.items() if not k.startswith("CONSORTIA_FABRIC")}
    e.update(FABRIC_HOME=str(home), PATH="/usr/bin:/bin", **env)
    r = subprocess.run(
        ["bash", str(INSTALL), "tools", "ca"], env=e, capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stderr
    assert "fabric tools installed" in r.stdout and "fabric ca installed" in r.stdout
    assert (
        _sha(home / "bin" / "fabric-ca-server")
        == "4f215840a64e4b0f4ab0bdb01dc0665733a546ffd89c1faeb80e0d56f34126b7"
    )
    assert (
        _sha(home / "bin" / "configtxlator")
        == "b715308feb750d5a0e31a71c46e0e41b8d9fa8c3e67c8c276fe3c36a1990be91"
    )
    out = subprocess.run([str(home / "bin" / "fabric-ca-client"), "version"], capture_output=True, text=True)
    assert "Version: 1.5.21" in out.stdout
    assert not (home / "bin" / "peer").exists()  # only what was asked for
    r = subprocess.run(
        ["bash", str(INSTALL), "tools", "ca"], env=e, capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0 and r.stdout.count("found") == 2
    (home / "bin" / "discover").write_bytes(b"changed")  # a changed file is installed again
    r = subprocess.run(["bash", str(INSTALL), "tools"], env=e, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "fabric tools installed" in r.stdout
    assert (
        _sha(home / "bin" / "discover") == "528f6cdf1c16aebe877c230299ec8eb5db3e71ea7bd3f30530f2cbbbcbfb400c"
    )


def test_a_ca_archive_with_a_wrong_sha256_installs_nothing(tmp_path):
    bad = tmp_path / CA_ARCHIVE
    shutil.copyfile(_named_archive("CONSORTIA_FABRIC_CA_ARCHIVE", CA_ARCHIVE), bad)
    with bad.open("ab") as f:
        f.write(b"\0")
    home = tmp_path / "fabric"
    e = {k: v for k, v in os.environ.items() if not k.startswith("CONSORTIA_FABRIC")}
    e.update(FABRIC_HOME=str(home), PATH="/usr/bin:/bin", CONSORTIA_FABRIC_CA_ARCHIVE=str(bad))
    r = subprocess.run(["bash", str(INSTALL), "ca"], env=e, capture_output=True, text=True, timeout=300)
    assert (
        r.returncode == 5
        and "expected 567e093d3c6673c4a42b2751205bbafd3c8a09362014d8c46e8c0bc7cb126e0d" in r.stderr
    )
    assert not (home / "bin" / "fabric-ca-server").exists()


def test_an_unknown_component_is_an_error(tmp_path):
    r = subprocess.run(
        ["bash", str(INSTALL), "orderer-only"],
        env={"FABRIC_HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
    )
    assert r.returncode == 1 and "unknown component 'orderer-only'" in r.stderr
