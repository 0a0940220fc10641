"""Embedded-host semantics: MVCC, endorsement policy, blocks, persistence, tampering, processes."""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import sqlite3
import threading
import time

import pytest

from audit.ledger_file import verify_ledger_file
from chaincode.canonical import canonical_json
from ledger.client import ConsortiaClient
from ledger.embedded import EmbeddedLedger
from ledger.embedded import blocks as B
from ledger.errors import (
    AlreadyExists,
    EndorsementPolicyFailure,
    LedgerError,
    LedgerUnavailable,
    MVCCConflict,
    transient,
)
from ledger.identity import Consortium

DIGEST = "sha256:" + "ab" * 32


@pytest.fixture(scope="module")
def consortium(tmp_path_factory) -> Consortium:
    return Consortium.generate(tmp_path_factory.mktemp("crypto"), ["Org1", "Org2", "Org3"])


def _spec(name: str) -> str:
    return json.dumps({"name": name, "version": "1", "algorithm": "a", "digest": DIGEST})


@contextlib.contextmanager
def _write_lock_held(path):
    """Another writer holds the ledger file's write lock: blocks wait, endorsements go on."""
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        con.execute("ROLLBACK")
        con.close()


def test_conflicting_transactions_exactly_one_valid(consortium, tmp_path):
    # blocks are cut at once: hold the write lock so both are endorsed before the first commits
    with EmbeddedLedger(tmp_path / "l.db", consortium) as led:
        u1 = consortium.identity("Org1")
        led.submit(u1, "Image:register", _spec("mvcc"))
        # both revokes are endorsed against the same version of the image key before either commits
        with _write_lock_held(tmp_path / "l.db"):
            f1 = led.submit_async(u1, "Image:revoke", "mvcc:1", "first")
            f2 = led.submit_async(u1, "Image:revoke", "mvcc:1", "second")
        codes = sorted([f1.result(10)[1], f2.result(10)[1]])
        assert codes == [B.MVCC_READ_CONFLICT, B.VALID]
        rec = json.loads(led.evaluate(u1, "Image:get", "mvcc:1"))
        assert rec["revoked_reason"] == "first"
        hist = json.loads(led.evaluate(u1, "Image:history", "mvcc:1"))
        assert len(hist) == 2  # the invalid transaction left no trace in state or history
        # the synchronous API raises the typed error for the loser
        errors: list[BaseException] = []

        def loser() -> None:
            try:
                led.submit(u1, "Image:register", _spec("race"))
            except BaseException as exc:
                errors.append(exc)

        with _write_lock_held(tmp_path / "l.db"):
            f3 = led.submit_async(u1, "Image:register", _spec("race"))
            _until(lambda: led._queue.qsize() == 0)  # the orderer holds f3, waiting for the lock
            t = threading.Thread(target=loser)
            t.start()
            # endorsed before f3 commits: both saw the key absent -> phantom of a point read
            _until(lambda: led._queue.qsize() == 1)
        t.join(10)
        assert f3.result(10)[1] == B.VALID
        assert len(errors) == 1 and isinstance(errors[0], MVCCConflict)


def _until(cond, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.005)


def test_lone_transaction_does_not_wait_for_the_batch_timer(consortium, tmp_path):
    with EmbeddedLedger(tmp_path / "l.db", consortium, batch_timeout=5.0) as led:
        u1 = consortium.identity("Org1")
        led.submit(u1, "Image:register", _spec("warm"))
        t0 = time.perf_counter()
        led.submit(u1, "Image:register", _spec("lone"))
        assert time.perf_counter() - t0 < 2.0


def test_too_few_endorsements_is_invalid(consortium, tmp_path):
    with EmbeddedLedger(tmp_path / "l.db", consortium) as led:
        u1 = consortium.identity("Org1")
        with pytest.raises(EndorsementPolicyFailure) as err:
            led.submit(u1, "Image:register", _spec("lonely"), endorsing_organisations=["Org1MSP"])
        assert err.value.validation_code == "ENDORSEMENT_POLICY_FAILURE"
        assert led.transaction_block(err.value.tx_id)[1] == "ENDORSEMENT_POLICY_FAILURE"
        with pytest.raises(Exception, match="does not exist"):
            led.evaluate(u1, "Image:get", "lonely:1")
        led.submit(u1, "Image:register", _spec("lonely"), endorsing_organisations=["Org2MSP", "Org3MSP"])
        assert json.loads(led.evaluate(u1, "Image:get", "lonely:1"))["owner"] == "Org1MSP"


