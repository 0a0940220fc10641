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
from audit.bundles import ENVELOPE, BundleError, export_bundle, verify_bundle
from audit.checkpoints import check_checkpoint
from audit.ledger_file import verify_ledger_file
from chaincode.canonical import canonical_json
from ledger.checkpoint import Checkpoint, sign_checkpoint
from ledger.errors import LedgerCorrupted
from ledger.identity import Consortium
from tests.audit.ledgers import resign_bundle, runner, snapshot, truncate_consistently

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
    resign_bundle(bundle, world.consortium.identity("Org1MSP"))
    report = verify_bundle(bundle)
    assert failed(report) == ["attestation 000002-Org3MSP"]
    assert "not by the executing organisation Org3MSP" in report.failures[0]["detail"]


def test_resigned_bundle_with_a_changed_record_fails_its_own_check(bundle, world):
    path = bundle / "records" / "executions" / "000003-Org1MSP.json"
    record = json.loads(path.read_bytes())
    record["result"]["metrics"]["loss"] = 0.0
    path.write_bytes(canonical_json(record))
    resign_bundle(bundle, world.consortium.identity("Org1MSP"))
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


def test_resigned_bundle_with_changed_private_terms_fails_against_the_hash(bundle, world):
    """The bundle carries the process's private terms (its exporter is a member): hyper-parameters
    changed in it no longer hash to the ``private_sha256`` the chain records."""
    path = bundle / "records" / "process.json"
    process = json.loads(path.read_bytes())
    assert process["private_sha256"] and process["private_salt"]
    process["hyperparameters"] = {**process["hyperparameters"], "n_new": 999}
    path.write_bytes(canonical_json(process))
    resign_bundle(bundle, world.consortium.identity("Org1MSP"))
    report = verify_bundle(bundle)
    assert failed(report) == ["private terms", "record writes"]
    writes = report.failures[1]["detail"]
    assert "records/process.json" in writes and "does not match" not in writes
    assert "the private part it carries hashes to sha256:" in writes
    assert "but the chain records sha256:" in report.failures[0]["detail"]


def test_a_bundle_without_a_record_of_the_lineage_fails(bundle, world):
    """A dishonest exporter drops an execution the model descends from and re-signs the manifest:
    the lineage recomputed from the bundle's records no longer reaches round 1 and a link breaks."""
    (bundle / "records" / "executions" / "000001-Org3MSP.json").unlink()
    (bundle / "attestations" / "000001-Org3MSP.dsse.json").unlink()
    resign_bundle(bundle, world.consortium.identity("Org1MSP"))
    report = verify_bundle(bundle)
    assert failed(report) == ["lineage complete", "lineage links", "record writes"]
    assert "stops before round 1 for Org3MSP (round 2)" in report.failures[0].detail
    assert "proc-0/2/Org1MSP read message from Org3MSP" in report.failures[1].detail
    assert report.failures[2].detail == (
        "records/executions/000001-Org3MSP.json: a proof for a record the bundle does not carry"
    )


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
    resign_bundle(bundle, world.consortium.identity("Org1MSP"))
    # the records are proven against the checkpointed head: without one, they are not proven
    assert failed(verify_bundle(bundle)) == ["ledger checkpoint", "record writes"]
    # validly re-signed by an organisation, but the claimed head is not a block of the bundle with that hash
    cp = Checkpoint.from_json(obj)
    resigned = sign_checkpoint(
        world.consortium.identity("Org1MSP"), cp.channel, cp.block_number, cp.header_hash
    )
    path.write_bytes(canonical_json(resigned.to_json()))
    resign_bundle(bundle, world.consortium.identity("Org1MSP"))
    report = verify_bundle(bundle)
    assert failed(report) == ["ledger checkpoint", "record writes"]
    path.unlink()
    resign_bundle(bundle, world.consortium.identity("Org1MSP"))
    assert "ledger checkpoint" in failed(verify_bundle(bundle))


