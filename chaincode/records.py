"""The on-chain records, each defined once (docs/ledger.md "Records").

Every record the contracts store, and every answer they give, is one of these pydantic models:

* the contracts build what they store with them (:meth:`TransactionContext.put` takes a
  :class:`Record`), read what is stored into them, and validate the signed execution result with
  :class:`ExecutionResult` (:func:`check_result`: an error names the key and the rule broken);
* the client (:class:`ledger.client.ConsortiaClient`) returns them;
* the gateway answers with them, so its OpenAPI document carries their JSON Schema.

**The JSON of a record is what it was built or read with** (:meth:`Record.json_object`): the fields
given to its constructor, or present in the stored JSON, plus any key this version does not know
(kept as it is). A field that a later transaction adds -- an image's ``revoked``, a process's
``status_by``, a completed execution record's ``privacy`` -- is absent until then, as it was when the
contracts wrote dicts, so every stored record keeps its canonical JSON byte for byte
(``tests/chaincode/test_records.py``, a golden record of each type). Numbers keep their JSON type: a
field that may hold an integer or a float is typed ``int | float``, and the fields of the signed result
are strict (no value is converted), so what is stored is what the task key signed.

Limits on free-form fields (:mod:`chaincode.limits`) are checked by the contracts on what they are
given, not here: a record committed before a limit existed stays readable.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Annotated, Any, Literal, Self, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    StrictFloat,
    StrictInt,
    StrictStr,
    StringConstraints,
    ValidationError,
)
from pydantic_core import PydanticSerializationError

from chaincode.errors import InvalidArgument
from wire.canonical import DIGEST_RE, canonical_json, sha256_digest

#: an image, process or model id
ID_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._:+-]{0,127}"
#: an organisation's MSP id
MSP_PATTERN = r"[A-Za-z0-9][A-Za-z0-9.-]{0,63}"

Digest = Annotated[
    str,
    StringConstraints(strict=True, pattern=DIGEST_RE.pattern),
    Field(description="A SHA-256 digest, `sha256:<64 lower-case hex>`"),
]
Identifier = Annotated[str, StringConstraints(strict=True, pattern=f"^{ID_PATTERN}$")]
#: an organisation's MSP id (as its certificates name it; a process's members also match MSP_PATTERN)
MspId = Annotated[str, Field(description="An organisation's MSP id")]
Timestamp = Annotated[
    str,
    Field(
        description="UTC ISO-8601 with microseconds (the transaction's time), e.g. 2026-01-01T00:00:00.000000Z"
    ),
]
#: where a task runs (docs/executor.md)
Runtime = Literal["container", "sandbox", "inprocess"]
RUNTIMES: tuple[str, ...] = get_args(Runtime)
#: a JSON number as it was written: an integer stays an integer, a float a float (never NaN or ±∞)
Number = StrictInt | Annotated[StrictFloat, Field(allow_inf_nan=False)]


def _json(value: Any, every_field: bool) -> Any:
    """A field's value in a record's dict: records inside as dicts, anything else as it is."""
    if isinstance(value, Record):
        return value.to_dict() if every_field else value.json_object()
    if isinstance(value, (tuple, list)) and value and isinstance(value[0], Record):
        return [_json(v, every_field) for v in value]
    return value


_PLAIN = (str, int, float, bool, dict, type(None))  # values passed on without a look inside


class Record(BaseModel):
    """A ledger record or a part of one (frozen; unknown keys are kept)."""

    model_config = ConfigDict(frozen=True, extra="allow", use_attribute_docstrings=True)

    def json_object(self) -> dict[str, Any]:
        """The record's JSON object: the fields it was built or read with, and unknown keys, each
        value as it is (records inside converted the same way; JSON values are not copied, so this
        works at any depth). The contracts store ``canonical_json`` of it."""
        fields = self.__pydantic_fields_set__
        out = {
            k: v if type(v) in _PLAIN else _json(v, False) for k, v in self.__dict__.items() if k in fields
        }
        if self.__pydantic_extra__:
            out.update(self.__pydantic_extra__)
        return out

    def to_dict(self) -> dict[str, Any]:
        """Every field (its default where the ledger's JSON lacks it; not the fields a subclass
        excludes from its answers) and unknown keys, as a plain dict; like :meth:`json_object`,
        nested JSON values are passed on, not copied, and signed parts stay as they were signed."""
        fields = type(self).model_fields
        out = {k: _json(v, True) for k, v in self.__dict__.items() if not fields[k].exclude}
        if self.__pydantic_extra__:
            out.update(self.__pydantic_extra__)
        return out

    def canonical(self) -> bytes:
        """The canonical JSON of :meth:`json_object` (what is stored, hashed and signed)."""
        return canonical_json(self.json_object())

    def replace(self, **changes: Any) -> Self:
        """A copy with ``changes`` (validated); the fields it had stay as they were."""
        fields = self.__pydantic_fields_set__
        data = {k: v for k, v in self.__dict__.items() if k in fields}
        data.update(self.__pydantic_extra__ or {})
        data.update(changes)
        return self.model_validate(data)

    def view(self, **fields: Any) -> Self:
        """A copy with the read-only ``fields`` that an answer adds and that are never stored (an
        image's ``approvals``, a process's ``current_round``, a model's ``wrapped_key``). Not
        validated again: the contract computes them."""
        return self.model_copy(update=fields)

    @classmethod
    def from_json(cls, raw: bytes | str) -> Self:
        """The record whose canonical JSON is ``raw`` (as stored or answered): parsed and validated in
        one pass by pydantic-core (its numbers are Python's: a float parses to the same double, an
        integer of any size stays exact); a value nested deeper than its parser goes (a record
        committed before the depth limit) is decoded by :mod:`json` instead."""
        try:
            return cls.model_validate_json(raw)
        except ValidationError:
            return cls.model_validate(json.loads(raw))  # the same answer, or the same error


def json_value(value: Any) -> Any:
    """A contract's answer as plain JSON values: records (and lists of them) as their JSON objects."""
    if isinstance(value, Record):
        return value.json_object()
    if isinstance(value, (list, tuple)):
        return [json_value(v) for v in value]
    return value


# ---------------------------------------------------------------------------------------- images
class ImageApproval(Record):
    """An organisation's approval of an image for use on its data, naming the exact digest it
    inspected (key ``ImageApproval/<image id>/<MSP>``; docs/consent.md). Approving again replaces it
    (the key's history keeps every version); a revoked approval stays on the ledger, marked."""

    image_id: Identifier
    organisation: MspId
    digest: Digest
    approved_by: str
    """Common name of the approving identity."""
    created: Timestamp
    tx_id: str
    datasets: tuple[str, ...] = ()
    """The dataset names it approves the image for (absent or empty: every dataset)."""
    expires: str | None = None
    """When the approval lapses (UTC ISO-8601, the transactions' format); absent: never."""
    revoked: str | None = None
    """When the organisation revoked it (only on a revoked approval)."""
    revoked_reason: str = ""
    revoked_by: str = ""

    def problem(self, digest: str, dataset: str, now: str) -> str | None:
        """Why this approval does not cover ``digest`` on ``dataset`` at time ``now`` (None: it does)."""
        if self.revoked is not None:
            return f"its approval of image {self.image_id} was revoked at {self.revoked}"
        if self.digest != digest:
            return f"it approved image {self.image_id} at digest {self.digest}, not {digest}"
        if self.expires is not None and now >= self.expires:
            return f"its approval of image {self.image_id} expired at {self.expires}"
        if self.datasets and dataset not in self.datasets:
            return (
                f"it approved image {self.image_id} for datasets {list(self.datasets)}, not for {dataset!r}"
            )
        return None


class ImageRecord(Record):
    """An algorithm image pinned by its content digest (key ``Image/<id>``, seed 003 §IV-B)."""

    id: Identifier
    name: str
    version: str
    algorithm: str
    """The step function the image runs (a registered name or ``module:Class``)."""
    digest: Digest
    reference: str
    """Where the image can be fetched (registry reference); empty if only by digest."""
    description: str = ""
    owner: MspId
    registered_by: str = ""
    created: Timestamp
    tx_id: str
    """The transaction that wrote this version."""
    status: Literal["active", "revoked"]
    revoked_reason: str = ""
    revoked: str | None = None
    """When the owner revoked it (only on a revoked image)."""
    approvals: tuple[ImageApproval, ...] = ()
    """Approvals by other organisations (``Image:get`` only; stored as their own records)."""


# ---------------------------------------------------------------------------------------- processes
class PrivacyBudget(Record):
    """A process's privacy budget, resolved (:func:`chaincode.privacy.parse_budget`)."""

    mechanism: str
    epsilon: Number
    accounting: Literal["basic", "zcdp"]
    """How releases compose: ε adds up (basic) or zCDP ρ adds up and is converted at δ (zcdp)."""
    scope: Literal["network", "node"]
    """The observer the budget caps: every link (network) or one organisation's messages (node)."""
    delta: float | None = None
    """δ of (ε, δ)-DP (only with one)."""


class ProcessPrivacy(Record):
    """A process's privacy, rigorous figure first (:func:`chaincode.privacy.privacy_status`; a view of
    its latest execution records, never stored). With a budget, ``epsilon_spent`` is the largest ε the
    ledger has charged a member so far in the budget's scope (its own accountant, never a figure an
    image reports); without one, no ε is guaranteed, and an ε an image reports is only shown as
    ``reported_epsilon``, labelled by ``reported_rigorous``."""

    rigorous: bool
    """True when the ledger charges a declared budget (every round's sensitivity a proven bound);
    False for a process without a budget: nothing is guaranteed."""
    epsilon_spent: float | None = None
    """The largest total ε the ledger has charged a member (budget's scope, at ``delta``)."""
    epsilon_budget: float | None = None
    delta: float | None = None
    scope: str | None = None
    accounting: str | None = None
    """How the latest charge derived ε (basic, zcdp, gdp or rdp)."""
    cap_epsilon: float
    """The consortium's cap on any budget's rigorous ε ..."""
    cap_delta: float
    """... at this δ."""
    reported_epsilon: float | None = None
    """The largest running ε (``epsilon_network_total`` or ``epsilon_total``) an image reported in its
    metrics: not charged, not the ledger's figure."""
    reported_rigorous: bool | None = None
    """Whether the image claims a proven sensitivity for it (its metric ``privacy_rigorous`` = 1); False:
    a nominal ε, not a guarantee."""


class MemberGain(Record):
    """What collaboration bought one member (a view of its last round's signed ``validation`` block, never
    stored): its collaborative and its alone-trained model's metric on its own validation slice."""

    organisation: MspId
    metric: str
    """``balanced_accuracy``, ``roc_auc``, ``mean_log_likelihood`` or ``mean_elbo`` (higher is better)."""
    isolated: float
    """The model trained on its own training rows alone, same hyper-parameters and rounds."""
    collaborative: float
    """Its model from the process."""
    gain: float
    """collaborative − isolated."""
    negative: bool
    """True when collaboration made its model worse than training alone: shown before it uses the model."""
    rows: int
    """Rows of its validation slice."""

    @classmethod
    def of(cls, record: ExecutionRecord) -> MemberGain | None:
        """The gain a completed last-round record's signed result carries (None: it carries none)."""
        scores = record.result.validation if record.status == "completed" and record.result else None
        if scores is None:
            return None
        gain = float(scores.collaborative) - float(scores.isolated)
        return cls(
            organisation=record.organisation,
            metric=scores.metric,
            isolated=float(scores.isolated),
            collaborative=float(scores.collaborative),
            gain=gain,
            negative=gain < 0,
            rows=scores.rows,
        )


#: the transient-map key under which a process's private part travels (docs/confidentiality.md)
PRIVATE_TERMS = "private_terms"


class PrivateTerms(Record):
    """The private part of a process's terms (docs/confidentiality.md): its hyper-parameters, its
    privacy budget (resolved), its description and a salt. One copy lives in each member's implicit collection (key
    ``LearningProcess/<id>``); the public record keeps :meth:`digest` as ``private_sha256``. The salt,
    32 random bytes (hex) chosen by the creating client, keeps the digest of a guessable value (a
    learning rate) from being found by hashing candidates."""

    hyperparameters: dict[str, Any]
    privacy_budget: PrivacyBudget | None
    description: str | None = None
    """The process's free text (absent from terms recorded while the description was public, which
    keeps their digest: the public record then carries it)."""
    salt: Annotated[str, StringConstraints(strict=True, pattern=r"^[0-9a-f]{64}$")]

    def digest(self) -> str:
        """``sha256:<hex>`` of the canonical JSON (what the public record's ``private_sha256`` is)."""
        return sha256_digest(self.canonical())


class ProcessRecord(Record):
    """A collaborative learning process (key ``LearningProcess/<id>``, seed 003 §IV-B/C): the
    image it pins, its consortium, topology, hyper-parameters, rounds and privacy budget.

    The hyper-parameters, the privacy budget and the description are private (:class:`PrivateTerms`): the stored,
    public record carries ``private_sha256`` instead, and ``LearningProcess:get`` answers a member
    with them joined from its own copy (``private_salt`` too). A record stored before they were
    private (no ``private_sha256``) carries them in clear."""

    id: Identifier
    image_id: Identifier
    image_digest: Digest
    """The digest of the image, pinned when the process was created."""
    algorithm: str
    consortium: tuple[MspId, ...]
    topology: dict[str, Any]
    """The communication graph: ``kind``, ``seed`` and the kind's own parameters."""
    hyperparameters: dict[str, Any] = Field(default_factory=dict)
    """Private: joined by a member's read (empty in the public record when ``private_sha256`` is set)."""
    rounds: int
    privacy_budget: PrivacyBudget | None = None
    """Private, as ``hyperparameters``."""
    private_sha256: Digest | None = None
    """The digest of the process's :class:`PrivateTerms` (None: a process recorded before they were private)."""
    private_salt: str | None = None
    """The salt of the :class:`PrivateTerms` (a member's read only; never stored)."""
    private_purged: Timestamp | None = None
    """When the members purged the private terms from their collections (``LearningProcess:purge_private``,
    a finished process): the values are gone, ``private_sha256`` stays as evidence."""
    dataset: str = ""
    description: str = ""
    """Private when the process's :class:`PrivateTerms` carry it (``description_private``): joined by a
    member's read, absent from the public record. Public on a process recorded before."""
    description_private: bool | None = None
    """True on a member's read whose ``description`` was joined from its private copy (never stored)."""
    creator: MspId
    created_by: str = ""
    created: Timestamp
    status: Literal["created", "running", "completed", "failed", "aborted", "declined"]
    status_reason: str
    updated: str
    tx_id: str
    status_by: str | None = None
    """The organisation that made the last status change (after the first change)."""
    current_round: int | None = None
    """The first round not yet completed by every member (``LearningProcess:get`` only)."""
    validation_fraction: Number = 0
    """The share of its own rows each member holds out as its validation slice (0: none; absent on
    processes created before slices existed). Docs/models.md "What collaboration bought you"."""
    privacy: ProcessPrivacy | None = None
    """What the process's privacy amounts to, rigorous ε first (read answers of the client and the
    gateway: :meth:`ledger.client.ConsortiaClient.process_privacy`; never stored)."""
    gains: tuple[MemberGain, ...] | None = None
    """What collaboration bought each member, from the last round's signed results (read answers of the
    client and the gateway: :meth:`ledger.client.ConsortiaClient.process_gains`; never stored)."""

    def terms(self) -> dict[str, Any]:
        """What a member accepts (docs/consent.md): image and digest, algorithm, consortium,
        topology, hyper-parameters, rounds, privacy budget, dataset name and validation fraction, as
        recorded (a process recorded without a validation fraction has none in its terms). The
        hyper-parameters and the budget of a process whose private part is private are bound by its
        ``private_sha256`` instead, so the public record alone gives the same terms as a member's read."""
        budget = self.privacy_budget
        terms: dict[str, Any] = {
            "id": self.id,
            "image_id": self.image_id,
            "image_digest": self.image_digest,
            "algorithm": self.algorithm,
            "consortium": list(self.consortium),
            "topology": self.topology,
            "hyperparameters": self.hyperparameters,
            "rounds": self.rounds,
            "privacy_budget": None if budget is None else budget.json_object(),
            "dataset": self.dataset,
        }
        if "validation_fraction" in self.model_fields_set:
            terms["validation_fraction"] = self.validation_fraction
        if self.private_sha256 is not None:
            del terms["hyperparameters"], terms["privacy_budget"]
            terms["private_sha256"] = self.private_sha256
        return terms

    def joined(self, terms: PrivateTerms) -> ProcessRecord:
        """This (public) record with ``terms`` joined, as a member reads it (never stored); the caller
        has checked them against ``private_sha256``."""
        described = (
            {}
            if terms.description is None
            else {"description": terms.description, "description_private": True}
        )
        return self.view(
            hyperparameters=terms.hyperparameters,
            privacy_budget=terms.privacy_budget,
            private_salt=terms.salt,
            **described,
        )

    def private_terms(self) -> PrivateTerms:
        """The private part of a member's read of the process (what it passes in the transient map
        to a transaction that needs it); ValueError on a record that has none joined."""
        if self.private_sha256 is None or self.private_salt is None:
            raise ValueError(f"learning process {self.id}: no private part joined to this record")
        extra = {"description": self.description} if self.description_private else {}
        return PrivateTerms(
            hyperparameters=self.hyperparameters,
            privacy_budget=self.privacy_budget,
            salt=self.private_salt,
            **extra,
        )

    def terms_digest(self) -> str:
        """``sha256:<hex>`` of the canonical JSON of :meth:`terms`: what an acceptance binds."""
        return sha256_digest(canonical_json(self.terms()))


class ProcessAcceptance(Record):
    """A member's answer to a process it is named in (key ``ProcessAcceptance/<process>/<MSP>``,
    docs/consent.md): ``accepted`` binds the digest of the process's terms it read
    (:meth:`ProcessRecord.terms_digest`); ``declined`` ends the process with the reason."""

    process_id: Identifier
    organisation: MspId
    decision: Literal["accepted", "declined"]
    terms_digest: Digest
    reason: str = ""
    signed_by: str
    """Common name of the identity that answered."""
    role: str
    """Its NodeOU role (``admin``, or one its organisation's membership record names)."""
    created: Timestamp
    tx_id: str


class ProcessProgress(Record):
    """Where a process stands (``LearningProcess:progress``): its status, current round, the members
    that completed the current round so far, and the number of completed tasks."""

    id: Identifier
    status: str
    rounds: int
    organisations: int
    current_round: int
    completed: tuple[str, ...]
    completed_tasks: int


class ProcessEndorsement(Record):
    """Who endorses a process's records (``LearningProcess:endorsement``): the key-level policy of
    its record as committed, ``required`` of the peers of ``organisations`` (docs/ledger.md, "Who
    endorses what"); ``organisations`` empty and ``required`` 0 for a process created before
    key-level policies (its records fall under the chaincode's policy)."""

    process_id: Identifier
    organisations: tuple[str, ...]
    required: int


# ---------------------------------------------------------------------------------------- execution records
class SignedPart(Record):
    """A part of what a task key signs: it is always written exactly as it was signed -- the keys it
    was given, no defaults added -- in the ledger, in the client's dicts and in the gateway's answers
    (:data:`SignedResult`), so that anyone can check the signature over an answer's ``result``."""

    def json_object(self) -> dict[str, Any]:
        try:  # pydantic's serialiser: its fields are typed, so this is the fast way
            return self.model_dump(exclude_unset=True)
        except PydanticSerializationError:  # a provenance value deeper than it goes
            return super().json_object()

    def to_dict(self) -> dict[str, Any]:
        return self.json_object()


class InputMessage(SignedPart):
    """A message a task read: who sent it and its digest (further signed keys are kept)."""

    sender: StrictStr | None = None
    """Confidential in a result with ``confidential_parties`` (absent from the signed form, joined
    back by a member's read from :attr:`ResultConfidential.senders`)."""
    digest: Digest


class OutputMessage(SignedPart):
    """A message a task wrote: its recipient, digest and size, and the provenance fields its
    algorithm declares (e.g. the estimators a collaborative-RF message carries)."""

    recipient: StrictStr | None = None
    """Confidential in a result with ``confidential_parties``, as :attr:`InputMessage.sender`."""
    digest: Digest
    size: StrictInt | None = None
    """Bytes of the sealed message."""


class ModelOutput(SignedPart):
    """The model a task wrote (a last round's final model): its digest, size and provenance."""

    digest: Digest
    size: StrictInt | None = None
    """Bytes of the model in the clear."""


class ResultInputs(SignedPart):
    """What a task read: its previous state, the messages addressed to it, its data commitment
    (confidential in a result with ``confidential_sha256``: absent from the signed form)."""

    model_config = ConfigDict(extra="forbid")
    state: Digest | None = None
    messages: list[InputMessage]
    data_commitment: Digest | None = None


class ResultOutputs(SignedPart):
    """What a task wrote: its new state, its messages and (last round) its model."""

    model_config = ConfigDict(extra="forbid")
    state: Digest
    messages: list[OutputMessage]
    model: ModelOutput | None = None


#: a numeric profile's name (``x86-64-v2``; algorithms/numeric_profile.py)
PROFILE_NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}"


