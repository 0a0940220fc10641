"""The gateway's own bodies (pydantic; with the records they make the OpenAPI document): requests,
paging, errors, and the answers built from the audit index.

A ledger record is answered as its one typed definition (:mod:`chaincode.records`, exported by
:mod:`ledger.client`): ``ImageRecord``, ``ProcessRecord``, ``ExecutionRecord``, ``HistoryEntry``, ...
are the response models themselves; only :class:`ModelOut` derives from its record, to keep the
caller's sealed data key inside the gateway. Identifiers in requests are validated with the contracts'
own patterns, so a malformed id is refused with 422 before it reaches the ledger.
"""

from __future__ import annotations

from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.json_schema import SkipJsonSchema

from api.schema_rules import process_rules, topology_parameters_rule
from executor.images.declarations import DATASET_NAME, TOPOLOGY_KIND, topology_problems
from ledger.client import ExecutionRecord, ModelRecord, ProcessRecord
from ledger.rules import (
    ID_PATTERN,
    MAX_CONSORTIUM,
    MAX_DATASET_CHARS,
    MAX_DESCRIPTION_CHARS,
    MAX_FIELD_DEPTH,
    MAX_HYPERPARAMETERS_BYTES,
    MAX_REFERENCE_CHARS,
    MAX_ROUNDS,
    MAX_TOPOLOGY_BYTES,
    MSP_PATTERN,
    PRIVACY_CAP_DELTA,
    PRIVACY_CAP_EPSILON,
    json_depth,
    process_size_problem,
)
from wire.canonical import canonical_json

ID = f"^{ID_PATTERN}$"
MSP = f"^{MSP_PATTERN}$"
DIGEST = r"^sha256:[0-9a-f]{64}$"
T = TypeVar("T")


def _bounded_json(value: Any, max_bytes: int) -> Any:
    """Plain JSON within the contracts' limits (:mod:`chaincode.limits`): nested at most
    ``MAX_FIELD_DEPTH`` levels (the field of a specification object, which the contract receives
    as one argument of at most ``MAX_JSON_DEPTH`` levels; measured without recursion, before
    anything encodes it), only finite
    numbers (no NaN/Infinity, so what is stored hashes the same everywhere), and at most
    ``max_bytes`` bytes of canonical JSON."""
    depth = json_depth(value)
    if depth > MAX_FIELD_DEPTH:
        raise ValueError(f"is nested {depth} levels deep, over the limit of {MAX_FIELD_DEPTH}")
    try:
        size = len(canonical_json(value))
    except (ValueError, TypeError) as exc:
        raise ValueError(f"must be plain JSON with finite numbers ({exc})") from None
    if size > max_bytes:
        raise ValueError(f"is {size} bytes of canonical JSON, over the limit of {max_bytes} bytes")
    return value


class ErrorBody(BaseModel):
    """Every error response: a stable code, a message saying what was refused, and details."""

    code: str
    message: str
    details: dict[str, Any] = {}


class Page(BaseModel, Generic[T]):
    items: list[T]
    total: int
    limit: int
    offset: int


class Health(BaseModel):
    status: Literal["ok", "degraded"]
    organisation: str
    last_indexed_block: int
    block_height: int
    index_error: str = ""


class WhoAmI(BaseModel):
    organisation: str
    user: str
    token_id: str


# ---------------------------------------------------------------------- images
class ImageIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$", examples=["collab-rf"])
    version: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$", examples=["1.0"])
    algorithm: str = Field(
        pattern=r"^[A-Za-z0-9_][A-Za-z0-9._:+-]{0,63}$",
        examples=["collab-rf", "algorithms.dpsda.step_function:DPSDA"],
    )
    digest: str = Field(pattern=DIGEST)
    reference: str = Field("", max_length=MAX_REFERENCE_CHARS)
    description: str = Field("", max_length=MAX_DESCRIPTION_CHARS)
    id: str | None = Field(None, pattern=ID)


class RevokeImageIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    reason: str = Field("", max_length=512)


class ApproveImageIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    digest: str = Field(pattern=DIGEST, description="The exact digest the approving organisation inspected.")
    datasets: list[str] | None = Field(
        None, min_length=1, max_length=64, description="Only for these dataset names (absent: every dataset)."
    )
    expires: str | None = Field(None, max_length=64, description="Until when (ISO-8601 with a time zone).")


class RevokeApprovalIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    reason: str = Field("", max_length=512)


class AcceptProcessIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    terms_digest: str | None = Field(
        None, pattern=DIGEST, description="The digest of the terms reviewed (absent: the terms as read now)."
    )


class DeclineProcessIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    reason: str = Field(min_length=1, max_length=1024)


# ---------------------------------------------------------------------- processes
class TopologyIn(BaseModel):
    """The communication graph: a ``kind``, a ``seed`` and the kind's own fields (plain JSON, nested at
    most 31 levels, at most 16 KiB of canonical JSON as a whole)."""

    model_config = ConfigDict(extra="allow", json_schema_extra=topology_parameters_rule())
    kind: str = Field(
        min_length=1,
        max_length=64,
        pattern=TOPOLOGY_KIND,
        examples=["cycle_with_inverse_chord"],
        description="A topology the executor knows (executor.images.declarations.TOPOLOGY_KINDS).",
    )
    seed: int = Field(
        0,
        ge=0,
        le=2**53 - 1,
        description="Integer in [0, 2^53): exact in every JSON implementation (the contract "
        "accepts up to 2^63 - 1 from other clients).",
    )

    @model_validator(mode="before")
    @classmethod
    def _bounded(cls, data: Any) -> Any:
        return _bounded_json(data, MAX_TOPOLOGY_BYTES) if isinstance(data, dict) else data


class PrivacyBudgetIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    mechanism: str = Field(min_length=1, max_length=64, examples=["gaussian"])
    epsilon: float = Field(
        gt=0,
        le=PRIVACY_CAP_EPSILON,
        allow_inf_nan=False,
        description="Rigorous ε the ledger may charge; at most the consortium's cap (chaincode.limits).",
    )
    delta: float | None = Field(
        None,
        ge=0,
        le=PRIVACY_CAP_DELTA,
        allow_inf_nan=False,
        description="δ of (ε, δ)-DP (needed by Gaussian rounds); at most the cap's δ.",
    )
    accounting: Literal["basic", "zcdp"] | None = Field(
        None, description="Composition (chaincode.privacy): default zcdp with a delta, else basic."
    )
    scope: Literal["network", "node"] | None = Field(
        None, description="Observer the budget caps: every link (network, default) or one organisation."
    )


#: a process with a privacy budget must clip its contribution (chaincode.privacy, and
#: executor.process.ProcessSpec): said in the schema so that a client learns it from the document
CLIPPED_IF_PRIVATE = {
    "anyOf": [
        {"properties": {"privacy_budget": {"type": "null"}}},
        {
            "required": ["hyperparameters"],
            "properties": {
                "hyperparameters": {
                    "type": "object",
                    "required": ["gradient_clip"],
                    "properties": {"gradient_clip": {"type": "number", "exclusiveMinimum": 0}},
                }
            },
        },
    ]
}


