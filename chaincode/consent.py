"""Consent before computation: the rules the contracts share (docs/consent.md).

* Who may consent for an organisation: an identity whose NodeOU role is ``admin``, or a role the
  organisation's own membership record names in ``consent_roles`` (set only by its admin).
* An organisation's approval of an image covers a process's task when it names the process's exact
  image digest, is not revoked, has not expired and, if it names datasets, names the process's. The
  image's owner needs none: registering an image is its owner's approval for its own data.
* A process starts only when every member's acceptance binds the digest of the process's terms as
  recorded (:meth:`chaincode.records.ProcessRecord.terms_digest`).
"""

from __future__ import annotations

from chaincode.context import TransactionContext
from chaincode.errors import ConsentMissing, Forbidden
from chaincode.records import ImageApproval, ImageRecord, MemberRecord, ProcessAcceptance, ProcessRecord

APPROVAL = "ImageApproval"
ACCEPTANCE = "ProcessAcceptance"
MEMBER = "Member"
CONSENT_ROLE = "admin"


def consent_roles(ctx: TransactionContext, msp_id: str) -> tuple[str, ...]:
    """The roles that may consent for ``msp_id``: admin and those its membership record names."""
    member = ctx.find(MemberRecord, ctx.key(MEMBER, msp_id))
    extra = () if member is None else tuple(r for r in member.consent_roles if r != CONSENT_ROLE)
    return (CONSENT_ROLE, *extra)


def require_consent_role(ctx: TransactionContext, what: str) -> None:
    """Refuse unless the caller may consent for its organisation (``what``: the act, for the error)."""
    ctx.require_submitter()
    roles = consent_roles(ctx, ctx.msp_id)
    if ctx.role not in roles:
        raise Forbidden(
            f"identity {ctx.subject} of {ctx.msp_id} has role {ctx.role!r}; only {' or '.join(roles)} "
            f"identities may {what} for {ctx.msp_id}"
        )


def approval_key(ctx: TransactionContext, image_id: str, msp_id: str) -> str:
    return ctx.key(APPROVAL, image_id, msp_id)


def acceptance_key(ctx: TransactionContext, process_id: str, msp_id: str) -> str:
    return ctx.key(ACCEPTANCE, process_id, msp_id)


def approval_problem(ctx: TransactionContext, process: ProcessRecord, msp_id: str) -> str | None:
    """Why ``msp_id`` has not approved the process's exact image for its dataset now (None: it has)."""
    image = ctx.find(ImageRecord, ctx.key("Image", process.image_id))
    if image is not None and image.owner == msp_id and image.digest == process.image_digest:
        return None  # the owner's registration is its approval for its own data
    approval = ctx.find(ImageApproval, approval_key(ctx, process.image_id, msp_id))
    if approval is None:
        return f"{msp_id} has not approved image {process.image_id} ({process.image_digest})"
    problem = approval.problem(process.image_digest, process.dataset, ctx.timestamp)
    return None if problem is None else f"{msp_id}: {problem}"


def require_approval(ctx: TransactionContext, process: ProcessRecord) -> None:
    """Refuse a task of the caller's organisation unless it approved the process's exact image."""
    problem = approval_problem(ctx, process, ctx.msp_id)
    if problem is not None:
        raise ConsentMissing(
            f"task of {ctx.msp_id} in learning process {process.id} refused: {problem}",
            process_id=process.id,
            organisation=ctx.msp_id,
        )


def missing_acceptances(ctx: TransactionContext, process: ProcessRecord) -> list[str]:
    """The members without a standing acceptance of the process's terms as recorded."""
    terms = process.terms_digest()
    missing = []
    for org in process.consortium:
        answer = ctx.find(ProcessAcceptance, acceptance_key(ctx, process.id, org))
        if answer is None or answer.decision != "accepted" or answer.terms_digest != terms:
            missing.append(org)
    return missing