def test_policy_all_needs_every_organisation(consortium, tmp_path):
    with EmbeddedLedger(tmp_path / "l.db", consortium, policy="ALL") as led:
        u = consortium.identity("Org2")
        with pytest.raises(EndorsementPolicyFailure):
            led.submit(u, "Image:register", _spec("x"), endorsing_organisations=["Org1MSP", "Org2MSP"])
        led.submit(u, "Image:register", _spec("x"))


def _endorsed_tx(led: EmbeddedLedger, identity, function: str, *args: str) -> dict:
    proposal, proposal_bytes, _ = led._proposal(identity, function, args)
    sim, payload = led._simulate(proposal, None)
    response = led._response(proposal_bytes, sim, payload)
    tx = {
        "proposal": proposal,
        "response": response,
        "endorsements": led._endorse(response, led.policy.default_endorsers(identity.msp_id)),
    }
    tx["signature"] = B.b64(identity.sign(B.signed_part(tx)))
    return tx


def test_tampered_and_replayed_transactions_are_invalidated(consortium, tmp_path):
    with EmbeddedLedger(tmp_path / "l.db", consortium) as led:
        u1, u2 = consortium.identity("Org1"), consortium.identity("Org2")
        # a client that changes the write set after endorsement: endorsements no longer match
        tx = _endorsed_tx(led, u1, "Image:register", _spec("forged"))
        key, value = tx["response"]["rwset"]["writes"][0]
        rec = json.loads(B.unb64(value))
        rec["owner"] = "Org2MSP"
        tx["response"]["rwset"]["writes"][0][1] = B.b64(canonical_json(rec))
        tx["signature"] = B.b64(u1.sign(B.signed_part(tx)))
        assert led._commit_block([tx])[0][1] == B.ENDORSEMENT_POLICY_FAILURE
        # someone else's envelope re-signed by another client: creator signature fails
        tx = _endorsed_tx(led, u1, "Image:register", _spec("stolen"))
        tx["signature"] = B.b64(u2.sign(B.signed_part(tx)))
        assert led._commit_block([tx])[0][1] == B.BAD_CREATOR_SIGNATURE
        # a valid transaction submitted twice: the second copy is a duplicate
        tx = _endorsed_tx(led, u1, "Image:register", _spec("twice"))
        assert [c for _, c in led._commit_block([tx, tx])] == [B.VALID, B.DUPLICATE_TXID]
        assert led._commit_block([tx])[0][1] == B.DUPLICATE_TXID
        # an endorsement by a client identity does not count
        tx = _endorsed_tx(led, u1, "Image:register", _spec("client-endorsed"))
        fake = consortium.identity("Org3")
        tx["endorsements"].append(
            {
                "endorser": B.b64(fake.serialized()),
                "signature": B.b64(fake.sign(B.endorsement_message(tx["response"], fake.serialized()))),
            }
        )
        tx["signature"] = B.b64(u1.sign(B.signed_part(tx)))
        assert led._commit_block([tx])[0][1] == B.ENDORSEMENT_POLICY_FAILURE
        assert verify_ledger_file(led.path, consortium)["valid_transactions"] == 1


def test_a_peer_key_that_does_not_match_its_certificate_endorses_nothing(consortium, tmp_path):
    """The submit path does not verify the endorsements it has just signed again: that holds only
    because each peer's key is shown to match its certificate before its first endorsement."""
    from cryptography.hazmat.primitives.asymmetric import ec

    from ledger.identity import Identity

    with EmbeddedLedger(tmp_path / "l.db", consortium) as led:
        u1 = consortium.identity("Org1")
        peer = led._peers["Org2MSP"]
        led._peers["Org2MSP"] = Identity(
            peer.msp_id, peer.certificate_pem, ec.generate_private_key(ec.SECP256R1())
        )
        height = led.block_height(u1)
        with pytest.raises(LedgerError, match="peer key of Org2MSP does not match its certificate"):
            led.submit(
                u1, "Image:register", _spec("mismatch"), endorsing_organisations=["Org1MSP", "Org2MSP"]
            )
        assert led.block_height(u1) == height
        led.submit(u1, "Image:register", _spec("matched"), endorsing_organisations=["Org1MSP", "Org3MSP"])


