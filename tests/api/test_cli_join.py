"""``consortia join``: the home of ONE organisation holding only its own keys and the others' public
certificates (issue 12, item 1), and ``consortia node run --home`` taking its ``[node]`` table."""

from __future__ import annotations

import json
import tomllib
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from api.cli import app
from chaincode.canonical import canonical_json
from home.errors import HomeError
from home.ledger import open_ledger
from home.settings import load
from ledger.client import ConsortiaClient
from ledger.errors import AccessDenied
from ledger.identity import Consortium

runner = CliRunner()
ENDPOINT = "https://127.0.2.1:8443"


def run(*args: str, code: int = 0):
    result = runner.invoke(app, list(args))
    assert result.exit_code == code, (result.stdout, result.stderr)
    return result


@pytest.fixture(scope="module")
def full(tmp_path_factory) -> Path:
    """A 3-organisation consortium made by ``consortia init`` (every key on one machine)."""
    home = tmp_path_factory.mktemp("full") / "home"
    run("init", "--orgs", "Org1,Org2,Org3", "--home", str(home), "--json")
    return home


def _profile(tmp_path: Path, msp: str) -> Path:
    p = tmp_path / f"connection-{msp}.json"
    p.write_text(
        json.dumps(
            {
                "channel": "consortia",
                "chaincode": "consortia",
                "peers": [{"msp_id": msp, "address": "127.0.2.1:7051"}],
            }
        )
    )
    return p


def join_args(full: Path, home: Path, *extra: str) -> list[str]:
    peers = full / "crypto" / "peerOrganizations"
    return [
        "join",
        "--org",
        "Org2",
        "--msp-dir",
        str(peers / "org2.example.com"),
        # the others' whole cryptogen folders are given: join must take their public part only
        "--member",
        f"Org1={peers / 'org1.example.com'}",
        "--member",
        f"Org3={peers / 'org3.example.com'}",
        "--orderer",
        str(full / "crypto" / "ordererOrganizations" / "example.com"),
        "--artifact-endpoint",
        ENDPOINT,
        "--listen",
        "127.0.2.1:8443",
        "--home",
        str(home),
        *extra,
    ]


def _private_keys(root: Path) -> set[Path]:
    return {f for f in root.rglob("*") if f.is_file() and b"PRIVATE KEY" in f.read_bytes()}


def test_join_makes_a_home_with_only_its_own_keys(tmp_path, full):
    home = tmp_path / "org2-home"
    data, store = tmp_path / "org2-data", tmp_path / "org2-artifacts"
    args = join_args(full, home, "--fabric-profile", str(_profile(tmp_path, "Org2MSP")))
    info = json.loads(run(*args, "--data", str(data), "--artifacts", str(store), "--json").stdout)
    assert info["organisation"] == "Org2MSP" and info["backend"] == "fabric"
    assert info["organisations"][0] == "Org2MSP" and set(info["organisations"]) == {
        "Org1MSP",
        "Org2MSP",
        "Org3MSP",
    }
    assert info["data"] == str(data) and info["artifact_endpoint"] == ENDPOINT
    own = home / "crypto" / "peerOrganizations" / "org2.example.com"
    keys = _private_keys(home)
    assert keys and all(own in k.parents for k in keys), sorted(map(str, keys - set(own.rglob("*"))))
    for other in ("org1.example.com", "org3.example.com"):
        folder = home / "crypto" / "peerOrganizations" / other
        assert not (folder / "users").exists() and not (folder / "peers").exists()
        assert sorted(p.name for p in (folder / "msp" / "cacerts").iterdir()) == [f"ca.{other}-cert.pem"]
    cfg = tomllib.loads((home / "consortia.toml").read_text())
    assert cfg["node"] == {
        "organisation": "Org2MSP",
        "artifact_endpoint": ENDPOINT,
        "listen": "127.0.2.1:8443",
    }
    assert set(cfg["organisations"]) == {"Org2MSP"}  # no table (no identity) for another organisation
    settings = load(home)
    assert settings.node_setting("organisation") == "Org2MSP" and settings.default_organisation == "Org2MSP"
    assert settings.paths.data("Org2MSP") == data and settings.paths.store_root == store

    # ledger.identity.Consortium loads a home where the others have no private keys
    joined, everyone = Consortium(home / "crypto"), Consortium(full / "crypto")
    assert set(joined.msp_ids) == set(everyone.msp_ids)
    me = joined.identity("Org2")
    for org in ("Org1", "Org3"):
        assert joined.encryption_certificate(org) == everyone.encryption_certificate(org)
        with pytest.raises(FileNotFoundError):
            joined.identity(org)
    # a process specification signed in the joined home verifies against the full consortium's CAs,
    # and one signed by Org1 (elsewhere) verifies in the joined home
    spec = canonical_json({"id": "p-join", "consortium": ["Org1MSP", "Org2MSP"], "rounds": 2})
    assert everyone.membership().verify_signature(me.serialized(), spec, me.sign(spec))[0] == "Org2MSP"
    org1 = everyone.identity("Org1")
    assert joined.membership().verify_signature(org1.serialized(), spec, org1.sign(spec))[0] == "Org1MSP"
    with pytest.raises(AccessDenied):
        joined.membership().verify_signature(org1.serialized(), spec + b" ", org1.sign(spec))


