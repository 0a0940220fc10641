"""Key-level endorsement policies on the embedded host (docs/ledger.md "Who endorses what"): a
3-member process in a 5-organisation channel is endorsed by 2 of its members, never by the channel's
majority; its records are refused when non-members endorse them; the policies survive value updates
and are replayed by the ledger-file verification."""

from __future__ import annotations

import json
import sqlite3

import pytest

from audit.ledger_file import verify_ledger_file
from chaincode.endorsement import KeyPolicy, guard_key, member_majority
from chaincode.stub import create_composite_key
from ledger.client import ConsortiaClient, private_terms_transient
from ledger.embedded import EmbeddedLedger
from ledger.embedded import blocks as B
from ledger.embedded.policy import key_policy_satisfied, plan_endorsers
from ledger.errors import EndorsementPolicyFailure, LedgerCorrupted
from ledger.identity import Consortium
from tests.contracts.helpers import new_process, run_task

ORGS = ["Org1", "Org2", "Org3", "Org4", "Org5"]
MEMBERS = ("Org2MSP", "Org4MSP", "Org5MSP")


@pytest.fixture(scope="module")
def five(tmp_path_factory) -> Consortium:
    return Consortium.generate(tmp_path_factory.mktemp("crypto5"), ORGS)


def _endorsers(led: EmbeddedLedger, tx_id: str) -> set[str]:
    block, _ = led.transaction_block(tx_id)
    con = sqlite3.connect(led.path)
    try:
        (raw,) = con.execute("SELECT body FROM blocks WHERE number = ?", (block,)).fetchone()
    finally:
        con.close()
    tx = next(t for t in json.loads(raw)["transactions"] if t["proposal"]["tx_id"] == tx_id)
    return {led.membership.deserialize(B.unb64(e["endorser"]))[0] for e in tx["endorsements"]}


def test_policy_bytes_are_a_signature_policy_envelope_of_the_members_peers():
    policy = member_majority(["Org5MSP", "Org2MSP", "Org4MSP"])
    assert policy == KeyPolicy(2, MEMBERS)
    raw = policy.to_bytes()
    assert KeyPolicy.from_bytes(raw) == policy
    assert key_policy_satisfied(raw, [("Org2MSP", "peer"), ("Org5MSP", "peer")])
    # one identity counts once
    assert not key_policy_satisfied(raw, [("Org2MSP", "peer"), ("Org2MSP", "peer")])
    assert not key_policy_satisfied(raw, [("Org2MSP", "peer"), ("Org5MSP", "client")])  # peers only
    assert not key_policy_satisfied(raw, [("Org1MSP", "peer"), ("Org3MSP", "peer"), ("Org2MSP", "peer")])
    assert not key_policy_satisfied(b"\xff not a policy", [("Org2MSP", "peer")])
    with pytest.raises(ValueError):
        KeyPolicy.from_bytes(b"\xff")
    # the plan: members first for the key-level policy; the chaincode's policy is then met by them
    assert plan_endorsers(None, [raw], "Org4MSP") == ["Org4MSP", "Org2MSP"]


def test_a_three_member_process_in_five_organisations_needs_two_members(five, tmp_path):
    with EmbeddedLedger(tmp_path / "l.db", five, batch_timeout=0.002) as led:
        clients = {f"{o}MSP": ConsortiaClient(led, five.identity(o)) for o in ORGS}
        admins = {f"{o}MSP": ConsortiaClient(led, five.identity(o, "Admin")) for o in ORGS}
        pid = new_process(admins, clients["Org2MSP"], "p5", consortium=MEMBERS, rounds=1)
        assert clients["Org4MSP"].process_endorsement(pid).required == 2
        run_task(clients["Org4MSP"], pid, 1)
        record = clients["Org4MSP"].get_execution(pid, 1, "Org4MSP")
        assert _endorsers(led, record.tx_id) <= set(MEMBERS) and len(_endorsers(led, record.tx_id)) == 2
        assert _endorsers(led, record.completed_tx_id) <= set(MEMBERS)
        # two non-members, then a member and a non-member: refused, though the chaincode's policy holds
        for endorsers in (["Org1MSP", "Org3MSP"], ["Org5MSP", "Org3MSP"]):
            with pytest.raises(EndorsementPolicyFailure):
                led.submit(
                    five.identity("Org5"),
                    "ExecutionRecord:fail_task",
                    json.dumps({"process_id": pid, "round": 1, "reason": "refused"}),
                    endorsing_organisations=endorsers,
                )
        # a value update keeps the policy: the completed record is still the members' to endorse
        con = sqlite3.connect(led.path)
        try:
            stored = dict(con.execute("SELECT key, policy FROM key_policies").fetchall())
        finally:
            con.close()
        key = create_composite_key("Execution", [pid, "000001", "Org4MSP"])
        assert KeyPolicy.from_bytes(stored[key.encode()]) == KeyPolicy(2, MEMBERS)
        assert KeyPolicy.from_bytes(stored[guard_key(pid).encode()]) == KeyPolicy(2, MEMBERS)
    assert verify_ledger_file(tmp_path / "l.db", five)["valid_transactions"] > 0


