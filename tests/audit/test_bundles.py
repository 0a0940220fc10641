"""audit.bundles: an exported bundle verifies offline; any changed byte, added or removed file, or a
re-signed bundle with a wrong attestation or record fails verification naming what broke. Every
bundle and attestation carries a signed checkpoint of the chain head (issue 14 item 5): bundle
verification checks it, and the ledger verifier detects a ledger truncated below the head a bundle
saw (``ledger verify --checkpoint <bundle>/checkpoint.json``)."""

from __future__ import annotations

import base64
import json
import random
import shutil
from pathlib import Path

import pytest

from api.cli import app
from audit.attestations import attest_execution, sign_envelope, statement_checkpoint
from audit.bundles import ENVELOPE, MANIFEST_TYPE, BundleError, export_bundle, verify_bundle
from audit.checkpoints import check_checkpoint
from audit.ledger_file import verify_ledger_file
from chaincode.canonical import canonical_json
from ledger.checkpoint import Checkpoint, sign_checkpoint
from ledger.errors import LedgerCorrupted
from ledger.identity import Consortium
from tests.audit.ledgers import runner, snapshot, truncate_consistently

MODEL = "proc-0:Org1MSP"


def cas(consortium: Consortium) -> dict[str, bytes]:
    return {
        o.msp_id: (o.path / "ca" / f"ca.{o.domain}-cert.pem").read_bytes() for o in consortium.organisations
    }


