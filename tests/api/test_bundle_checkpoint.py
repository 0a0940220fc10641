"""Issue 14 item 5 in audit bundles and attestations: each carries a signed checkpoint of the
chain head; bundle verification checks it, and the ledger verifier detects a ledger truncated
below the head a bundle saw (``ledger verify --checkpoint <bundle>/checkpoint.json``)."""

from __future__ import annotations

import base64
import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from api.attestation import check_checkpoint, statement_checkpoint
from api.bundle import export_bundle, verify_bundle
from api.cli import app
from chaincode.canonical import canonical_json
from ledger.checkpoint import Checkpoint, sign_checkpoint
from ledger.embedded.verify import verify_ledger_file
from ledger.errors import LedgerCorrupted
from tests.api.test_bundle import _resign, cas, failed
from tests.ledger.test_verify_integrity import truncate_consistently

MODEL = "proc-0:Org2MSP"
runner = CliRunner()


@pytest.fixture(scope="module")
def exported(world, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("cp-bundles") / "bundle"
    signers = {m: world.consortium.identity(m) for m in ("Org1MSP", "Org2MSP", "Org3MSP")}
    summary = export_bundle(
        out, world.clients["Org2MSP"], MODEL, signers=signers, ca_certificates=cas(world.consortium)
    )
    assert (
        summary["checkpoint"]["block_number"]
        == world.ledger.block_height(world.consortium.identity("Org2")) - 1
    )
    return out


@pytest.fixture
def bundle(exported, tmp_path) -> Path:
    copy = tmp_path / "b"
    shutil.copytree(exported, copy)
    return copy


def snapshot(world, dest: Path) -> Path:
    """A consistent copy of the world's (open) ledger file."""
    src = sqlite3.connect(world.ledger.path)
    dst = sqlite3.connect(dest)
    src.backup(dst)
    dst.close()
    src.close()
    return dest


def test_bundle_and_every_attestation_carry_a_verified_checkpoint(exported, world):
    report = verify_bundle(exported, trusted_cas=cas(world.consortium))
    assert report.ok, report.failures
    [check] = [c for c in report.checks if c["check"] == "ledger checkpoint"]
    assert "signed by Org2MSP" in check["detail"]
    cp = json.loads((exported / "checkpoint.json").read_bytes())
    for p in (exported / "attestations").glob("*.dsse.json"):
        statement = json.loads(base64.b64decode(json.loads(p.read_bytes())["payload"]))
        assert statement_checkpoint(statement) == cp
        check_checkpoint(statement_checkpoint(statement), cas(world.consortium))


def test_ledger_truncated_below_the_bundles_checkpoint_is_detected(exported, world, tmp_path):
    cp_file = exported / "checkpoint.json"
    cp = Checkpoint.from_json(json.loads(cp_file.read_bytes()))
    copy = snapshot(world, tmp_path / "ledger.db")
    assert verify_ledger_file(copy, world.consortium, [cp])["checkpoints"] == 1
    res = runner.invoke(
        app,
        [
            "ledger",
            "verify",
            str(copy),
            "--crypto",
            str(world.consortium.root),
            "--checkpoint",
            str(cp_file),
            "--json",
        ],
    )
    assert res.exit_code == 0, res.stdout
    truncate_consistently(copy, cp.block_number - 2)
    assert verify_ledger_file(copy, world.consortium)["blocks"] == cp.block_number - 1
    with pytest.raises(LedgerCorrupted, match="truncated"):
        verify_ledger_file(copy, world.consortium, [cp])
    res = runner.invoke(
        app,
        [
            "ledger",
            "verify",
            str(copy),
            "--crypto",
            str(world.consortium.root),
            "--checkpoint",
            str(cp_file),
            "--json",
        ],
    )
    assert res.exit_code == 1 and "truncated" in json.loads(res.stdout)["error"]


def test_changed_or_missing_checkpoint_fails_the_bundle(bundle, world):
    path = bundle / "checkpoint.json"
    obj = json.loads(path.read_bytes())
    obj["block_number"] -= 1  # claims an earlier head: the signature breaks
    path.write_bytes(canonical_json(obj))
    _resign(bundle, world.consortium.identity("Org2MSP"))
    assert failed(verify_bundle(bundle)) == ["ledger checkpoint"]
    # validly re-signed by an organisation, but the claimed head is not a block of the bundle with that hash
    cp = Checkpoint.from_json(obj)
    resigned = sign_checkpoint(
        world.consortium.identity("Org2MSP"), cp.channel, cp.block_number, cp.header_hash
    )
    path.write_bytes(canonical_json(resigned.to_json()))
    _resign(bundle, world.consortium.identity("Org2MSP"))
    report = verify_bundle(bundle)
    assert failed(report) == ["ledger checkpoint"]
    path.unlink()
    _resign(bundle, world.consortium.identity("Org2MSP"))
    assert "ledger checkpoint" in failed(verify_bundle(bundle))


def test_attestation_without_checkpoint_fails(bundle, world):
    from api.attestation import attest_execution

    name = sorted((bundle / "attestations").glob("*Org3MSP.dsse.json"))[0]
    node = name.name[: -len(".dsse.json")]
    record = json.loads((bundle / "records" / "executions" / f"{node}.json").read_bytes())
    name.write_bytes(canonical_json(attest_execution(record, world.consortium.identity("Org3MSP"))))
    _resign(bundle, world.consortium.identity("Org2MSP"))
    report = verify_bundle(bundle)
    assert failed(report) == [f"attestation {node}"]
    assert "carries no ledger checkpoint" in report.failures[0]["detail"]


def test_gateway_attestation_carries_the_chain_head(gateways, world):
    _, client, _ = gateways["Org1MSP"]
    env = client.get("/api/v1/processes/proc-0/executions/3/Org1MSP/attestation").json()
    statement = json.loads(base64.b64decode(env["payload"]))
    cp, signer = check_checkpoint(statement_checkpoint(statement), cas(world.consortium))
    assert signer == "Org1MSP" and cp.block_number >= 1
    assert (
        world.ledger.block(world.consortium.identity("Org1"), cp.block_number).header_hash == cp.header_hash
    )
