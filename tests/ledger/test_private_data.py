"""Private data on the embedded host (docs/confidentiality.md): Fabric's implicit per-organisation
collections, the clear text only in the private store of the collection's organisation, hashes only
in the blocks, purge, key-level policies of private keys and MVCC on hashed reads.

These tests drive the private-data stub through the ``KV:private_*`` functions of the probe contract
(:mod:`tests.support.probe_contract`), put in place of ``chaincode.dispatch.invoke`` here as the
Fabric test network's chaincode services serve it (tests/fabric/test_private_data.py runs the same
functions on real Fabric)."""

from __future__ import annotations

import hashlib
import sqlite3

import pytest

from audit.ledger_file import verify_ledger_file
from chaincode import dispatch
from chaincode.endorsement import member_majority
from chaincode.errors import Forbidden, InvalidArgument, NotFound
from chaincode.stub import implicit_collection
from ledger.embedded import EmbeddedLedger
from ledger.embedded.store import private_store_path
from ledger.errors import EndorsementFailure, EndorsementPolicyFailure, LedgerCorrupted
from ledger.identity import Consortium
from tests.support import probe_contract

ORGS = ["Org1", "Org2", "Org3"]
C1, C2, C3 = (implicit_collection(f"{o}MSP") for o in ORGS)
SECRET = b"learning-rate=0.0371-secret-hyperparameter"


@pytest.fixture(scope="module")
def consortium(tmp_path_factory) -> Consortium:
    return Consortium.generate(tmp_path_factory.mktemp("crypto-private"), ORGS)


@pytest.fixture
def ledger(consortium, tmp_path, monkeypatch):
    monkeypatch.setattr(dispatch, "invoke", probe_contract.invoke)
    led = EmbeddedLedger(tmp_path / "l.db", consortium, policy="MAJORITY", batch_timeout=0.002)
    yield led
    led.close()


def _org(consortium: Consortium, n: int):
    return consortium.identity(ORGS[n - 1])


def _files_bytes(*paths) -> bytes:
    """The bytes of the files and their SQLite side files (WAL, shared memory) that exist."""
    out = b""
    for p in paths:
        for side in (p, p.with_name(p.name + "-wal"), p.with_name(p.name + "-shm")):
            if side.exists():
                out += side.read_bytes()
    return out


def test_the_clear_text_reaches_only_the_collections_organisations(ledger, consortium):
    org1, org2, org3 = (_org(consortium, n) for n in (1, 2, 3))
    ledger.submit(org1, "KV:private_put", "hp", C1, C2, transient={"value": SECRET})
    # each member reads its own organisation's copy on its own peer
    assert ledger.evaluate(org1, "KV:private_get", C1, "hp") == SECRET
    assert ledger.evaluate(org2, "KV:private_get", C2, "hp") == SECRET
    assert ledger.evaluate(org1, "KV:msp") == b"Org1MSP"
    # Org3 holds no copy: its own collection has nothing, another organisation's is refused
    with pytest.raises(NotFound):
        ledger.evaluate(org3, "KV:private_get", C3, "hp")
    for collection in (C1, C2):
        with pytest.raises(Forbidden, match="unavailable: collection .* not held by .* Org3MSP"):
            ledger.evaluate(org3, "KV:private_get", collection, "hp")
    with pytest.raises(InvalidArgument, match="no private data collection"):
        ledger.evaluate(org1, "KV:private_get", "_implicit_org_Org9MSP", "hp")
    # everyone (Org3 too) reads the hash from the hashed state
    digest = hashlib.sha256(SECRET).hexdigest()
    assert ledger.evaluate(org3, "KV:private_hash", C1, "hp").decode() == digest
    assert ledger.evaluate(org3, "KV:private_hash", C3, "hp") == b""
    path = ledger.path
    ledger.close()
    # the block file carries the hashes, not the value; only Org1's and Org2's stores hold it
    chain = _files_bytes(path)
    assert SECRET not in chain and digest.encode() in chain
    assert hashlib.sha256(b"hp").hexdigest().encode() in chain  # the hashed write set names the key
    org3_view = chain + _files_bytes(private_store_path(path, "Org3MSP"))
    assert SECRET not in org3_view
    for member in ("Org1MSP", "Org2MSP"):
        assert SECRET in _files_bytes(private_store_path(path, member))  # the positive control
    verify_ledger_file(path, consortium)  # the hashed state replays from the chain


def test_a_copy_that_is_not_the_attested_version_is_not_read(ledger, consortium):
    org1 = _org(consortium, 1)
    ledger.submit(org1, "KV:private_put", "k", C1, transient={"value": b"v1"})
    store = sqlite3.connect(private_store_path(ledger.path, "Org1MSP"))
    try:  # the store's copy claims another version than the hashed state attests
        store.execute("UPDATE private_writes SET txnum = txnum + 7")
        store.commit()
    finally:
        store.close()
    with pytest.raises(Forbidden, match="matching public hash version is not available"):
        ledger.evaluate(org1, "KV:private_get", C1, "k")


def test_purge_deletes_every_version_and_the_blocks_keep_the_hashes(ledger, consortium):
    org1 = _org(consortium, 1)
    first, second = b"first-version-of-the-secret", b"second-version-of-the-secret"
    ledger.submit(org1, "KV:private_put", "k", C1, transient={"value": first})
    ledger.submit(org1, "KV:private_put", "k", C1, transient={"value": second})
    ledger.submit(org1, "KV:private_put", "other", C1, transient={"value": b"kept-value-of-another-key"})
    ledger.submit(org1, "KV:private_delete", C1, "other")  # a delete keeps the earlier versions
    ledger.submit(org1, "KV:private_purge", C1, "k")
    with pytest.raises(NotFound):
        ledger.evaluate(org1, "KV:private_get", C1, "k")
    assert ledger.evaluate(org1, "KV:private_hash", C1, "k") == b""  # purged from the hashed state too
    path = ledger.path
    ledger.close()
    store = _files_bytes(private_store_path(path, "Org1MSP"))
    assert first not in store and second not in store
    assert b"kept-value-of-another-key" in store  # the deleted key's history stays until purged
    chain = _files_bytes(path)
    for value in (first, second):
        assert hashlib.sha256(value).hexdigest().encode() in chain  # immutable evidence


