"""Private data on real Fabric (docs/confidentiality.md): the probe contract's ``KV:private_*``
functions (the same ones tests/ledger/test_private_data.py runs on the embedded host) on the shared
3-organisation test network. A value written to Org1's and Org2's implicit collections reaches
their peers only: Org3 reads the hash, never the value, and a byte search of Org3's peer folder
finds no copy while Org1's does (the positive control that makes the search mean something)."""

from __future__ import annotations

import hashlib
import time
import uuid
from pathlib import Path

import pytest

from chaincode.errors import Forbidden, NotFound
from chaincode.stub import implicit_collection
from ledger.errors import EndorsementFailure, EndorsementPolicyFailure
from tests.support.fabric import eventually

pytestmark = pytest.mark.fabric

C1, C2, C3 = (implicit_collection(f"Org{n}MSP") for n in (1, 2, 3))


def _peer_folder(fabric, n: int) -> Path:
    """Organisation ``n``'s peer's ``fileSystemPath`` (CORE_PEER_FILESYSTEMPATH of the network)."""
    return fabric.network.net / "data" / fabric.network.peer_name(n - 1)


def _found_in(folder: Path, needle: bytes) -> list[str]:
    hits = []
    for path in folder.rglob("*"):
        if path.is_file() and needle in path.read_bytes():
            hits.append(str(path.relative_to(folder)))
    return hits


def test_a_private_value_reaches_the_collections_organisations_only(fabric, fabric_ledger, fabric_ids):
    org1, org2, org3 = fabric_ids["Org1"], fabric_ids["Org2"], fabric_ids["Org3"]
    key = f"hp-{uuid.uuid4().hex[:8]}"
    secret = f"lr={uuid.uuid4().hex}".encode()  # unique per run, high entropy (no compression hides it)
    fabric_ledger.submit(
        org1,
        "KV:private_put",
        key,
        C1,
        C2,
        transient={"value": secret},
        endorsing_organisations=["Org1MSP", "Org2MSP"],
    )
    assert fabric_ledger.evaluate(org1, "KV:msp") == b"Org1MSP"
    assert fabric_ledger.evaluate(org3, "KV:msp") == b"Org3MSP"
    assert fabric_ledger.evaluate(org1, "KV:private_get", C1, key) == secret
    assert eventually(lambda: fabric_ledger.evaluate(org2, "KV:private_get", C2, key)) == secret
    for collection in (C1, C2):
        with pytest.raises(Forbidden, match="not held by the executing organisation Org3MSP"):
            fabric_ledger.evaluate(org3, "KV:private_get", collection, key)
    with pytest.raises(NotFound):
        fabric_ledger.evaluate(org3, "KV:private_get", C3, key)
    digest = hashlib.sha256(secret).hexdigest().encode()
    assert eventually(lambda: fabric_ledger.evaluate(org3, "KV:private_hash", C1, key) or _raise()) == digest
    assert not _found_in(_peer_folder(fabric, 3), secret)
    assert _found_in(_peer_folder(fabric, 1), secret)  # the positive control


def test_an_implicit_collection_is_written_only_with_its_organisations_endorsement(fabric_ledger, fabric_ids):
    """Fabric's implicit collection of X has the endorsement policy "a peer of X": Org2's collection
    written with Org1's and Org3's endorsements (the chaincode's majority) is invalid; every member
    whose copy is written endorses it, so each holds its copy from its own endorsement."""
    org1, org2 = fabric_ids["Org1"], fabric_ids["Org2"]
    key = f"policy-{uuid.uuid4().hex[:8]}"
    with pytest.raises(EndorsementPolicyFailure):
        fabric_ledger.submit(
            org1,
            "KV:private_put",
            key,
            C2,
            transient={"value": b"v"},
            endorsing_organisations=["Org1MSP", "Org3MSP"],
        )
    fabric_ledger.submit(
        org1, "KV:private_put", key, C2, transient={"value": b"w"}, endorsing_organisations=["Org2MSP"]
    )
    assert eventually(lambda: fabric_ledger.evaluate(org2, "KV:private_get", C2, key)) == b"w"


