"""Publication of an organisation's final model at the end of a learning process (docs/models.md;
seed 003 §IV-C).

After its last round the organisation's model is in its own store, sealed to itself. It is opened,
encrypted once under a fresh data key (:func:`exchange.model_seal.seal_model`: the data key is sealed
to every consortium member), the ciphertext is stored, and ``Model:publish`` records the model's
digest, the ciphertext digest, the sealed keys and the estimator ids. The last round's metrics are
not copied into the model record, which every channel member's blocks carry: they are confidential
(docs/confidentiality.md), and a member reads them from the last round's execution record.
Idempotent: an already published model is left alone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from exchange.model_seal import seal_model
from exchange.store import ArtifactStore
from ledger.client import ConsortiaClient, ProcessRecord
from ledger.errors import AlreadyExists, ContractError, NotFound
from ledger.identity import Consortium


def publish_model(
    client: ConsortiaClient,
    store: ArtifactStore,
    consortium: Consortium,
    process: ProcessRecord,
    submit: Callable[..., Any] | None = None,
) -> None:
    """Publish ``client.organisation``'s final model of ``process`` (nothing if it has none, or if it
    is published already). ``submit(fn, *args, **kw)`` sends the transaction (the agent's retry on
    MVCC conflicts); default: a plain call."""
    submit = submit or (lambda fn, *a, **kw: fn(*a, **kw))
    pid, last, org = process.id, process.rounds, client.organisation
    try:
        client.get_model(f"{pid}:{org}")
        return  # already published
    except NotFound:
        pass
    except ContractError:
        return
    try:
        rec = client.get_execution(pid, last, org)
    except NotFound:
        return
    result = rec.result
    model = result.outputs.model if result else None
    if result is None or model is None:
        return
    payload = store.get_private(model.digest, consortium.encryption_key(org))
    label = {"process_id": pid, "owner": org, "digest": model.digest}
    ciphertext, wrapped = seal_model(payload, label, consortium, process.consortium)
    stored = store.put(ciphertext)
    try:
        submit(
            client.publish_model,
            pid,
            model.digest,
            len(payload) if model.size is None else model.size,
            stored.digest,
            wrapped,
            location=stored.location,
            estimators=list(model.json_object().get("estimators", [])),
        )
    except AlreadyExists:
        pass