def test_key_level_policies_of_private_keys_are_enforced_at_validation(ledger, consortium):
    org1 = _org(consortium, 1)
    ledger.submit(org1, "KV:private_put", "guarded", C1, C2, transient={"value": b"x"})
    ledger.submit(org1, "KV:private_guard", C1, "guarded", "Org1MSP", "Org2MSP")
    policy = ledger.evaluate(org1, "KV:private_policy", C1, "guarded")
    assert policy == member_majority(["Org1MSP", "Org2MSP"]).to_bytes()
    # the chaincode's policy (a majority: Org1 and Org3) holds, the key's (Org1 and Org2) does not
    with pytest.raises(EndorsementPolicyFailure):
        ledger.submit(
            org1,
            "KV:private_put",
            "guarded",
            C1,
            transient={"value": b"y"},
            endorsing_organisations=["Org1MSP", "Org3MSP"],
        )
    assert ledger.evaluate(org1, "KV:private_get", C1, "guarded") == b"x"
    # the planner asks the key's organisations
    ledger.submit(org1, "KV:private_put", "guarded", C1, transient={"value": b"z"})
    assert ledger.evaluate(org1, "KV:private_get", C1, "guarded") == b"z"


def test_hashed_reads_are_validated_like_public_reads(ledger, consortium):
    org1 = _org(consortium, 1)
    ledger.submit(org1, "KV:private_put", "counter", C1, transient={"value": b"a"})
    # both simulated against the same committed version (another writer holds the file's write lock,
    # so neither commits before both are endorsed): the second to commit is a conflict
    holder = sqlite3.connect(ledger.path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        first = ledger.submit_async(org1, "KV:private_append", C1, "counter", transient={"value": b"b"})
        second = ledger.submit_async(org1, "KV:private_append", C1, "counter", transient={"value": b"c"})
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert [f.result(timeout=30)[1] for f in (first, second)] == ["VALID", "MVCC_READ_CONFLICT"]
    assert ledger.evaluate(org1, "KV:private_get", C1, "counter") == b"ab"


def test_an_implicit_collection_is_written_only_with_its_organisations_endorsement(ledger, consortium):
    """Fabric gives organisation X's implicit collection the endorsement policy "a peer of X": a write
    to it endorsed without X (the chaincode's majority holds) is invalid; X alone suffices."""
    org1 = _org(consortium, 1)
    with pytest.raises(EndorsementPolicyFailure):
        ledger.submit(
            org1,
            "KV:private_put",
            "k",
            C2,
            transient={"value": b"v"},
            endorsing_organisations=["Org1MSP", "Org3MSP"],
        )
    ledger.submit(
        org1, "KV:private_put", "k", C2, transient={"value": b"v"}, endorsing_organisations=["Org2MSP"]
    )
    assert ledger.evaluate(_org(consortium, 2), "KV:private_get", C2, "k") == b"v"
    # the planner asks each written collection's organisation
    ledger.submit(org1, "KV:private_put", "k", C1, C2, C3, transient={"value": b"w"})
    for n, collection in ((1, C1), (2, C2), (3, C3)):
        assert ledger.evaluate(_org(consortium, n), "KV:private_get", collection, "k") == b"w"


def test_a_transaction_that_reads_private_data_is_simulated_by_each_endorser(ledger, consortium):
    """Each endorser runs the contract against its own private store: a read of Org1's collection
    endorsed by Org2 too fails there (Org2's peer holds no copy), as every Fabric endorser simulates."""
    org1 = _org(consortium, 1)
    ledger.submit(org1, "KV:private_put", "n", C1, transient={"value": b"a"})
    with pytest.raises(Forbidden, match="not held by the executing organisation Org2MSP"):
        ledger.submit(
            org1,
            "KV:private_append",
            C1,
            "n",
            transient={"value": b"b"},
            endorsing_organisations=["Org1MSP", "Org2MSP"],
        )
    # each endorser reads its own organisation's copy: the same value, but the read sets name
    # different collections, so the endorsements differ (Fabric's Gateway refuses them the same way)
    ledger.submit(org1, "KV:private_put", "n", C1, C2, transient={"value": b"same"})
    assert ledger.evaluate(org1, "KV:private_own", "n") == ledger.evaluate(
        _org(consortium, 2), "KV:private_own", "n"
    )
    with pytest.raises(EndorsementFailure, match="differs"):
        ledger.submit(org1, "KV:private_own", "n", endorsing_organisations=["Org1MSP", "Org2MSP"])


def test_the_hashed_state_is_checked_against_the_chain(ledger, consortium):
    """``ledger verify`` replays the hashed write sets: an edited value hash in the file is found."""
    ledger.submit(_org(consortium, 1), "KV:private_put", "k", C1, transient={"value": b"v"})
    path = ledger.path
    ledger.close()
    verify_ledger_file(path, consortium)
    con = sqlite3.connect(path)
    try:
        con.execute("UPDATE private_hashes SET value_hash = ?", (hashlib.sha256(b"forged").hexdigest(),))
        con.commit()
    finally:
        con.close()
    with pytest.raises(LedgerCorrupted, match="private_hashes"):
        verify_ledger_file(path, consortium)
