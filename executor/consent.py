"""Consent before computation, on the organisation's own node (docs/consent.md).

The contracts refuse to start a process that not every member accepted, and refuse a member's task
without its approval of the process's exact image digest (:mod:`chaincode.consent`). A node agent
does not rely on that: before it registers a task it checks, on what it reads from the ledger and on
its own clock and policy, that

* its organisation accepted this process, and the acceptance binds the digest of the terms the agent
  itself computes from the process record it reads (image digest, hyper-parameters, topology,
  rounds, privacy budget, dataset, consortium: :meth:`ProcessRecord.terms_digest`);
* its organisation approved the exact image digest for this dataset, unrevoked and unexpired (unless
  it owns the image: registering is its approval for its own data);
* its local policy (:class:`ConsentPolicy`, the ``[consent]`` table of the home's consortia.toml)
  holds: a minimum number of consortium members approving the digest, the dataset names it lets
  processes use, the largest ε it lets a process spend.

A refusal is recorded on the ledger with ``fail_task`` (code ``CONSENT_REFUSED``) and nothing runs.

:func:`give_consent` is what each organisation's admin does on its own host -- approve the image
for the process's dataset and accept the process -- gathered for the flows that act as every
organisation on one machine (the demo, tests, benchmarks).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict, Field

from ledger.client import ConsortiaClient, ImageRecord, ProcessAcceptance, ProcessRecord
from ledger.errors import ConsentMissing, Forbidden, NotFound

__all__ = ["ConsentPolicy", "consent_problem", "give_consent"]

CONSENT_REFUSED = "CONSENT_REFUSED"


class ConsentPolicy(BaseModel):
    """``[consent]`` of consortia.toml: what this node's organisation requires beyond its own
    acceptance and approval before any task of its runs (every key optional)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    min_approvals: int = Field(
        default=0,
        ge=0,
        description="Run only images whose digest is approved by at least this many consortium members "
        "(the owner's registration counts as its approval).",
    )
    datasets: tuple[str, ...] | None = Field(
        default=None, description="Run only processes naming one of these datasets (absent: any)."
    )
    max_epsilon: float | None = Field(
        default=None,
        gt=0,
        description="Run only processes with a privacy budget of at most this ε (absent: no limit; "
        "set, a process without a budget is refused).",
    )


def _now() -> str:
    """Now, in the transactions' format (``2026-01-01T00:00:00.000000Z``), so that times compare as strings."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _covers(image: ImageRecord, org: str, digest: str, dataset: str, now: str) -> str | None:
    """Why ``org`` has not approved ``digest`` of ``image`` for ``dataset`` at ``now`` (None: it has)."""
    if image.owner == org and image.digest == digest:
        return None
    approval = next((a for a in image.approvals if a.organisation == org), None)
    if approval is None:
        return f"{org} has not approved image {image.id} ({digest})"
    problem = approval.problem(digest, dataset, now)
    return None if problem is None else f"{org}: {problem}"


def consent_problem(
    client: ConsortiaClient,
    process: ProcessRecord,
    image: ImageRecord,
    policy: ConsentPolicy = ConsentPolicy(),
    now: str | None = None,
) -> str | None:
    """Why this organisation (``client.organisation``) must not run a task of ``process``, or None.
    ``image`` is the process's image as read now (with its approvals)."""
    org, now = client.organisation, now or _now()
    if process.private_salt is not None and process.private_terms().digest() != process.private_sha256:
        return (
            f"the private terms of learning process {process.id} as read do not match its on-chain hash "
            f"{process.private_sha256}"
        )
    terms = process.terms_digest()
    answers = {a.organisation: a for a in client.process_acceptances(process.id)}
    own: ProcessAcceptance | None = answers.get(org)
    if own is None or own.decision != "accepted":
        return f"{org} has not accepted learning process {process.id}"
    if own.terms_digest != terms:
        return (
            f"{org} accepted learning process {process.id} with terms {own.terms_digest}, but its terms "
            f"as recorded now have digest {terms}"
        )
    if image.digest != process.image_digest:
        return f"image {image.id} is registered at {image.digest}, the process pins {process.image_digest}"
    if (problem := _covers(image, org, process.image_digest, process.dataset, now)) is not None:
        return problem
    if policy.datasets is not None and process.dataset not in policy.datasets:
        return f"local policy: dataset {process.dataset!r} is not among {list(policy.datasets)}"
    if policy.max_epsilon is not None:
        budget = process.privacy_budget
        if budget is None:
            return f"local policy: a process needs a privacy budget of ε ≤ {policy.max_epsilon}"
        if float(budget.epsilon) > policy.max_epsilon:
            return f"local policy: privacy budget ε = {budget.epsilon} is over ε ≤ {policy.max_epsilon}"
    if policy.min_approvals:
        approving = [
            m
            for m in process.consortium
            if _covers(image, m, process.image_digest, process.dataset, now) is None
        ]
        if len(approving) < policy.min_approvals:
            return (
                f"local policy: image {image.id} is approved by {len(approving)} member(s) "
                f"{approving}, fewer than {policy.min_approvals}"
            )
    return None


def give_consent(admins: Mapping[str, ConsortiaClient], process_id: str) -> list[ProcessAcceptance]:
    """Each member's admin (``admins``: MSP id -> a client of an identity that may consent for it)
    gives its consent (:func:`consent_to`: approves the process's image unless its standing approval
    covers it or it owns the image, and accepts the process's terms as it reads them; members not in
    ``admins``: not here, nothing given). On one machine only (demo, tests, benchmarks); in a
    deployment each organisation does this on its own host (``consortia process accept
    --approve-image``, or ``consortia image approve`` then ``consortia process accept``)."""
    process = None
    for admin in admins.values():
        try:
            process = admin.get_process(process_id)
            break
        except Forbidden:  # not a member: another admin reads it
            continue
    if process is None:
        raise NotFound(f"none of {sorted(admins)} is a member of learning process {process_id}")
    image = next(admins[m] for m in process.consortium if m in admins).get_image(process.image_id)
    # the others consent on their hosts
    return [_consent(admins[m], process, image, None) for m in process.consortium if m in admins]


def consent_to(admin: ConsortiaClient, process_id: str, terms_digest: str | None = None) -> ProcessAcceptance:
    """``admin``'s organisation consents to process ``process_id`` in one go, as its admin does on its
    own host with ``consortia process accept --approve-image``: it approves the image the process pins,
    at the digest it pins and for every dataset of its, unless its standing approval already covers
    that digest for the process's dataset or it owns the image; then it accepts the terms.
    ``terms_digest`` is the digest of the terms the admin reviewed (None: the terms as read now); terms
    that changed since are :class:`~ledger.errors.ConsentMissing` before anything is written."""
    process = admin.get_process(process_id)
    return _consent(admin, process, admin.get_image(process.image_id), terms_digest)


def _consent(
    admin: ConsortiaClient, process: ProcessRecord, image: ImageRecord, terms_digest: str | None
) -> ProcessAcceptance:
    terms = process.terms_digest()
    if terms_digest is not None and terms_digest != terms:
        raise ConsentMissing(
            f"the terms of learning process {process.id} have digest {terms}, not the reviewed {terms_digest}: "
            "nothing approved or accepted"
        )
    if _covers(image, admin.organisation, process.image_digest, process.dataset, _now()) is not None:
        admin.approve_image(process.image_id, process.image_digest)  # for every dataset of its
    return admin.accept_process(process.id, terms)
