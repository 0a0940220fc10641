"""Model contract: final models and who may read them (seed 003 §IV-B, Fig. 2 "models").

The payload lives off chain, encrypted once under a random data key; the ledger holds that
data key sealed for each organisation on the access list, one ``ModelKey`` record per
organisation beside the model record, so access holds cryptographically as well as in the
contract. An organisation only ever reads its own sealed key.

Granting adds a sealed key. Revoking *rotates* the data key: the owner re-encrypts the stored
model under a fresh key and the revocation carries the new ciphertext digest and the new key
sealed for exactly the remaining access list, so a sealed key the revoked organisation fetched
earlier opens nothing that is stored any more (``key_version`` counts the rotations). What
revocation cannot undo -- plaintext already downloaded -- is stated in docs/models.md.

Events carry identifiers only (model id, process id, organisation): digests and locations are
read through :meth:`ModelContract.get`, which checks the access list.
A model can only be published by the organisation whose completed execution record of the last
round names the model's digest, so every model has an audited lineage.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections.abc import Sequence
from typing import Any

from chaincode.canonical import RawJSON, canonical_json, is_digest
from chaincode.context import (
    TransactionContext,
    own_private_copy,
    parse_json_arg,
    require_keys,
    require_str,
    transient_part,
)
from chaincode.errors import (
    AlreadyExists,
    Forbidden,
    ImageMismatch,
    InvalidArgument,
    InvalidState,
    NotFound,
)
from chaincode.learning_process import EXECUTION, PROCESS, load_process, require_member, round_key
from chaincode.limits import MAX_ESTIMATORS_BYTES, MAX_REFERENCE_CHARS, bounded_json, bounded_text
from chaincode.records import (
    ID_PATTERN,
    MODEL,
    MODEL_PRIVATE,
    MSP_PATTERN,
    NEXT_MODEL_PRIVATE,
    ModelPrivate,
    ModelRecord,
    ProcessRecord,
    ResultOutputs,
    SealedKey,
)
from chaincode.stub import implicit_collection

MODEL_KEY = "ModelKey"
#: the fields of a model record that are private for a process with private terms
PRIVATE_FIELDS = ("size", "location", "metrics", "estimators")


def _check_wrapped_key(value: Any, org: str) -> str:
    if not isinstance(value, str):
        raise InvalidArgument(f"wrapped key for {org} must be base64 text")
    try:
        raw = base64.b64decode(value, validate=True)
    except binascii.Error:
        raise InvalidArgument(f"wrapped key for {org} is not valid base64") from None
    if not 32 < len(raw) <= 512:
        raise InvalidArgument(f"wrapped key for {org} has an implausible length {len(raw)}")
    return value


def _sealed_key(ctx: TransactionContext, model_id: str, org: str) -> str | None:
    rec = ctx.find(SealedKey, ctx.key(MODEL_KEY, model_id, org))
    return None if rec is None else rec.wrapped_key


def _purged(ctx: TransactionContext, record: ModelRecord) -> str | None:
    """When the private data of the model's process was purged (None: not purged)."""
    process = ctx.find(ProcessRecord, ctx.key(PROCESS, record.process_id))
    return None if process is None else process.private_purged


def _own_part(ctx: TransactionContext, record: ModelRecord) -> ModelPrivate:
    """The private part of ``record`` from the executing peer's own organisation's copy, checked
    against its ``private_sha256`` (:func:`chaincode.context.own_private_copy`)."""
    assert record.private_sha256 is not None
    return own_private_copy(
        ctx,
        ctx.key(MODEL, record.id),
        ModelPrivate,
        record.private_sha256,
        f"model {record.id}",
        process_id=record.process_id,
    )


def _joined(ctx: TransactionContext, record: ModelRecord) -> ModelRecord:
    """``record`` as an organisation on its access list reads it: a private record with the caller's
    own copy joined (after the hash check), or with ``private_purged`` once its process's private
    data was purged; a public record as it is."""
    if record.private_sha256 is None:
        return record
    purged = _purged(ctx, record)
    if purged is not None:
        return record.view(private_purged=purged)
    return record.joined(_own_part(ctx, record))


