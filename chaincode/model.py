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
import math
import re
from typing import Any

from chaincode.canonical import RawJSON, is_digest
from chaincode.context import TransactionContext, parse_json_arg, require_keys, require_str
from chaincode.errors import AlreadyExists, Forbidden, ImageMismatch, InvalidArgument, InvalidState, NotFound
from chaincode.learning_process import EXECUTION, load_process, require_member, round_key
from chaincode.limits import MAX_ESTIMATORS_BYTES, MAX_REFERENCE_CHARS, bounded_json, bounded_text
from chaincode.records import ID_PATTERN, MSP_PATTERN, ModelRecord, ResultOutputs, SealedKey

MODEL = "Model"
MODEL_KEY = "ModelKey"


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


def _view(ctx: TransactionContext, record: ModelRecord) -> ModelRecord:
    """The model record with the caller's own sealed data key."""
    return record.view(wrapped_key=_sealed_key(ctx, record.id, ctx.msp_id))


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
        ciphertext_digest, wrapped_keys, metrics?, location?, estimators?, id?}``."""
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
            {"process_id", "digest", "size", "ciphertext_digest", "wrapped_keys"},
            "model",
        )
        pid = require_str(spec, "process_id", pattern=ID_PATTERN)
        process = load_process(ctx, pid)
        require_member(ctx, process)
        model_id = spec.get("id") or f"{pid}:{ctx.msp_id}"
        if not isinstance(model_id, str) or not re.fullmatch(ID_PATTERN, model_id):
            raise InvalidArgument(f"model id {model_id!r} must match {ID_PATTERN}")
        for f in ("digest", "ciphertext_digest"):
            if not is_digest(spec[f]):
                raise InvalidArgument(f"model {f} must be sha256:<64 hex>")
        if not isinstance(spec["size"], int) or isinstance(spec["size"], bool) or spec["size"] < 0:
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
        record = ModelRecord(
            id=model_id,
            process_id=pid,
            owner=ctx.msp_id,
            digest=spec["digest"],
            size=spec["size"],
            ciphertext_digest=spec["ciphertext_digest"],
            location=location,
            metrics=metrics,
            estimators=tuple(estimators),
            image_digest=process.image_digest,
            round=last,
            access=tuple(sorted(process.consortium)),
            key_version=1,
            created=ctx.timestamp,
            published_by=ctx.subject,
            tx_id=ctx.tx_id,
        )
        ctx.put(key, record)
        for org, sealed in sorted(wrapped.items()):
            _put_sealed_key(ctx, model_id, org, sealed)
        ctx.emit("ModelPublished", {"id": model_id, "process_id": pid, "owner": ctx.msp_id})
        return record.view(wrapped_key=wrapped[ctx.msp_id])

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
        record = self._owner_update(ctx, model_id)
        if not re.fullmatch(MSP_PATTERN, organisation):
            raise InvalidArgument(f"{organisation!r} is not an MSP id")
        if organisation in record.access:
            raise AlreadyExists(f"{organisation} already has access to model {model_id}")
        _put_sealed_key(ctx, model_id, organisation, _check_wrapped_key(wrapped_key, organisation))
        record = record.replace(
            access=sorted(set(record.access) | {organisation}), updated=ctx.timestamp, tx_id=ctx.tx_id
        )
        ctx.put(self._key(ctx, model_id), record)
        ctx.emit("ModelAccessGranted", {"id": model_id, "organisation": organisation})
        return _view(ctx, record)

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
        ctx.stub.del_state(ctx.key(MODEL_KEY, model_id, organisation))
        for org, sealed in sorted(wrapped.items()):
            _put_sealed_key(ctx, model_id, org, sealed)
        changes: dict[str, Any] = {"location": location} if location is not None else {}
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
        return _view(ctx, record)

    def history(self, ctx: TransactionContext, model_id: str, limit: str = "", after: str = "") -> RawJSON:
        """Every version of the model record (sealed keys are separate records, never shown); with
        ``limit``/``after`` one page, newest first (:meth:`TransactionContext.history`)."""
        record = self._load(ctx, model_id)
        self._require_access(ctx, record)
        return ctx.history(self._key(ctx, model_id), limit, after)
