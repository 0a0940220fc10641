"""The checks of a lineage's artifacts in the organisations' stores (docs/audited-process.md
"Lineage verification"): what the signed records name is there and has the signed digest.

* an execution's output **state** is in its organisation's store, sealed to it: given that
  organisation's key it opens to bytes with the signed digest; without it only its presence is
  checked (a state is the organisation's secret);
* every output **message** is in the sender's store, indexed for its recipient, and re-hashes; given
  the recipient's key it opens (AEAD bound to process, round, sender and recipient) to bytes whose
  digest is the signed payload digest;
* the **model** is in its owner's store sealed to the owner (opened and re-hashed given the owner's
  key), and its encrypted copy (the Model record's ciphertext digest) re-hashes.

``store_root`` holds the organisations' stores (``<root>/<msp id>``); the checks only read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from audit.lineage import execution_node_id
from audit.report import Check, Report
from exchange import messages
from exchange.errors import ArtifactError, ExchangeError
from exchange.store import ArtifactStore, open_sealed_message
from wire.canonical import sha256_digest

#: what fetching, opening or matching an artifact may raise; each is a failed check
ARTIFACT_ERRORS: tuple[type[BaseException], ...] = (ExchangeError, OSError, ValueError)


def _store(store_root: Path, organisation: str) -> ArtifactStore:
    return ArtifactStore(store_root, organisation, create=False)


def private_check(store: ArtifactStore, digest: str, owner_key: Any, kind: str, subject: str) -> Check:
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
    except (ArtifactError, OSError, ValueError) as exc:
        return Check(kind, subject, False, f"{type(exc).__name__}: {exc}")


def message_check(
    store_root: Path, record: Mapping[str, Any], message: Mapping[str, Any], recipient_key: Any
) -> Check:
    """One output message of an execution record, in the sender's store."""
    pid, rnd, org = record["process_id"], record["round"], record["organisation"]
    subject = f"message {execution_node_id(pid, rnd, org)} to {message['recipient']}"
    sender = _store(store_root, org)
    try:
        ref = messages.locate(sender, pid, rnd, message["recipient"], message["digest"])
    except ArtifactError as exc:
        return Check("artifact", subject, False, f"sealed message not in the sender's store: {exc}")
    try:
        sealed = sender.get(ref.stored.digest)  # re-hashed by the store
        if recipient_key is None:
            return Check(
                "artifact", subject, sha256_digest(sealed) == ref.stored.digest, "sealed; integrity only"
            )
        open_sealed_message(sealed, ref, process_id=pid, round=rnd, recipient_key=recipient_key)
        return Check("artifact", subject, True, "opened; payload digest matches")
    except ARTIFACT_ERRORS as exc:
        return Check("artifact", subject, False, f"{type(exc).__name__}: {exc}")


def check_artifacts(
    report: Report,
    records: Iterable[Mapping[str, Any]],
    model: Mapping[str, Any],
    store_root: str | Path,
    recipient_keys: Mapping[str, Any],
) -> None:
    """Add the artifact checks of the lineage's ``records`` and of ``model`` to ``report``
    (``recipient_keys``: MSP id -> key-agreement private key, for the organisations whose sealed
    artifacts may be opened)."""
    root = Path(store_root)
    for rec in records:
        outputs = rec["result"]["outputs"]
        node = execution_node_id(rec["process_id"], rec["round"], rec["organisation"])
        report.checks.append(
            private_check(
                _store(root, rec["organisation"]),
                outputs["state"],
                recipient_keys.get(rec["organisation"]),
                "artifact",
                f"state of {node}",
            )
        )
        for m in outputs.get("messages") or []:
            report.checks.append(message_check(root, rec, m, recipient_keys.get(m["recipient"])))
    owner = _store(root, model["owner"])
    report.checks.append(
        private_check(
            owner,
            model["digest"],
            recipient_keys.get(model["owner"]),
            "model",
            f"model {model['id']} plaintext",
        )
    )
    try:
        owner.get(model["ciphertext_digest"])  # re-hashed by the store
        report.add(f"model {model['id']} ciphertext", True, "in the owner's store; digest matches", "model")
    except ARTIFACT_ERRORS as exc:
        report.add(f"model {model['id']} ciphertext", False, f"{type(exc).__name__}: {exc}", "model")