def test_attestation_without_checkpoint_fails(bundle, world):
    name = sorted((bundle / "attestations").glob("*Org3MSP.dsse.json"))[0]
    node = name.name[: -len(".dsse.json")]
    record = json.loads((bundle / "records" / "executions" / f"{node}.json").read_bytes())
    name.write_bytes(canonical_json(attest_execution(record, world.consortium.identity("Org3MSP"))))
    resign_bundle(bundle, world.consortium.identity("Org1MSP"))
    report = verify_bundle(bundle)
    assert failed(report) == [f"attestation {node}"]
    assert "carries no ledger checkpoint" in report.failures[0]["detail"]


def test_export_needs_a_way_to_find_blocks(world, tmp_path):
    from ledger.client import ConsortiaClient
    from tests.audit.ledgers import WithoutTransactionLookup

    blind = ConsortiaClient(WithoutTransactionLookup(world.ledger), world.consortium.identity("Org1MSP"))
    with pytest.raises(BundleError, match="export with the audit index"):
        export_bundle(tmp_path / "b", blind, MODEL, signers={}, ca_certificates=cas(world.consortium))


# ---- the records proven against the blocks' write sets (audit.write_sets; issue 32 item 4)
def test_every_record_is_proven_against_its_block(exported):
    report = verify_bundle(exported)
    checks = {c["check"]: c for c in report.checks}
    assert checks["block headers"]["ok"] and checks["record writes"]["ok"], report.failures
    assert checks["record writes"]["detail"].startswith("12 records are the values their transactions wrote")
    proof = json.loads((exported / "proofs" / "writes.json").read_bytes())
    assert proof["format"] == "consortia-embedded-block/1" and len(proof["writes"]) == 12
    headers = json.loads((exported / "proofs" / "headers.json").read_bytes())["headers"]
    checkpoint = json.loads((exported / "checkpoint.json").read_bytes())
    assert headers[-1]["number"] == checkpoint["block_number"]
    assert {e["block"] for e in proof["writes"]} == {
        int(p.stem) for p in (exported / "proofs" / "blocks").glob("*.block")
    }


@pytest.mark.parametrize(
    ("record", "field", "value"),
    [
        ("image.json", "name", "another-image"),
        ("process.json", "status", "aborted"),
        ("model.json", "created", "2020-01-01T00:00:00Z"),
        ("executions/000003-Org2MSP.json", "runtime", "container"),
    ],
)
def test_a_resigned_bundle_with_a_changed_public_field_fails_against_the_write_set(
    bundle, world, record, field, value
):
    """A dishonest exporter changes a public field that no signature covers and re-signs: the record is
    no longer the value its transaction wrote."""
    path = bundle / "records" / record
    obj = json.loads(path.read_bytes())
    assert obj[field] != value
    obj[field] = value
    path.write_bytes(canonical_json(obj))
    resign_bundle(bundle, world.consortium.identity("Org1MSP"))
    report = verify_bundle(bundle)
    assert "record writes" in failed(report)
    detail = next(c["detail"] for c in report.failures if c["check"] == "record writes")
    assert f"records/{record}: differs from the value the chain wrote (fields {field})" in detail


def _forge_write(bundle: Path, kind: str, change) -> tuple[Path, int]:
    """Change the value one transaction of a carried block wrote for a record of ``kind``; returns the
    block file and number."""
    proof = json.loads((bundle / "proofs" / "writes.json").read_bytes())
    entry = next(e for e in proof["writes"] if e["kind"] == kind)
    path = bundle / "proofs" / "blocks" / f"{entry['block']:08d}.block"
    body = json.loads(path.read_bytes())
    for tx in body["transactions"]:
        if tx["proposal"]["tx_id"] == entry["tx_id"]:
            writes = tx["response"]["rwset"]["writes"]
            for w in writes:
                if w[0] == entry["key"]:
                    value = json.loads(base64.b64decode(w[1]))
                    change(value)
                    w[1] = base64.b64encode(canonical_json(value)).decode()
    path.write_bytes(canonical_json(body))
    return path, entry["block"]


