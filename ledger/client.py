"""The typed client: the four journeys' ledger operations over any :class:`Ledger` host.

``ConsortiaClient(ledger, identity)`` acts for one identity; its methods read like the seed's
description of each contract and return the records the contracts store and answer, typed once in
:mod:`chaincode.records`. This module is the client's public surface: it exports those record types
too (``__all__``), so that the packages above the ledger use them without importing the chaincode.
"""

from __future__ import annotations

import base64
import json
import secrets
from collections.abc import Iterator, Sequence
from typing import Any, TypeVar, overload

from cryptography.hazmat.primitives.asymmetric import ec
from pydantic import TypeAdapter, ValidationError

from chaincode.canonical import canonical_json
from chaincode.privacy import privacy_status
from chaincode.records import (
    MODEL_PRIVATE,
    NEXT_MODEL_PRIVATE,
    PREVIOUS_EXECUTION_PRIVATE,
    PRIVATE_TERMS,
    RESULT_CONFIDENTIAL,
    DisclosedRecords,
    DisclosureRecord,
    ExecutionRecord,
    ExecutionResult,
    HistoryEntry,
    HistoryPage,
    ImageApproval,
    ImageRecord,
    InboxEntry,
    InputMessage,
    MemberGain,
    MemberRecord,
    ModelOutput,
    ModelPrivate,
    ModelRecord,
    OutputMessage,
    PrivacyBudget,
    PrivacyCharge,
    PrivateTerms,
    ProcessAcceptance,
    ProcessEndorsement,
    ProcessPrivacy,
    ProcessProgress,
    ProcessRecord,
    Record,
    ResultConfidential,
    ResultInputs,
    ResultOutputs,
    signed_result,
    split_result,
)
from ledger.errors import ContractError, Forbidden, PrivateDataMismatch
from ledger.identity import Identity, public_key_pem
from ledger.interface import Ledger, SubmitResult
from ledger.rules import DEFAULT_HISTORY_PAGE

__all__ = [
    "DisclosedRecords",
    "DisclosureRecord",
    "ConsortiaClient",
    "ExecutionRecord",
    "ExecutionResult",
    "HistoryEntry",
    "HistoryPage",
    "ImageApproval",
    "ImageRecord",
    "InboxEntry",
    "InputMessage",
    "MemberGain",
    "MemberRecord",
    "ModelOutput",
    "ModelRecord",
    "OutputMessage",
    "PrivacyBudget",
    "PrivacyCharge",
    "PrivateTerms",
    "ProcessAcceptance",
    "ProcessEndorsement",
    "ProcessPrivacy",
    "ProcessProgress",
    "ProcessRecord",
    "Record",
    "ResultInputs",
    "ResultConfidential",
    "ResultOutputs",
    "privacy_status",
    "signed_result",
    "split_result",
]

_HISTORY = TypeAdapter(list[HistoryEntry])
_IMAGES = TypeAdapter(list[ImageRecord])
_PROCESSES = TypeAdapter(list[ProcessRecord])
_ACCEPTANCES = TypeAdapter(list[ProcessAcceptance])
_EXECUTIONS = TypeAdapter(list[ExecutionRecord])
_INBOX = TypeAdapter(list[InboxEntry])
_MODELS = TypeAdapter(list[ModelRecord])
_MEMBERS = TypeAdapter(list[MemberRecord])
_DISCLOSURES = TypeAdapter(list[DisclosureRecord])


_R = TypeVar("_R", bound=Record)


def _records(adapter: TypeAdapter[list[_R]], raw: bytes) -> list[_R]:
    """A JSON array of records, parsed and validated in one pass (as :meth:`Record.from_json`)."""
    try:
        return adapter.validate_json(raw)
    except ValidationError:  # nested deeper than pydantic-core's parser goes
        return adapter.validate_python(json.loads(raw))


def _history(raw: bytes) -> list[HistoryEntry]:
    return _records(_HISTORY, raw)


def _checked_execution(record: ExecutionRecord) -> ExecutionRecord:
    """``record`` after checking its joined private part against its on-chain ``private_sha256`` (the
    peer that answered is not trusted with it); a record without a joined part as it is."""
    if record.confidential_salt is not None and record.private_part().digest() != record.private_sha256:
        raise PrivateDataMismatch(
            f"the private part of the execution record of {record.organisation} for round {record.round} of "
            f"{record.process_id} as answered does not match the on-chain hash {record.private_sha256}",
            process_id=record.process_id,
        )
    return record


