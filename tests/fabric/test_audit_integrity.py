"""Issue 14 items 1 and 5 on the real Fabric network: the lineage of a process whose SHARE rounds
repeat digests reaches round 1 through the index, the ledger verification and the audit bundle;
signed chain-head checkpoints taken through the Gateway verify against the chain, and a
checkpoint the chain no longer reaches (or reaches with another hash) is refused."""

from __future__ import annotations

import json
import uuid

import pytest

from api.follower import sync
from api.index import AuditIndex
from audit.bundles import export_bundle, verify_bundle
from audit.checkpoints import check_on_ledger
from audit.lineage import execution_node_id
from audit.verification import verify_model
from chaincode.canonical import canonical_json
from exchange.store import ArtifactStore
from ledger.checkpoint import checkpoint_of, sign_checkpoint
from ledger.client import ConsortiaClient
from ledger.errors import CheckpointInvalid, LedgerCorrupted
from tests.api.world import World, ring_process
from tests.audit.ledgers import resign_bundle

pytestmark = [pytest.mark.fabric, pytest.mark.timeout(900)]

ROUNDS, SHARE = 6, frozenset({3, 4, 5})


@pytest.fixture(scope="module")
def crf(fabric, fabric_ledger, tmp_path_factory):
    root = tmp_path_factory.mktemp("fabric-crf")
    c = fabric.consortium
    orgs = tuple(o.msp_id for o in c.organisations)
    clients = {m: ConsortiaClient(fabric_ledger, c.identity(m)) for m in orgs}
    stores = {m: ArtifactStore.at(root / "artifacts" / m) for m in orgs}
    w = World(c, fabric_ledger, clients, stores, root)  # type: ignore[arg-type]
    pid = f"crf-{uuid.uuid4().hex[:8]}"
    ring_process(w, pid, rounds=ROUNDS, orgs=orgs, all_to_all=True, unchanged_rounds=SHARE)
    return w, pid, orgs


def test_lineage_through_repeated_digests_on_fabric(crf, tmp_path):
    w, pid, orgs = crf
    owner = orgs[0]
    model_id = f"{pid}:{owner}"
    expected = {
        execution_node_id(pid, r, o) for o in orgs for r in range(1, ROUNDS + 1) if o == owner or r < ROUNDS
    }
    client = w.clients[owner]
    with AuditIndex(tmp_path / "ix.db") as ix:
        sync(ix, client)
        lin = ix.lineage(model_id)
        assert {n["id"] for n in lin["nodes"]} == expected and len(expected) == 16
        report = verify_model(client, model_id, index=ix)
        assert report.ok, report.failures
        signers = {m: w.consortium.identity(m) for m in orgs}
        cas = {
            o.msp_id: (o.path / "ca" / f"ca.{o.domain}-cert.pem").read_bytes()
            for o in w.consortium.organisations
        }
        summary = export_bundle(
            tmp_path / "bundle", client, model_id, signers=signers, ca_certificates=cas, index=ix
        )
    assert summary["executions"] == 18
    bundle_report = verify_bundle(tmp_path / "bundle", trusted_cas=cas)
    assert bundle_report.ok, bundle_report.failures
    names = {c["check"]: c for c in bundle_report.checks}
    assert names["lineage complete"]["detail"].startswith("16 executions")
    assert names["ledger checkpoint"]["ok"]
    # every record proven against its Fabric block: common.Block bytes, data hash over the envelopes,
    # ASN.1 header hashes chained to the checkpoint (audit.write_sets)
    assert names["block headers"]["ok"] and names["record writes"]["ok"], bundle_report.failures
    assert names["record writes"]["detail"].startswith("21 records are the values their transactions wrote")
    proof = json.loads((tmp_path / "bundle" / "proofs" / "writes.json").read_bytes())
    assert proof["format"] == "fabric-common-block/1"
    # a re-signed bundle whose public record was changed is refused against the block's write set
    path = tmp_path / "bundle" / "records" / "process.json"
    process = json.loads(path.read_bytes())
    process["rounds"] += 1
    path.write_bytes(canonical_json(process))
    resign_bundle(tmp_path / "bundle", w.consortium.identity(owner))
    changed = verify_bundle(tmp_path / "bundle", trusted_cas=cas)
    detail = next(c["detail"] for c in changed.failures if c["check"] == "record writes")
    assert "records/process.json: differs from the value the chain wrote (fields rounds)" in detail


def test_checkpoints_on_fabric(fabric, fabric_ledger, fabric_ids):
    membership = fabric.consortium.membership()
    org1, org2 = fabric_ids["Org1"], fabric_ids["Org2"]
    cp = checkpoint_of(fabric_ledger, org1)
    assert check_on_ledger(cp, fabric_ledger, org2, membership) == "Org1MSP"
    fabric_ledger.submit(org1, "KV:put", f"cp-{uuid.uuid4().hex[:8]}", "x")  # the chain grows past it
    assert check_on_ledger(cp, fabric_ledger, org2, membership) == "Org1MSP"
    height = fabric_ledger.block_height(org1)
    beyond = sign_checkpoint(org1, fabric_ledger.channel, height + 3, "ab" * 32)  # a head this chain lacks
    with pytest.raises(LedgerCorrupted, match="truncated"):
        check_on_ledger(beyond, fabric_ledger, org2, membership)
    other = sign_checkpoint(org1, fabric_ledger.channel, cp.block_number, "cd" * 32)
    with pytest.raises(LedgerCorrupted, match="rewritten"):
        check_on_ledger(other, fabric_ledger, org2, membership)
    wrong_channel = sign_checkpoint(org1, "elsewhere", cp.block_number, cp.header_hash)
    with pytest.raises(CheckpointInvalid, match="channel"):
        check_on_ledger(wrong_channel, fabric_ledger, org2, membership)
