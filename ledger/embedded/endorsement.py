"""Endorsement on the embedded host (steps 1-2 of :mod:`ledger.embedded.ledger`): build and sign
a proposal, check it as a peer's endorser does (msgvalidation.go), simulate the chaincode against
a snapshot of the committed state, and sign the proposal response with each endorsing
organisation's peer key."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from typing import Any

from chaincode import dispatch
from chaincode.canonical import canonical_json
from chaincode.errors import ContractError
from ledger.embedded import blocks as B
from ledger.embedded.simulation import TxSimulator
from ledger.embedded.store import Store
from ledger.errors import AccessDenied, LedgerError
from ledger.identity import Identity, MembershipService


class PendingTransaction(Future[tuple[int, str, bytes]]):
    """An endorsed transaction waiting for its block: yields ``(block, validation code, result)``."""

    def __init__(
        self,
        tx_id: str,
        payload: bytes,
        endorsed: bool = False,
        private: dict[str, dict[str, bytes | None]] | None = None,
    ):
        super().__init__()
        self.tx_id = tx_id
        self.payload = payload
        self.endorsed = endorsed  # its signatures and endorsements were checked when it was queued
        # the clear-text private write set, by collection: handed to the collections' organisations
        # at commit, never part of the transaction
        self.private = private or {}


class Endorser:
    """The endorsing side of :class:`ledger.embedded.ledger.EmbeddedLedger` (which sets these)."""

    channel: str
    chaincode: str
    membership: MembershipService
    _peers: dict[str, Identity]
    _store: Store
    _private_stores: dict[str, Store]  # each organisation's private data store, by MSP id
    _collections: frozenset[str]  # the channel's private data collections
    _matched: set[str]  # organisations whose peer key was shown to match its certificate

    def _proposal(
        self, identity: Identity, function: str, args: Sequence[str]
    ) -> tuple[dict[str, Any], bytes, bytes]:
        """(proposal, its canonical JSON, the creator's signature of it): the bytes are encoded once and
        travel with the proposal (as a Fabric ``SignedProposal`` carries its ``proposal_bytes``) to the
        endorser's check and the response's proposal hash."""
        if not isinstance(function, str) or not all(isinstance(a, str) for a in args):
            raise TypeError("function and arguments must be strings")
        creator = identity.serialized()
        nonce = os.urandom(24)
        proposal = {
            "channel": self.channel,
            "chaincode": self.chaincode,
            "tx_id": B.compute_tx_id(nonce, creator),
            "nonce": B.b64(nonce),
            "creator": B.b64(creator),
            "timestamp": time.time(),
            "function": function,
            "args": list(args),
        }
        proposal_bytes = canonical_json(proposal)
        return proposal, proposal_bytes, identity.sign(proposal_bytes)

    def _check_proposal(self, proposal: dict[str, Any], proposal_bytes: bytes, signature: bytes) -> None:
        """What a peer's endorser checks before running chaincode (msgvalidation.go); ``proposal_bytes``
        is the canonical JSON of ``proposal`` (:meth:`_proposal`)."""
        creator = B.unb64(proposal["creator"])
        msp_id, role = self.membership.verify_signature(creator, proposal_bytes, signature)  # AccessDenied
        if role not in ("client", "admin"):
            # Fabric's proposal ACL is the channel's Writers policy: admin or client identities
            raise AccessDenied(
                f"a {role} identity of {msp_id} may not send proposals (Writers policy: admin | client)"
            )
        if B.compute_tx_id(B.unb64(proposal["nonce"]), creator) != proposal["tx_id"]:
            raise AccessDenied("proposal transaction id is not sha256(nonce || creator)")
        if proposal["channel"] != self.channel or proposal["chaincode"] != self.chaincode:
            raise AccessDenied(f"proposal is for channel {proposal['channel']}/{proposal['chaincode']}")

    def _simulate(
        self, proposal: dict[str, Any], transient: Mapping[str, bytes] | None, msp_id: str = ""
    ) -> tuple[TxSimulator, bytes]:
        """Run the chaincode against one snapshot of the committed state (raises ContractError) on
        organisation ``msp_id``'s peer: its private store is the one private reads see."""
        con = self._store.connection()
        store = self._private_stores.get(msp_id)
        private = None if store is None else store.connection()
        con.execute("BEGIN")
        if private is not None:
            private.execute("BEGIN")
        try:
            sim = TxSimulator(
                con,
                tx_id=proposal["tx_id"],
                channel=self.channel,
                timestamp=proposal["timestamp"],
                creator=B.unb64(proposal["creator"]),
                transient=dict(transient or {}),
                msp_id=msp_id if store is not None else "",
                collections=self._collections,
                private=private,
            )
            try:
                payload = dispatch.invoke(sim, proposal["function"], proposal["args"])
            except ContractError as err:
                # the chaincode's error reply, rebuilt from its wire form as a Fabric client would
                raise ContractError.from_wire(err.to_wire()) from None
        finally:
            con.execute("COMMIT")
            if private is not None:
                private.execute("COMMIT")
        return sim, payload

    def _response(self, proposal_bytes: bytes, sim: TxSimulator, payload: bytes) -> dict[str, Any]:
        """The proposal response payload that endorsers sign (``proposal_bytes``: the proposal's
        canonical JSON, :meth:`_proposal`)."""
        return {
            "proposal_hash": B.sha256_hex(proposal_bytes),
            "status": 200,
            "payload": B.b64(payload),
            "rwset": sim.rwset(),
            "event": None if sim.event is None else [sim.event[0], B.b64(sim.event[1])],
        }

    def _endorse(self, response: dict[str, Any], organisations: Sequence[str]) -> list[dict[str, str]]:
        out, payload = [], canonical_json(response)
        for org in organisations:
            peer = self._peers.get(org)
            if peer is None:
                raise LedgerError(f"no peer of organisation {org!r} in this channel")
            if org not in self._matched:  # once: then its signatures are valid by construction
                if peer.private_key.public_key() != peer.certificate.public_key():
                    raise LedgerError(f"the peer key of {org} does not match its certificate")
                self._matched.add(org)
            endorser = peer.serialized()
            out.append(
                {
                    "endorser": B.b64(endorser),
                    "signature": B.b64(peer.sign(B.endorsement_message(payload, endorser))),
                }
            )
        return out