def test_queue_time_check_without_signatures_still_judges_identities_and_policy(consortium, tmp_path):
    from ledger.embedded.validation import StateView, check_endorsed, check_policies, endorsers_of

    with EmbeddedLedger(tmp_path / "l.db", consortium) as led:
        u1 = consortium.identity("Org1")

        def check(tx, signatures):
            return check_endorsed(
                tx,
                membership=led.membership,
                channel=led.channel,
                chaincode=led.chaincode,
                signatures=signatures,
            )

        tx = _endorsed_tx(led, u1, "Image:register", _spec("fresh"))
        assert check(tx, True) is None and check(tx, False) is None
        few = dict(tx, endorsements=tx["endorsements"][:1])
        assert check(few, False) is None  # its identities are sound; the policies depend on the state

        def policies(tx):
            view = StateView.of(led._store.connection())
            return check_policies(
                tx["response"]["rwset"], endorsers_of(tx, led.membership, None), led.policy, view
            )

        assert policies(tx) is None and policies(few) == B.ENDORSEMENT_POLICY_FAILURE
        client = consortium.identity("Org3")  # a client identity cannot endorse
        by_client = dict(
            tx,
            endorsements=[
                *tx["endorsements"][:1],
                {"endorser": B.b64(client.serialized()), "signature": tx["endorsements"][0]["signature"]},
            ],
        )
        assert check(by_client, False) == B.ENDORSEMENT_POLICY_FAILURE
        peer_as_creator = dict(
            tx, proposal=dict(tx["proposal"], creator=B.b64(led._peers["Org1MSP"].serialized()))
        )
        assert check(peer_as_creator, False) == B.BAD_CREATOR_SIGNATURE
        # what the flag leaves out: a changed signature is found only when signatures are verified
        # (at commit of a transaction not built here, and by every replay)
        altered = dict(tx, signature=tx["endorsements"][0]["signature"])
        assert check(altered, True) == B.BAD_CREATOR_SIGNATURE and check(altered, False) is None


def test_blocks_are_hash_chained_and_cut_by_size(consortium, tmp_path):
    with EmbeddedLedger(tmp_path / "l.db", consortium, batch_size=3, batch_timeout=0.2) as led:
        u = consortium.identity("Org1")
        futures = [led.submit_async(u, "Image:register", _spec(f"b{i}")) for i in range(7)]
        blocks = [f.result(10)[0] for f in futures]
        assert all(f.result()[1] == B.VALID for f in futures)
        sizes = [blocks.count(b) for b in sorted(set(blocks))]
        assert max(sizes) <= 3 and sum(sizes) == 7
        h = led.block_height(u)
        for n in range(1, h):
            assert led.block(u, n).previous_hash == led.block(u, n - 1).header_hash


def test_stored_blocks_are_canonical_json_with_the_transactions_encoded_once(consortium, tmp_path):
    """A block's stored body splices in the transactions' JSON encoded for the data hash: the stored
    bytes must still be exactly the canonical JSON of the body (what verify and Fabric-side tools
    hash), including a transaction whose argument spells the splice marker itself."""
    with EmbeddedLedger(tmp_path / "l.db", consortium, batch_size=4, batch_timeout=0.2) as led:
        u = consortium.identity("Org1")
        futures = [led.submit_async(u, "Image:register", _spec(n)) for n in ("one", "two", "three")]
        assert all(f.result(10)[1] == B.VALID for f in futures)
    con = sqlite3.connect(tmp_path / "l.db")
    rows = con.execute("SELECT number, body FROM blocks WHERE number > 0").fetchall()
    con.close()
    assert rows
    for _, raw in rows:
        raw = raw if isinstance(raw, bytes) else raw.encode()
        body = json.loads(raw)
        assert raw == canonical_json(body)
        assert body["data_hash"] == B.sha256_hex(canonical_json(body["transactions"]))
        assert B.body_json(body, canonical_json(body["transactions"])) == raw
    tricky = {"number": 5, "data_hash": "ab", "transactions": [{"args": ['"transactions":0', "ü"]}]}
    assert B.body_json(tricky, canonical_json(tricky["transactions"])) == canonical_json(tricky)