def test_verification_replays_key_policies(five, tmp_path):
    path = tmp_path / "l.db"
    with EmbeddedLedger(path, five, batch_timeout=0.002) as led:
        clients = {f"{o}MSP": ConsortiaClient(led, five.identity(o)) for o in ORGS}
        admins = {f"{o}MSP": ConsortiaClient(led, five.identity(o, "Admin")) for o in ORGS}
        pid = new_process(admins, clients["Org2MSP"], "pv", consortium=MEMBERS, rounds=1)
    verify_ledger_file(path, five)
    con = sqlite3.connect(path)
    con.execute(
        "UPDATE key_policies SET policy = ? WHERE key = ?",
        (KeyPolicy(1, ("Org1MSP",)).to_bytes(), guard_key(pid).encode()),
    )
    con.commit()
    con.close()
    with pytest.raises(LedgerCorrupted, match="key_policies"):
        verify_ledger_file(path, five)


def _endorsed(led: EmbeddedLedger, identity, function: str, *args: str, transient=None) -> dict:
    """A transaction endorsed as ``submit`` does it (the host's plan), not yet ordered."""
    proposal, proposal_bytes, _ = led._proposal(identity, function, args)
    sim, payload = led._simulate(proposal, transient, identity.msp_id)
    response = led._response(proposal_bytes, sim, payload)
    tx = {"proposal": proposal, "response": response}
    tx["endorsements"] = led._endorse(response, led._plan(sim, identity.msp_id))
    tx["signature"] = B.b64(identity.sign(B.signed_part(tx)))
    return tx


def test_policies_set_in_a_block_leave_its_other_transactions_valid(five, tmp_path):
    """Processes created in one block (each setting policies), with other writes between them and
    after them: every transaction is judged by its own keys' policies; a write to a key whose policy
    an earlier transaction of the block set is invalid, as on Fabric."""
    path = tmp_path / "l.db"
    with EmbeddedLedger(path, five) as led:
        org2 = ConsortiaClient(led, five.identity("Org2"))
        org2.register_image("img-blk", "1", "collab-rf", "sha256:" + "ab" * 32)
        u2 = five.identity("Org2")

        def create(pid: str) -> dict:
            spec = {
                "id": pid,
                "image_id": "img-blk:1",
                "consortium": list(MEMBERS),
                "topology": {"kind": "ring", "seed": 7},
                "rounds": 1,
            }
            private = private_terms_transient({"n_new": 5}, None)
            return _endorsed(led, u2, "LearningProcess:create", json.dumps(spec), transient=private)

        image = {
            "name": "img-blk2",
            "version": "1",
            "algorithm": "collab-rf",
            "digest": "sha256:" + "cd" * 32,
        }
        txs = [create("blk-0"), _endorsed(led, u2, "Image:register", json.dumps(image)), create("blk-1")]
        txs.append(create("blk-0"))  # the same process again: its keys' policies were set by txs[0]
        codes = [code for _, code in led._commit_block(txs)]
        assert codes == [B.VALID, B.VALID, B.VALID, B.ENDORSEMENT_POLICY_FAILURE]
        for pid in ("blk-0", "blk-1"):
            assert org2.process_endorsement(pid).required == 2
    assert verify_ledger_file(path, five)["valid_transactions"] >= 4
