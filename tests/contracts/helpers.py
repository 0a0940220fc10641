"""Building signed execution results the way a task does (key pair per task), and completing tasks the
way the node agent does: the task key signs the public form of the result, whose confidential part
(metrics, data commitment, validation scores) travels in the transient map (docs/confidentiality.md)."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Mapping, Sequence
from typing import Any

from cryptography.hazmat.primitives.asymmetric import ec

from chaincode.canonical import canonical_json
from chaincode.errors import NotFound
from chaincode.records import ResultConfidential
from ledger.client import ConsortiaClient, ExecutionRecord, split_result
from ledger.identity import sign

IMAGE_DIGEST = "sha256:" + "ab" * 32


def digest_of(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def make_result(
    process_id: str,
    rnd: int,
    org: str,
    *,
    image_digest: str = IMAGE_DIGEST,
    runtime: str = "sandbox",
    metrics: dict[str, float] | None = None,
    model_digest: str | None = None,
    recipients: tuple[str, ...] = (),
    validation: dict[str, Any] | None = None,
) -> dict[str, Any]:
    result = {
        "process_id": process_id,
        "round": rnd,
        "organisation": org,
        "image_digest": image_digest,
        "runtime": runtime,
        "inputs": {
            "state": digest_of(f"state-{org}-{rnd - 1}"),
            "messages": [],
            "data_commitment": digest_of(f"data-{org}"),
        },
        "outputs": {
            "state": digest_of(f"state-{org}-{rnd}"),
            "messages": [
                {"recipient": r, "digest": digest_of(f"msg-{org}-{r}-{rnd}"), "size": 10} for r in recipients
            ],
            "model": None if model_digest is None else {"digest": model_digest, "size": 123},
        },
        "metrics": metrics or {"loss": 0.5},
        "started": "2026-01-01T00:00:00Z",
        "finished": "2026-01-01T00:00:01Z",
    }
    if validation is not None:
        result["validation"] = validation
    return result


def public_result(result: dict[str, Any]) -> tuple[dict[str, Any], ResultConfidential]:
    """A full result as (its public form, which the task key signs; its confidential part), with a
    fresh salt, as the node agent splits a task's manifest."""
    return split_result(result, secrets.token_hex(32))


def complete(
    client: ConsortiaClient, key: ec.EllipticCurvePrivateKey, result: dict[str, Any]
) -> ExecutionRecord:
    """Complete a task as the node agent does: ``key`` signs the public form of the full ``result``,
    and the confidential part goes in the transient map. The answer is the public record (a member
    reads the values with ``get_execution``)."""
    public, part = public_result(result)
    return client.complete_task(public, sign(key, canonical_json(public)), part)


def run_task(client: ConsortiaClient, process_id: str, rnd: int, **result_kw: Any) -> dict[str, Any]:
    """Register a task key, then complete the task with a correctly signed result (public form)."""
    key = ec.generate_private_key(ec.SECP256R1())
    client.create_task(process_id, rnd, key.public_key(), result_kw.get("runtime", "sandbox"))
    result = make_result(process_id, rnd, client.organisation, **result_kw)
    complete(client, key, result)
    return result


def new_process(
    admins: Mapping[str, ConsortiaClient],
    org1: ConsortiaClient,
    uid: str,
    consortium=("Org1MSP", "Org2MSP"),
    rounds: int = 2,
    privacy_budget: dict | None = None,
    start: bool = True,
    hyperparameters: dict | None = None,
    validation_fraction: float | None = None,
    description: str = "",
) -> str:
    image_id = f"img-{uid}:1"
    try:
        org1.get_image(image_id)
    except NotFound:
        org1.register_image(f"img-{uid}", "1", "collab-rf", IMAGE_DIGEST)
    pid = f"proc-{uid}"
    org1.create_process(
        pid,
        image_id,
        list(consortium),
        {"kind": "ring", "seed": 7},
        rounds,
        hyperparameters=hyperparameters or {"n_new": 5},
        privacy_budget=privacy_budget,
        validation_fraction=validation_fraction,
        description=description,
        co_endorsers=lone_co_endorser(consortium),
    )
    if start:
        consent(admins, pid, consortium)
        org1.start_process(pid)
    return pid


def lone_co_endorser(consortium: Sequence[str]) -> tuple[str, ...]:
    """The organisation that endorses a one-member process's creation with its member (on Fabric the
    chaincode's policy needs two; docs/confidentiality.md), none for a larger consortium."""
    if len(consortium) != 1:
        return ()
    return ("Org2MSP",) if consortium[0] == "Org1MSP" else ("Org1MSP",)


def consent(admins: Mapping[str, ConsortiaClient], pid: str, members: Sequence[str]) -> None:
    """Every member's admin approves the process's image (unless it owns it) and accepts the process,
    as each organisation does on its own host (docs/consent.md)."""
    process = admins[members[0]].get_process(pid)
    image = admins[process.consortium[0]].get_image(process.image_id)
    for msp in process.consortium:
        admin = admins[msp]
        mine = next((a for a in image.approvals if a.organisation == msp and a.revoked is None), None)
        if msp != image.owner and (mine is None or mine.digest != process.image_digest):
            admin.approve_image(process.image_id, process.image_digest)
        admin.accept_process(pid)


def private_metrics(eps: float, n: int = 2, **extra: float) -> dict[str, float]:
    """The privacy metrics of one round whose n releases are each ε-DP Laplace (ρ = ε²/2 each)."""
    return {
        "privacy_rigorous": 1,
        "epsilon_spent": eps,
        "epsilon_network_spent": n * eps,
        "rho_spent": eps * eps / 2,
        "rho_network_spent": n * eps * eps / 2,
        **extra,
    }
