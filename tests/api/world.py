"""A small consortium with a completed audited learning process, built through the typed client
the way node agents do it: task keys registered, results signed, messages linking rounds, models
encrypted to the consortium and published. Shared by the API tests."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric import ec

from chaincode.canonical import canonical_json
from exchange.model_seal import model_aad, model_key_info
from exchange.sealing import encrypt_payload, seal
from exchange.service import HostedServices, node_store
from exchange.store import ArtifactStore
from executor.consent import give_consent
from ledger.client import ConsortiaClient, split_result
from ledger.embedded import EmbeddedLedger
from ledger.errors import NotFound
from ledger.identity import Consortium, sign

ORGS = ("Org1MSP", "Org2MSP", "Org3MSP")
IMAGE_DIGEST = "sha256:" + "cd" * 32


def digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def estimators(orgs: tuple[str, ...]) -> list[dict[str, object]]:
    """The estimator list a model of the world carries: signed in the last round's result and
    published on the Model record (as collaborative RF lists its estimators)."""
    return [{"origin": o, "trees": 2} for o in orgs]


@dataclass
class World:
    consortium: Consortium
    ledger: EmbeddedLedger
    clients: dict[str, ConsortiaClient]
    stores: dict[str, ArtifactStore]
    root: Path
    processes: list[str] = field(default_factory=list)
    models: dict[str, bytes] = field(default_factory=dict)  # model id -> plaintext


def ring_process(
    w: World,
    pid: str,
    rounds: int = 3,
    orgs: tuple[str, ...] = ORGS,
    *,
    image_id: str = "rf:1",
    budget: float | None = 3.0,
    publish: bool = True,
    all_to_all: bool = False,
    unchanged_rounds: frozenset[int] = frozenset(),
    validation: dict[str, tuple[float, float]] | None = None,
) -> None:
    """Run a ring process to completion: in round r each organisation reads its previous state and the
    message of its predecessor from round r-1, and sends a message to its successor (``all_to_all``:
    to every other organisation, as collaborative RF does). In ``unchanged_rounds`` (collaborative
    RF's SHARE rounds) an organisation's state and messages are those of the round before: the
    same digests are output by several rounds. ``validation`` (organisation -> (isolated, collaborative)
    balanced accuracy): the process declares a validation slice of 0.2 and each last-round result carries
    those scores (of 12 rows), as a task's validation block."""
    c1 = w.clients[orgs[0]]
    try:
        c1.get_image(image_id)
    except NotFound:
        name, version = image_id.split(":")
        c1.register_image(name, version, "collab-rf", IMAGE_DIGEST, reference="localhost/rf:1")
    c1.create_process(
        pid,
        image_id,
        list(orgs),
        {"kind": "ring", "seed": 7},
        rounds,
        hyperparameters={"n_trees": 4, "gradient_clip": 1.0},  # a private process must clip
        privacy_budget=None
        if budget is None
        else {"mechanism": "gaussian", "epsilon": budget, "scope": "node"},
        validation_fraction=None if validation is None else 0.2,
    )
    give_consent({o: ConsortiaClient(c1.ledger, w.consortium.identity(o, "Admin")) for o in orgs}, pid)
    c1.start_process(pid)
    n = len(orgs)
    prev_state: dict[str, str | None] = {o: None for o in orgs}
    prev_msgs: dict[str, list[dict[str, str]]] = {o: [] for o in orgs}
    for rnd in range(1, rounds + 1):
        new_msgs: dict[str, list[dict[str, str]]] = {o: [] for o in orgs}
        for i, org in enumerate(orgs):
            c = w.clients[org]
            key = ec.generate_private_key(ec.SECP256R1())
            c.create_task(pid, rnd, key.public_key(), "sandbox")
            same = rnd in unchanged_rounds and prev_state[org] is not None
            base = rnd
            while base in unchanged_rounds and base > 1:
                base -= 1
            state = prev_state[org] if same else digest(f"{pid}-state-{org}-{rnd}".encode())
            recipients = [o for o in orgs if o != org] if all_to_all else [orgs[(i + 1) % n]]
            sent = [
                {"recipient": r, "digest": digest(f"{pid}-msg-{org}-{r}-{base}".encode()), "size": 32}
                for r in recipients
            ]
            model = None
            if rnd == rounds:
                payload = f"model of {org} for {pid}: ".encode() + bytes(range(64))
                model = {"digest": digest(payload), "size": len(payload), "estimators": estimators(orgs)}
                w.models[f"{pid}:{org}"] = payload
            result = {
                "process_id": pid,
                "round": rnd,
                "organisation": org,
                "image_digest": IMAGE_DIGEST,
                "runtime": "sandbox",
                "inputs": {
                    "state": prev_state[org],
                    "messages": prev_msgs[org],
                    "data_commitment": digest(f"data-{org}".encode()),
                },
                "outputs": {"state": state, "messages": sent, "model": model},
                "metrics": {
                    "loss": round(1.0 / rnd + 0.01 * i, 6),
                    "epsilon_spent": 0.5,
                    "epsilon_network_spent": 0.5 * n,
                    "privacy_rigorous": 1,
                },
                "started": "2026-01-01T00:00:00Z",
                "finished": "2026-01-01T00:00:01Z",
            }
            if validation is not None and rnd == rounds:
                isolated, collaborative = validation[org]
                result["validation"] = {
                    "metric": "balanced_accuracy",
                    "collaborative": collaborative,
                    "isolated": isolated,
                    "rows": 12,
                }
            # as the node agent completes: the task key signs the public form, the metrics, data
            # commitment and validation scores go in the transient map (docs/confidentiality.md)
            public, confidential = split_result(result, secrets.token_hex(32))
            c.complete_task(public, sign(key, canonical_json(public)), confidential)
            prev_state[org] = state
            for m in sent:
                new_msgs[m["recipient"]].append({"sender": org, "digest": m["digest"]})
        prev_msgs = new_msgs
    c1.complete_process(pid)
    w.processes.append(pid)
    if publish:
        for org in orgs:
            publish_model(w, pid, org, orgs)


def publish_model(w: World, pid: str, org: str, orgs: tuple[str, ...]) -> str:
    payload = w.models[f"{pid}:{org}"]
    ident = {"process_id": pid, "owner": org, "digest": digest(payload)}  # the executor's convention
    data_key, ciphertext = encrypt_payload(payload, model_aad(ident))
    cdig = w.stores[org].put(ciphertext).digest  # in the owner's store; others fetch it from its service
    wrapped = {o: seal(w.consortium.encryption_certificate(o), data_key, model_key_info(ident)) for o in orgs}
    w.clients[org].publish_model(
        pid,
        digest(payload),
        len(payload),
        cdig,
        wrapped,
        metrics={"accuracy": 0.9},
        estimators=estimators(orgs),
        location=w.stores[org].location,
    )
    return f"{pid}:{org}"


def hosted_stores(
    consortium: Consortium, clients: dict[str, ConsortiaClient], folder: Path
) -> dict[str, ArtifactStore]:
    """Each organisation's store under ``folder/<MSP>``, served to the others in this process by its own
    service (the ledger's rule) and reaching theirs the same way: the organisations of a test world live in
    one process, and none opens another's files."""
    hosted = HostedServices()
    return {m: node_store(c, consortium, folder, hosted=hosted) for m, c in clients.items()}


def build_world(root: Path, processes: int = 1) -> World:
    consortium = Consortium.generate(root / "crypto", ["Org1", "Org2", "Org3", "Org4"])
    led = EmbeddedLedger(root / "ledger.db", consortium, batch_timeout=0.002)
    clients = {
        o.msp_id: ConsortiaClient(led, consortium.identity(o.msp_id)) for o in consortium.organisations
    }
    stores = hosted_stores(consortium, clients, root / "artifacts")  # the executor's layout
    w = World(consortium, led, clients, stores, root)
    for i in range(processes):
        ring_process(w, f"proc-{i}")
    return w