def test_a_transaction_that_reads_private_data_is_endorsed_differently_by_each_organisation(
    fabric_ledger, fabric_ids
):
    """Each endorser reads its own organisation's copy: the read sets name different collections, so
    the Gateway refuses the endorsements (the embedded host re-simulates on each endorser to refuse
    the same transactions)."""
    org1, org2 = fabric_ids["Org1"], fabric_ids["Org2"]
    key = f"own-{uuid.uuid4().hex[:8]}"
    both = ["Org1MSP", "Org2MSP"]
    fabric_ledger.submit(
        org1, "KV:private_put", key, C1, C2, transient={"value": b"same"}, endorsing_organisations=both
    )
    assert fabric_ledger.evaluate(org1, "KV:private_own", key) == b"same"
    assert eventually(lambda: fabric_ledger.evaluate(org2, "KV:private_own", key)) == b"same"
    with pytest.raises(EndorsementFailure):
        fabric_ledger.submit(org1, "KV:private_own", key, endorsing_organisations=both)


def test_purge_removes_the_value_and_keeps_the_hash_on_the_chain(fabric, fabric_ledger, fabric_ids):
    org1 = fabric_ids["Org1"]
    key = f"purge-{uuid.uuid4().hex[:8]}"
    secret = f"purged={uuid.uuid4().hex}".encode()
    both = ["Org1MSP", "Org2MSP"]
    fabric_ledger.submit(
        org1, "KV:private_put", key, C1, transient={"value": secret}, endorsing_organisations=both
    )
    assert fabric_ledger.evaluate(org1, "KV:private_get", C1, key) == secret
    fabric_ledger.submit(org1, "KV:private_purge", C1, key, endorsing_organisations=both)
    with pytest.raises(NotFound):
        fabric_ledger.evaluate(org1, "KV:private_get", C1, key)
    assert fabric_ledger.evaluate(org1, "KV:private_hash", C1, key) == b""


def _raise():
    raise NotFound("no hash yet")


def test_the_blocks_delivered_to_a_non_member_carry_the_hash_not_the_value(fabric, fabric_ledger, fabric_ids):
    """Org3's admin reads the channel's blocks, whole, through its own peer's Deliver service
    (``delivered_blocks``): a public value is in them (the positive control of the read), a value
    written to Org1's and Org2's collections is not, its hash is."""
    from audit.exposure import Needle, Needles, search_blocks

    org1 = fabric_ids["Org1"]
    key = f"deliver-{uuid.uuid4().hex[:8]}"
    public, secret = (f"{what}={uuid.uuid4().hex}".encode() for what in ("public", "secret"))
    fabric_ledger.submit(org1, "KV:put", key, public.decode())
    fabric_ledger.submit(
        org1,
        "KV:private_put",
        key,
        C1,
        C2,
        transient={"value": secret},
        endorsing_organisations=["Org1MSP", "Org2MSP"],
    )
    admin3 = fabric.consortium.identity("Org3", "Admin")
    height = fabric_ledger.block_height(org1)
    deadline = time.monotonic() + 30
    while fabric_ledger.block_height(admin3) < height and time.monotonic() < deadline:
        time.sleep(0.5)
    blocks = list(fabric_ledger.delivered_blocks(admin3, 0, height - 1))
    assert len(blocks) == height
    needles = Needles(
        (Needle("metrics", ("public",), (public,)), Needle("hyperparameters", ("secret",), (secret,))), ()
    )
    found = search_blocks(blocks, needles)
    assert found.hits_by_kind()["metrics"] == 1 and found.hits_by_kind()["hyperparameters"] == 0
    assert any(hashlib.sha256(secret).digest() in b for b in blocks)  # the hashed write set