class NumericProfileRecord(SignedPart):
    """The numeric profile a task computed under: the floating-point kernels its image declares
    (docs/reproducibility.md), named and digested as ``algorithms.numeric_profile`` records it."""

    model_config = ConfigDict(extra="forbid")
    name: Annotated[str, StringConstraints(strict=True, pattern=f"^{PROFILE_NAME_PATTERN}$")]
    version: Annotated[StrictInt, Field(ge=1)]
    digest: Digest


#: the version of the algorithm SDK a task ran with (semantic versioning; consortia_sdk.SDK_VERSION)
SDK_VERSION_PATTERN = r"(0|[1-9][0-9]{0,5})\.(0|[1-9][0-9]{0,5})\.(0|[1-9][0-9]{0,5})"


class ValidationScores(SignedPart):
    """The last round's scores on the member's validation slice (:mod:`algorithms.validation`): its
    collaborative model and the model it would have got alone, by the family's metric."""

    model_config = ConfigDict(extra="forbid")
    metric: Annotated[str, StringConstraints(strict=True, pattern=r"^[a-z][a-z0-9_]{0,63}$")]
    collaborative: Number
    isolated: Number
    rows: Annotated[StrictInt, Field(ge=1)]


class ExecutionResult(SignedPart):
    """A task's result, as its task key signs it (canonical JSON) and the ledger stores it."""

    model_config = ConfigDict(extra="forbid")
    image_digest: Digest
    runtime: Runtime
    inputs: ResultInputs
    outputs: ResultOutputs
    metrics: dict[str, Number] = Field(default_factory=dict)
    """Confidential in a result with ``confidential_sha256`` (absent from the signed form)."""
    process_id: Identifier
    round: Annotated[StrictInt, Field(ge=1)]
    organisation: Annotated[StrictStr, StringConstraints(min_length=1, max_length=256)]
    numeric_profile: NumericProfileRecord | None = None
    """Absent in results made before tasks recorded it."""
    sdk: Annotated[str, StringConstraints(strict=True, pattern=f"^{SDK_VERSION_PATTERN}$")] | None = None
    """The algorithm SDK version the task ran with (``MAJOR.MINOR.PATCH``); absent in results made
    before tasks recorded it."""
    started: StrictStr | None = None
    finished: StrictStr | None = None
    validation: ValidationScores | None = None
    """The last round of a process with a validation slice only (confidential, as ``metrics``)."""
    confidential_sha256: Digest | None = None
    """The digest of the result's :class:`ResultConfidential` part (docs/confidentiality.md): the
    metrics, the data commitment and the validation scores are then not in what the task key signs
    (:meth:`signed_form`). Absent: a result signed with them in clear (before they were private)."""
    confidential_parties: Literal[True] | None = None
    """True: who sent each input message and who each output message goes to are confidential too
    (:attr:`ResultConfidential.senders` and ``recipients``, in the messages' order): the signed form's
    messages carry digests and sizes only. Absent: a result signed with them in clear (before)."""

    def signed_form(self) -> dict[str, Any]:
        """What the task key signed (its canonical JSON): the result as given, without the
        confidential fields a member's read joins back when ``confidential_sha256`` is set."""
        signed: dict[str, Any] = signed_result(self.json_object())
        return signed

    def confidential_part(self, salt: str) -> ResultConfidential:
        """The confidential part of this result as a member reads it (joined), with ``salt``;
        ValueError if a field it needs is not joined."""
        if self.inputs.data_commitment is None:
            raise ValueError("no data commitment joined")
        parties: dict[str, Any] = {}
        if self.confidential_parties:
            parties["senders"] = [m.sender for m in self.inputs.messages]
            parties["recipients"] = [m.recipient for m in self.outputs.messages]
        return ResultConfidential(
            metrics=self.metrics,
            data_commitment=self.inputs.data_commitment,
            validation=self.validation,
            salt=salt,
            **parties,
        )

    def joined(self, part: ResultConfidential) -> ExecutionResult:
        """The result with its confidential part joined back (a member's read; never signed as such)."""
        data = self.signed_form()
        data["metrics"] = part.metrics
        data["inputs"] = {**data["inputs"], "data_commitment": part.data_commitment}
        if part.senders is not None:
            ins = data["inputs"]
            data["inputs"] = {
                **ins,
                "messages": [{**m, "sender": s} for m, s in zip(ins["messages"], part.senders, strict=True)],
            }
        if part.recipients is not None:
            outs = data["outputs"]
            data["outputs"] = {
                **outs,
                "messages": [
                    {**m, "recipient": r} for m, r in zip(outs["messages"], part.recipients, strict=True)
                ],
            }
        if part.validation is not None:
            data["validation"] = part.validation.json_object()
        return ExecutionResult.model_validate(data)


