"""A model verified against the ledger, without trusting the agents that wrote its records nor the
index that lists them (seed 003 §IV-C "verifiable").

:func:`verify_model` is the one model audit: the gateway's ``POST /models/{id}/verify`` and
``consortia model verify`` call it with their audit index, the demo and the node side with the
artifact stores and keys. It reads the Model, LearningProcess and Image records and every execution
record of the process from the ledger as the caller, recomputes the lineage from those records by
the one rule (:mod:`audit.lineage`) and checks:

* **lineage** -- it is whole (every organisation back to round 1), every execution is linked to
  what the round before signed, the model is the digest and estimator list the owner's last-round
  execution signed, from the pinned image (and the Image record has that digest);
* **execution** -- for each execution of the lineage: the result names the record's process, round,
  organisation and runtime, result, record and process pin the same image, and the task signature
  holds (:func:`audit.lineage.check_execution`);
* **history** -- each was created once and completed once (``running -> completed``);
* **block** -- the transactions of the model, process, image and every lineage execution are valid
  transactions of their blocks, when their blocks can be found (the embedded host finds any
  transaction; on Fabric the audit index does, from the events it followed);
* **index** (given an index) -- the index's copy of the model and of each execution is the
  ledger's, and its lineage lists exactly the same executions;
* **image** (given ``local_image_digest``) -- the local image has the pinned digest;
* **artifact** / **model** (given ``store_root``) -- :mod:`audit.artifacts`.

It only reads.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from audit.artifacts import check_artifacts
from audit.lineage import check_execution, check_lineage, execution_node_id, node_round
from audit.report import Report
from ledger.client import ConsortiaClient
from ledger.interface import BlockInfo, Ledger


class IndexView(Protocol):
    """What the verification reads of an audit index (``api.index.AuditIndex``)."""

    def model(self, model_id: str) -> dict[str, Any] | None: ...

    def execution(self, process_id: str, rnd: int, organisation: str) -> dict[str, Any] | None: ...

    def lineage(self, model_id: str) -> dict[str, Any] | None: ...

    def transaction_block(self, tx_id: str) -> int | None: ...


def transaction_locator(ledger: Ledger, index: IndexView | None = None) -> Callable[[str], int | None] | None:
    """How to find the block of a transaction: the host itself when it can say (embedded), else the
    audit index's events; None when neither can."""
    finder = getattr(ledger, "transaction_block", None)
    if finder is not None:

        def on_host(tx_id: str) -> int | None:
            hit = finder(tx_id)
            return None if hit is None else int(hit[0])

        return on_host
    return index.transaction_block if index is not None else None


def transaction_validity(
    client: ConsortiaClient, index: IndexView | None = None
) -> Callable[[str], bool | None]:
    """``valid(tx_id)``: whether the transaction is a VALID transaction of its block (None when its
    block cannot be found); blocks are read once."""
    locate = transaction_locator(client.ledger, index)
    blocks: dict[int, BlockInfo] = {}

    def valid(tx_id: str) -> bool | None:
        number = locate(tx_id) if locate is not None else None
        if number is None:
            return None
        if number not in blocks:
            blocks[number] = client.ledger.block(client.identity, number)
        info = blocks[number]
        return tx_id in info.tx_ids and info.validation_codes[info.tx_ids.index(tx_id)] == "VALID"

    return valid


def _strip(record: dict[str, Any]) -> dict[str, Any]:
    """A record without the caller's sealed data key and the process's moving round."""
    return {k: v for k, v in record.items() if k not in ("wrapped_key", "current_round")}


def verify_model(
    client: ConsortiaClient,
    model_id: str,
    *,
    index: IndexView | None = None,
    store_root: str | Path | None = None,
    recipient_keys: Mapping[str, Any] | None = None,
    local_image_digest: Callable[[str], str | None] | None = None,
    history: bool = True,
) -> Report:
    """Verify ``model_id`` and its whole lineage (see the module docstring for the checks).

    ``index``: also check the audit index's copy; ``store_root``: also check the artifacts in the
    organisations' stores, opening the sealed ones of the organisations in ``recipient_keys`` (MSP id
    -> key-agreement private key); ``local_image_digest(reference)``: also check the local image;
    ``history=False`` skips the record histories (one ledger read per execution)."""

    def read(function: str, *args: str) -> Any:
        return json.loads(client.ledger.evaluate(client.identity, function, *args))

    report = Report(f"model:{model_id}")
    model = _strip(read("Model:get", model_id))
    process = _strip(read("LearningProcess:get", model["process_id"]))
    image = read("Image:get", process["image_id"])
    executions = read("ExecutionRecord:query", json.dumps({"process_id": process["id"]}))
    indexed = None
    if index is not None:
        same = index.model(model_id) == model
        report.add(
            "index matches ledger: model",
            same,
            "" if same else "the index's model record differs from the ledger's",
            "index",
        )
        indexed = {n["id"] for n in (index.lineage(model_id) or {}).get("nodes", [])}
    if local_image_digest is not None:
        local = local_image_digest(image["reference"])
        report.add(
            f"local image {image['reference']}",
            local == process["image_digest"],
            f"local {local}, pinned {process['image_digest']}",
            "image",
        )
    lineage = check_lineage(report, model, process, image, executions, indexed)
    by_node = {execution_node_id(e["process_id"], e["round"], e["organisation"]): e for e in executions}
    nodes = sorted((n for n in lineage.nodes if n in by_node), key=lambda n: (node_round(n), n))
    for node in nodes:
        rec = by_node[node]
        pid, rnd, org = rec["process_id"], rec["round"], rec["organisation"]
        if index is not None:
            same = index.execution(pid, rnd, org) == rec
            report.add(
                f"index matches ledger: {node}", same, "" if same else "the index's copy differs", "index"
            )
        report.run(f"execution {node}", check_execution, rec, process, kind="execution")
        if history:
            states = [h.value["status"] for h in client.execution_history(pid, rnd, org) if h.value]
            report.add(
                f"history {node}",
                states == ["running", "completed"],
                f"history {states}",
                "history",
            )
    if transaction_locator(client.ledger, index) is not None:
        valid = transaction_validity(client, index)
        txs = {model["tx_id"], process["tx_id"], image["tx_id"]}
        for node in nodes:
            txs |= {by_node[node]["tx_id"], by_node[node].get("completed_tx_id") or by_node[node]["tx_id"]}
        bad = []
        for tx in sorted(txs):
            ok = valid(tx)
            if not ok:
                bad.append(
                    f"{tx}: not found" if ok is None else f"{tx}: not a valid transaction of its block"
                )
        report.add(
            "transactions in valid blocks", not bad, "; ".join(bad) or f"{len(txs)} transactions", "block"
        )
    if store_root is not None:
        check_artifacts(
            report,
            [by_node[n] for n in nodes if by_node[n].get("result")],
            model,
            store_root,
            recipient_keys or {},
        )
    report.facts = {
        "model_id": model_id,
        "process_id": process["id"],
        "owner": model["owner"],
        "model_digest": model["digest"],
        "image_digest": process["image_digest"],
        "lineage": nodes,
    }
    return report