def private_terms_transient(
    hyperparameters: dict[str, Any],
    privacy_budget: dict[str, Any] | None,
    salt: str | None = None,
    description: str = "",
) -> dict[str, bytes]:
    """The transient map of ``LearningProcess:create``: the process's private part (hyper-parameters,
    budget, description) with ``salt`` (None: 32 fresh random bytes, hex). Without a salt, a non-member could find a low-entropy value
    (``{"lr": 0.05}``) from its on-chain SHA-256 by hashing candidates (docs/confidentiality.md)."""
    private: dict[str, Any] = {
        "hyperparameters": hyperparameters,
        "description": description,
        "salt": salt or secrets.token_hex(32),
    }
    if privacy_budget is not None:
        private["privacy_budget"] = privacy_budget
    return {PRIVATE_TERMS: canonical_json(private)}


def process_transient(process: ProcessRecord) -> dict[str, bytes] | None:
    """The transient map that gives a transaction endorsed by several members ``process``'s private
    part, from a member's read (None for a process recorded before its terms were private)."""
    if process.private_sha256 is None:
        return None
    return {PRIVATE_TERMS: process.private_terms().canonical()}


def _model_joined(record: ModelRecord, part: ModelPrivate | None) -> ModelRecord:
    """The public record a model transaction answers (the answer is in the block) with the private
    part the client sent joined, once it hashes to the record's ``private_sha256``."""
    if part is None or record.private_sha256 is None:
        return record
    if part.digest() != record.private_sha256:
        raise PrivateDataMismatch(
            f"the private part sent for model {record.id} does not match its on-chain hash {record.private_sha256}",
            process_id=record.process_id,
        )
    return record.joined(part)


def creation_endorsers(consortium: Sequence[str], co_endorsers: Sequence[str] = ()) -> list[str] | None:
    """Who endorses a process's creation (or the purge of its private terms): every member, whose peer
    keeps its own copy of the private part (its implicit collection's policy), and ``co_endorsers``,
    organisations outside the consortium trusted with the private terms: a one-member process needs one
    on Fabric, where the chaincode's policy asks for two organisations and the Gateway sends transient
    data only to organisations it is told to trust. None (the host chooses) for a lone organisation."""
    orgs = list(consortium) + [o for o in co_endorsers if o not in consortium]
    return orgs if len(orgs) > 1 else None