#: the keys of a result that its confidential part holds (``inputs.data_commitment`` too)
CONFIDENTIAL_RESULT_KEYS = ("metrics", "validation")


def signed_result(result: Any) -> Any:
    """The signed form of a result given as a JSON object: with ``confidential_sha256``, the object
    without the metrics, the validation scores and ``inputs.data_commitment``, and with
    ``confidential_parties`` without the messages' senders and recipients (a member's read joins them
    back); otherwise (or not an object) as it is."""
    if not isinstance(result, dict) or result.get("confidential_sha256") is None:
        return result
    out = {k: v for k, v in result.items() if k not in CONFIDENTIAL_RESULT_KEYS}
    parties = result.get("confidential_parties") is True
    inputs = out.get("inputs")
    if isinstance(inputs, dict):
        out["inputs"] = {k: v for k, v in inputs.items() if k != "data_commitment"}
        if parties:
            out["inputs"]["messages"] = _without(inputs.get("messages"), "sender")
    outputs = out.get("outputs")
    if parties and isinstance(outputs, dict):
        out["outputs"] = {**outputs, "messages": _without(outputs.get("messages"), "recipient")}
    return out


def _without(messages: Any, party: str) -> Any:
    """``messages`` (a list of message objects) without their ``party`` key."""
    if not isinstance(messages, list):
        return messages
    return [{k: v for k, v in m.items() if k != party} if isinstance(m, dict) else m for m in messages]