def _view(ctx: TransactionContext, record: ModelRecord) -> ModelRecord:
    """The model record with the caller's own private copy joined and its own sealed data key."""
    return _joined(ctx, record).view(wrapped_key=_sealed_key(ctx, record.id, ctx.msp_id))


def _answer(ctx: TransactionContext, record: ModelRecord) -> ModelRecord:
    """The answer of a transaction that writes a model: the public record (an answer is written into
    the block, which every channel member receives; the submitting client joins the private part it
    sent) with the caller's sealed key."""
    return record.view(wrapped_key=_sealed_key(ctx, record.id, ctx.msp_id))


def _transient_part(ctx: TransactionContext, record: ModelRecord, what: str) -> ModelPrivate:
    """The model's current private part from the transient map, checked against its ``private_sha256``
    (a transaction endorsed by several organisations cannot read their copies: each has its own)."""
    return transient_part(
        ctx,
        MODEL_PRIVATE,
        ModelPrivate,
        f"model {record.id} has a private part; {what} needs it",
        digest=record.private_sha256,
        mismatch=f"the private part given for model {record.id} does not match the on-chain hash "
        f"{record.private_sha256}",
        process_id=record.process_id,
    )


def _checked_part(part: ModelPrivate) -> ModelPrivate:
    """``part`` within the limits of a model's fields (InvalidArgument otherwise)."""
    if part.size < 0:
        raise InvalidArgument("model size must be a non-negative integer")
    bounded_json(list(part.estimators), "estimators", MAX_ESTIMATORS_BYTES)
    bounded_text(part.location, "model location", MAX_REFERENCE_CHARS)
    return part


def _put_copies(ctx: TransactionContext, model_id: str, part: ModelPrivate, orgs: Any) -> None:
    """One copy of ``part`` in the implicit collection of each of ``orgs`` (each endorsed by its owner)."""
    copy = part.canonical()
    for org in sorted(orgs):
        ctx.stub.put_private_data(implicit_collection(org), ctx.key(MODEL, model_id), copy)


def _put_sealed_key(ctx: TransactionContext, model_id: str, org: str, wrapped: str) -> None:
    ctx.put(
        ctx.key(MODEL_KEY, model_id, org),
        SealedKey(
            model_id=model_id, organisation=org, wrapped_key=wrapped, granted=ctx.timestamp, tx_id=ctx.tx_id
        ),
    )


