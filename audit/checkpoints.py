"""Verifying signed checkpoints of a chain head (made by :mod:`ledger.checkpoint`): the anchor that
makes a truncated or rewritten ledger detectable.

A checkpoint holds a block number and that block's header hash, signed by a consortium identity.
Checking it has two parts:

* **who signed** -- against the consortium's membership (:func:`check_signature`: a consortium
  identity, valid when it signed), or offline against the organisations' CA certificates alone
  (:func:`check_checkpoint`: an audit bundle, an attestation). Only an identity whose NodeOU role is
  in :data:`VOUCHING_ROLES` vouches for a chain head: the orderer (which made the blocks), or an
  organisation's admin or client (a person or a service acting for the organisation: the exporter of
  a bundle, an attester). A peer's certificate does not: a peer endorses and serves blocks, and its
  key lives on a server the organisation runs unattended;
* **the chain still reaches it** (:func:`check_chain`): the ledger has that block, with that header
  hash. :func:`check_on_ledger` does both against a live ledger (either host); the ledger-file
  verification (:mod:`audit.ledger_file`) against the file it replays.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from typing import Any

from cryptography.hazmat.primitives.asymmetric import ec

from audit.signatures import CertificateInvalid, check_certificate
from ledger.checkpoint import Checkpoint
from ledger.errors import AccessDenied, CheckpointInvalid, LedgerCorrupted
from ledger.identity import Identity, MembershipService, certificate_role, verify
from ledger.interface import Ledger

#: NodeOU roles whose signature vouches for a chain head (docs/ledger.md "Verification")
VOUCHING_ROLES = frozenset({"orderer", "admin", "client"})


def _check_role(cp: Checkpoint, msp_id: str, role: str | None, what: str) -> None:
    if role not in VOUCHING_ROLES:
        raise CheckpointInvalid(
            f"{what} of block {cp.block_number} is signed by a {role or 'role-less'} identity of "
            f"{msp_id}: only the orderer or an organisation's admin or client vouches for a chain head"
        )


def check_signature(cp: Checkpoint, membership: MembershipService) -> str:
    """The signer is a consortium identity valid when it signed, of a role in :data:`VOUCHING_ROLES`,
    and the signature holds. Returns the signer's MSP id; raises :class:`CheckpointInvalid`."""
    at = dt.datetime.fromtimestamp(cp.created, dt.UTC)
    try:
        msp_id, role = membership.verify_signature(cp.signer, cp.signed_bytes(), cp.signature, at=at)
    except AccessDenied as exc:
        raise CheckpointInvalid(f"checkpoint of block {cp.block_number} does not verify: {exc}") from None
    _check_role(cp, msp_id, role, "checkpoint")
    return msp_id


def check_checkpoint(
    obj: Any, cas: Mapping[str, bytes], what: str = "ledger checkpoint"
) -> tuple[Checkpoint, str]:
    """Verify a checkpoint (JSON form) offline: its signer's certificate is issued by the CA of the
    MSP it names (``cas``: MSP id -> CA PEM), was valid when it signed, names a role in
    :data:`VOUCHING_ROLES`, and the signature holds.
    Returns (checkpoint, signer MSP id); raises :class:`CheckpointInvalid` naming ``what``."""
    try:
        cp = Checkpoint.from_json(obj)
        msp, pem = cp.signer_msp_id, cp.signer_certificate_pem
    except (CheckpointInvalid, ValueError) as exc:
        raise CheckpointInvalid(f"{what}: {exc}") from None
    ca = cas.get(msp)
    if ca is None:
        raise CheckpointInvalid(f"{what} is signed by {msp}, whose CA is not trusted")
    try:
        cert = check_certificate(pem, ca, what)
    except CertificateInvalid as exc:
        raise CheckpointInvalid(str(exc)) from None
    at = dt.datetime.fromtimestamp(cp.created, dt.UTC)
    if not (cert.not_valid_before_utc <= at <= cert.not_valid_after_utc):
        raise CheckpointInvalid(f"{what}: the signer's certificate was not valid when it signed")
    _check_role(cp, msp, certificate_role(cert), what)
    pub = cert.public_key()
    if not isinstance(pub, ec.EllipticCurvePublicKey) or not verify(pub, cp.signed_bytes(), cp.signature):
        raise CheckpointInvalid(f"{what}: signature does not verify")
    return cp, msp


def check_chain(cp: Checkpoint, channel: str, height: int, header_hash_of: Callable[[int], str]) -> None:
    """The chain (``height`` blocks, ``header_hash_of(n)``) still reaches the checkpoint's block
    with the same header hash; raises :class:`LedgerCorrupted` otherwise (:class:`CheckpointInvalid`
    for a checkpoint of another channel)."""
    if cp.channel != channel:
        raise CheckpointInvalid(f"the checkpoint is of channel {cp.channel!r}, the ledger is {channel!r}")
    if height <= cp.block_number:
        raise LedgerCorrupted(
            f"the chain is truncated: it ends at block {height - 1}, a checkpoint signed "
            f"{_when(cp.created)} saw block {cp.block_number}",
            max(height - 1, 0),
        )
    if header_hash_of(cp.block_number) != cp.header_hash:
        raise LedgerCorrupted(
            f"block {cp.block_number} is not the block the checkpoint signed {_when(cp.created)} "
            f"saw (header hash differs): the chain was rewritten",
            cp.block_number,
        )


def check_on_ledger(cp: Checkpoint, ledger: Ledger, identity: Identity, membership: MembershipService) -> str:
    """Both checks against a live ledger (either host); returns the signer's MSP id."""
    signer = check_signature(cp, membership)
    check_chain(
        cp, ledger.channel, ledger.block_height(identity), lambda n: ledger.block(identity, n).header_hash
    )
    return signer


def _when(created: float) -> str:
    return dt.datetime.fromtimestamp(created, dt.UTC).isoformat(timespec="seconds")
