"""Commit-time validation of the embedded host, as a Fabric peer's committer does it:

1. duplicate transaction id -> DUPLICATE_TXID;
2. the client's identity and its signature over the envelope -> BAD_CREATOR_SIGNATURE;
3. tx id = sha256(nonce || creator), response bound to the proposal -> BAD_PROPOSAL_TXID / INVALID_OTHER_REASON;
4. endorsements: valid peer identities, valid signatures, distinct organisations satisfying the
   endorsement policy -> ENDORSEMENT_POLICY_FAILURE;
5. MVCC: every key read still has the version read, given the valid transactions before it in
   the same block -> MVCC_READ_CONFLICT; every range read returns the same keys and versions
   -> PHANTOM_READ_CONFLICT.

The same code validates new blocks at commit and replays the chain in ``verify``.
"""

from __future__ import annotations

import base64
from typing import Any, Callable, Iterable

from chaincode.canonical import canonical_json
from ledger.embedded import blocks as B
from ledger.embedded.policy import EndorsementPolicy
from ledger.errors import AccessDenied
from ledger.identity import MembershipService

Version = tuple[int, int]


class StateView:
    """Committed versions plus the writes of earlier valid transactions of the current block."""

    def __init__(self, get_version: Callable[[str], Version | None],
                 get_range: Callable[[str, str], list[tuple[str, Version]]]):
        self._get_version = get_version
        self._get_range = get_range
        self.updates: dict[str, tuple[bytes | None, Version]] = {}

    def version(self, key: str) -> Version | None:
        if key in self.updates:
            value, version = self.updates[key]
            return None if value is None else version
        return self._get_version(key)

    def range(self, start: str, end: str) -> list[tuple[str, Version]]:
        rows = dict(self._get_range(start, end))
        for k, (value, version) in self.updates.items():
            if k >= start and (not end or k < end):
                if value is None:
                    rows.pop(k, None)
                else:
                    rows[k] = version
        # sort bytewise like the store
        return sorted(rows.items(), key=lambda kv: kv[0].encode("utf-8"))


def validate_transaction(tx: dict[str, Any], *, membership: MembershipService, policy: EndorsementPolicy,
                         view: StateView, seen_tx_ids: Callable[[str], bool], channel: str, chaincode: str) -> str:
    """Return the validation code of ``tx`` (does not apply its writes)."""
    try:
        proposal, response = tx["proposal"], tx["response"]
        tx_id = proposal["tx_id"]
        if seen_tx_ids(tx_id):
            return B.DUPLICATE_TXID
        creator = B.unb64(proposal["creator"])
        try:
            _, role = membership.verify_signature(creator, B.signed_part(tx), B.unb64(tx["signature"]))
        except AccessDenied:
            return B.BAD_CREATOR_SIGNATURE
        if role not in ("client", "admin"):
            return B.BAD_CREATOR_SIGNATURE
        if B.compute_tx_id(B.unb64(proposal["nonce"]), creator) != tx_id:
            return B.BAD_PROPOSAL_TXID
        if proposal["channel"] != channel or proposal["chaincode"] != chaincode:
            return B.INVALID_OTHER_REASON
        if response["proposal_hash"] != B.sha256_hex(canonical_json(proposal)) or response["status"] != 200:
            return B.INVALID_OTHER_REASON
        endorsing_orgs: set[str] = set()
        for e in tx["endorsements"]:
            endorser = B.unb64(e["endorser"])
            try:
                msp_id, role = membership.verify_signature(endorser, B.endorsement_message(response, endorser),
                                                           B.unb64(e["signature"]))
            except AccessDenied:
                return B.ENDORSEMENT_POLICY_FAILURE
            if role != "peer":
                return B.ENDORSEMENT_POLICY_FAILURE
            endorsing_orgs.add(msp_id)
        if not policy.satisfied_by(endorsing_orgs):
            return B.ENDORSEMENT_POLICY_FAILURE
        rwset = response["rwset"]
        for key, version in rwset["reads"]:
            expected = None if version is None else (version[0], version[1])
            if view.version(key) != expected:
                return B.MVCC_READ_CONFLICT
        for start, end, kv in rwset["range_reads"]:
            if view.range(start, end) != [(k, (v[0], v[1])) for k, v in kv]:
                return B.PHANTOM_READ_CONFLICT
        return B.VALID
    except (KeyError, TypeError, ValueError, IndexError, base64.binascii.Error):
        return B.INVALID_OTHER_REASON


def writes_of(tx: dict[str, Any]) -> Iterable[tuple[str, bytes | None]]:
    for key, value in tx["response"]["rwset"]["writes"]:
        yield key, (None if value is None else B.unb64(value))