#: the transient-map key of a result's confidential part (``ExecutionRecord:complete_task``)
RESULT_CONFIDENTIAL = "result_confidential"
#: the transient-map key of the caller's previous record's private part (its privacy block)
PREVIOUS_EXECUTION_PRIVATE = "previous_execution_private"


class ResultConfidential(Record):
    """The confidential part of a task's result (docs/confidentiality.md): its per-round metrics,
    its data commitment, its validation scores, who sent each message it read and who each message it
    wrote goes to, and a salt of 32 random bytes (hex) chosen by the
    executing organisation's agent, so that the digest of low-entropy metrics is not found by
    hashing candidates. The signed result carries :meth:`digest` as ``confidential_sha256``."""

    model_config = ConfigDict(extra="forbid")
    metrics: dict[str, Number]
    data_commitment: Digest
    validation: ValidationScores | None = None
    senders: list[StrictStr] | None = None
    """The sender of each of the result's input messages, in their order (absent from parts made
    before the parties were confidential: their messages name them in the signed result)."""
    recipients: list[StrictStr] | None = None
    """The recipient of each of the result's output messages, in their order (as ``senders``)."""
    salt: Annotated[str, StringConstraints(strict=True, pattern=r"^[0-9a-f]{64}$")]

    def digest(self) -> str:
        """``sha256:<hex>`` of the canonical JSON (the signed result's ``confidential_sha256``)."""
        return sha256_digest(self.canonical())


