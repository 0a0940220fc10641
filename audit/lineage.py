"""The one lineage rule of a model, and the checks of a lineage's records (seed 003 §IV-C
"verifiable": every step signed, every artifact bound by its digest).

Round r of a learning process reads exactly what round r-1 wrote (``exchange.rounds``):
organisation o's previous state (its own round r-1 output) and every message addressed to o in round
r-1. The rule links each input of the execution (o, r) to the execution whose *signed output*
produced that exact (digest, round):

* its previous state -> (o, r-1), whose signed output state has that digest;
* an inbox message from s -> (s, r-1), whose signed output lists a message to o with that digest;
* its data commitment is external (the organisation's own data); round 1 starts from no state and
  reads no message.

Anything else is a **broken link**: an input with no such producer (a replayed older state, a
message never sent in the round before, an input in round 1), a later round without a previous
state, and a message addressed to o in round r-1 that (o, r) did not read. Digests repeat across
rounds -- a SHARE round of collaborative RF outputs its input state again -- so a digest alone does
not name its producer: the round does.

The **lineage** of organisation o's model is every execution reached from o's last-round execution
by following the links backwards. The audit index shows it (:func:`model_lineage`, from its
artifact rows), and every verification recomputes it from the records (:func:`record_lineage`): the
gateway's and the node's (:mod:`audit.verification`) and the offline bundle's (:mod:`audit.bundles`).
The checks of a lineage's records (:func:`check_execution`, :func:`check_links`,
:func:`check_lineage_complete`, :func:`check_model`) take plain records, the canonical JSON the
contracts store.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from audit.report import Report
from audit.signatures import check_record_signature
from ledger.client import PrivateTerms

#: an artifact row of the walk: (round, organisation, direction, kind, peer, digest)
Row = tuple[int, str, str, str, str, str]

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


def execution_node_id(process_id: str, rnd: int, organisation: str) -> str:
    return f"{process_id}/{rnd}/{organisation}"


def node_round(node: str) -> int:
    """The round of an execution node id."""
    return int(node.rsplit("/", 2)[1])


def artifact_rows(record: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    """Every input and output digest of a completed execution record, as the index's ``artifacts``
    rows: (process, round, organisation, direction, kind, peer, digest, size)."""
    result = record.get("result") or {}
    if not result:
        return []
    pid, rnd, org = record["process_id"], record["round"], record["organisation"]
    rows: list[tuple[Any, ...]] = []
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


@dataclass
class Lineage:
    """The walk from ``root``: the executions reached (walk order), the links followed (``edges``
    ``{from, to, kind, digest}``), the external inputs (data commitments) and the broken links of
    the executions reached (``{to, kind, peer, digest, detail}``)."""

    root: str
    nodes: list[str] = field(default_factory=list)
    edges: list[dict[str, Any]] = field(default_factory=list)
    external: list[dict[str, Any]] = field(default_factory=list)
    broken: list[dict[str, Any]] = field(default_factory=list)


class Links:
    """The rule over the artifact rows of one process: who produced each input of an execution.
    Executions are keyed by (round, organisation) inside; node ids are made for the answers."""

    def __init__(self, process_id: str, rows: Iterable[Row]):
        self.process_id = process_id
        # (kind, producer, addressee, digest, round) of every signed output
        self.produced: set[tuple[str, str, str, str, int]] = set()
        # (addressee, round) -> {(sender, digest)} of the messages sent in that round
        self.sent: dict[tuple[str, int], set[tuple[str, str]]] = {}
        # (round, organisation) -> its inputs (kind, peer, digest); every execution with a result
        self.inputs: dict[tuple[int, str], list[tuple[str, str, str]]] = {}
        for r, o, direction, kind, peer, digest in rows:
            mine = self.inputs.setdefault((r, o), [])
            if direction == "out":
                if kind in ("state", "message"):
                    self.produced.add((kind, o, peer, digest, r))
                if kind == "message":
                    self.sent.setdefault((peer, r), set()).add((o, digest))
            else:
                mine.append((kind, peer, digest))

    def of(self, node: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
        """(edges into ``node``, its external inputs, its broken links) by the rule."""
        _, rnd, org = node.rsplit("/", 2)
        return self._of(int(rnd), org, node)

    def _of(
        self, rnd: int, org: str, node: str
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
        edges: list[dict[str, Any]] = []
        external: list[dict[str, Any]] = []
        broken: list[dict[str, Any]] = []
        inputs = self.inputs.get((rnd, org))
        if inputs is None:
            return edges, external, broken  # no signed result: nothing to link
        read: set[tuple[str, str]] = set()
        has_state = False
        for kind, peer, digest in inputs:
            if kind == "state":
                has_state, producer, addressee = True, org, org
            elif kind == "message":
                read.add((peer, digest))
                producer, addressee = peer, org
            else:
                external.append({"to": node, "kind": kind, "digest": digest})
                continue
            if (kind, producer, addressee, digest, rnd - 1) in self.produced:
                src = execution_node_id(self.process_id, rnd - 1, producer)
                edges.append({"from": src, "to": node, "kind": kind, "digest": digest})
            else:
                what = "previous state" if kind == "state" else f"message from {peer}"
                broken.append(
                    {
                        "to": node,
                        "kind": kind,
                        "peer": producer,
                        "digest": digest,
                        "detail": f"{node} read {what} {digest}, which {producer} did not output "
                        + (f"in round {rnd - 1}" if rnd > 1 else "(round 1 starts from no input)"),
                    }
                )
        if rnd > 1 and not has_state:
            broken.append(
                {
                    "to": node,
                    "kind": "state",
                    "peer": org,
                    "digest": None,
                    "detail": f"{node} read no previous state (round {rnd} starts from round {rnd - 1}'s)",
                }
            )
        unread = self.sent.get((org, rnd - 1), set()) - read if rnd > 1 else set()
        for sender, digest in sorted(unread):
            broken.append(
                {
                    "to": node,
                    "kind": "message",
                    "peer": sender,
                    "digest": digest,
                    "detail": f"{node} did not read the message {digest} {sender} sent it in round {rnd - 1}",
                }
            )
        return edges, external, broken

    def walk(self, start: str) -> Lineage:
        """The lineage of ``start``: breadth-first along the edges, backwards in rounds."""
        lin = Lineage(start)
        _, rnd, org = start.rsplit("/", 2)
        seen = {(int(rnd), org)}
        todo = deque([(int(rnd), org, start)])
        while todo:
            r, o, node = todo.popleft()
            lin.nodes.append(node)
            edges, external, broken = self._of(r, o, node)
            lin.edges += edges
            lin.external += external
            lin.broken += broken
            for e in edges:
                producer = (r - 1, e["from"].rsplit("/", 1)[1])
                if producer not in seen:
                    seen.add(producer)
                    todo.append((*producer, e["from"]))
        return lin


def walk_lineage(process_id: str, rows: Iterable[Row], start: str) -> Lineage:
    """The lineage of the execution ``start`` over the artifact rows (round, organisation,
    direction, kind, peer, digest) of its process."""
    return Links(process_id, rows).walk(start)


def _rows(executions: Iterable[Mapping[str, Any]]) -> list[Row]:
    return [(r[1], r[2], r[3], r[4], r[5], r[6]) for e in executions for r in artifact_rows(e)]


def record_lineage(process_id: str, executions: Iterable[Mapping[str, Any]], owner: str, rnd: int) -> Lineage:
    """The lineage of ``owner``'s round-``rnd`` execution, computed from execution records
    themselves (the ledger's or a bundle's)."""
    return walk_lineage(process_id, _rows(executions), execution_node_id(process_id, rnd, owner))


def model_lineage(
    model: Mapping[str, Any],
    process: Mapping[str, Any] | None,
    executions: Iterable[tuple[Any, ...]],
    artifacts: Iterable[Row],
) -> dict[str, Any]:
    """The lineage of ``model`` as the audit index serves it, from its process's execution rows
    (:data:`LINEAGE_NODE_COLUMNS`) and artifact rows: the nodes in (round, organisation) order, the
    edges, the external inputs and the broken links."""
    pid = model["process_id"]
    info = {}
    for row in executions:
        node = dict(zip(LINEAGE_NODE_COLUMNS, row))
        node_id = execution_node_id(pid, node["round"], node["organisation"])
        info[node_id] = {"id": node_id, "process_id": pid, **node}
    rnd = model.get("round") or (process or {}).get("rounds") or 0
    lin = walk_lineage(pid, artifacts, execution_node_id(pid, rnd, model["owner"]))
    nodes = sorted((info[n] for n in lin.nodes if n in info), key=lambda n: (n["round"], n["organisation"]))
    return {
        "model": model,
        "process": process,
        "image_digest": model.get("image_digest", ""),
        "root": lin.root,
        "nodes": nodes,
        "edges": lin.edges,
        "external_inputs": lin.external,
        "broken_links": lin.broken,
    }


# ---------------------------------------------------------------------------- checks of records


def check_execution(record: Mapping[str, Any], process: Mapping[str, Any]) -> str:
    """A completed execution record: its result names the record's process, round, organisation and
    runtime; result, record and process pin the same image; its task signature holds."""
    node = execution_node_id(record["process_id"], record["round"], record["organisation"])
    if record.get("status") != "completed":
        raise ValueError(f"execution {node} is {record.get('status')}, not completed")
    result = record["result"]
    for f in ("process_id", "round", "organisation", "runtime"):
        if result.get(f) != record[f]:
            raise ValueError(f"execution {node}: result.{f} = {result.get(f)!r} differs from the record")
    if record["process_id"] != process["id"]:
        raise ValueError(f"execution {node} is not of process {process['id']}")
    if result["image_digest"] != process["image_digest"] or record["image_digest"] != process["image_digest"]:
        raise ValueError(
            f"execution {node} ran image {result['image_digest']} (record {record['image_digest']}), "
            f"the process pins {process['image_digest']}"
        )
    check_record_signature(record)
    return f"{node}: task signature and pinned image verified"


def check_links(executions: Iterable[Mapping[str, Any]]) -> str:
    """Every completed execution of a process is linked by the rule (module docstring) to what the
    round before signed: each input produced there, each message sent to it read."""
    done = [e for e in executions if e.get("result")]
    if not done:
        raise ValueError("no completed execution to link")
    links = Links(done[0]["process_id"], _rows(done))
    broken, edges = [], 0
    for e in done:
        into, _, bad = links.of(execution_node_id(e["process_id"], e["round"], e["organisation"]))
        edges += len(into)
        broken += bad
    if broken:
        shown = "; ".join(b["detail"] for b in broken[:5])
        raise ValueError(f"{len(broken)} broken link(s): {shown}" + (" …" if len(broken) > 5 else ""))
    return f"{len(done)} executions, {edges} links to the round before verified"


def check_lineage_complete(
    lineage: Lineage, executions: Mapping[str, Mapping[str, Any]], indexed: set[str] | None = None
) -> str:
    """The lineage computed from the records is whole: every node is a completed record at hand,
    every organisation in it is followed back to its round-1 execution, and (given) the index's
    lineage lists exactly the same executions."""
    missing = [n for n in lineage.nodes if not (executions.get(n) or {}).get("result")]
    if missing or not lineage.nodes:
        raise ValueError(
            f"the lineage names executions that are not completed records: {missing}"
            if missing
            else "the lineage is empty"
        )
    first: dict[str, int] = {}
    for n in lineage.nodes:
        org, rnd = executions[n]["organisation"], executions[n]["round"]
        first[org] = min(first.get(org, rnd), rnd)
    short = sorted(f"{org} (round {rnd})" for org, rnd in first.items() if rnd != 1)
    if short:
        raise ValueError(f"the lineage stops before round 1 for {', '.join(short)}")
    if indexed is not None and indexed != set(lineage.nodes):
        missing, extra = sorted(set(lineage.nodes) - indexed), sorted(indexed - set(lineage.nodes))
        raise ValueError(
            f"the index's lineage lists {len(indexed)} executions, the records give {len(lineage.nodes)} "
            f"(missing {missing[:5]}, extra {extra[:5]})"
        )
    return f"{len(lineage.nodes)} executions, each organisation back to round 1"


def check_model(
    model: Mapping[str, Any],
    process: Mapping[str, Any],
    executions: Iterable[Mapping[str, Any]],
    image: Mapping[str, Any] | None = None,
) -> str:
    """The model is the one its owner's last-round execution signed (digest and estimator list),
    from the image the process pins (and the Image record has that digest)."""
    if model["process_id"] != process["id"]:
        raise ValueError(f"model {model['id']} belongs to {model['process_id']}, not {process['id']}")
    last_round = process["rounds"]
    if model.get("round", last_round) != last_round:
        raise ValueError(
            f"model {model['id']} names round {model.get('round')}, the process has {last_round}"
        )
    last = [e for e in executions if e["organisation"] == model["owner"] and e["round"] == last_round]
    if not last or not last[0].get("result"):
        raise ValueError(f"no completed last-round execution of {model['owner']} for {process['id']}")
    signed = last[0]["result"]["outputs"].get("model") or {}
    if signed.get("digest") != model["digest"]:
        raise ValueError(
            f"model digest {model['digest']} is not the digest {signed.get('digest')} signed by the "
            f"last-round execution of {model['owner']}"
        )
    if list(signed.get("estimators") or []) != list(model.get("estimators") or []):
        raise ValueError(
            f"model {model['id']}: the estimator list differs from the one its last-round execution signed"
        )
    if model.get("image_digest") and model["image_digest"] != process["image_digest"]:
        raise ValueError(
            f"model names image {model['image_digest']}, the process pins {process['image_digest']}"
        )
    if image is not None and image["digest"] != process["image_digest"]:
        raise ValueError(
            f"image {image['id']} has digest {image['digest']}, the process pinned {process['image_digest']}"
        )
    return f"model {model['digest']} produced by {model['owner']} in round {last_round}"


def check_lineage(
    report: Report,
    model: Mapping[str, Any],
    process: Mapping[str, Any],
    image: Mapping[str, Any] | None,
    executions: list[Mapping[str, Any]],
    indexed: set[str] | None = None,
) -> Lineage:
    """Add to ``report`` the checks every model audit shares --
    the lineage is whole, every execution is linked by the rule, the model is the one signed --
    and return the lineage recomputed from ``executions`` (every record of the process)."""
    by_node = {execution_node_id(e["process_id"], e["round"], e["organisation"]): e for e in executions}
    lineage = record_lineage(process["id"], executions, model["owner"], process["rounds"])
    report.run("lineage complete", check_lineage_complete, lineage, by_node, indexed, kind="lineage")
    report.run("lineage links", check_links, executions, kind="chain")
    report.run("model", check_model, model, process, executions, image, kind="model")
    report.run("private terms", check_private_terms, process, kind="process")
    return lineage


def check_private_terms(process: Mapping[str, Any]) -> str:
    """The process's private terms (hyper-parameters, privacy budget, description and salt), when the record
    carries them -- a member's read, or a bundle a member exported -- hash to the ``private_sha256``
    that the chain records (docs/confidentiality.md); ValueError if they do not."""
    digest = process.get("private_sha256")
    if digest is None:
        return "recorded in clear on the chain (a process created before terms were private)"
    if process.get("private_purged") is not None:
        return f"purged on {process['private_purged']}, hash-attested: {digest}"
    if process.get("private_salt") is None:
        return f"not carried: only the chain's hash {digest}"
    terms = {
        "hyperparameters": process.get("hyperparameters", {}),
        "privacy_budget": process.get("privacy_budget"),
        "salt": process["private_salt"],
    }
    if process.get("description_private"):  # terms recorded since the description is private
        terms["description"] = process.get("description", "")
    got = PrivateTerms.model_validate(terms).digest()
    if got != digest:
        raise ValueError(
            f"the private terms of learning process {process['id']} hash to {got}, "
            f"but the chain records {digest}"
        )
    return f"private terms carried, matching the on-chain hash {digest}"
