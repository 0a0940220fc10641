"""``consortia join`` is handed folders and a profile it must not trust (issue 33 item 3). It
followed symbolic links: a member's "public" ``msp/config.yaml`` or the orderer's
``signcerts/*.pem`` linked to the joiner's own admin key put that key into the new home as a 0644
file, and a linked ``encryption/cert.pem`` was refused only after the key had been copied (and left
there). Now links are refused, never followed, every public file must parse as what it is, files are
0600 and folders 0700, and a refused join leaves nothing behind, so a corrected retry works."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

from api.cli import app
from home.create import init_home
from home.errors import HomeError
from home.join import join_organisation

runner = CliRunner()
ENDPOINT = "https://127.0.2.1:8443"


@pytest.fixture(scope="module")
def full(tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("full") / "home"
    init_home(home, ["Org1", "Org2", "Org3"])
    return home / "crypto"


@pytest.fixture
def handed(full, tmp_path) -> dict[str, Path]:
    """What the joiner (Org2) is handed: its own folder, copies of the others' folders (controlled by
    whoever sent them: links kept as links) and of the orderer's, and a profile naming a TLS root."""
    peers = full / "peerOrganizations"
    out = {"own": peers / "org2.example.com"}
    for name in ("org1.example.com", "org3.example.com"):
        out[name] = tmp_path / "handed" / name
        shutil.copytree(peers / name, out[name], symlinks=True)
    out["orderer"] = tmp_path / "handed" / "example.com"
    shutil.copytree(full / "ordererOrganizations" / "example.com", out["orderer"], symlinks=True)
    tls = peers / "org2.example.com" / "tlsca" / "tlsca.org2.example.com-cert.pem"
    out["tls"] = tmp_path / "handed" / "peer-tls-ca.pem"
    shutil.copyfile(tls, out["tls"])
    out["profile"] = tmp_path / "handed" / "connection.json"
    write_profile(out["profile"], out["tls"])
    return out


def write_profile(path: Path, tls: Path) -> None:
    peer = {"msp_id": "Org2MSP", "address": "127.0.2.1:7051", "tls_ca_file": str(tls)}
    path.write_text(json.dumps({"channel": "consortia", "chaincode": "consortia", "peers": [peer]}))


def admin_key(handed) -> Path:
    own = handed["own"]
    return own / "users" / f"Admin@{own.name}" / "msp" / "keystore" / "priv_sk"


def join(home: Path, handed) -> None:
    join_organisation(
        home,
        "Org2",
        handed["own"],
        {"Org1": handed["org1.example.com"], "Org3": handed["org3.example.com"]},
        handed["orderer"],
        ENDPOINT,
        profile=handed["profile"],
    )


def keys_outside_own(home: Path) -> list[Path]:
    own = home / "crypto" / "peerOrganizations" / "org2.example.com"
    return [
        f
        for f in home.rglob("*")
        if f.is_file() and b"PRIVATE KEY" in f.read_bytes() and own not in f.parents
    ]


def plant_link(target: Path, to: Path) -> None:
    target.unlink()
    target.symlink_to(to)


def link_folder(folder: Path, to: Path) -> None:
    shutil.rmtree(folder)
    folder.symlink_to(to, target_is_directory=True)


ATTACKS = {
    "config.yaml -> own admin key": lambda h: plant_link(
        h["org1.example.com"] / "msp" / "config.yaml", admin_key(h)
    ),
    "orderer signcerts -> own admin key": lambda h: plant_link(
        next((h["orderer"] / "orderers").glob("*/msp/signcerts/*.pem")), admin_key(h)
    ),
    "encryption/cert.pem -> own admin key": lambda h: plant_link(
        h["org3.example.com"] / "encryption" / "cert.pem", admin_key(h)
    ),
    "cacerts/*.pem -> own admin key": lambda h: plant_link(
        next((h["org1.example.com"] / "msp" / "cacerts").glob("*.pem")), admin_key(h)
    ),
    "profile tls_ca_file -> own admin key": lambda h: plant_link(h["tls"], admin_key(h)),
    "an orderer folder linked to the joiner's admin": lambda h: link_folder(
        next((h["orderer"] / "orderers").iterdir()), admin_key(h).parents[2]
    ),
    "config.yaml holding a copy of the key": lambda h: shutil.copyfile(
        admin_key(h), h["org1.example.com"] / "msp" / "config.yaml"
    ),
    "encryption/cert.pem holding a copy of the key": lambda h: shutil.copyfile(
        admin_key(h), h["org3.example.com"] / "encryption" / "cert.pem"
    ),
    "a certificate followed by the key": lambda h: (
        h["org1.example.com"] / "encryption" / "cert.pem"
    ).write_bytes(
        (h["org1.example.com"] / "encryption" / "cert.pem").read_bytes() + admin_key(h).read_bytes()
    ),
    "tls_ca_file holding the key": lambda h: shutil.copyfile(admin_key(h), h["tls"]),
}


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_a_hostile_public_folder_or_profile_is_refused_and_leaves_nothing(tmp_path, handed, attack):
    ATTACKS[attack](handed)
    home = tmp_path / "org2-home"
    with pytest.raises(HomeError):
        join(home, handed)
    assert not home.exists()  # no half-made home, no copied key
    assert not [p for p in tmp_path.rglob("*") if p.is_file() and "org2-home" in p.parts]


def test_a_retry_after_a_refusal_works_and_the_home_is_private(tmp_path, handed, full):
    key = admin_key(handed)
    cfg = handed["org1.example.com"] / "msp" / "config.yaml"
    honest = cfg.read_bytes()
    plant_link(cfg, key)
    home = tmp_path / "org2-home"
    res = runner.invoke(
        app,
        [
            "join",
            "--org",
            "Org2",
            "--msp-dir",
            str(handed["own"]),
            "--member",
            f"Org1={handed['org1.example.com']}",
            "--member",
            f"Org3={handed['org3.example.com']}",
            "--orderer",
            str(handed["orderer"]),
            "--artifact-endpoint",
            ENDPOINT,
            "--fabric-profile",
            str(handed["profile"]),
            "--home",
            str(home),
            "--json",
        ],
    )
    assert res.exit_code == 2 and "symbolic link" in res.stdout, res.stdout
    assert not home.exists()
    cfg.unlink()
    cfg.write_bytes(honest)
    join(home, handed)  # the same home, once the folder is honest
    assert not keys_outside_own(home)
    for p in home.rglob("*"):
        want = 0o700 if p.is_dir() else 0o600
        assert not p.is_symlink() and stat.S_IMODE(os.lstat(p).st_mode) == want, (p, oct(p.stat().st_mode))
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    copied = home / "fabric" / "Org2MSP-peer-tls-ca.pem"
    assert copied.read_bytes() == handed["tls"].read_bytes()
    assert json.loads((home / "fabric" / "profile.json").read_text())["peers"][0]["tls_ca_file"] == str(
        copied
    )