def split_result(result: dict[str, Any], salt: str) -> tuple[dict[str, Any], ResultConfidential]:
    """A full result (a task's manifest) as (the public result to sign, its confidential part): the
    metrics, the data commitment, the validation scores and the messages' senders and recipients go
    into the part; the public result keeps the messages' digests and sizes."""
    inputs, outputs = result["inputs"], result["outputs"]
    validation = result.get("validation")
    senders, recipients = _parties(inputs, "sender"), _parties(outputs, "recipient")
    parties = senders is not None and recipients is not None  # else malformed: the contract names why
    part = ResultConfidential(
        metrics=result["metrics"],
        data_commitment=inputs["data_commitment"],
        validation=None if validation is None else ValidationScores.model_validate(validation),
        **({"senders": senders, "recipients": recipients} if parties else {}),
        salt=salt,
    )
    public = {k: v for k, v in result.items() if k not in CONFIDENTIAL_RESULT_KEYS}
    public["inputs"] = {k: v for k, v in inputs.items() if k != "data_commitment"}
    if parties:
        public["inputs"]["messages"] = _without(inputs["messages"], "sender")
        public["outputs"] = {**outputs, "messages": _without(outputs["messages"], "recipient")}
        public["confidential_parties"] = True
    public["confidential_sha256"] = part.digest()
    return public, part


def _parties(side: Any, party: str) -> list[str] | None:
    """The ``party`` (sender or recipient) of each of a result side's messages; None when the messages
    are not a list of objects that each name one as a string."""
    messages = side.get("messages") if isinstance(side, dict) else None
    if not isinstance(messages, list) or not all(
        isinstance(m, dict) and isinstance(m.get(party), str) for m in messages
    ):
        return None
    return [m[party] for m in messages]


#: the result field of an execution record: answered exactly as signed (no defaults added), with the
#: JSON Schema of :class:`ExecutionResult`
SignedResult = Annotated[
    ExecutionResult | None, PlainSerializer(lambda r: None if r is None else r.json_object())
]


