"""Fixtures of the artifact-exchange tests: a generated consortium of four organisations (Org4 never
takes part in a process), and a way to put a completed round of one organisation on a ledger."""

from __future__ import annotations

import os
import secrets

import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from exchange import messages
from exchange.readers import StaticReaders
from exchange.sealing import seal
from exchange.service import ArtifactServer
from exchange.store import ArtifactStore
from ledger.client import ConsortiaClient, split_result
from ledger.embedded import EmbeddedLedger
from ledger.errors import NotFound
from ledger.identity import Consortium, sign
from wire.canonical import canonical_json, sha256_digest

ORGS = ("Org1MSP", "Org2MSP", "Org3MSP", "Org4MSP")
IMAGE_DIGEST = "sha256:" + "cd" * 32


@pytest.fixture(scope="session")
def consortium(tmp_path_factory):
    return Consortium.generate(tmp_path_factory.mktemp("crypto4"), ["Org1", "Org2", "Org3", "Org4"])


def start_process(
    client: ConsortiaClient, pid: str, orgs: list[str], rounds: int, consortium: Consortium
) -> None:
    """A running ring process of ``orgs`` (the image registered once), which each member's admin
    approved and accepted (docs/consent.md)."""
    try:
        client.get_image("avg:1")
    except NotFound:
        client.register_image("avg", "1", "average-consensus", IMAGE_DIGEST, reference="localhost/avg:1")
    client.create_process(pid, "avg:1", orgs, {"kind": "ring", "seed": 1}, rounds)
    for org in orgs:
        admin = ConsortiaClient(client.ledger, consortium.identity(org, "Admin"))
        if org != client.organisation and not any(
            a.organisation == org for a in client.get_image("avg:1").approvals
        ):
            admin.approve_image("avg:1", IMAGE_DIGEST)
        admin.accept_process(pid)
    client.start_process(pid)


def complete_round(
    client: ConsortiaClient,
    pid: str,
    rnd: int,
    state: str,
    messages: list[dict[str, object]],
    model: dict[str, object] | None = None,
) -> None:
    """``client``'s organisation registers a task key and completes round ``rnd`` with a signed result
    naming ``state``, the output ``messages`` ({recipient, digest, size}) and ``model`` ({digest, size}):
    its public form, the metrics and the data commitment in the transient map."""
    key = ec.generate_private_key(ec.SECP256R1())
    client.create_task(pid, rnd, key.public_key(), "sandbox")
    result = {
        "process_id": pid,
        "round": rnd,
        "organisation": client.organisation,
        "image_digest": IMAGE_DIGEST,
        "runtime": "sandbox",
        "inputs": {"state": None, "messages": [], "data_commitment": "sha256:" + "0" * 64},
        "outputs": {"state": state, "messages": messages, "model": model},
        "metrics": {},
        "started": "2026-01-01T00:00:00Z",
        "finished": "2026-01-01T00:00:01Z",
    }
    public, confidential = split_result(result, secrets.token_hex(32))  # as the node agent completes
    client.complete_task(public, sign(key, canonical_json(public)), confidential)


@pytest.fixture
def served(tmp_path, consortium):
    """Org1's HTTPS service on 127.0.1.1 with a message for Org2 and a model for Org1..Org3 (readers fixed
    in advance): (server, store, message digest, model digest)."""
    store = ArtifactStore(tmp_path / "org1", "Org1MSP")
    message = store.put(b"sealed message for Org2" * 1000).digest
    model = store.put(os.urandom(3_000_000)).digest
    readers = StaticReaders({message: ["Org2MSP"], model: ["Org1MSP", "Org2MSP", "Org3MSP"]})
    srv = ArtifactServer(("127.0.1.1", 0), store, consortium, readers).start()
    yield srv, store, message, model
    srv.stop()


@pytest.fixture
def world(tmp_path, consortium):
    """Org1 completed round 1 of p (one round, Org1..Org3) with a sealed message to Org2 and one to Org3,
    indexed in its store, and published its model (ciphertext in its store, access Org1..Org3)."""
    ledger = EmbeddedLedger(tmp_path / "ledger.sqlite", consortium)
    clients = {o: ConsortiaClient(ledger, consortium.identity(o)) for o in ORGS}
    start_process(clients["Org1MSP"], "p", list(ORGS[:3]), 1, consortium)
    store = ArtifactStore(tmp_path / "store", "Org1MSP")
    sent = {}
    for r in ("Org2MSP", "Org3MSP"):
        ref = store.put_message(
            f"to {r}".encode(),
            process_id="p",
            round=1,
            recipient=r,
            recipient_certificate=consortium.encryption_certificate(r),
        )
        messages.write_entry(store, "p", 1, ref)
        sent[r] = ref
    model = b"the model of Org1"
    ct = store.put(b"its ciphertext").digest
    complete_round(
        clients["Org1MSP"],
        "p",
        1,
        sha256_digest(b"state"),
        [{"recipient": r, "digest": ref.payload_digest, "size": 4} for r, ref in sent.items()],
        model={"digest": sha256_digest(model), "size": len(model)},
    )
    keys = {o: seal(consortium.encryption_certificate(o), bytes(32)) for o in ORGS[:3]}
    clients["Org1MSP"].publish_model("p", sha256_digest(model), len(model), ct, keys)
    yield clients, store, sent, ct
    ledger.close()
