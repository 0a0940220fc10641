"""The Gateway client against the real Fabric network (fabric-network/, probe contract ``KV:*``).

Fabric-specific behaviour of issue 3: endorsement policy, MVCC conflicts, outsiders refused,
chaincode events with resume after reconnect, a peer stopped and restarted mid-suite.
Tests are ordered: the peer-restart test sits in the middle and the ones after it must still pass.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from chaincode.errors import AlreadyExists, InvalidArgument, NotFound
from ledger.errors import AccessDenied, EndorsementPolicyFailure, MVCCConflict
from ledger.fabric.gateway import FabricLedger, submit_with_retry
from ledger.interface import Ledger

pytestmark = [pytest.mark.fabric, pytest.mark.timeout(300)]


def uid() -> str:
    return uuid.uuid4().hex[:10]


def test_is_a_ledger(fabric_ledger):
    assert isinstance(fabric_ledger, Ledger)


def test_submit_then_evaluate_from_another_organisation(fabric_ledger, fabric_ids):
    k = f"k-{uid()}"
    r = fabric_ledger.submit(fabric_ids["Org1"], "KV:put", k, "v1")
    assert r.result == b"v1" and r.validation_code == "VALID" and len(r.tx_id) == 64
    assert fabric_ledger.block_height(fabric_ids["Org1"]) > r.block_number
    assert fabric_ledger.evaluate(fabric_ids["Org2"], "KV:get", k) == b"v1"
    assert fabric_ledger.evaluate(fabric_ids["Org3"], "KV:get", k) == b"v1"


def test_contract_errors_arrive_typed(fabric_ledger, fabric_ids):
    k = f"k-{uid()}"
    with pytest.raises(NotFound) as e:
        fabric_ledger.evaluate(fabric_ids["Org1"], "KV:get", k)
    assert e.value.details == {"key": k}
    fabric_ledger.submit(fabric_ids["Org1"], "KV:create", k, "a")
    with pytest.raises(AlreadyExists):
        fabric_ledger.submit(fabric_ids["Org2"], "KV:create", k, "b")
    with pytest.raises(InvalidArgument):
        fabric_ledger.evaluate(fabric_ids["Org1"], "KV:nope")
    assert fabric_ledger.evaluate(fabric_ids["Org1"], "KV:get", k) == b"a"


def test_creator_timestamp_and_transient_reach_the_chaincode(fabric_ledger, fabric_ids):
    t0 = time.time()
    who = json.loads(fabric_ledger.evaluate(fabric_ids["Org3"], "KV:whoami"))
    assert who["msp_id"] == "Org3MSP" and who["channel"] == fabric_ledger.channel
    assert abs(who["timestamp"] - t0) < 30
    r = fabric_ledger.submit(fabric_ids["Org1"], "KV:transient", "secret", transient={"secret": b"s3cr3t"})
    assert r.result == b"s3cr3t"


def test_range_and_history(fabric_ledger, fabric_ids):
    p = f"r-{uid()}-"
    for i in range(3):
        fabric_ledger.submit(fabric_ids["Org1"], "KV:put", f"{p}{i}", str(i))
    rows = json.loads(fabric_ledger.evaluate(fabric_ids["Org2"], "KV:range", p, p + "~"))
    assert rows == [[f"{p}{i}", str(i)] for i in range(3)]
    k = f"{p}0"
    t2 = fabric_ledger.submit(fabric_ids["Org1"], "KV:put", k, "again").tx_id
    fabric_ledger.submit(fabric_ids["Org1"], "KV:delete", k)
    hist = json.loads(fabric_ledger.evaluate(fabric_ids["Org1"], "KV:history", k))
    assert [(h[1], h[2]) for h in hist] == [("0", False), ("again", False), ("", True)]  # oldest first
    assert hist[1][0] == t2


def test_too_few_endorsements_is_invalid(fabric_ledger, fabric_ids):
    """The chaincode's policy: peers of two organisations; one organisation's endorsement is not enough."""
    k = f"k-{uid()}"
    with pytest.raises(EndorsementPolicyFailure) as e:
        fabric_ledger.submit(fabric_ids["Org1"], "KV:put", k, "x", endorsing_organisations=["Org1MSP"])
    assert e.value.validation_code == "ENDORSEMENT_POLICY_FAILURE"
    with pytest.raises(NotFound):
        fabric_ledger.evaluate(fabric_ids["Org1"], "KV:get", k)
    fabric_ledger.submit(fabric_ids["Org1"], "KV:put", k, "y", endorsing_organisations=["Org1MSP", "Org3MSP"])
    assert fabric_ledger.evaluate(fabric_ids["Org2"], "KV:get", k) == b"y"


def test_conflicting_writes_get_mvcc_read_conflict(fabric_ledger, fabric_ids):
    """Two increments endorsed against the same version: the first commits, the second is invalid."""
    k = f"c-{uid()}"
    org1, org2 = fabric_ids["Org1"], fabric_ids["Org2"]
    tx_a, env_a, _ = fabric_ledger.endorse(org1, "KV:incr", k)
    tx_b, env_b, _ = fabric_ledger.endorse(org2, "KV:incr", k)
    fabric_ledger.send(org1, tx_a, env_a)
    assert fabric_ledger.commit_status(org1, tx_a)[0] == 0
    fabric_ledger.send(org2, tx_b, env_b)
    code, _ = fabric_ledger.commit_status(org2, tx_b)
    from ledger.fabric.errors import validation_error

    err = validation_error(tx_b, code)
    assert isinstance(err, MVCCConflict) and err.validation_code == "MVCC_READ_CONFLICT"
    assert fabric_ledger.evaluate(org1, "KV:get", k) == b"1"


def test_concurrent_increments_retry_until_all_counted(fabric_ledger, fabric_ids):
    k = f"c-{uid()}"
    ids = [fabric_ids["Org1"], fabric_ids["Org2"], fabric_ids["Org3"]] * 2
    conflicts = []

    def one(ident):
        try:
            return fabric_ledger.submit(ident, "KV:incr", k)
        except MVCCConflict:
            conflicts.append(1)
            return submit_with_retry(fabric_ledger, ident, "KV:incr", k, attempts=20)

    with ThreadPoolExecutor(6) as pool:
        list(pool.map(one, ids))
    assert fabric_ledger.evaluate(fabric_ids["Org1"], "KV:get", k) == str(len(ids)).encode()


def test_identity_outside_the_consortium_is_refused(fabric_ledger, fabric_ids, outsider):
    with pytest.raises(AccessDenied):
        fabric_ledger.evaluate(outsider, "KV:whoami")
    with pytest.raises(AccessDenied):
        fabric_ledger.submit(outsider, "KV:put", f"k-{uid()}", "x")


def test_events_arrive_in_order_from_a_start_block(fabric_ledger, fabric_ids):
    start = fabric_ledger.block_height(fabric_ids["Org1"])
    keys = [f"e-{uid()}" for _ in range(3)]
    txs = [fabric_ledger.submit(fabric_ids["Org1"], "KV:put", k, "v").tx_id for k in keys]
    seen = []
    for ev in fabric_ledger.events(fabric_ids["Org2"], start_block=start, timeout=5):
        if ev.tx_id in txs:
            seen.append(ev)
        if len(seen) == 3:
            break
    assert [e.tx_id for e in seen] == txs
    assert [json.loads(e.payload)["key"] for e in seen] == keys
    assert all(e.name == "KV.put" and e.chaincode == fabric_ledger.chaincode for e in seen)


def test_peer_restart_mid_suite_catches_up_and_events_resume(fabric, fabric_ledger, fabric_ids):
    """Stop Org2's peer while Org2 listens for events; Org1 keeps submitting (Org1+Org3 are a
    majority); restart the peer: it catches up and the event stream resumes, nothing lost or
    repeated."""
    net = fabric.network
    org1, org2 = fabric_ids["Org1"], fabric_ids["Org2"]
    start = fabric_ledger.block_height(org1)
    before = [fabric_ledger.submit(org1, "KV:put", f"p-{uid()}", "b").tx_id for _ in range(2)]
    got: list = []
    done = threading.Event()
    listener = FabricLedger(fabric_ledger.peers, fabric_ledger.channel, fabric_ledger.chaincode)

    def listen():
        for ev in listener.events(org2, start_block=start, timeout=90):
            got.append(ev.tx_id)
            if len(got) >= 5:
                break
        done.set()

    t = threading.Thread(target=listen, daemon=True)
    t.start()
    deadline = time.monotonic() + 30
    while len(got) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert got == before
    net.stop_node("peer0.org2")
    during = [
        fabric_ledger.submit(
            org1, "KV:put", f"p-{uid()}", "d", endorsing_organisations=["Org1MSP", "Org3MSP"]
        ).tx_id
        for _ in range(3)
    ]
    height = fabric_ledger.block_height(org1)
    net.restart_node("peer0.org2")
    assert net.wait_block_height(1, height, timeout=60) >= height
    assert done.wait(90), f"events did not resume: got {len(got)} of 5"
    listener.close()
    assert got == before + during
    fabric_ledger.submit(org2, "KV:put", f"p-{uid()}", "after")  # Org2's Gateway works again


def test_suite_continues_after_restart(fabric_ledger, fabric_ids):
    k = f"k-{uid()}"
    fabric_ledger.submit(fabric_ids["Org2"], "KV:put", k, "z")
    assert fabric_ledger.evaluate(fabric_ids["Org3"], "KV:get", k) == b"z"


def test_blocks_are_hash_chained(fabric_ledger, fabric_ids):
    ident = fabric_ids["Org1"]
    r = fabric_ledger.submit(ident, "KV:put", f"k-{uid()}", "x")
    b = fabric_ledger.block(ident, r.block_number)
    prev = fabric_ledger.block(ident, r.block_number - 1)
    assert b.number == r.block_number and r.tx_id in b.tx_ids
    assert b.validation_codes[b.tx_ids.index(r.tx_id)] == "VALID"
    assert b.previous_hash == prev.header_hash
    assert fabric_ledger.block(ident, 0).previous_hash == ""


def test_many_concurrent_clients_all_commit(fabric_ledger, fabric_ids):
    ids = list(fabric_ids.values())
    keys = [f"m-{uid()}" for _ in range(30)]
    with ThreadPoolExecutor(10) as pool:
        results = list(
            pool.map(lambda ik: fabric_ledger.submit(ids[ik[0] % 3], "KV:put", ik[1], "v"), enumerate(keys))
        )
    assert all(r.validation_code == "VALID" for r in results)
    assert len({r.tx_id for r in results}) == 30


def test_high_s_signature_and_tampered_tx_id_rejected_at_endorsement(fabric_ledger, fabric_ids):
    """The peer checks low-S signatures and tx_id = sha256(nonce || creator) (msgvalidation.go)."""
    import grpc
    from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature, encode_dss_signature
    from fabric_protos.gateway import gateway_pb2

    from ledger.fabric.proposal import build_proposal
    from ledger.identity import P256_ORDER

    ident = fabric_ids["Org1"]
    stub = fabric_ledger._stub(fabric_ledger._peer_for(ident))

    def evaluate(tx_id, signed):
        req = gateway_pb2.EvaluateRequest(
            transaction_id=tx_id, channel_id=fabric_ledger.channel, proposed_transaction=signed
        )
        return stub.Evaluate(req, timeout=30)

    p = build_proposal(ident, fabric_ledger.channel, fabric_ledger.chaincode, "KV:whoami", [])
    assert evaluate(p.tx_id, p.signed).result.status == 200
    r, s = decode_dss_signature(p.signed.signature)
    high = type(p.signed)(
        proposal_bytes=p.signed.proposal_bytes, signature=encode_dss_signature(r, P256_ORDER - s)
    )
    with pytest.raises(grpc.RpcError):
        evaluate(p.tx_id, high)
    other = build_proposal(
        ident, fabric_ledger.channel, fabric_ledger.chaincode, "KV:whoami", [], nonce=b"x" * 24
    )
    forged = build_proposal(ident, fabric_ledger.channel, fabric_ledger.chaincode, "KV:whoami", [])
    # a valid signature over a proposal whose tx id does not match its nonce and creator
    from fabric_protos.common import common_pb2
    from fabric_protos.peer import proposal_pb2

    prop = proposal_pb2.Proposal.FromString(forged.signed.proposal_bytes)
    header = common_pb2.Header.FromString(prop.header)
    chdr = common_pb2.ChannelHeader.FromString(header.channel_header)
    chdr.tx_id = other.tx_id
    header.channel_header = chdr.SerializeToString()
    prop.header = header.SerializeToString()
    raw = prop.SerializeToString()
    with pytest.raises(grpc.RpcError):
        evaluate(other.tx_id, proposal_pb2.SignedProposal(proposal_bytes=raw, signature=ident.sign(raw)))
