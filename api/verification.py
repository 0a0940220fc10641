"""Verifying a model's whole lineage: every signature and digest, against the ledger or offline.

The pure checks here take plain records (canonical JSON dicts, as the contracts store them) and
are shared by the gateway's live verification (:func:`verify_model_on_ledger`, which also
re-checks the index's answer against the ledger) and the offline audit bundle (:mod:`api.bundle`).
"""

from __future__ import annotations

import json
from typing import Any

from api.index import AuditIndex, execution_node_id, record_lineage
from executor.report import Report
from executor.task_keys import check_record_signature
from ledger.client import ConsortiaClient

__all__ = [
    "Report",
    "check_execution",
    "check_lineage_complete",
    "check_links",
    "check_model",
    "verify_model_on_ledger",
]


def check_execution(record: dict[str, Any], process: dict[str, Any]) -> str:
    """A completed execution record: result matches the record, pinned image, valid task signature."""
    node = execution_node_id(record["process_id"], record["round"], record["organisation"])
    if record.get("status") != "completed":
        raise ValueError(f"execution {node} is {record.get('status')}, not completed")
    result = record["result"]
    for f in ("process_id", "round", "organisation"):
        if result.get(f) != record[f]:
            raise ValueError(f"execution {node}: result.{f} = {result.get(f)!r} differs from the record")
    if result["image_digest"] != process["image_digest"] or record["image_digest"] != process["image_digest"]:
        raise ValueError(
            f"execution {node} ran image {result['image_digest']}, the process pins {process['image_digest']}"
        )
    check_record_signature(record)
    return f"{node}: task signature and pinned image verified"


def check_links(executions: list[dict[str, Any]]) -> str:
    """Every input of every execution is an output of an earlier execution of the same process:
    previous state from the same organisation, inbox messages from their sender addressed to the
    consumer (round 1's initial state and the data commitments are external inputs)."""
    outs: dict[tuple[str, str], set[str]] = {}  # (producer, recipient or 'state') -> digests
    first: dict[str, int] = {}
    by_round = sorted((e for e in executions if e.get("result")), key=lambda e: e["round"])
    n = 0
    for e in by_round:
        first.setdefault(e["organisation"], e["round"])
    for rnd in sorted({e["round"] for e in by_round}):
        current = [e for e in by_round if e["round"] == rnd]
        for e in current:
            org, ins = e["organisation"], e["result"]["inputs"]
            node = execution_node_id(e["process_id"], rnd, org)
            if ins.get("state") and rnd > first[org] and ins["state"] not in outs.get((org, "state"), set()):
                raise ValueError(
                    f"{node}: input state {ins['state']} is not an earlier output state of {org}"
                )
            for m in ins.get("messages") or []:
                if m["digest"] not in outs.get((m["sender"], org), set()):
                    raise ValueError(
                        f"{node}: inbox message {m['digest']} from {m['sender']} was never "
                        f"published by {m['sender']} for {org}"
                    )
                n += 1
        for e in current:
            o = e["result"]["outputs"]
            outs.setdefault((e["organisation"], "state"), set()).add(o["state"])
            for m in o.get("messages") or []:
                outs.setdefault((e["organisation"], m["recipient"]), set()).add(m["digest"])
    return f"{len(by_round)} executions, {n} message links verified"


def check_lineage_complete(
    lineage: list[str], executions: dict[str, dict[str, Any]], indexed: set[str] | None = None
) -> str:
    """The lineage computed from the records is whole: every node is a record at hand, for every
    organisation in it the walk reaches the execution that started from the initial state
    (round 1), and (given) the index's lineage lists exactly the same executions."""
    missing = [n for n in lineage if n not in executions]
    if missing or not lineage:
        raise ValueError(
            f"the lineage names executions that are not records: {missing}"
            if missing
            else "the lineage is empty"
        )
    first: dict[str, str] = {}
    for n in lineage:
        org = executions[n]["organisation"]
        if org not in first or executions[n]["round"] < executions[first[org]]["round"]:
            first[org] = n
    short = sorted(
        n for n in first.values() if (executions[n].get("result") or {}).get("inputs", {}).get("state")
    )
    if short:
        raise ValueError(f"the lineage stops at {short}, which read a state no earlier execution produced")
    if indexed is not None and indexed != set(lineage):
        raise ValueError(
            f"the index's lineage lists {len(indexed)} executions, the records give {len(lineage)} "
            f"(missing {sorted(set(lineage) - indexed)[:5]}, extra {sorted(indexed - set(lineage))[:5]})"
        )
    return f"{len(lineage)} executions, each organisation back to its initial state"