def test_a_forged_block_fails_its_data_hash_and_a_forged_header_its_chain(bundle, world):
    def aborted(value):
        value["status"] = "aborted"

    # the record and the block's write both changed: the block's transactions no longer hash to its header
    path = bundle / "records" / "process.json"
    process = json.loads(path.read_bytes())
    process["status"] = "aborted"
    path.write_bytes(canonical_json(process))
    block_file, number = _forge_write(bundle, "process", aborted)
    resign_bundle(bundle, world.consortium.identity("Org1MSP"))
    report = verify_bundle(bundle)
    assert failed(report) == ["record writes"]
    assert f"block {number}'s transactions do not hash to its header's data hash" in report.failures[0].detail
    # the block's data hash recomputed too: it is no longer the chain's block of that number
    from ledger.embedded import blocks as B

    body = json.loads(block_file.read_bytes())
    body["data_hash"] = B.sha256_hex(canonical_json(body["transactions"]))
    block_file.write_bytes(canonical_json(body))
    resign_bundle(bundle, world.consortium.identity("Org1MSP"))
    report = verify_bundle(bundle)
    assert failed(report) == ["record writes"]
    assert f"block {number} is not the chain's block {number}" in report.failures[0].detail
    # and its header in the chain replaced by the forged one: the next block no longer links to it
    headers_file = bundle / "proofs" / "headers.json"
    chain = json.loads(headers_file.read_bytes())
    forged = json.loads(B.header_bytes(body))
    chain["headers"] = [forged if h["number"] == number else h for h in chain["headers"]]
    headers_file.write_bytes(canonical_json(chain))
    resign_bundle(bundle, world.consortium.identity("Org1MSP"))
    report = verify_bundle(bundle)
    assert failed(report)[:2] == ["block headers", "record writes"]
    assert (
        f"block {number + 1} does not link to the header hash of block {number}" in report.failures[0].detail
    )


def test_a_proof_pointing_at_another_records_write_fails(bundle, world):
    """The proof of one execution record names another's transaction and key: refused, by the key the
    verifier computes from the record itself."""
    path = bundle / "proofs" / "writes.json"
    proof = json.loads(path.read_bytes())
    executions = [e for e in proof["writes"] if e["kind"] == "execution"]
    executions[0].update({k: executions[1][k] for k in ("key", "tx_id", "block")})
    path.write_bytes(canonical_json(proof))
    resign_bundle(bundle, world.consortium.identity("Org1MSP"))
    report = verify_bundle(bundle)
    assert failed(report) == ["record writes"]
    assert f"{executions[0]['record']}: the proof names key" in report.failures[0].detail


@pytest.mark.parametrize(
    "content",
    [b"\x00\xff not a block", b"[" * 100_000 + b"]" * 100_000, b'{"number": 1}'],
    ids=["garbage", "nested", "no-transactions"],
)
def test_a_carried_block_that_is_not_a_block_is_a_failed_check(bundle, world, content):
    """A re-signed bundle whose carried block is garbage, nested too deep or incomplete: a failed check
    naming the record, never a traceback."""
    proof = json.loads((bundle / "proofs" / "writes.json").read_bytes())
    entry = next(e for e in proof["writes"] if e["kind"] == "model")
    (bundle / "proofs" / "blocks" / f"{entry['block']:08d}.block").write_bytes(content)
    resign_bundle(bundle, world.consortium.identity("Org1MSP"))
    report = verify_bundle(bundle)
    assert failed(report) == ["record writes"]
    assert "records/model.json: " in report.failures[0].detail


def test_fabric_block_reader_refuses_bytes_that_are_not_a_block():
    from ledger.fabric.blocks import block_content

    with pytest.raises(ValueError, match="not a serialized Fabric block"):
        block_content(b"\xff\xff\xff\xff")
