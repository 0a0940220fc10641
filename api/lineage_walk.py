"""The lineage walk of a model (docs/api.md "Audit index"): which executions a model descends from,
linked by the exact (digest, round) each input consumed. Used by the audit index
(:meth:`api.index.AuditIndex.lineage`), by the verification against the ledger
(:mod:`api.verification`) and by the offline audit bundle (:mod:`api.bundle`), so the three walk a
lineage by one rule."""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Iterable
from typing import Any


def execution_node_id(process_id: str, rnd: int, organisation: str) -> str:
    return f"{process_id}/{rnd}/{organisation}"


def artifact_rows(record: dict[str, Any]) -> list[tuple]:
    """Every input and output digest of a completed execution record, as ``artifacts`` rows."""
    result = record.get("result") or {}
    if not result:
        return []
    pid, rnd, org = record["process_id"], record["round"], record["organisation"]
    rows: list[tuple] = []
    inputs, outputs = result.get("inputs") or {}, result.get("outputs") or {}
    if inputs.get("state"):
        rows.append((pid, rnd, org, "in", "state", org, inputs["state"], None))
    if inputs.get("data_commitment"):
        rows.append((pid, rnd, org, "in", "data_commitment", org, inputs["data_commitment"], None))
    for m in inputs.get("messages") or []:
        rows.append((pid, rnd, org, "in", "message", m["sender"], m["digest"], None))
    if outputs.get("state"):
        rows.append((pid, rnd, org, "out", "state", org, outputs["state"], None))
    for m in outputs.get("messages") or []:
        rows.append((pid, rnd, org, "out", "message", m["recipient"], m["digest"], m.get("size")))
    model = outputs.get("model")
    if model:
        rows.append((pid, rnd, org, "out", "model", org, model["digest"], model.get("size")))
    return rows


def walk_lineage(
    process_id: str, artifact_rows: Iterable[tuple[int, str, str, str, str, str]], start: str
) -> tuple[list[str], list[dict[str, Any]], list[dict[str, Any]]]:
    """Walk a lineage backwards from the execution ``start`` over ``artifact_rows`` (round,
    organisation, direction, kind, peer, digest) of one process. Returns (node ids in walk order,
    edges, external inputs).

    Each input is linked to the producer of the exact (digest, round) it consumed: an input of
    round r comes from an *earlier* round -- the previous state from the same organisation, a
    message from its sender addressed to the consumer -- and of the executions that output that
    digest, the latest round before r. Digests repeat across rounds (a round that leaves the
    state unchanged outputs its input again), so a digest alone does not name its producer: keyed
    by digest only, a round would be recorded as producing its own input and the walk would stop
    short of round 1."""
    # (kind, producing organisation, addressee, digest) -> rounds that output it, ascending
    produced: dict[tuple[str, str, str, str], list[int]] = {}
    inputs: dict[str, list[tuple[int, str, str, str, str]]] = {}
    for r, o, direction, kind, peer, digest in artifact_rows:
        if direction == "out":
            if kind in ("state", "message"):
                produced.setdefault((kind, o, peer, digest), []).append(r)
        else:
            inputs.setdefault(execution_node_id(process_id, r, o), []).append((r, o, kind, peer, digest))
    for rounds in produced.values():
        rounds.sort()

    def producer_of(rnd: int, org: str, kind: str, peer: str, digest: str) -> str | None:
        if kind == "state":
            key = ("state", org, org, digest)  # its own previous state
        elif kind == "message":
            key = ("message", peer, org, digest)  # sent by ``peer`` to ``org``
        else:
            return None  # data commitments come from outside
        rounds = produced.get(key, ())
        i = bisect.bisect_left(rounds, rnd)  # rounds strictly before the consumer's
        return execution_node_id(process_id, rounds[i - 1], key[1]) if i > 0 else None

    order, edges, external = [], [], []
    seen, todo = {start}, deque([start])
    while todo:
        node = todo.popleft()
        order.append(node)
        for rnd, org, kind, peer, digest in inputs.get(node, ()):
            src = producer_of(rnd, org, kind, peer, digest)
            if src is None:
                external.append({"to": node, "kind": kind, "digest": digest})
                continue
            edges.append({"from": src, "to": node, "kind": kind, "digest": digest})
            if src not in seen:
                seen.add(src)
                todo.append(src)
    return order, edges, external


def record_lineage(executions: Iterable[dict[str, Any]], owner: str, rnd: int) -> list[str]:
    """The lineage (node ids, walk order) of ``owner``'s round-``rnd`` execution, computed from
    execution records themselves (the ledger's or a bundle's) by the index's own rule."""
    execs = list(executions)
    if not execs:
        return []
    rows = [row[1:7] for e in execs for row in artifact_rows(e)]
    return walk_lineage(execs[0]["process_id"], rows, execution_node_id(execs[0]["process_id"], rnd, owner))[
        0
    ]


#: the columns of an execution a lineage node shows (the index's covering index holds them all)
LINEAGE_NODE_COLUMNS = (
    "round",
    "organisation",
    "status",
    "image_digest",
    "tx_id",
    "completed_tx_id",
    "block",
)


def model_lineage(
    model: dict[str, Any],
    process: dict[str, Any] | None,
    executions: Iterable[tuple],
    artifacts: Iterable[tuple[int, str, str, str, str, str]],
) -> dict[str, Any]:
    """The lineage of ``model`` (see :meth:`api.index.AuditIndex.lineage`) from its process's
    execution rows (:data:`LINEAGE_NODE_COLUMNS`) and artifact rows: the nodes in (round,
    organisation) order, the edges and the external inputs of :func:`walk_lineage`."""
    pid = model["process_id"]
    info = {}
    for row in executions:
        node = dict(zip(LINEAGE_NODE_COLUMNS, row))
        node_id = execution_node_id(pid, node["round"], node["organisation"])
        info[node_id] = {"id": node_id, "process_id": pid, **node}
    start = execution_node_id(pid, model["round"], model["owner"])
    order, edges, external = walk_lineage(pid, artifacts, start)
    nodes = sorted((info[n] for n in order if n in info), key=lambda n: (n["round"], n["organisation"]))
    return {
        "model": model,
        "process": process,
        "image_digest": model.get("image_digest", ""),
        "root": start,
        "nodes": nodes,
        "edges": edges,
        "external_inputs": external,
    }
