"""Auditor replay through the gateway (docs/audit-replay.md): the disclosures of a process the caller may
see, a disclosure uploaded and replayed as this gateway's organisation (the auditor), a whole process
replayed from every disclosure uploaded for it, and the verdicts kept for the explorer.

The replays run the tasks in this machine's sandbox with this organisation's key-agreement key, exactly
as ``consortia audit replay`` does (:mod:`audit.replay`); uploads and verdicts are kept in memory for
the gateway's lifetime (``GET /api/v1/replays``)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter
from fastapi import Path as PathParam
from pydantic import BaseModel, ConfigDict, Field

from api import schemas as S
from api.gateway.deps import Caller, GatewayDep, ProcessId, reads, writes
from api.gateway.state import record
from api.responses import DepthSafeRoute
from audit.disclosure import Disclosure
from audit.replay import ImageSource, ReplayError, replay_disclosure, replay_process
from ledger.errors import InvalidArgument, NotFound
from wire.canonical import canonical_json

router = APIRouter(route_class=DepthSafeRoute)
read, write = reads(router, "audit"), writes(router, "audit")
BundleDigest = Annotated[str, PathParam(pattern=r"^sha256:[0-9a-f]{64}$", max_length=71)]


class DisclosureFileIn(BaseModel):
    """A disclosure file (`consortia audit disclose --out`; audit/disclosure.py), as its JSON object. Its
    integrity -- the sealed bytes hash to ``bundle_digest``, the ledger records that digest, the bundle
    opens with this organisation's key -- is checked by the replay, not by the schema."""

    model_config = ConfigDict(extra="forbid")
    format: Literal["consortia-disclosure/1"]
    process_id: Annotated[str, Field(pattern=S.ID, max_length=128)]
    organisation: Annotated[str, Field(pattern=S.MSP, max_length=64)]
    recipient: Annotated[str, Field(pattern=S.MSP, max_length=64)]
    rounds: Annotated[list[Annotated[int, Field(ge=1, le=100_000)]], Field(min_length=1, max_length=100_000)]
    bundle_digest: Annotated[str, Field(pattern=S.DIGEST)]
    sealed: Annotated[
        str, Field(pattern=r"^[A-Za-z0-9+/]*={0,2}$", description="base64 of the sealed bundle")
    ]


class DisclosureIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    disclosure: DisclosureFileIn


def _images() -> ImageSource:
    from executor.images.recipe import cache_root

    return ImageSource(cache_root() / "bundles")


@read("/api/v1/processes/{process_id}/disclosures", response_model=list[dict[str, Any]])
def disclosures(process_id: ProcessId, c: Caller) -> list[dict[str, Any]]:
    """Who disclosed which tasks of the process to whom, and when (a member sees every disclosure of
    it, any other organisation those addressed to it)."""
    return [record(r) for r in c.list_disclosures(process_id)]


@write("/api/v1/replays", response_model=dict[str, Any])
def replay_upload(body: DisclosureIn, c: Caller, gw: GatewayDep) -> dict[str, Any]:
    """Upload a disclosure addressed to this organisation and replay it: the per-task verdicts."""
    try:
        d = Disclosure.from_json(canonical_json(body.disclosure.model_dump()))
    except (ValueError, TypeError) as exc:  # DisclosureError included
        raise InvalidArgument(str(exc)) from None
    gw.disclosures[d.bundle_digest] = d
    return _replay(d, c, gw)


@write("/api/v1/replays/{bundle_digest}", response_model=dict[str, Any])
def replay_named(bundle_digest: BundleDigest, c: Caller, gw: GatewayDep) -> dict[str, Any]:
    """Replay again a disclosure uploaded before, named by its bundle digest."""
    d = gw.disclosures.get(bundle_digest)
    if d is None:
        raise NotFound(f"no disclosure of bundle {bundle_digest} was uploaded to this gateway")
    return _replay(d, c, gw)


def _replay(d: Disclosure, c: Caller, gw: GatewayDep) -> dict[str, Any]:
    try:
        rep = replay_disclosure(d, c, gw.consortium.encryption_key(gw.msp_id), _images())
    except ReplayError as exc:
        raise InvalidArgument(str(exc)) from None
    out = rep.to_dict()
    gw.replays[d.bundle_digest] = out
    return out


@write("/api/v1/processes/{process_id}/replay", response_model=dict[str, Any])
def replay_whole_process(process_id: ProcessId, c: Caller, gw: GatewayDep) -> dict[str, Any]:
    """Replay every disclosure of the process uploaded to this gateway: every record and final model."""
    found = [d for d in gw.disclosures.values() if d.process_id == process_id]
    if not found:
        raise NotFound(f"no disclosure of {process_id} was uploaded to this gateway")
    rep = replay_process(process_id, found, c, gw.consortium.encryption_key(gw.msp_id), _images())
    out = rep.to_dict()
    for r in out["disclosures"]:
        gw.replays[r["bundle_digest"]] = r
    return out


@read("/api/v1/replays", response_model=list[dict[str, Any]])
def replays(_: Caller, gw: GatewayDep) -> list[dict[str, Any]]:
    """The verdicts of the replays this gateway ran, newest last."""
    return list(gw.replays.values())
