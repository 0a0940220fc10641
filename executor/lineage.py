"""Verify the lineage of a final model from the ledger and the artifact stores
(seed 003 §IV-C "verifiable": every step signed, every artifact bound by its digest).

The lineage of organisation o's model is every execution record its model depends on: o's
record of the last round, and recursively, for a record (p, r), p's record of round r-1 (the
previous state it read) and the record (s, r-1) of every sender s of a message p read in round r.
For each record in the lineage, :func:`verify_model_lineage` re-checks, without trusting the agent
that wrote it:

* **signature** -- the ECDSA P-256 signature over the canonical JSON of the result verifies with
  the task public key registered in the record before the task ran;
* **identity** -- the result names the record's process, round, organisation and runtime;
* **image** -- the result's image digest equals the record's, the process's pinned digest and
  the Image record's digest (and, given a resolver, the digest of the local image);
* **chain** -- the previous-state digest equals the output state of (p, r-1) (``null`` in round 1);
  the input messages are exactly the messages the senders' signed results addressed to p in r-1,
  with the same digests;
* **history** -- the record was created once and completed once (``running -> completed``);
* **artifacts** -- the output state is in p's store, sealed to p; given p's key it opens to bytes
  with the signed digest (without it, only its presence is checked: a state is p's secret);
  every sealed message is in the sender's store, re-hashes, and (given the recipient's key)
  opens to bytes whose digest is the signed payload digest; the model is in the owner's store,
  sealed to the owner (opened and re-hashed given the owner's key), with the digest the Model
  record and the last signed result name, and its encrypted copy re-hashes.

The function only reads: it is what the gateway's ``audit verify`` calls.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from exchange import messages
from exchange.errors import ArtifactCorrupted, ArtifactError, ArtifactNotFound
from exchange.store import ArtifactStore, open_sealed_message
from executor.report import Check, Report
from executor.task_keys import TaskSignatureInvalid, check_record_signature
from ledger.client import ConsortiaClient
from ledger.errors import ContractError
from ledger.records import ExecutionRecord
from wire.canonical import sha256_digest


@dataclass
class LineageReport(Report):
    """The :class:`executor.report.Report` of one model's lineage, with the model's facts."""

    process_id: str = ""
    owner: str = ""
    model_digest: str = ""
    image_digest: str = ""
    records: list[tuple[str, int]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "process_id": self.process_id,
            "owner": self.owner,
            "model_digest": self.model_digest,
            "image_digest": self.image_digest,
            "ok": self.ok,
            "records": [list(r) for r in self.records],
            "checks": self.counts(),
            "failures": [c.__dict__ for c in self.failures],
        }


def _signature_valid(record: ExecutionRecord) -> tuple[bool, str]:
    """(ok, why) of :func:`executor.task_keys.check_record_signature` (the one signature check)."""
    try:
        check_record_signature(record)
        return True, ""
    except TaskSignatureInvalid as exc:
        return False, str(exc)


def verify_model_lineage(
    client: ConsortiaClient,
    process_id: str,
    owner: str,
    store_root: str | Path,
    recipient_keys: Mapping[str, Any] | None = None,
    local_image_digest: Callable[[str], str | None] | None = None,
    check_history: bool = True,
) -> LineageReport:
    """Verify organisation ``owner``'s final model of ``process_id`` and its whole lineage.

    ``client`` reads the ledger as a consortium member; ``store_root`` holds the organisations'
    artifact stores; ``recipient_keys`` (MSP id -> key-agreement private key) lets sealed messages
    be opened and their payload digests re-checked (without a key a sealed message is checked for
    integrity only); ``local_image_digest(reference)`` adds the local-image check."""
    store_root = Path(store_root)
    recipient_keys = recipient_keys or {}
    process = client.get_process(process_id)
    image = client.get_image(process.image_id)
    model = client.get_model(f"{process_id}:{owner}")
    rep = LineageReport(
        f"model:{process_id}:{owner}", [], process_id, owner, model.digest, process.image_digest
    )
    add = rep.checks.append

    # the image
    add(
        Check(
            "image",
            f"image {image.id}",
            image.digest == process.image_digest,
            f"image record {image.digest}, process pins {process.image_digest}",
        )
    )
    if local_image_digest is not None:
        local = local_image_digest(image.reference)
        add(
            Check(
                "image",
                f"local image {image.reference}",
                local == process.image_digest,
                f"local {local}, pinned {process.image_digest}",
            )
        )

    cache: dict[tuple[str, int], ExecutionRecord | None] = {}

    def record(org: str, rnd: int) -> ExecutionRecord | None:
        if (org, rnd) not in cache:
            try:
                cache[(org, rnd)] = client.get_execution(process_id, rnd, org)
            except ContractError:
                cache[(org, rnd)] = None
        return cache[(org, rnd)]

    # walk the lineage back from the owner's last record
    last = model.round or process.rounds
    todo = [(owner, last)]
    seen: set[tuple[str, int]] = set()
    while todo:
        org, rnd = todo.pop()
        if (org, rnd) in seen:
            continue
        seen.add((org, rnd))
        subj = f"{org} round {rnd}"
        rec = record(org, rnd)
        if rec is None or rec.status != "completed" or rec.result is None:
            add(Check("chain", subj, False, "no completed execution record"))
            continue
        res = rec.result
        ok, why = _signature_valid(rec)
        add(Check("signature", subj, ok, why))
        add(
            Check(
                "identity",
                subj,
                (res["process_id"], res["round"], res["organisation"], res["runtime"])
                == (process_id, rnd, org, rec.runtime),
                "result names another task",
            )
        )
        add(
            Check(
                "image",
                subj,
                res["image_digest"] == rec.image_digest == process.image_digest,
                f"result {res['image_digest']}, record {rec.image_digest}",
            )
        )
        if check_history:
            states = [h.value["status"] for h in client.execution_history(process_id, rnd, org) if h.value]
            add(Check("history", subj, states == ["running", "completed"], f"history {states}"))
        # chain: previous state
        ins = res["inputs"]
        if rnd == 1:
            add(Check("chain", subj, ins["state"] is None, "round 1 must start from init"))
        else:
            prev = record(org, rnd - 1)
            want = prev.result["outputs"]["state"] if prev and prev.result else None
            add(
                Check(
                    "chain",
                    subj + " state",
                    want is not None and ins["state"] == want,
                    f"read {ins['state']}, round {rnd - 1} wrote {want}",
                )
            )
            todo.append((org, rnd - 1))
            # chain: messages read == messages addressed to org in round r-1
            got = {m["sender"]: m["digest"] for m in ins["messages"]}
            sent: dict[str, str] = {}
            for s in process.consortium:
                if s == org:
                    continue
                srec = record(s, rnd - 1)
                for m in srec.result["outputs"]["messages"] if srec and srec.result else []:
                    if m["recipient"] == org:
                        sent[s] = m["digest"]
            add(
                Check(
                    "chain",
                    subj + " inbox",
                    got == sent,
                    f"read {sorted(got)} / sent {sorted(sent)}" if got != sent else "",
                )
            )
            for s in sent:
                todo.append((s, rnd - 1))
        # artifacts: state and messages
        store = ArtifactStore(store_root, org)
        add(
            _private_check(
                store, res["outputs"]["state"], recipient_keys.get(org), "artifact", subj + " state"
            )
        )
        for m in res["outputs"]["messages"]:
            msubj = f"{subj} message to {m['recipient']}"
            try:
                message = messages.locate(store, process_id, rnd, m["recipient"], m["digest"])
            except ArtifactError:
                add(Check("artifact", msubj, False, "sealed message not in the sender's store"))
                continue
            ref = message.stored
            try:
                sealed = store.get(ref.digest)
                key = recipient_keys.get(m["recipient"])
                if key is not None:
                    open_sealed_message(sealed, message, process_id=process_id, round=rnd, recipient_key=key)
                    add(Check("artifact", msubj, True, "opened; payload digest matches"))
                else:
                    add(
                        Check(
                            "artifact", msubj, sha256_digest(sealed) == ref.digest, "sealed; integrity only"
                        )
                    )
            except Exception as exc:  # any failure to fetch / open / match is a failed check
                add(Check("artifact", msubj, False, f"{type(exc).__name__}: {exc}"))

    rep.records = sorted(seen, key=lambda t: (t[1], t[0]))
    # the model
    lrec = record(owner, last)
    signed = (lrec.result["outputs"].get("model") or {}) if lrec and lrec.result else {}
    add(
        Check(
            "model",
            f"model {model.id}",
            signed.get("digest") == model.digest,
            f"signed {signed.get('digest')}, Model record {model.digest}",
        )
    )
    add(
        Check(
            "model",
            f"model {model.id} estimators",
            [list(e) for e in signed.get("estimators", [])] == [list(e) for e in model.estimators],
            "estimator ids differ between the signed result and the Model record",
        )
    )
    owner_store = ArtifactStore(store_root, model.owner)
    add(
        _private_check(
            owner_store, model.digest, recipient_keys.get(model.owner), "model", f"model {model.id} plaintext"
        )
    )
    try:
        owner_store.get(model.ciphertext_digest)
        add(Check("model", f"model {model.id} ciphertext", True))
    except Exception as exc:
        add(Check("model", f"model {model.id} ciphertext", False, f"{type(exc).__name__}: {exc}"))
    return rep


def _private_check(store: ArtifactStore, digest: str, owner_key: Any, kind: str, subject: str) -> Check:
    """A state or plaintext model is stored sealed to its owner: with the owner's key it is opened
    and re-hashed; without it only its presence can be checked (its bytes are not ours to read)."""
    try:
        if owner_key is None:
            ok = store.has_private(digest)
            return Check(
                kind,
                subject,
                ok,
                "sealed to its owner; present (contents checked with the owner's key only)"
                if ok
                else f"private artifact {digest} not in the store of {store.organisation}",
            )
        store.get_private(digest, owner_key)
        return Check(kind, subject, True, "opened with the owner's key; digest matches")
    except (ArtifactCorrupted, ArtifactNotFound, OSError, ValueError) as exc:
        return Check(kind, subject, False, f"{type(exc).__name__}: {exc}")