class PrivacySpent(Record):
    """One observer's charge of one round: pure ε (Laplace rounds) or one Gaussian release or none."""

    epsilon_basic: float | None = None
    """The round's pure ε (Laplace rounds only; a Gaussian release has none)."""
    rho: float
    releases: int | None = None
    """1 if the round released a Gaussian gradient, else 0 (Gaussian rounds only)."""


class PrivacyTotals(Record):
    """One observer's totals up to this round, and the ε they amount to under the accounting."""

    epsilon_basic: float | None = None
    rho: float
    epsilon: float
    """The rigorous ε at the block's δ: the figure the budget caps (in the budget's scope)."""
    releases: int | None = None
    """Gaussian releases so far (Gaussian rounds only)."""


class PrivacyCharges(Record):
    node: PrivacySpent
    network: PrivacySpent


class PrivacyCharge(Record):
    """The privacy block of a completed execution record (:func:`chaincode.privacy.charge`)."""

    mechanism: Literal["gaussian"] | None = None
    """``gaussian`` on a Gaussian round (absent on a pure-ε round)."""
    accounting: Literal["basic", "zcdp", "gdp", "rdp"]
    """How ε was derived: basic sum or zCDP of pure-ε releases; exact Gaussian DP (gdp) or the
    sampled Gaussian's RDP curve (rdp) of Gaussian releases."""
    scope: Literal["network", "node"]
    delta: float | None
    rigorous: bool
    sensitivity: Number | None
    gradient_clip: Number | None
    noise_multiplier: float | None = None
    """z of a Gaussian round."""
    sampling_rate: float | None = None
    """Poisson rate q of a Gaussian round (1: no sampling)."""
    parallel_composition: bool | None = None
    """A Gaussian round of a stream, where every record enters one round (the run is one release)."""
    spent: PrivacyCharges
    node: PrivacyTotals
    network: PrivacyTotals


class ExecutionRecord(Record):
    """One organisation's task of one round (key ``Execution/<process>/<round>/<MSP>``, seed 003 §IV-C):
    its registered task key, then its signed result (completed) or the reason it failed."""

    process_id: Identifier
    round: int
    organisation: MspId
    image_digest: Digest
    runtime: Runtime | Literal[""]
    """Empty on a failure recorded without a task."""
    public_key: str
    """The task's P-256 public key (PEM); empty on a failure recorded without a task."""
    status: Literal["running", "completed", "failed"]
    created: Timestamp
    created_by: str = ""
    tx_id: str
    result: SignedResult = None
    signature: str = ""
    """The task key's ECDSA signature over the canonical JSON of ``result`` (base64 DER)."""
    completed: str = ""
    completed_tx_id: str = ""
    failure_reason: str = ""
    failure_details: dict[str, Any] = {}
    epsilon_total: float = 0.0
    """The organisation's ε spent so far in the budget's scope (0 without a budget). Private in a
    record with ``private_sha256``: 0 in the stored, public record, and a member's read joins it."""
    privacy: PrivacyCharge | None = None
    """Private, as ``epsilon_total``."""
    private_sha256: Digest | None = None
    """The digest of the record's :class:`ExecutionPrivate` copy (one in each member's implicit
    collection, docs/confidentiality.md); None: a record whose result is signed in clear."""
    confidential_salt: str | None = None
    """The salt of the result's confidential part (a member's read only; never stored)."""
    private_purged: Timestamp | None = None
    """When the process's members purged its private data (``LearningProcess:purge_private``): a read
    then answers the public record, its ``private_sha256`` the evidence (never stored)."""

    def private_part(self) -> ExecutionPrivate:
        """The private part of a member's joined read (what the next round's completion passes in
        the transient map); ValueError on a record with none joined."""
        res = self.result
        if self.private_sha256 is None or self.confidential_salt is None or res is None:
            raise ValueError(f"execution record of {self.organisation}: no private part joined")
        if res.inputs.data_commitment is None:
            raise ValueError(f"execution record of {self.organisation}: no data commitment joined")
        return ExecutionPrivate(
            result=res.confidential_part(self.confidential_salt),
            epsilon_total=self.epsilon_total,
            privacy=self.privacy,
        )


class ExecutionPrivate(Record):
    """What each member's implicit collection holds of a completed execution record whose result is
    confidential (key ``Execution/<process>/<round>/<MSP>``): the result's confidential part and the
    privacy charge the contract computed from it. The public record keeps :meth:`digest` as
    ``private_sha256`` (salted by the part's salt)."""

    result: ResultConfidential
    epsilon_total: float
    privacy: PrivacyCharge | None

    def digest(self) -> str:
        """``sha256:<hex>`` of the canonical JSON (the public record's ``private_sha256``)."""
        return sha256_digest(self.canonical())

    def joined(self, record: dict[str, Any]) -> dict[str, Any]:
        """The stored (public) execution record's JSON object with this part joined, as a member reads
        it (never stored): ``result`` with its confidential fields, ``epsilon_total``, ``privacy`` and
        ``confidential_salt``. The caller has checked the part against ``private_sha256``."""
        result = ExecutionResult.model_validate(record["result"]).joined(self.result)
        return {
            **record,
            "result": result.json_object(),
            "epsilon_total": self.epsilon_total,
            "privacy": None if self.privacy is None else self.privacy.json_object(),
            "confidential_salt": self.result.salt,
        }


class InboxEntry(Record):
    """One organisation's part of a round as the next round's task of the caller needs it
    (``ExecutionRecord:inbox``): its status, the digest of the state it recorded (completed only) and
    its output messages addressed to the caller."""

    organisation: str
    status: str
    state: str | None
    messages: tuple[OutputMessage, ...]


# ---------------------------------------------------------------------------------------- models
#: the key prefix of model records (``Model/<id>``), and of their private copies in the implicit collections
MODEL = "Model"
#: the transient-map key under which a model's private part travels (``Model:publish``/``grant``/``revoke``)
MODEL_PRIVATE = "model_private"
#: the transient-map key of the new private part of a revocation that moves the model (``Model:revoke``)
NEXT_MODEL_PRIVATE = "next_model_private"