class ConsortiaClient:
    def __init__(self, ledger: Ledger, identity: Identity):
        self.ledger = ledger
        self.identity = identity

    @property
    def organisation(self) -> str:
        return self.identity.msp_id

    def _submit(self, function: str, *args: str, **kw: Any) -> bytes:
        res: SubmitResult = self.ledger.submit(self.identity, function, *args, **kw)
        return res.result

    def _evaluate(self, function: str, *args: str) -> bytes:
        return self.ledger.evaluate(self.identity, function, *args)

    # ---- history pages (every contract's ``history``; newest first, docs/ledger.md "History reads")
    def history_page(
        self, function: str, *key: str, limit: int | None = None, after: str | None = None
    ) -> HistoryPage:
        """One page of ``function``'s history (e.g. ``"Model:history", model_id``): at most ``limit``
        versions (default :data:`~chaincode.limits.DEFAULT_HISTORY_PAGE`), newest first, older
        than the version whose bookmark is ``after`` (``None``: from the newest)."""
        size = str(DEFAULT_HISTORY_PAGE if limit is None else limit)
        return HistoryPage.from_json(self._evaluate(function, *key, size, after or ""))

    def history_pages(self, function: str, *key: str, limit: int | None = None) -> Iterator[HistoryPage]:
        """Every page of ``function``'s history, newest first, each read when the previous one has
        been consumed (stop iterating to stop reading)."""
        after: str | None = None
        while True:
            page = self.history_page(function, *key, limit=limit, after=after)
            yield page
            if page.next is None:
                return
            after = page.next

    # ---- images
    def register_image(
        self,
        name: str,
        version: str,
        algorithm: str,
        digest: str,
        reference: str = "",
        image_id: str | None = None,
        description: str = "",
    ) -> ImageRecord:
        spec = {
            "name": name,
            "version": version,
            "algorithm": algorithm,
            "digest": digest,
            "reference": reference,
            "description": description,
        }
        if image_id:
            spec["id"] = image_id
        return ImageRecord.from_json(self._submit("Image:register", json.dumps(spec)))

    def get_image(self, image_id: str) -> ImageRecord:
        return ImageRecord.from_json(self._evaluate("Image:get", image_id))

    def list_images(self) -> list[ImageRecord]:
        return _records(_IMAGES, self._evaluate("Image:list"))

    def revoke_image(self, image_id: str, reason: str = "") -> ImageRecord:
        return ImageRecord.from_json(self._submit("Image:revoke", image_id, reason))

    def approve_image(
        self,
        image_id: str,
        digest: str,
        *,
        datasets: Sequence[str] | None = None,
        expires: str | None = None,
    ) -> ImageApproval:
        """This organisation approves the image at ``digest`` for use on its data (only on
        ``datasets`` if given, until ``expires`` if given; docs/consent.md). Needs a consent role."""
        options: dict[str, Any] = {}
        if datasets is not None:
            options["datasets"] = list(datasets)
        if expires is not None:
            options["expires"] = expires
        args = (image_id, digest, json.dumps(options)) if options else (image_id, digest)
        return ImageApproval.from_json(self._submit("Image:approve", *args))

    def revoke_image_approval(self, image_id: str, reason: str = "") -> ImageApproval:
        """This organisation withdraws its approval of the image (no new task of its may run it)."""
        return ImageApproval.from_json(self._submit("Image:revoke_approval", image_id, reason))

    def image_history(self, image_id: str) -> list[HistoryEntry]:
        return _history(self.ledger.evaluate(self.identity, "Image:history", image_id))

    # ---- learning processes
    def create_process(
        self,
        process_id: str,
        image_id: str,
        consortium: Sequence[str],
        topology: dict[str, Any],
        rounds: int,
        hyperparameters: dict[str, Any] | None = None,
        privacy_budget: dict[str, Any] | None = None,
        dataset: str = "",
        image_digest: str | None = None,
        description: str = "",
        validation_fraction: float | None = None,
        co_endorsers: Sequence[str] = (),
    ) -> ProcessRecord:
        """Create a process; ``validation_fraction`` (None: not declared, no slice) is the share of its rows
        each member holds out to measure what collaboration bought it (docs/models.md). The
        hyper-parameters, the privacy budget and the description are private (docs/confidentiality.md): they travel in
        the transient map with a fresh salt, and every member's peer endorses (each keeps its own
        copy), with ``co_endorsers`` (:func:`creation_endorsers`). Returns the process as this member
        reads it (private part joined)."""
        spec: dict[str, Any] = {
            "id": process_id,
            "image_id": image_id,
            "consortium": list(consortium),
            "topology": topology,
            "rounds": rounds,
            "dataset": dataset,
        }
        if image_digest is not None:
            spec["image_digest"] = image_digest
        if validation_fraction is not None:
            spec["validation_fraction"] = validation_fraction
        self._submit(
            "LearningProcess:create",
            json.dumps(spec),
            transient=private_terms_transient(hyperparameters or {}, privacy_budget, description=description),
            endorsing_organisations=creation_endorsers(consortium, co_endorsers),
        )
        return self.get_process(process_id)

    def _with_terms(self, answer: bytes) -> ProcessRecord:
        """A transaction's answer is the public record (the answer is part of the block): with this
        member's private terms joined from its own read, as ``get_process`` answers."""
        public = ProcessRecord.from_json(answer)
        if public.private_sha256 is None or public.private_purged is not None:
            return public
        read = self.get_process(public.id)
        return public.view(
            hyperparameters=read.hyperparameters,
            privacy_budget=read.privacy_budget,
            private_salt=read.private_salt,
            description=read.description,
            description_private=read.description_private,
        )

    def get_process(self, process_id: str) -> ProcessRecord:
        """The process with this member's copy of its private terms joined, checked here too against
        the on-chain hash (the peer that answered is not trusted with it)."""
        process = ProcessRecord.from_json(self._evaluate("LearningProcess:get", process_id))
        if process.private_salt is not None and process.private_terms().digest() != process.private_sha256:
            raise PrivateDataMismatch(
                f"the private terms of learning process {process_id} as answered do not match the on-chain "
                f"hash {process.private_sha256}",
                process_id=process_id,
            )
        return process

    def process_progress(self, process_id: str) -> ProcessProgress:
        """Status, current round and who completed it so far, without reading the records."""
        return ProcessProgress.from_json(self._evaluate("LearningProcess:progress", process_id))

    def process_endorsement(self, process_id: str) -> ProcessEndorsement:
        """Who endorses the process's records: its key-level policy as committed."""
        return ProcessEndorsement.from_json(self._evaluate("LearningProcess:endorsement", process_id))

    def process_privacy(self, process: ProcessRecord) -> ProcessPrivacy:
        """What ``process``'s privacy amounts to, rigorous ε first (:func:`chaincode.privacy.privacy_status`):
        read from the records of its current round and the one before, where every member's latest
        completed record is (a member completed every round before the current one)."""
        rnd = process.current_round
        if rnd is None:
            rnd = self.process_progress(process.id).current_round
        records: list[ExecutionRecord] = []
        for r in sorted({min(rnd, process.rounds), rnd - 1}):
            if r >= 1:
                records += self.query_executions(process.id, round=r)
        return privacy_status(process.privacy_budget, records)

    def process_gains(self, process: ProcessRecord) -> tuple[MemberGain, ...]:
        """What collaboration bought each member that has completed the last round, by organisation, from
        the signed ``validation`` blocks of its records (empty without a validation slice or before then)."""
        if not process.validation_fraction:
            return ()
        records = self.query_executions(process.id, round=process.rounds)
        gains = (MemberGain.of(r) for r in sorted(records, key=lambda r: r.organisation))
        return tuple(g for g in gains if g is not None)

    def model_gain(self, model: ModelRecord) -> MemberGain | None:
        """What collaboration bought ``model``'s owner (its last round's signed ``validation`` block), or
        None if its process declared no validation slice, or if this organisation may read the model but
        not the process's records (access granted to an organisation outside the consortium)."""
        try:
            rnd = model.round or self.get_process(model.process_id).rounds
            records = self.query_executions(model.process_id, round=rnd, organisation=model.owner)
        except Forbidden:
            return None
        return next((g for r in records if (g := MemberGain.of(r)) is not None), None)

    def list_processes(self) -> list[ProcessRecord]:
        return _records(_PROCESSES, self._evaluate("LearningProcess:list"))

    def accept_process(self, process_id: str, terms_digest: str | None = None) -> ProcessAcceptance:
        """This organisation accepts the process, binding the digest of its terms: ``terms_digest``
        (what the caller reviewed), or that of the terms as read now. Needs a consent role."""
        if terms_digest is None:
            terms_digest = self.get_process(process_id).terms_digest()
        return ProcessAcceptance.from_json(self._submit("LearningProcess:accept", process_id, terms_digest))

    def decline_process(self, process_id: str, reason: str) -> ProcessAcceptance:
        """This organisation declines the process: it ends ``declined`` with the reason."""
        return ProcessAcceptance.from_json(self._submit("LearningProcess:decline", process_id, reason))

    def process_acceptances(self, process_id: str) -> list[ProcessAcceptance]:
        """Every member's answer so far (accepted with its terms digest, or declined with a reason)."""
        return _records(_ACCEPTANCES, self._evaluate("LearningProcess:acceptances", process_id))

    def start_process(self, process_id: str) -> ProcessRecord:
        return self._with_terms(self._submit("LearningProcess:start", process_id))

    def complete_process(self, process_id: str) -> ProcessRecord:
        return self._with_terms(self._submit("LearningProcess:complete", process_id))

    def fail_process(self, process_id: str, reason: str) -> ProcessRecord:
        return self._with_terms(self._submit("LearningProcess:fail", process_id, reason))

    def abort_process(self, process_id: str, reason: str = "") -> ProcessRecord:
        return self._with_terms(self._submit("LearningProcess:abort", process_id, reason))

    def purge_endorsers(self, process_id: str) -> list[str]:
        """Whose peers endorse the purge of a process's private data: its members and every organisation
        holding a copy of one of its private models (``LearningProcess:purge_endorsers``)."""
        return [str(o) for o in json.loads(self._evaluate("LearningProcess:purge_endorsers", process_id))]

    def purge_process_private(self, process_id: str, co_endorsers: Sequence[str] = ()) -> ProcessRecord:
        """Purge a finished process's private data from every collection that holds it: its members' and
        those of the organisations a private model of it was granted to (each one's peer endorses, with
        ``co_endorsers``: :func:`creation_endorsers`); its public record keeps the hashes and says when
        the data was purged."""
        holders = self.purge_endorsers(process_id)
        return ProcessRecord.from_json(
            self._submit(
                "LearningProcess:purge_private",
                process_id,
                endorsing_organisations=creation_endorsers(holders, co_endorsers),
            )
        )

    def process_history(self, process_id: str) -> list[HistoryEntry]:
        return _history(self.ledger.evaluate(self.identity, "LearningProcess:history", process_id))

    # ---- execution records
    def create_task(
        self, process_id: str, round: int, public_key: str | ec.EllipticCurvePublicKey, runtime: str
    ) -> ExecutionRecord:
        pem = public_key if isinstance(public_key, str) else public_key_pem(public_key)
        spec = {"process_id": process_id, "round": round, "public_key": pem, "runtime": runtime}
        return ExecutionRecord.from_json(self._submit("ExecutionRecord:create_task", json.dumps(spec)))

    def complete_task(
        self,
        result: dict[str, Any] | bytes,
        signature: bytes,
        confidential: ResultConfidential | None = None,
    ) -> ExecutionRecord:
        """Submit a task's result with the task key's signature over ``canonical_json(result)``;
        ``result`` is the result, or already its canonical JSON (as signed). With ``confidential``,
        ``result`` is the public form (``confidential_sha256`` in place of the metrics, the data
        commitment and the validation scores, :func:`chaincode.records.split_result`): the part goes
        in the transient map, with this member's copy of the previous round's private part (the
        privacy charge continues from it), and every member of the process endorses (each keeps its
        own copy, docs/confidentiality.md). The answer is the public record."""
        raw = result if isinstance(result, bytes) else canonical_json(result)
        transient: dict[str, bytes] = {}
        endorsers: list[str] | None = None
        try:
            named = json.loads(raw)
            pid, rnd, org = named.get("process_id"), named.get("round"), named.get("organisation")
        except (ValueError, AttributeError):
            pid = rnd = org = None
        process = self._readable_process(pid)
        if process is not None:  # else the contract refuses the result with the reason
            transient.update(process_transient(process) or {})
        if confidential is not None:
            transient[RESULT_CONFIDENTIAL] = confidential.canonical()
            if process is not None:
                endorsers = creation_endorsers(process.consortium)
            # the privacy charge (a process with a budget) continues from the previous round's
            previous = None
            if process is None or process.privacy_budget is not None:
                previous = self._previous_private(pid, rnd, org)
            if previous is not None:
                transient[PREVIOUS_EXECUTION_PRIVATE] = previous
        return ExecutionRecord.from_json(
            self._submit(
                "ExecutionRecord:complete_task",
                raw.decode("utf-8"),
                base64.b64encode(signature).decode("ascii"),
                transient=transient or None,
                endorsing_organisations=endorsers,
            )
        )

    def _readable_process(self, pid: Any) -> ProcessRecord | None:
        """The process a result names, as this member reads it (None: none it reads)."""
        if not isinstance(pid, str):
            return None
        try:
            return self.get_process(pid)
        except ContractError:
            return None

    def _previous_private(self, pid: Any, rnd: Any, org: Any) -> bytes | None:
        """This member's copy of the private part of ``org``'s record of round ``rnd - 1`` (None: no
        such record, or one without a private part)."""
        if not (isinstance(pid, str) and isinstance(org, str) and isinstance(rnd, int) and rnd > 1):
            return None
        try:
            previous = self.get_execution(pid, rnd - 1, org)
        except ContractError:
            return None
        return None if previous.private_sha256 is None else previous.private_part().canonical()

    def fail_task(
        self, process_id: str, round: int, reason: str, details: dict[str, Any] | None = None
    ) -> ExecutionRecord:
        spec = {"process_id": process_id, "round": round, "reason": reason, "details": details or {}}
        return ExecutionRecord.from_json(self._submit("ExecutionRecord:fail_task", json.dumps(spec)))

    def get_execution(self, process_id: str, round: int, organisation: str) -> ExecutionRecord:
        """The record, with this member's copy of its private part joined (checked here too)."""
        return _checked_execution(
            ExecutionRecord.from_json(
                self._evaluate("ExecutionRecord:get", process_id, str(round), organisation)
            )
        )

    def round_inbox(self, process_id: str, round: int) -> list[InboxEntry]:
        """Each organisation's status, state digest and messages to this organisation in ``round``."""
        return _records(_INBOX, self._evaluate("ExecutionRecord:inbox", process_id, str(round)))

    def query_executions(
        self, process_id: str, round: int | None = None, organisation: str | None = None
    ) -> list[ExecutionRecord]:
        flt: dict[str, Any] = {"process_id": process_id}
        if round is not None:
            flt["round"] = round
        if organisation is not None:
            flt["organisation"] = organisation
        records = _records(_EXECUTIONS, self._evaluate("ExecutionRecord:query", json.dumps(flt)))
        return [_checked_execution(r) for r in records]

    def execution_history(self, process_id: str, round: int, organisation: str) -> list[HistoryEntry]:
        return _history(
            self.ledger.evaluate(
                self.identity, "ExecutionRecord:history", process_id, str(round), organisation
            )
        )

    # ---- models
    def publish_model(
        self,
        process_id: str,
        digest: str,
        size: int,
        ciphertext_digest: str,
        wrapped_keys: dict[str, bytes],
        metrics: dict[str, float] | None = None,
        location: str = "",
        estimators: list[Any] | None = None,
        model_id: str | None = None,
    ) -> ModelRecord:
        """Publish a final model. For a process with private terms, the size, location, metrics and
        estimators go in the transient map with a fresh salt (:class:`ModelPrivate`), and every member
        (the access list) endorses: each keeps its own copy (docs/confidentiality.md)."""
        spec: dict[str, Any] = {
            "process_id": process_id,
            "digest": digest,
            "ciphertext_digest": ciphertext_digest,
            "wrapped_keys": {o: base64.b64encode(k).decode() for o, k in wrapped_keys.items()},
        }
        if model_id:
            spec["id"] = model_id
        fields: dict[str, Any] = {
            "size": size,
            "metrics": metrics or {},
            "location": location,
            "estimators": estimators or [],
        }
        process = self._readable_process(process_id)
        part: ModelPrivate | None = None
        endorsers: list[str] | None = None
        if process is not None and process.private_sha256 is not None:
            part = ModelPrivate(**fields, salt=secrets.token_hex(32))
            endorsers = creation_endorsers(process.consortium)
        else:  # a process recorded before its terms were private (or one the contract refuses)
            spec.update(fields)
        answer = self._submit(
            "Model:publish",
            json.dumps(spec),
            transient=None if part is None else {MODEL_PRIVATE: part.canonical()},
            endorsing_organisations=endorsers,
        )
        return _model_joined(ModelRecord.from_json(answer), part)

    def get_model(self, model_id: str) -> ModelRecord:
        return ModelRecord.from_json(self._evaluate("Model:get", model_id))

    def list_models(self) -> list[ModelRecord]:
        return _records(_MODELS, self._evaluate("Model:list"))

    def grant_model(self, model_id: str, organisation: str, wrapped_key: bytes) -> ModelRecord:
        """Add ``organisation`` to a model's access list. A model with a private part: the owner's copy
        (its read) goes in the transient map and the grantee's peer endorses, keeping its own copy."""
        part: ModelPrivate | None = None
        endorsers: list[str] | None = None
        current = self.get_model(model_id)
        if current.private_sha256 is not None and current.private_purged is None:
            part = current.private_part()
            endorsers = creation_endorsers([current.owner, organisation])
        answer = self._submit(
            "Model:grant",
            model_id,
            organisation,
            base64.b64encode(wrapped_key).decode(),
            transient=None if part is None else {MODEL_PRIVATE: part.canonical()},
            endorsing_organisations=endorsers,
        )
        return _model_joined(ModelRecord.from_json(answer), part)

    def revoke_model(
        self,
        model_id: str,
        organisation: str,
        ciphertext_digest: str,
        wrapped_keys: dict[str, bytes],
        location: str | None = None,
    ) -> ModelRecord:
        """Revoke ``organisation`` and rotate the data key: ``ciphertext_digest`` is the model
        re-encrypted under a fresh key, ``wrapped_keys`` that key sealed for the remaining list. A
        model with a private part: every organisation on the current list endorses (the revoked one's
        copy is deleted), and a new ``location`` travels in a new private part with a fresh salt."""
        rotation: dict[str, Any] = {
            "ciphertext_digest": ciphertext_digest,
            "wrapped_keys": {o: base64.b64encode(k).decode() for o, k in wrapped_keys.items()},
        }
        transient: dict[str, bytes] | None = None
        endorsers: list[str] | None = None
        part: ModelPrivate | None = None
        current = self.get_model(model_id)
        if current.private_sha256 is not None and current.private_purged is None:
            endorsers = creation_endorsers(current.access)
            part = current.private_part()
            if location is not None:
                moved = part.view(location=location, salt=secrets.token_hex(32))
                transient = {MODEL_PRIVATE: part.canonical(), NEXT_MODEL_PRIVATE: moved.canonical()}
                part = moved
        elif location is not None:
            rotation["location"] = location
        answer = self._submit(
            "Model:revoke",
            model_id,
            organisation,
            json.dumps(rotation),
            transient=transient,
            endorsing_organisations=endorsers,
        )
        return _model_joined(ModelRecord.from_json(answer), part)

    @overload
    def model_history(self, model_id: str) -> list[HistoryEntry]: ...

    @overload
    def model_history(self, model_id: str, limit: int, after: str | None = None) -> HistoryPage: ...

    @overload
    def model_history(self, model_id: str, limit: int | None = None, *, after: str) -> HistoryPage: ...

    def model_history(
        self, model_id: str, limit: int | None = None, after: str | None = None
    ) -> list[HistoryEntry] | HistoryPage:
        """Without ``limit`` and ``after``: every version of the model record, oldest first (one
        read of the whole history). With either: one :class:`HistoryPage`, newest first
        (:meth:`history_page`); :meth:`history_pages` iterates over all of them."""
        if limit is None and after is None:
            return _history(self.ledger.evaluate(self.identity, "Model:history", model_id))
        return self.history_page("Model:history", model_id, limit=limit, after=after)

    # ---- membership
    def publish_membership(
        self, artifact_endpoint: str, tls_ca_digest: str, gateway_endpoint: str = ""
    ) -> MemberRecord:
        """Create or replace this organisation's own membership record (its MSP id is the key)."""
        spec = {"artifact_endpoint": artifact_endpoint, "tls_ca_digest": tls_ca_digest}
        if gateway_endpoint:
            spec["gateway_endpoint"] = gateway_endpoint
        return MemberRecord.from_json(self._submit("Membership:publish", json.dumps(spec)))

    def get_member(self, msp_id: str) -> MemberRecord:
        return MemberRecord.from_json(self._evaluate("Membership:get", msp_id))

    def list_members(self) -> list[MemberRecord]:
        return _records(_MEMBERS, self._evaluate("Membership:list"))

    def member_history(self, msp_id: str) -> list[HistoryEntry]:
        return _history(self.ledger.evaluate(self.identity, "Membership:history", msp_id))

    # ---- disclosures to auditors (docs/audit-replay.md)
    def record_disclosure(
        self, process_id: str, rounds: Sequence[int], recipient: str, bundle_digest: str
    ) -> DisclosureRecord:
        """Record that this organisation disclosed the inputs of its tasks of ``rounds`` to ``recipient``
        in the sealed bundle of digest ``bundle_digest``."""
        spec = {
            "process_id": process_id,
            "rounds": list(rounds),
            "recipient": recipient,
            "bundle_digest": bundle_digest,
        }
        return DisclosureRecord.from_json(self._submit("Disclosure:record", json.dumps(spec)))

    def get_disclosure(self, process_id: str, bundle_digest: str) -> DisclosureRecord:
        return DisclosureRecord.from_json(self._evaluate("Disclosure:get", process_id, bundle_digest))

    def list_disclosures(self, process_id: str) -> list[DisclosureRecord]:
        return _records(_DISCLOSURES, self._evaluate("Disclosure:list", process_id))

    def disclosed_records(self, process_id: str, bundle_digest: str) -> DisclosedRecords:
        """The disclosure, its process and the disclosed execution records, as the recipient reads them."""
        return DisclosedRecords.from_json(self._evaluate("Disclosure:records", process_id, bundle_digest))