def test_the_joined_identity_acts_on_the_consortium_ledger(tmp_path, full):
    """Org2, from its joined home, registers an image and creates a process on the consortium's
    ledger (here the embedded one the full home hosts); the channel accepts its signatures."""
    home = tmp_path / "org2"
    run(*join_args(full, home, "--fabric-profile", str(_profile(tmp_path, "Org2MSP"))))
    me = Consortium(home / "crypto").identity("Org2MSP")
    ledger = open_ledger(full)
    try:
        client = ConsortiaClient(ledger, me)
        image = client.register_image("join", "1", "avg", "sha256:" + "ab" * 32)
        rec = client.create_process("p-join", image.id, ["Org1MSP", "Org2MSP"], {"kind": "ring"}, 2)
        assert rec.creator == "Org2MSP" and image.owner == "Org2MSP"
        member = client.publish_membership(ENDPOINT, "sha256:" + "cd" * 32)
        assert (
            ConsortiaClient(ledger, Consortium(full / "crypto").identity("Org1")).get_member("Org2MSP")
            == member
        )
    finally:
        ledger.close()


def test_node_run_takes_the_node_table(tmp_path, full, monkeypatch):
    import home.agent

    home_dir = tmp_path / "org2"
    run(*join_args(full, home_dir, "--fabric-profile", str(_profile(tmp_path, "Org2MSP"))))
    places = home.agent.NodePlaces.of_home(home_dir)
    assert places.org == "Org2MSP" and places.artifact_endpoint == ENDPOINT
    assert places.store_root == home_dir / "artifacts" and places.consortium.root == home_dir / "crypto"
    assert places.state == home_dir / "state" / "Org2MSP" and places.ledger_file is None  # the home's
    seen = {}

    def built(places, **options):  # what `consortia node run --home` builds, before any ledger is opened
        seen.update(places=places, **options)
        raise home.agent.HomeError("stop here")

    monkeypatch.setattr(home.agent, "build_agent", built)
    r = run("node", "run", "--home", str(home_dir), "--runtime", "sandbox", code=2)
    got = seen["places"]
    assert "stop here" in r.stderr and seen["runtime"] == "sandbox"
    assert replace(got, consortium=None) == replace(places, consortium=None)
    assert got.consortium.root == places.consortium.root


def test_an_embedded_ledger_needs_every_peer(tmp_path, full):
    home = tmp_path / "org2"
    run(*join_args(full, home, "--ledger", str(full / "ledger.db")))
    assert load(home).ledger_backend == "embedded"
    with pytest.raises(HomeError, match="every peer's key"):
        open_ledger(home)


@pytest.mark.parametrize(
    "change, message",
    [
        (("--artifact-endpoint", "http://127.0.2.1:8443"), "https://host:port"),
        (("--fabric-profile", "PROFILE-ORG1"), "names no peer of Org2MSP"),
        (("--member", "Org3"), "NAME=DIR"),
    ],
)
def test_join_refusals(tmp_path, full, change, message):
    args = join_args(full, tmp_path / "h")
    if "--fabric-profile" not in change:
        args += ["--fabric-profile", str(_profile(tmp_path, "Org2MSP"))]
    option, value = change
    value = str(_profile(tmp_path, "Org1MSP")) if value == "PROFILE-ORG1" else value
    if option in args and option != "--member":
        args[args.index(option) + 1] = value
    else:
        args += [option, value]
    out = run(*args, "--json", code=2)
    assert message in out.stdout + out.stderr


def test_join_refuses_a_member_without_public_certificates(tmp_path, full):
    bare = tmp_path / "org3.example.com"
    (bare / "msp").mkdir(parents=True)
    args = join_args(full, tmp_path / "h", "--fabric-profile", str(_profile(tmp_path, "Org2MSP")))
    args[args.index(f"Org3={full / 'crypto' / 'peerOrganizations' / 'org3.example.com'}")] = f"Org3={bare}"
    out = run(*args, "--json", code=2)
    assert "org3.example.com" in out.stdout + out.stderr