def test_restart_keeps_state_and_history(consortium, tmp_path):
    path = tmp_path / "l.db"
    with EmbeddedLedger(path, consortium) as led:
        c = ConsortiaClient(led, consortium.identity("Org1"))
        c.register_image("persist", "1", "a", DIGEST)
        c.revoke_image("persist:1", "why")
        height = led.block_height(c.identity)
    with EmbeddedLedger(path, consortium) as led:
        c = ConsortiaClient(led, consortium.identity("Org1"))
        assert c.get_image("persist:1").status == "revoked"
        assert [h.value["status"] for h in c.image_history("persist:1")] == ["active", "revoked"]
        assert led.block_height(c.identity) == height
        c.register_image("after", "1", "a", DIGEST)
        assert verify_ledger_file(led.path, consortium)["blocks"] == height + 1


def test_ledger_refuses_another_consortium(consortium, tmp_path):
    path = tmp_path / "l.db"
    EmbeddedLedger(path, consortium).close()
    other = Consortium.generate(tmp_path / "other", ["Org1", "Org2"])
    with pytest.raises(LedgerError, match="belongs to a channel"):
        EmbeddedLedger(path, other)


def test_events_in_order_and_resume(consortium, tmp_path):
    with EmbeddedLedger(tmp_path / "l.db", consortium) as led:
        c = ConsortiaClient(led, consortium.identity("Org1"))
        c.register_image("e1", "1", "a", DIGEST)
        c.revoke_image("e1:1")
        blk = led.block_height(c.identity)
        c.register_image("e2", "1", "a", DIGEST)
        events = list(led.events(c.identity, 0, timeout=0.2))
        assert [e.name for e in events] == ["ImageRegistered", "ImageRevoked", "ImageRegistered"]
        assert json.loads(events[0].payload)["id"] == "e1:1"
        resumed = list(led.events(c.identity, blk, timeout=0.2))
        assert [json.loads(e.payload)["id"] for e in resumed] == ["e2:1"]
        assert all(e.block_number >= blk for e in resumed)


def _worker(crypto: str, path: str, org: str, n: int, q) -> None:
    cons = Consortium(crypto)
    with EmbeddedLedger(path, cons, batch_timeout=0.005) as led:
        c = ConsortiaClient(led, cons.identity(org))
        for i in range(n):
            c.register_image(f"mp-{org}-{i}", "1", "a", DIGEST)
        # all workers race on one key: exactly one may create it
        try:
            c.register_image("contended", "1", "a", DIGEST)
            q.put("won")
        except (AlreadyExists, MVCCConflict) as exc:
            q.put(type(exc).__name__)


def test_processes_share_one_file(consortium, tmp_path):
    path = tmp_path / "shared.db"
    EmbeddedLedger(path, consortium).close()
    ctx = multiprocessing.get_context("spawn")
    q = ctx.Queue()
    procs = [
        ctx.Process(target=_worker, args=(str(consortium.root), str(path), org, 15, q))
        for org in ("Org1", "Org2", "Org3")
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    outcomes = sorted(q.get(timeout=5) for _ in procs)
    assert outcomes.count("won") == 1 and set(outcomes) <= {"won", "AlreadyExists", "MVCCConflict"}
    with EmbeddedLedger(path, consortium) as led:
        c = ConsortiaClient(led, consortium.identity("Org1"))
        ids = {i.id for i in c.list_images()}
        assert len([i for i in ids if i.startswith("mp-")]) == 45 and "contended:1" in ids
        stats = verify_ledger_file(led.path, consortium)
        assert stats["valid_transactions"] == 46


def test_a_ledger_file_that_cannot_be_opened_for_now_is_unavailable_then_works_again(consortium, tmp_path):
    """A ledger file on a folder that is gone for a while (an unmounted volume): a call from a thread
    that opens a new connection is LedgerUnavailable (transient, nothing written), and works once the
    folder is back."""
    folder = tmp_path / "volume"
    folder.mkdir()
    ledger = EmbeddedLedger(folder / "ledger.sqlite", consortium)
    ident = consortium.identity("Org1")
    ledger.submit(ident, "Image:register", _spec("before"))
    folder.rename(tmp_path / "away")
    seen: list[BaseException] = []

    def call():  # a new thread: a new SQLite connection to the file's path
        try:
            ledger.evaluate(ident, "Image:list")
        except BaseException as exc:
            seen.append(exc)

    t = threading.Thread(target=call)
    t.start()
    t.join()
    [err] = seen
    assert isinstance(err, LedgerUnavailable) and transient(err) and "SQLITE_CANTOPEN" in str(err)
    (tmp_path / "away").rename(folder)
    seen.clear()
    t = threading.Thread(target=call)
    t.start()
    t.join()
    assert not seen
    ledger.close()