class ModelPrivate(Record):
    """The private part of a model record (docs/confidentiality.md): where its ciphertext is stored, its
    size, its metrics and its estimators, with a salt. One copy lives in the implicit collection of each
    organisation on the model's access list (key ``Model/<id>``); the public record keeps :meth:`digest`
    as ``private_sha256``. The salt (32 random bytes, hex, chosen by the publishing client) keeps a
    guessable value (a size, a path) from being found by hashing candidates."""

    location: str = ""
    size: int
    metrics: dict[str, Number] = {}
    estimators: tuple[Any, ...] = ()
    salt: Annotated[str, StringConstraints(strict=True, pattern=r"^[0-9a-f]{64}$")]

    def digest(self) -> str:
        """``sha256:<hex>`` of the canonical JSON (what the public record's ``private_sha256`` is)."""
        return sha256_digest(self.canonical())


class ModelRecord(Record):
    """A final model (key ``Model/<id>``, seed 003 §IV-B): stored off chain, encrypted under a data key
    sealed for each organisation on its access list.

    The model of a process whose terms are private keeps its location, size, metrics and estimators
    private (:class:`ModelPrivate`): the stored, public record carries ``private_sha256`` instead (and
    ``size`` 0), and ``Model:get`` answers an organisation on the access list with them joined from its
    own copy. A model published before (or of a process recorded before terms were private) carries
    them in clear. What stays public (identifiers, owner, digests, access list, key version, image,
    round, times) is what the access control and the lineage check need."""

    id: Identifier
    process_id: Identifier
    owner: MspId
    digest: Digest
    """The digest of the model in the clear (the one the last round's execution record signed)."""
    size: int = 0
    """Private, as ``location``, ``metrics`` and ``estimators``, when ``private_sha256`` is set: joined
    by a read of an organisation on the access list (absent from the public record)."""
    ciphertext_digest: Digest
    location: str = ""
    metrics: dict[str, Number] = {}
    estimators: tuple[Any, ...] = ()
    image_digest: str = ""
    round: int = 0
    access: tuple[MspId, ...]
    key_version: int = 1
    """Incremented by each revocation (which rotates the data key)."""
    created: Timestamp
    published_by: str = ""
    tx_id: str
    updated: str = ""
    wrapped_key: str | None = None
    """The caller's own sealed data key (base64), on reads; never stored in this record."""
    gain: MemberGain | None = None
    """What collaboration bought the model's owner (gateway and CLI reads, from the last round's signed
    result; never stored): ``negative`` warns before the model is used."""
    private_sha256: Digest | None = None
    """The digest of the model's :class:`ModelPrivate` (None: a model whose fields are public)."""
    private_salt: str | None = None
    """The salt of the :class:`ModelPrivate` (a read by an organisation on the access list; never stored)."""
    private_purged: Timestamp | None = None
    """On reads of a model whose process's private data was purged (``LearningProcess:purge_private``):
    when. The values are gone, ``private_sha256`` stays as evidence (never stored)."""

    def joined(self, part: ModelPrivate) -> ModelRecord:
        """This (public) record with ``part`` joined, as an organisation on the access list reads it
        (never stored); the caller has checked it against ``private_sha256``."""
        return self.view(
            location=part.location,
            size=part.size,
            metrics=part.metrics,
            estimators=part.estimators,
            private_salt=part.salt,
        )

    def private_part(self) -> ModelPrivate:
        """The private part of a joined read (what the owner passes in the transient map to ``grant``
        and ``revoke``); ValueError on a record that has none joined."""
        if self.private_sha256 is None or self.private_salt is None:
            raise ValueError(f"model {self.id}: no private part joined to this record")
        return ModelPrivate(
            location=self.location,
            size=self.size,
            metrics=self.metrics,
            estimators=self.estimators,
            salt=self.private_salt,
        )


class SealedKey(Record):
    """A model's data key sealed for one organisation (key ``ModelKey/<model id>/<MSP>``)."""

    model_id: Identifier
    organisation: MspId
    wrapped_key: str
    granted: Timestamp
    tx_id: str


# ---------------------------------------------------------------------------------------- membership
class MemberRecord(Record):
    """Where an organisation is reached (key ``Member/<MSP>``, written only by that organisation): its
    artifact service (and gateway) endpoint and the SHA-256 digest of its TLS CA certificate PEM."""

    msp_id: MspId
    artifact_endpoint: str
    """``https://host:port`` of its artifact service."""
    gateway_endpoint: str = ""
    tls_ca_digest: Digest
    version: int
    created: str = ""
    updated_at: str
    published_by: str = ""
    tx_id: str
    consent_roles: tuple[str, ...] = ()
    """NodeOU roles besides ``admin`` whose identities may approve images and accept processes for
    this organisation (set only by its admin; absent: admin only)."""


# ---------------------------------------------------------------------------------------- disclosures
class DisclosureRecord(Record):
    """An organisation's disclosure of the inputs of some of its tasks to an auditor (key
    ``Disclosure/<process>/<bundle hex>``, docs/audit-replay.md): the process, the rounds, the recipient,
    and the digest of the sealed bundle; written only by the disclosing organisation, once."""

    process_id: Identifier
    organisation: MspId
    """The disclosing organisation (the caller's MSP id)."""
    rounds: tuple[int, ...]
    """The rounds of the organisation's tasks whose inputs the bundle holds."""
    recipient: MspId
    """The auditor: the organisation to whose key-agreement certificate the bundle is sealed."""
    bundle_digest: Digest
    """``sha256`` of the sealed bundle's bytes."""
    disclosed_by: str
    """Common name of the identity that recorded it."""
    role: str
    created: Timestamp
    tx_id: str


class DisclosedRecords(Record):
    """What a disclosure's recipient may read of the ledger (``Disclosure:records``): the disclosure,
    the process and the disclosing organisation's execution records of the disclosed rounds, as stored."""

    disclosure: DisclosureRecord
    process: ProcessRecord
    executions: tuple[ExecutionRecord, ...]


# ---------------------------------------------------------------------------------------- history
class HistoryEntry(Record):
    """One committed version of a record."""

    tx_id: str
    timestamp: Timestamp
    is_delete: bool
    value: dict[str, Any] | None = None


class HistoryPage(Record):
    """One page of a record's history, newest first; ``next`` is the bookmark to pass as ``after``
    for the following (older) page, ``None`` on the last page."""

    items: tuple[HistoryEntry, ...]
    next: str | None = None


# ---------------------------------------------------------------------------------------- result errors
_PARTS = {"inputs": "input", "outputs": "output"}
_PARTY = {"inputs": "sender", "outputs": "recipient"}