def check_model(
    model: dict[str, Any],
    process: dict[str, Any],
    executions: list[dict[str, Any]],
    image: dict[str, Any] | None = None,
) -> str:
    """The model is the one its owner's last-round execution signed, from the pinned image."""
    if model["process_id"] != process["id"]:
        raise ValueError(f"model {model['id']} belongs to {model['process_id']}, not {process['id']}")
    last = [e for e in executions if e["organisation"] == model["owner"] and e["round"] == process["rounds"]]
    if not last or not last[0].get("result"):
        raise ValueError(f"no completed last-round execution of {model['owner']} for {process['id']}")
    produced = (last[0]["result"]["outputs"].get("model") or {}).get("digest")
    if produced != model["digest"]:
        raise ValueError(
            f"model digest {model['digest']} is not the digest {produced} signed by the "
            f"last-round execution of {model['owner']}"
        )
    if model.get("image_digest") and model["image_digest"] != process["image_digest"]:
        raise ValueError(
            f"model names image {model['image_digest']}, the process pins {process['image_digest']}"
        )
    if image is not None and image["digest"] != process["image_digest"]:
        raise ValueError(
            f"image {image['id']} has digest {image['digest']}, the process pinned {process['image_digest']}"
        )
    return f"model {model['digest']} produced by {model['owner']} in round {process['rounds']}"


def _strip(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k not in ("wrapped_key", "current_round")}


def transaction_block(client: ConsortiaClient, index: AuditIndex | None, tx_id: str) -> int | None:
    """Block number of a transaction: from the host when it can say, else from the index's events."""
    finder = getattr(client.ledger, "transaction_block", None)
    if finder is not None:
        hit = finder(tx_id)
        return None if hit is None else hit[0]
    if index is not None:
        rows = index._q("SELECT block FROM events WHERE tx_id = ? LIMIT 1", (tx_id,))
        return rows[0][0] if rows else None
    return None


def verify_model_on_ledger(client: ConsortiaClient, index: AuditIndex, model_id: str) -> Report:
    """Re-check a model's lineage against the ledger itself (not the index): records, signatures,
    pinned image, links between executions, the model digest, that every transaction is in a
    valid block -- and that the index's copy of each record is the ledger's."""
    report = Report(f"model:{model_id}")
    model = _strip(json.loads(client.ledger.evaluate(client.identity, "Model:get", model_id)))
    process = _strip(
        json.loads(client.ledger.evaluate(client.identity, "LearningProcess:get", model["process_id"]))
    )
    image = json.loads(client.ledger.evaluate(client.identity, "Image:get", process["image_id"]))
    executions = json.loads(
        client.ledger.evaluate(
            client.identity, "ExecutionRecord:query", json.dumps({"process_id": process["id"]})
        )
    )
    report.add(
        "index matches ledger: model",
        index.model(model_id) == model,
        "" if index.model(model_id) == model else "the index's model record differs from the ledger's",
    )
    lineage = index.lineage(model_id)
    on_ledger = {execution_node_id(e["process_id"], e["round"], e["organisation"]): e for e in executions}
    # the lineage is recomputed from the ledger's records: the index's answer is checked, not trusted
    wanted = sorted(
        record_lineage(executions, model["owner"], model.get("round") or process["rounds"]),
        key=lambda n: (int(n.rsplit("/", 2)[1]), n),
    )
    report.run(
        "lineage complete",
        check_lineage_complete,
        wanted,
        on_ledger,
        {n["id"] for n in (lineage or {}).get("nodes", [])},
    )
    for node in wanted:
        rec = on_ledger.get(node)
        if rec is None:
            report.add(
                f"execution {node} on ledger", False, "the index lists it, the ledger has no such record"
            )
            continue
        pid, rnd, org = node.rsplit("/", 2)
        same = index.execution(pid, int(rnd), org) == rec
        report.add(f"index matches ledger: {node}", same, "" if same else "the index's copy differs")
        report.run(f"execution {node}", check_execution, rec, process)
    report.run("lineage links", check_links, [on_ledger[n] for n in wanted if n in on_ledger])
    report.run("model", check_model, model, process, executions, image)
    txs = {model["tx_id"], process["tx_id"], image["tx_id"]}
    for node in wanted:
        if node in on_ledger:
            txs |= {
                on_ledger[node]["tx_id"],
                on_ledger[node].get("completed_tx_id") or on_ledger[node]["tx_id"],
            }
    bad = []
    for tx in sorted(txs):
        number = transaction_block(client, index, tx)
        if number is None:
            bad.append(f"{tx}: not found")
            continue
        info = client.ledger.block(client.identity, number)
        if tx not in info.tx_ids or info.validation_codes[info.tx_ids.index(tx)] != "VALID":
            bad.append(f"{tx}: not a valid transaction of block {number}")
    report.add("transactions in valid blocks", not bad, "; ".join(bad) or f"{len(txs)} transactions")
    return report