class ModelContract:
    name = "Model"

    @staticmethod
    def _key(ctx: TransactionContext, model_id: str) -> str:
        return ctx.key(MODEL, model_id)

    def publish(self, ctx: TransactionContext, spec_json: str) -> ModelRecord:
        """Publish the caller's final model of a process: ``{process_id, digest, size,
        ciphertext_digest, wrapped_keys, metrics?, location?, estimators?, id?}``.

        For a process with private terms, ``size``, ``location``, ``metrics`` and ``estimators`` are
        private: they are refused here and come as a :class:`ModelPrivate` in the transient map
        (:data:`MODEL_PRIVATE`); a copy goes to each organisation on the access list (each endorses)
        and the public record keeps its ``private_sha256``."""
        ctx.require_submitter()
        spec = require_keys(
            parse_json_arg(spec_json, "model"),
            {
                "id",
                "process_id",
                "digest",
                "size",
                "ciphertext_digest",
                "wrapped_keys",
                "metrics",
                "location",
                "estimators",
            },
            {"process_id", "digest", "ciphertext_digest", "wrapped_keys"},
            "model",
        )
        pid = require_str(spec, "process_id", pattern=ID_PATTERN)
        process = load_process(ctx, pid)
        require_member(ctx, process)
        private = process.private_sha256 is not None
        if private:
            named = sorted(f for f in PRIVATE_FIELDS if f in spec)
            if named:
                raise InvalidArgument(
                    f"learning process {pid} has private terms: the model's {', '.join(named)} are private; "
                    f"pass them in the transient map under {MODEL_PRIVATE!r}, not in the arguments",
                    process_id=pid,
                )
        elif "size" not in spec:
            raise InvalidArgument("model is missing required fields ['size']")
        model_id = spec.get("id") or f"{pid}:{ctx.msp_id}"
        if not isinstance(model_id, str) or not re.fullmatch(ID_PATTERN, model_id):
            raise InvalidArgument(f"model id {model_id!r} must match {ID_PATTERN}")
        for f in ("digest", "ciphertext_digest"):
            if not is_digest(spec[f]):
                raise InvalidArgument(f"model {f} must be sha256:<64 hex>")
        if not private and (
            not isinstance(spec["size"], int) or isinstance(spec["size"], bool) or spec["size"] < 0
        ):
            raise InvalidArgument("model size must be a non-negative integer")
        key = self._key(ctx, model_id)
        if ctx.stub.get_state(key) is not None:
            raise AlreadyExists(f"model {model_id} is already published")
        last = process.rounds
        # the stored JSON of the last round's record: only its result's outputs are read (typed)
        execution = ctx.get(ctx.key(EXECUTION, pid, round_key(last), ctx.msp_id))
        if execution is None or execution["status"] != "completed" or not execution.get("result"):
            raise InvalidState(
                f"{ctx.msp_id} has not completed the last round ({last}) of learning process {pid}; "
                f"only a model produced by a completed audited run can be published"
            )
        model = ResultOutputs.model_validate(execution["result"]["outputs"]).model
        produced = None if model is None else model.digest
        if produced != spec["digest"]:
            raise ImageMismatch(
                f"model digest {spec['digest']} is not the model {produced} that the execution "
                f"record of {ctx.msp_id} for round {last} of {pid} signed"
            )
        wrapped = spec["wrapped_keys"]
        if not isinstance(wrapped, dict) or set(wrapped) != set(process.consortium):
            raise InvalidArgument(
                f"wrapped_keys must hold the data key sealed for exactly the consortium {sorted(process.consortium)}"
            )
        for org, v in wrapped.items():
            _check_wrapped_key(v, org)
        metrics = spec.get("metrics") or {}
        if not isinstance(metrics, dict) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            for v in metrics.values()
        ):
            raise InvalidArgument("model metrics must be an object of finite numbers")
        estimators = spec.get("estimators") or []
        if not isinstance(estimators, list):
            raise InvalidArgument("estimators must be a list")
        bounded_json(estimators, "estimators", MAX_ESTIMATORS_BYTES)
        location = bounded_text(spec.get("location"), "model location", MAX_REFERENCE_CHARS)
        part: ModelPrivate | None = None
        fields: dict[str, Any] = {
            "size": spec.get("size", 0),
            "location": location,
            "metrics": metrics,
            "estimators": tuple(estimators),
        }
        if private:
            part = _checked_part(
                transient_part(
                    ctx, MODEL_PRIVATE, ModelPrivate, f"the private part of model {model_id} is missing"
                )
            )
            fields = {"private_sha256": part.digest()}
        record = ModelRecord(
            id=model_id,
            process_id=pid,
            owner=ctx.msp_id,
            digest=spec["digest"],
            ciphertext_digest=spec["ciphertext_digest"],
            **fields,
            image_digest=process.image_digest,
            round=last,
            access=tuple(sorted(process.consortium)),
            key_version=1,
            created=ctx.timestamp,
            published_by=ctx.subject,
            tx_id=ctx.tx_id,
        )
        ctx.put(key, record)
        if part is not None:
            _put_copies(ctx, model_id, part, record.access)
        for org, sealed in sorted(wrapped.items()):
            _put_sealed_key(ctx, model_id, org, sealed)
        ctx.emit("ModelPublished", {"id": model_id, "process_id": pid, "owner": ctx.msp_id})
        return record.view(wrapped_key=wrapped[ctx.msp_id])  # public: the answer is in the block

    def _load(self, ctx: TransactionContext, model_id: str) -> ModelRecord:
        return ctx.load(ModelRecord, self._key(ctx, model_id), f"model {model_id}")

    def _require_access(self, ctx: TransactionContext, record: ModelRecord) -> None:
        if ctx.msp_id not in record.access:
            raise Forbidden(f"{ctx.msp_id} is not on the access list of model {record.id}")

    def get(self, ctx: TransactionContext, model_id: str) -> ModelRecord:
        record = self._load(ctx, model_id)
        self._require_access(ctx, record)
        return _view(ctx, record)

    def list(self, ctx: TransactionContext) -> list[ModelRecord]:
        """Models whose access list includes the caller's organisation."""
        return [_view(ctx, r) for r in ctx.scan(ModelRecord, MODEL) if ctx.msp_id in r.access]

    def _owner_update(self, ctx: TransactionContext, model_id: str) -> ModelRecord:
        ctx.require_submitter()
        record = self._load(ctx, model_id)
        if record.owner != ctx.msp_id:
            raise Forbidden(
                f"model {model_id} is owned by {record.owner}; only the owner may change its access list"
            )
        return record

    def grant(
        self, ctx: TransactionContext, model_id: str, organisation: str, wrapped_key: str
    ) -> ModelRecord:
        """Add ``organisation`` to the access list with the data key sealed for it. A model with a
        private part needs that part in the transient map (:data:`MODEL_PRIVATE`, the owner's read,
        checked against ``private_sha256``): a copy goes to the grantee's collection, so the grantee's
        peer endorses with the owner's."""
        record = self._owner_update(ctx, model_id)
        part: ModelPrivate | None = None
        if not re.fullmatch(MSP_PATTERN, organisation):
            raise InvalidArgument(f"{organisation!r} is not an MSP id")
        if organisation in record.access:
            raise AlreadyExists(f"{organisation} already has access to model {model_id}")
        _check_wrapped_key(wrapped_key, organisation)
        if record.private_sha256 is not None:
            if _purged(ctx, record) is not None:
                raise InvalidState(
                    f"the private data of model {model_id} was purged with its process's; it cannot be granted "
                    "any more",
                    process_id=record.process_id,
                )
            part = _transient_part(ctx, record, "granting access")
            _put_copies(ctx, model_id, part, [organisation])
        _put_sealed_key(ctx, model_id, organisation, wrapped_key)
        record = record.replace(
            access=sorted(set(record.access) | {organisation}), updated=ctx.timestamp, tx_id=ctx.tx_id
        )
        ctx.put(self._key(ctx, model_id), record)
        ctx.emit("ModelAccessGranted", {"id": model_id, "organisation": organisation})
        return _answer(ctx, record)

    def revoke(
        self, ctx: TransactionContext, model_id: str, organisation: str, rotation_json: str
    ) -> ModelRecord:
        """Remove ``organisation`` from the access list and rotate the data key: ``rotation_json`` is
        ``{ciphertext_digest, wrapped_keys, location?}`` -- the digest of the model re-encrypted under
        a fresh data key (it must differ from the current one) and that key sealed for exactly the
        remaining access list. Every remaining sealed key is replaced; the revoked one is deleted."""
        record = self._owner_update(ctx, model_id)
        if organisation == record.owner:
            raise InvalidArgument("the owner cannot revoke its own access")
        if organisation not in record.access:
            raise NotFound(f"{organisation} has no access to model {model_id}")
        rotation = require_keys(
            parse_json_arg(rotation_json, "key rotation"),
            {"ciphertext_digest", "wrapped_keys", "location"},
            {"ciphertext_digest", "wrapped_keys"},
            "key rotation",
        )
        if not is_digest(rotation["ciphertext_digest"]):
            raise InvalidArgument("key rotation ciphertext_digest must be sha256:<64 hex>")
        if rotation["ciphertext_digest"] == record.ciphertext_digest:
            raise InvalidArgument(
                f"revoking access to model {model_id} must replace its ciphertext "
                f"(re-encrypted under a fresh data key); got the current one"
            )
        remaining = [o for o in record.access if o != organisation]
        wrapped = rotation["wrapped_keys"]
        if not isinstance(wrapped, dict) or set(wrapped) != set(remaining):
            raise InvalidArgument(
                f"wrapped_keys must hold the new data key sealed for exactly the remaining "
                f"access list {remaining}"
            )
        for org, v in wrapped.items():
            _check_wrapped_key(v, org)
        location = rotation.get("location")
        if location is not None and (not isinstance(location, str) or len(location) > 2048):
            raise InvalidArgument("key rotation location must be a string of at most 2048 characters")
        changes: dict[str, Any] = {"location": location} if location is not None else {}
        part: ModelPrivate | None = None
        if record.private_sha256 is not None:
            part = self._revoke_private(ctx, record, organisation, remaining, location)
            changes = {} if part is None else {"private_sha256": part.digest()}
        ctx.stub.del_state(ctx.key(MODEL_KEY, model_id, organisation))
        for org, sealed in sorted(wrapped.items()):
            _put_sealed_key(ctx, model_id, org, sealed)
        record = record.replace(
            access=remaining,
            ciphertext_digest=rotation["ciphertext_digest"],
            key_version=record.key_version + 1,
            updated=ctx.timestamp,
            tx_id=ctx.tx_id,
            **changes,
        )
        ctx.put(self._key(ctx, model_id), record)
        ctx.emit("ModelAccessRevoked", {"id": model_id, "organisation": organisation})
        return _answer(ctx, record)

    def _revoke_private(
        self,
        ctx: TransactionContext,
        record: ModelRecord,
        organisation: str,
        remaining: Sequence[str],
        location: str | None,
    ) -> ModelPrivate | None:
        """The private side of a revocation: delete the revoked organisation's copy and, when the
        transient map moves the model, rewrite the remaining copies (the new part; None: unmoved)."""
        if location is not None:
            raise InvalidArgument(
                f"model {record.id} has a private location: pass the new one in a new private part in the "
                f"transient map under {NEXT_MODEL_PRIVATE!r}, not in the key rotation",
                process_id=record.process_id,
            )
        if _purged(ctx, record) is not None:
            raise InvalidState(
                f"the private data of model {record.id} was purged with its process's; revoking needs it",
                process_id=record.process_id,
            )
        key = ctx.key(MODEL, record.id)
        ctx.stub.del_private_data(implicit_collection(organisation), key)
        if NEXT_MODEL_PRIVATE not in ctx.stub.get_transient():
            return None
        current = _transient_part(ctx, record, "moving it")
        moved = _checked_part(
            transient_part(ctx, NEXT_MODEL_PRIVATE, ModelPrivate, "the moved model's private part is missing")
        )
        same = {"location": moved.location, "salt": moved.salt}
        if moved.salt == current.salt or current.view(**same) != moved:
            raise InvalidArgument(
                f"the new private part of model {record.id} may differ from the current one only in its "
                "location, and must have a fresh salt",
                process_id=record.process_id,
            )
        _put_copies(ctx, record.id, moved, remaining)
        return moved

    def history(self, ctx: TransactionContext, model_id: str, limit: str = "", after: str = "") -> RawJSON:
        """Every version of the model record (sealed keys are separate records, never shown); with
        ``limit``/``after`` one page, newest first (:meth:`TransactionContext.history`). A private
        model's versions that carry the current ``private_sha256`` are answered with the caller's copy
        joined (after the hash check); older versions of a moved model keep their public form."""
        record = self._load(ctx, model_id)
        self._require_access(ctx, record)
        raw = ctx.history(self._key(ctx, model_id), limit, after)
        if record.private_sha256 is None:
            return raw
        current = _joined(ctx, record)
        versions = json.loads(raw)
        for entry in versions if isinstance(versions, list) else versions["items"]:
            value = entry.get("value")
            if value is None or value.get("private_sha256") != record.private_sha256:
                continue
            entry["value"] = {
                **value,
                **{
                    f: current.json_object()[f]
                    for f in (*PRIVATE_FIELDS, "private_salt", "private_purged")
                    if f in current.json_object()
                },
            }
        return RawJSON(canonical_json(versions))