class ProcessIn(BaseModel):
    """A learning process to create; with a ``privacy_budget``, ``hyperparameters.gradient_clip``
    must be a number > 0 (without clipping no sensitivity bound holds); the topology must be defined
    for the consortium's size (``TOPOLOGY_SIZES``)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=process_rules(CLIPPED_IF_PRIVATE))
    id: str = Field(pattern=ID)
    image_id: str = Field(pattern=ID)
    image_digest: str | None = Field(None, pattern=DIGEST)
    consortium: list[Annotated[str, Field(pattern=MSP, max_length=64)]] = Field(
        min_length=1,
        max_length=MAX_CONSORTIUM,
        json_schema_extra={"uniqueItems": True},
        description="MSP ids of the organisations of the process, each once; the caller's organisation among them.",
    )
    topology: TopologyIn
    rounds: int = Field(ge=1, le=MAX_ROUNDS)
    hyperparameters: dict[str, Any] = Field(
        {},
        description=f"Plain JSON object: finite numbers only, nested at most {MAX_FIELD_DEPTH} levels, at most "
        f"{MAX_HYPERPARAMETERS_BYTES // 1024} KiB of canonical JSON.",
    )
    privacy_budget: PrivacyBudgetIn | None = None
    dataset: str = Field(
        "",
        max_length=MAX_DATASET_CHARS,
        pattern="^$|" + DATASET_NAME,
        description="The dataset name each member maps to its own data (a folder name).",
    )
    description: str = Field("", max_length=MAX_DESCRIPTION_CHARS)
    validation_fraction: float | None = Field(
        None,
        ge=0,
        lt=1,
        description="The share of its own rows each member holds out to learn what collaboration bought it "
        "(its metric alone and together, docs/models.md); omitted: 0.2 where the image's algorithm can score "
        "a slice, else none; 0: none.",
    )
    start: bool = Field(False, description="Start the process right after creating it.")

    @field_validator("consortium")
    @classmethod
    def _each_once(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError("lists an organisation twice")
        return v

    @field_validator("hyperparameters")
    @classmethod
    def _hyper(cls, v: dict[str, Any]) -> dict[str, Any]:
        return _bounded_json(v, MAX_HYPERPARAMETERS_BYTES)

    @model_validator(mode="after")
    def _topology_fits_the_consortium(self) -> ProcessIn:
        """The topology's parameters and its size (e.g. the cycle with inverse chord needs a prime
        number of organisations) are checked here, with the same registry the tasks build it with:
        they depend on the request alone, not on the image."""
        problems = topology_problems(self.topology.model_dump(), len(self.consortium))
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @model_validator(mode="after")
    def _size(self) -> ProcessIn:
        """Rounds x members within what one creation transaction holds (the contract's own rule)."""
        if (problem := process_size_problem(self.rounds, len(self.consortium))) is not None:
            raise ValueError(problem)
        return self

    @model_validator(mode="after")
    def _clipped_if_private(self) -> ProcessIn:
        clip = self.hyperparameters.get("gradient_clip")
        if self.privacy_budget is not None and not (
            isinstance(clip, (int, float)) and not isinstance(clip, bool) and clip > 0
        ):
            raise ValueError(
                "a process with a privacy budget must clip: set hyperparameters.gradient_clip > 0"
            )
        return self


class AbortIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    reason: str = Field("", max_length=1024)


class EventOut(BaseModel):
    block: int
    tx_id: str
    name: str
    process_id: str | None = None
    subject: str
    payload: dict[str, Any]


class TimelineOut(BaseModel):
    process: ProcessRecord
    executions: list[ExecutionRecord]
    events: list[EventOut]
    last_indexed_block: int


class WatchOut(BaseModel):
    events: list[EventOut]
    last_indexed_block: int
    status: str


class PublishedArtifact(BaseModel):
    round: int
    organisation: str
    kind: str
    recipient: str | None = None
    digest: str
    size: int | None = None


class RunArtifacts(BaseModel):
    round: int
    organisation: str
    artifacts: list[PublishedArtifact]


class ArtifactUse(BaseModel):
    process_id: str
    round: int
    organisation: str
    kind: str
    peer: str
    size: int | None = None


class ArtifactProvenance(BaseModel):
    digest: str
    produced_by: list[ArtifactUse]
    consumed_by: list[ArtifactUse]


# ---------------------------------------------------------------------- models
class ModelOut(ModelRecord):
    """A model record as the gateway answers it: without the caller's sealed data key, which stays
    inside the gateway (it opens the model for downloads)."""

    wrapped_key: SkipJsonSchema[str | None] = Field(None, exclude=True)

    @model_validator(mode="before")
    @classmethod
    def _no_sealed_key(cls, data: Any) -> Any:
        if isinstance(data, dict) and "wrapped_key" in data:
            data = {k: v for k, v in data.items() if k != "wrapped_key"}
        return data


class AccessIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    organisation: str = Field(pattern=MSP)


class LineageNode(BaseModel):
    id: str
    process_id: str
    round: int
    organisation: str
    status: str
    image_digest: str
    tx_id: str
    completed_tx_id: str
    block: int


class LineageEdge(BaseModel):
    model_config = ConfigDict(populate_by_name=True)
    source: str = Field(alias="from")
    to: str
    kind: str
    digest: str


class LineageOut(BaseModel):
    model: ModelOut
    process: ProcessRecord | None
    image_digest: str
    root: str
    nodes: list[LineageNode]
    edges: list[LineageEdge]
    external_inputs: list[dict[str, Any]]
    broken_links: list[dict[str, Any]] = []


class CheckOut(BaseModel):
    check: str
    kind: str = ""
    ok: bool
    detail: str = ""


class VerificationOut(BaseModel):
    subject: str
    ok: bool
    failures: int
    checks: list[CheckOut]
    facts: dict[str, Any] = {}
