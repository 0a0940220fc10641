"""Offline audit bundles: an exported bundle verifies; any changed byte, added or removed file,
or a re-signed bundle with a wrong attestation fails verification naming what broke."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest

from api.attestation import attest_execution, sign_envelope
from api.bundle import ENVELOPE, MANIFEST_TYPE, BundleError, export_bundle, verify_bundle
from chaincode.canonical import canonical_json
from ledger.identity import Consortium

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