def check_result(value: Any) -> ExecutionResult:
    """``value`` (a decoded argument) as an :class:`ExecutionResult`, or :class:`InvalidArgument`
    naming the first key that breaks its type and the rule (unknown or missing keys first)."""
    try:
        result = ExecutionResult.model_validate(value)
    except ValidationError as exc:
        errors: list[Any] = list(exc.errors(include_url=False))
        if isinstance(value, dict) and value.get("confidential_sha256") is None:
            # signed in clear: the confidential fields are required, named with the others missing
            if "metrics" not in value:
                errors.append({"type": "missing", "loc": ("metrics",)})
            inputs = value.get("inputs")
            if isinstance(inputs, dict) and "data_commitment" not in inputs:
                errors.append({"type": "missing", "loc": ("inputs", "data_commitment")})
        raise InvalidArgument(_result_error(errors)) from None
    _check_parties(result)
    if result.confidential_sha256 is None:  # signed in clear: the confidential fields are required
        if "metrics" not in result.model_fields_set:
            raise InvalidArgument("execution result lacks required fields ['metrics']")
        if result.inputs.data_commitment is None:
            raise InvalidArgument("result.inputs lacks required fields ['data_commitment']")
        return result
    named = [k for k in CONFIDENTIAL_RESULT_KEYS if k in result.model_fields_set]
    if "data_commitment" in result.inputs.model_fields_set:
        named.append("inputs.data_commitment")
    if named:
        raise InvalidArgument(
            f"execution result with confidential_sha256 names {named}: they are confidential and go "
            f"in the transient map under {RESULT_CONFIDENTIAL!r}, never in the arguments"
        )
    return result


def _check_parties(result: ExecutionResult) -> None:
    """Each message names its sender (input) or recipient (output) -- unless the result keeps them
    confidential (``confidential_parties``, with ``confidential_sha256``), when none may name one."""
    if result.confidential_parties and result.confidential_sha256 is None:
        raise InvalidArgument(
            "execution result with confidential_parties needs confidential_sha256 (the part that names them)"
        )
    for kind, messages, party in (
        ("input", result.inputs.messages, "sender"),
        ("output", result.outputs.messages, "recipient"),
    ):
        named = [getattr(m, party) is not None for m in messages]
        if result.confidential_parties and any(named):
            raise InvalidArgument(
                f"execution result with confidential_parties names an {kind} message's {party}: it is "
                f"confidential and goes in the transient map under {RESULT_CONFIDENTIAL!r}, never in "
                "the arguments"
            )
        if not result.confidential_parties and not all(named):
            raise InvalidArgument(f"each {kind} message needs a {party}")


def _where(loc: Iterable[Any]) -> str:
    return ".".join(["result", *(str(p) for p in loc)])


def _keys_error(errors: list[Any], parent: tuple[Any, ...], what: str) -> str | None:
    """Unknown, then missing keys of the object at ``parent`` (``what`` names it)."""
    for kind, words in (("extra_forbidden", "has unknown fields"), ("missing", "lacks required fields")):
        names = sorted(
            str(e["loc"][-1]) for e in errors if e["type"] == kind and tuple(e["loc"][:-1]) == parent
        )
        if names:
            return f"{what} {words} {names}"
    return None


def _result_error(errors: list[Any]) -> str:
    if any(e["loc"] == () for e in errors):
        return "execution result must be a JSON object"
    top = _keys_error(errors, (), "execution result")
    if top is not None:
        return top
    first = errors[0]
    loc = tuple(first["loc"])
    value = first.get("input")
    head, where = loc[0], _where(loc)
    if head in _PARTS:
        if len(loc) == 1:
            return f"{where} must be a JSON object"
        keys = _keys_error(errors, (head,), _where((head,)))
        if keys is not None:
            return keys
        if loc[1] == "messages":
            kind, party = _PARTS[head], _PARTY[head]
            if len(loc) == 2:
                return f"{where} must be a list"
            field = loc[3] if len(loc) > 3 else party
            if field == "digest":
                return f"{kind} message digest must be a digest sha256:<64 hex>, got {value!r}"
            if field == "size":
                return f"{kind} message size must be an integer, got {value!r}"
            return f"each {kind} message needs a {party}"
        if loc[1:] == ("model",):
            return f"{where} must be an object"
        if loc[1:] == ("model", "size"):
            return f"{where} must be an integer, got {value!r}"
        return f"{where} must be a digest sha256:<64 hex>, got {value!r}"
    if head == "image_digest":
        return f"{where} must be a digest sha256:<64 hex>, got {value!r}"
    if head == "runtime":
        return f"{where} must be one of {RUNTIMES}"
    if head == "metrics":
        if len(loc) == 1:
            return f"{where} must be an object"
        return f"metric {loc[1]!r} must be a finite number"
    if head == "round":
        return f"round must be a positive integer, got {value!r}"
    if head == "process_id":
        if isinstance(value, str) and value:
            return f"field 'process_id' = {value!r} does not match {ID_PATTERN}"
        return "field 'process_id' must be a non-empty string"
    if head == "organisation":
        return "field 'organisation' must be a non-empty string of at most 256 characters"
    if head == "validation":
        keys = _keys_error(errors, (head,), _where((head,)))
        if keys is not None:
            return keys
        if len(loc) == 1:
            return f"{where} must be a JSON object"
        if loc[1] == "metric":
            return f"{_where(loc)} must be a lower-case name (letters, digits, _), got {value!r}"
        if loc[1] == "rows":
            return f"{_where(loc)} must be a positive integer, got {value!r}"
        return f"{_where(loc[:2])} must be a finite number, got {value!r}"
    if head == "sdk":
        return f"{where} must be an SDK version MAJOR.MINOR.PATCH, got {value!r}"
    if head == "numeric_profile":
        keys = _keys_error(errors, (head,), _where((head,)))
        if keys is not None:
            return keys
        if len(loc) == 1:
            return f"{where} must be a JSON object"
        if loc[1] == "name":
            return f"{_where(loc)} must be a string matching {PROFILE_NAME_PATTERN}, got {value!r}"
        if loc[1] == "version":
            return f"{_where(loc)} must be a positive integer, got {value!r}"
        return f"{_where(loc)} must be a digest sha256:<64 hex>, got {value!r}"
    return f"{where} must be a string"
