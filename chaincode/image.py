"""Image contract: the registry of algorithm images (seed 003 §IV-B, Fig. 2 "image hashes").

An image record pins an algorithm image by its content digest. The owner is the caller's
organisation (from its certificate). Another organisation approves an image for use on its
data, naming its exact digest, optionally for named datasets and until an expiry, and may revoke
its approval (each approval is its own key, so approvals never conflict; docs/consent.md); the
owner's registration is its approval for its own data. The owner may revoke the image, after which
no new learning process can pin it.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from chaincode.canonical import RawJSON, is_digest
from chaincode.consent import APPROVAL, approval_key, require_consent_role
from chaincode.context import TransactionContext, iso_time, parse_json_arg, require_keys, require_str
from chaincode.errors import AlreadyExists, Forbidden, ImageMismatch, InvalidArgument, InvalidState, NotFound
from chaincode.limits import (
    MAX_APPROVAL_DATASETS,
    MAX_DESCRIPTION_CHARS,
    MAX_REFERENCE_CHARS,
    MAX_REVOCATION_REASON_CHARS,
    bounded_text,
)
from chaincode.records import ID_PATTERN, ImageApproval, ImageRecord

IMAGE = "Image"
DATASET_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}"  #: a dataset name (a folder of a node's data root)


def parse_time(value: Any, what: str) -> str:
    """An ISO-8601 time with a time zone, as the transactions' UTC format (``...T..:..:...ffffffZ``),
    so that times compare as strings."""
    if not isinstance(value, str) or len(value) > 64:
        raise InvalidArgument(f"{what} must be an ISO-8601 time string")
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00") if value.endswith("Z") else value)
    except ValueError:
        raise InvalidArgument(f"{what} {value!r} is not an ISO-8601 time") from None
    if when.tzinfo is None:
        raise InvalidArgument(f"{what} {value!r} must name its time zone (e.g. Z)")
    return iso_time(when.astimezone(UTC).timestamp())


class ImageContract:
    name = "Image"

    @staticmethod
    def _key(ctx: TransactionContext, image_id: str) -> str:
        return ctx.key(IMAGE, image_id)

    def register(self, ctx: TransactionContext, spec_json: str) -> ImageRecord:
        """Register an image: ``{id, name, version, algorithm, digest, reference}``."""
        ctx.require_submitter()
        spec = require_keys(
            parse_json_arg(spec_json, "image specification"),
            {"id", "name", "version", "algorithm", "digest", "reference", "description"},
            {"name", "version", "algorithm", "digest"},
            "image specification",
        )
        name = require_str(spec, "name", pattern=r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
        version = require_str(spec, "version", pattern=r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}")
        image_id = spec.get("id") or f"{name}:{version}"
        if not isinstance(image_id, str) or not re.fullmatch(ID_PATTERN, image_id):
            raise InvalidArgument(f"image id {image_id!r} must match {ID_PATTERN}")
        if not is_digest(spec["digest"]):
            raise InvalidArgument(f"image digest {spec['digest']!r} is not of the form sha256:<64 hex>")
        key = self._key(ctx, image_id)
        if ctx.stub.get_state(key) is not None:
            raise AlreadyExists(f"image {image_id} is already registered", image_id=image_id)
        record = ImageRecord(
            id=image_id,
            name=name,
            version=version,
            algorithm=require_str(spec, "algorithm", max_len=64),
            digest=spec["digest"],
            reference=bounded_text(spec.get("reference"), "image reference", MAX_REFERENCE_CHARS),
            description=bounded_text(spec.get("description"), "image description", MAX_DESCRIPTION_CHARS),
            owner=ctx.msp_id,
            registered_by=ctx.subject,
            created=ctx.timestamp,
            tx_id=ctx.tx_id,
            status="active",
            revoked_reason="",
        )
        ctx.put(key, record)
        ctx.emit("ImageRegistered", {"id": image_id, "digest": record.digest, "owner": ctx.msp_id})
        return record

    def _load(self, ctx: TransactionContext, image_id: str) -> ImageRecord:
        return ctx.load(ImageRecord, self._key(ctx, image_id), f"image {image_id}")

    def get(self, ctx: TransactionContext, image_id: str) -> ImageRecord:
        """The image with the other organisations' approvals (by organisation)."""
        record = self._load(ctx, image_id)
        approvals = sorted(ctx.scan(ImageApproval, APPROVAL, image_id), key=lambda a: a.organisation)
        return record.view(approvals=tuple(approvals))

    def list(self, ctx: TransactionContext) -> RawJSON:
        """Every :class:`ImageRecord`, as stored."""
        return RawJSON.array(kv.value for kv in ctx.scan_raw(IMAGE))

    def revoke(self, ctx: TransactionContext, image_id: str, reason: str = "") -> ImageRecord:
        ctx.require_submitter()
        reason = bounded_text(reason, "revocation reason", MAX_REVOCATION_REASON_CHARS)
        record = self._load(ctx, image_id)
        if record.owner != ctx.msp_id:
            raise Forbidden(f"image {image_id} is owned by {record.owner}; {ctx.msp_id} may not revoke it")
        if record.status == "revoked":
            raise InvalidState(f"image {image_id} is already revoked")
        record = record.replace(
            status="revoked", revoked_reason=reason, revoked=ctx.timestamp, tx_id=ctx.tx_id
        )
        ctx.put(self._key(ctx, image_id), record)
        ctx.emit("ImageRevoked", {"id": image_id, "reason": reason})
        return record

    def approve(
        self, ctx: TransactionContext, image_id: str, digest: str, options_json: str = ""
    ) -> ImageApproval:
        """The caller's organisation approves the image for use on its data, naming the exact digest
        it inspected; ``options_json`` ``{datasets?: [name, ...], expires?: ISO-8601}`` limits it to
        those datasets and until that time. Signed by its admin or a role its membership record names
        (:func:`chaincode.consent.require_consent_role`). Approving again replaces the approval (a
        revoked one too); the owner needs none (its registration is its approval for its own data)."""
        require_consent_role(ctx, "approve images")
        record = self._load(ctx, image_id)
        if record.status != "active":
            raise InvalidState(f"image {image_id} is revoked and cannot be approved")
        if record.owner == ctx.msp_id:
            raise Forbidden(
                f"{ctx.msp_id} owns image {image_id}: its registration is its approval for its own data"
            )
        if digest != record.digest:
            raise ImageMismatch(
                f"approval of image {image_id} names digest {digest}, "
                f"but the registered digest is {record.digest}"
            )
        options = require_keys(
            parse_json_arg(options_json or "{}", "approval options"),
            {"datasets", "expires"},
            set(),
            "approval options",
        )
        fields: dict[str, Any] = {}
        datasets = options.get("datasets")
        if datasets is not None:
            if (
                not isinstance(datasets, list)
                or not datasets
                or len(datasets) > MAX_APPROVAL_DATASETS
                or not all(isinstance(d, str) and re.fullmatch(DATASET_PATTERN, d) for d in datasets)
            ):
                raise InvalidArgument(
                    f"approval datasets must be a non-empty list of at most {MAX_APPROVAL_DATASETS} "
                    f"dataset names matching {DATASET_PATTERN}"
                )
            fields["datasets"] = tuple(sorted(set(datasets)))
        if options.get("expires") is not None:
            expires = parse_time(options["expires"], "approval expiry")
            if expires <= ctx.timestamp:
                raise InvalidArgument(f"approval expiry {expires} is not after now ({ctx.timestamp})")
            fields["expires"] = expires
        approval = ImageApproval(
            image_id=image_id,
            organisation=ctx.msp_id,
            digest=digest,
            approved_by=ctx.subject,
            created=ctx.timestamp,
            tx_id=ctx.tx_id,
            **fields,
        )
        ctx.put(approval_key(ctx, image_id, ctx.msp_id), approval)
        ctx.emit("ImageApproved", {"id": image_id, "organisation": ctx.msp_id})
        return approval

    def revoke_approval(self, ctx: TransactionContext, image_id: str, reason: str = "") -> ImageApproval:
        """The caller's organisation withdraws its approval: no new task of its may run the image
        (``ExecutionRecord:create_task`` refuses it); the revoked approval stays on the ledger."""
        require_consent_role(ctx, "revoke image approvals")
        reason = bounded_text(reason, "revocation reason", MAX_REVOCATION_REASON_CHARS)
        key = approval_key(ctx, image_id, ctx.msp_id)
        approval = ctx.find(ImageApproval, key)
        if approval is None:
            raise NotFound(f"{ctx.msp_id} has no approval of image {image_id} to revoke")
        if approval.revoked is not None:
            raise InvalidState(f"the approval of image {image_id} by {ctx.msp_id} is already revoked")
        approval = approval.replace(
            revoked=ctx.timestamp, revoked_reason=reason, revoked_by=ctx.subject, tx_id=ctx.tx_id
        )
        ctx.put(key, approval)
        ctx.emit("ImageApprovalRevoked", {"id": image_id, "organisation": ctx.msp_id})
        return approval

    def history(self, ctx: TransactionContext, image_id: str, limit: str = "", after: str = "") -> RawJSON:
        """Every version of the image record; with ``limit``/``after`` one page, newest first."""
        key = self._key(ctx, image_id)
        if ctx.stub.get_state(key) is None:
            raise NotFound(f"image {image_id} does not exist")
        return ctx.history(key, limit, after)