@pytest.fixture(scope="module")
def exported(world, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("bundles") / "bundle"
    signers = {m: world.consortium.identity(m) for m in ("Org1MSP", "Org2MSP", "Org3MSP")}
    summary = export_bundle(
        out, world.clients["Org1MSP"], MODEL, signers=signers, ca_certificates=cas(world.consortium)
    )
    assert summary["executions"] == 9 and summary["attestations"] == 9 and summary["blocks"] > 0
    assert (
        summary["checkpoint"]["block_number"]
        == world.ledger.block_height(world.consortium.identity("Org1")) - 1
    )
    return out


@pytest.fixture
def bundle(exported, tmp_path) -> Path:
    copy = tmp_path / "b"
    shutil.copytree(exported, copy)
    return copy


def failed(report) -> list[str]:
    return [c["check"] for c in report.checks if not c["ok"]]


def test_exported_bundle_verifies_offline(exported, world):
    report = verify_bundle(exported)
    assert report.ok, report.failures
    names = [c["check"] for c in report.checks]
    assert "manifest signature" in names and "transactions in blocks" in names
    assert sum(n.startswith("attestation ") for n in names) == 9
    assert sum(n.startswith("execution ") for n in names) == 9
    private = next(c for c in report.checks if c["check"] == "private terms")
    assert private["ok"] and "carried, matching the on-chain hash sha256:" in private["detail"]
    assert verify_bundle(exported, trusted_cas=cas(world.consortium)).ok


def test_every_file_and_layout(exported):
    rels = {p.relative_to(exported).as_posix() for p in exported.rglob("*") if p.is_file()}
    assert ENVELOPE in rels and "records/model.json" in rels
    assert sum(r.startswith("attestations/") for r in rels) == 9
    assert any(r.startswith("certificates/ca/") for r in rels) and any(r.startswith("blocks/") for r in rels)
    model = json.loads((exported / "records" / "model.json").read_text())
    assert "wrapped_key" not in model


def test_any_changed_byte_fails_naming_what_broke(bundle):
    rng = random.Random(20261122)
    files = sorted(p for p in bundle.rglob("*") if p.is_file())
    tried = 0
    for path in files:
        rel = path.relative_to(bundle).as_posix()
        data = path.read_bytes()
        positions = {0, len(data) - 1, rng.randrange(len(data))}
        for pos in positions:
            changed = bytearray(data)
            changed[pos] ^= 0x01 if rng.random() < 0.5 else 0x20
            path.write_bytes(bytes(changed))
            report = verify_bundle(bundle)
            path.write_bytes(data)
            tried += 1
            assert not report.ok, f"{rel} byte {pos} changed, bundle still verifies"
            where = " ".join(f"{c['check']} {c['detail']}" for c in report.failures)
            if rel == ENVELOPE:
                assert "manifest" in where or ENVELOPE in where, where
            else:
                assert rel in where, f"{rel}: {where}"
    assert tried > 100
    assert verify_bundle(bundle).ok


def test_added_or_removed_files_fail(bundle):
    (bundle / "records" / "extra.json").write_text("{}")
    assert "file records/extra.json" in failed(verify_bundle(bundle))
    (bundle / "records" / "extra.json").unlink()
    victim = next((bundle / "attestations").glob("*.dsse.json"))
    victim.unlink()
    assert f"file attestations/{victim.name}" in failed(verify_bundle(bundle))


def test_resigned_bundle_with_a_foreign_attestation_fails(bundle, world):
    """Even with a valid manifest signature, an attestation must be signed by the executing organisation."""
    record = json.loads((bundle / "records" / "executions" / "000002-Org3MSP.json").read_bytes())
    forged = attest_execution(record, world.consortium.identity("Org3MSP"))
    forged["signatures"] = sign_envelope(
        json.loads(__import__("base64").b64decode(forged["payload"])), world.consortium.identity("Org2MSP")
    )["signatures"]
    path = bundle / "attestations" / "000002-Org3MSP.dsse.json"
    path.write_bytes(canonical_json(forged))
    _resign(bundle, world.consortium.identity("Org1MSP"))
    report = verify_bundle(bundle)
    assert failed(report) == ["attestation 000002-Org3MSP"]
    assert "not by the executing organisation Org3MSP" in report.failures[0]["detail"]


def test_resigned_bundle_with_a_changed_record_fails_its_own_check(bundle, world):
    path = bundle / "records" / "executions" / "000003-Org1MSP.json"
    record = json.loads(path.read_bytes())
    record["result"]["metrics"]["loss"] = 0.0
    path.write_bytes(canonical_json(record))
    _resign(bundle, world.consortium.identity("Org1MSP"))
    names = failed(verify_bundle(bundle))
    assert "execution 000003-Org1MSP" in names and "attestation 000003-Org1MSP" in names


def test_untrusted_ca_pins_refuse_the_bundle(exported, tmp_path):
    other = Consortium.generate(tmp_path / "other", ["Org1"])
    report = verify_bundle(exported, trusted_cas=cas(other))
    assert failed(report) == ["manifest signature"]


def test_export_refuses_a_non_empty_directory(world, exported):
    with pytest.raises(BundleError):
        export_bundle(exported, world.clients["Org1MSP"], MODEL, signers={}, ca_certificates={})


def test_missing_envelope(tmp_path):
    assert failed(verify_bundle(tmp_path)) == ["bundle"]


def _resign(bundle: Path, identity) -> None:
    """Rebuild the manifest over the current files and sign it (what a dishonest exporter could do)."""
    import hashlib

    env = json.loads((bundle / ENVELOPE).read_bytes())
    manifest = json.loads(__import__("base64").b64decode(env["payload"]))
    manifest["files"] = {
        p.relative_to(bundle).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in bundle.rglob("*")
        if p.is_file() and p.name != ENVELOPE
    }
    (bundle / ENVELOPE).write_bytes(canonical_json(sign_envelope(manifest, identity, MANIFEST_TYPE)))


def test_resigned_bundle_with_changed_private_terms_fails_against_the_hash(bundle, world):
    """The bundle carries the process's private terms (its exporter is a member): hyper-parameters
    changed in it no longer hash to the ``private_sha256`` the chain records."""
    path = bundle / "records" / "process.json"
    process = json.loads(path.read_bytes())
    assert process["private_sha256"] and process["private_salt"]
    process["hyperparameters"] = {**process["hyperparameters"], "n_new": 999}
    path.write_bytes(canonical_json(process))
    _resign(bundle, world.consortium.identity("Org1MSP"))
    report = verify_bundle(bundle)
    assert failed(report) == ["private terms"]
    assert "but the chain records sha256:" in report.failures[0]["detail"]


def test_a_bundle_without_a_record_of_the_lineage_fails(bundle, world):
    """A dishonest exporter drops an execution the model descends from and re-signs the manifest:
    the lineage recomputed from the bundle's records no longer reaches round 1 and a link breaks."""
    (bundle / "records" / "executions" / "000001-Org3MSP.json").unlink()
    (bundle / "attestations" / "000001-Org3MSP.dsse.json").unlink()
    _resign(bundle, world.consortium.identity("Org1MSP"))
    report = verify_bundle(bundle)
    assert failed(report) == ["lineage complete", "lineage links"]
    assert "stops before round 1 for Org3MSP (round 2)" in report.failures[0].detail
    assert "proc-0/2/Org1MSP read message from Org3MSP" in report.failures[1].detail


# ---------------------------------------------------------------------------- chain-head checkpoints


def test_bundle_and_every_attestation_carry_a_verified_checkpoint(exported, world):
    report = verify_bundle(exported, trusted_cas=cas(world.consortium))
    assert report.ok, report.failures
    [check] = [c for c in report.checks if c["check"] == "ledger checkpoint"]
    assert "signed by Org1MSP" in check["detail"]
    cp = json.loads((exported / "checkpoint.json").read_bytes())
    for p in (exported / "attestations").glob("*.dsse.json"):
        statement = json.loads(base64.b64decode(json.loads(p.read_bytes())["payload"]))
        assert statement_checkpoint(statement) == cp
        check_checkpoint(statement_checkpoint(statement), cas(world.consortium))


def test_ledger_truncated_below_the_bundles_checkpoint_is_detected(exported, world, tmp_path):
    cp_file = exported / "checkpoint.json"
    cp = Checkpoint.from_json(json.loads(cp_file.read_bytes()))
    copy_ = snapshot(world.ledger.path, tmp_path / "ledger.db")
    assert verify_ledger_file(copy_, world.consortium, [cp])["checkpoints"] == 1
    args = ["ledger", "verify", str(copy_), "--crypto", str(world.consortium.root)]
    res = runner.invoke(app, [*args, "--checkpoint", str(cp_file), "--json"])
    assert res.exit_code == 0, res.stdout
    truncate_consistently(copy_, cp.block_number - 2)
    assert verify_ledger_file(copy_, world.consortium)["blocks"] == cp.block_number - 1
    with pytest.raises(LedgerCorrupted, match="truncated"):
        verify_ledger_file(copy_, world.consortium, [cp])
    res = runner.invoke(app, [*args, "--checkpoint", str(cp_file), "--json"])
    assert res.exit_code == 1 and "truncated" in json.loads(res.stdout)["error"]


def test_changed_or_missing_checkpoint_fails_the_bundle(bundle, world):
    path = bundle / "checkpoint.json"
    obj = json.loads(path.read_bytes())
    obj["block_number"] -= 1  # claims an earlier head: the signature breaks
    path.write_bytes(canonical_json(obj))
    _resign(bundle, world.consortium.identity("Org1MSP"))
    assert failed(verify_bundle(bundle)) == ["ledger checkpoint"]
    # validly re-signed by an organisation, but the claimed head is not a block of the bundle with that hash
    cp = Checkpoint.from_json(obj)
    resigned = sign_checkpoint(
        world.consortium.identity("Org1MSP"), cp.channel, cp.block_number, cp.header_hash
    )
    path.write_bytes(canonical_json(resigned.to_json()))
    _resign(bundle, world.consortium.identity("Org1MSP"))
    report = verify_bundle(bundle)
    assert failed(report) == ["ledger checkpoint"]
    path.unlink()
    _resign(bundle, world.consortium.identity("Org1MSP"))
    assert "ledger checkpoint" in failed(verify_bundle(bundle))


def test_attestation_without_checkpoint_fails(bundle, world):
    name = sorted((bundle / "attestations").glob("*Org3MSP.dsse.json"))[0]
    node = name.name[: -len(".dsse.json")]
    record = json.loads((bundle / "records" / "executions" / f"{node}.json").read_bytes())
    name.write_bytes(canonical_json(attest_execution(record, world.consortium.identity("Org3MSP"))))
    _resign(bundle, world.consortium.identity("Org1MSP"))
    report = verify_bundle(bundle)
    assert failed(report) == [f"attestation {node}"]
    assert "carries no ledger checkpoint" in report.failures[0]["detail"]


def test_export_needs_a_way_to_find_blocks(world, tmp_path):
    from ledger.client import ConsortiaClient
    from tests.audit.ledgers import WithoutTransactionLookup

    blind = ConsortiaClient(WithoutTransactionLookup(world.ledger), world.consortium.identity("Org1MSP"))
    with pytest.raises(BundleError, match="export with the audit index"):
        export_bundle(tmp_path / "b", blind, MODEL, signers={}, ca_certificates=cas(world.consortium))
