"""Fabric transaction messages built and parsed on ``hyperledger-fabric-protos`` (docs/fabric.md "Gateway client").

A port of fabric-gateway's ``transactioncontext.go``, ``proposalbuilder.go``,
``transactionparser.go`` and the block-header hash of ``protoutil/blockutils.go``:

* ``tx_id = hex(sha256(nonce || creator))`` -- checked by the peer (msgvalidation.go);
* the proposal is signed over SHA-256(proposal bytes), low-S (``ledger.identity.sign``);
* the endorsed result sits in Envelope.payload -> Payload.data -> Transaction.actions[0] ->
  ChaincodeActionPayload.action.proposal_response_payload -> ChaincodeAction.response.payload.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from fabric_protos.common import common_pb2
from fabric_protos.orderer import ab_pb2
from fabric_protos.peer import (
    chaincode_event_pb2,
    chaincode_pb2,
    proposal_pb2,
    proposal_response_pb2,
    transaction_pb2,
)
from google.protobuf import timestamp_pb2

from ledger.identity import Identity

NONCE_BYTES = 24


@dataclass(frozen=True)
class SignedProposal:
    tx_id: str
    signed: proposal_pb2.SignedProposal


def compute_tx_id(nonce: bytes, creator: bytes) -> str:
    """Fabric's ``protoutil.ComputeTxID``."""
    return hashlib.sha256(nonce + creator).hexdigest()


def _header(
    identity: Identity,
    kind: int,
    channel: str,
    extension: bytes = b"",
    nonce: bytes | None = None,
    timestamp: float | None = None,
) -> tuple[str, common_pb2.Header]:
    """(tx id, the signed message's Header): a channel header of type ``kind`` stamped now (or at
    ``timestamp``), and the creator with a fresh nonce (or ``nonce``)."""
    creator = identity.serialized()
    nonce = os.urandom(NONCE_BYTES) if nonce is None else nonce
    tx_id = compute_tx_id(nonce, creator)
    now = time.time() if timestamp is None else timestamp
    chdr = common_pb2.ChannelHeader(
        type=kind,
        timestamp=timestamp_pb2.Timestamp(seconds=int(now), nanos=int((now % 1) * 1e9)),
        channel_id=channel,
        tx_id=tx_id,
        epoch=0,
        extension=extension,
    )
    shdr = common_pb2.SignatureHeader(creator=creator, nonce=nonce)
    return tx_id, common_pb2.Header(
        channel_header=chdr.SerializeToString(), signature_header=shdr.SerializeToString()
    )


def build_proposal(
    identity: Identity,
    channel: str,
    chaincode: str,
    function: str,
    args: Sequence[str | bytes],
    transient: Mapping[str, bytes] | None = None,
    *,
    nonce: bytes | None = None,
    timestamp: float | None = None,
) -> SignedProposal:
    """A signed ENDORSER_TRANSACTION proposal invoking ``function(*args)`` on ``chaincode``."""
    if not channel or not chaincode or not function:
        raise ValueError("channel, chaincode and function must be non-empty")
    cc_id = chaincode_pb2.ChaincodeID(name=chaincode)
    tx_id, header = _header(
        identity,
        common_pb2.ENDORSER_TRANSACTION,
        channel,
        proposal_pb2.ChaincodeHeaderExtension(chaincode_id=cc_id).SerializeToString(),
        nonce,
        timestamp,
    )
    raw_args = [function.encode()] + [a if isinstance(a, bytes) else str(a).encode("utf-8") for a in args]
    cis = chaincode_pb2.ChaincodeInvocationSpec(
        chaincode_spec=chaincode_pb2.ChaincodeSpec(
            type=chaincode_pb2.ChaincodeSpec.UNDEFINED,
            chaincode_id=cc_id,
            input=chaincode_pb2.ChaincodeInput(args=raw_args),
        )
    )
    ccpp = proposal_pb2.ChaincodeProposalPayload(
        input=cis.SerializeToString(), TransientMap=dict(transient or {})
    )
    proposal_bytes = proposal_pb2.Proposal(
        header=header.SerializeToString(), payload=ccpp.SerializeToString()
    ).SerializeToString()
    signed = proposal_pb2.SignedProposal(
        proposal_bytes=proposal_bytes, signature=identity.sign(proposal_bytes)
    )
    return SignedProposal(tx_id, signed)


def sign_envelope(identity: Identity, envelope: common_pb2.Envelope) -> common_pb2.Envelope:
    """The prepared transaction from Endorse, signed by the submitter over SHA-256(payload)."""
    return common_pb2.Envelope(payload=envelope.payload, signature=identity.sign(envelope.payload))


def seek_envelope(
    identity: Identity, channel: str, start: int | None, stop: int | None = None
) -> common_pb2.Envelope:
    """A signed ``DELIVER_SEEK_INFO`` envelope asking a peer's Deliver service for every block from
    ``start`` on (None: from the newest) to ``stop`` (None: without end), waiting for blocks not yet
    committed (fabric-gateway's ``blockeventsbuilder``; the peer checks the signature and the
    channel's Readers once)."""
    if start is not None and start < 0:
        raise ValueError("start block must be >= 0")
    if stop is not None and (stop < 0 or (start is not None and stop < start)):
        raise ValueError("stop block must be >= 0 and >= start")
    first = (
        ab_pb2.SeekPosition(newest=ab_pb2.SeekNewest())
        if start is None
        else ab_pb2.SeekPosition(specified=ab_pb2.SeekSpecified(number=start))
    )
    seek = ab_pb2.SeekInfo(
        start=first,
        stop=ab_pb2.SeekPosition(specified=ab_pb2.SeekSpecified(number=2**64 - 1 if stop is None else stop)),
        behavior=ab_pb2.SeekInfo.BLOCK_UNTIL_READY,
    )
    _, header = _header(identity, common_pb2.DELIVER_SEEK_INFO, channel)
    payload = common_pb2.Payload(header=header, data=seek.SerializeToString()).SerializeToString()
    return common_pb2.Envelope(payload=payload, signature=identity.sign(payload))


def envelope_result(envelope: common_pb2.Envelope) -> bytes:
    """The chaincode's response payload inside an endorsed transaction envelope."""
    payload = common_pb2.Payload.FromString(envelope.payload)
    tx = transaction_pb2.Transaction.FromString(payload.data)
    if not tx.actions:
        raise ValueError("endorsed transaction has no actions")
    cap = transaction_pb2.ChaincodeActionPayload.FromString(tx.actions[0].payload)
    prp = proposal_response_pb2.ProposalResponsePayload.FromString(cap.action.proposal_response_payload)
    action = proposal_pb2.ChaincodeAction.FromString(prp.extension)
    result: bytes = action.response.payload
    return result


def chaincode_event_of(envelope: common_pb2.Envelope) -> chaincode_event_pb2.ChaincodeEvent | None:
    """The chaincode event a committed transaction envelope carries (None if it set none)."""
    payload = common_pb2.Payload.FromString(envelope.payload)
    tx = transaction_pb2.Transaction.FromString(payload.data)
    if not tx.actions:
        return None
    cap = transaction_pb2.ChaincodeActionPayload.FromString(tx.actions[0].payload)
    prp = proposal_response_pb2.ProposalResponsePayload.FromString(cap.action.proposal_response_payload)
    action = proposal_pb2.ChaincodeAction.FromString(prp.extension)
    return chaincode_event_pb2.ChaincodeEvent.FromString(action.events) if action.events else None


# --------------------------------------------------------------------------- blocks


def _der_length(n: int) -> bytes:
    if n < 0x80:
        return bytes([n])
    b = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(b)]) + b


def _der_integer(n: int) -> bytes:
    b = n.to_bytes(max(1, (n.bit_length() + 8) // 8), "big", signed=True)
    return b"\x02" + _der_length(len(b)) + b


def _der_octets(b: bytes) -> bytes:
    return b"\x04" + _der_length(len(b)) + b


def block_header_bytes(number: int, previous_hash: bytes, data_hash: bytes) -> bytes:
    """The ASN.1 DER ``SEQUENCE{INTEGER number, OCTET STRING previous_hash, OCTET STRING data_hash}``
    of a block header (Fabric ``protoutil.BlockHeaderBytes``): what its hash and the orderers'
    signatures cover."""
    body = _der_integer(number) + _der_octets(previous_hash) + _der_octets(data_hash)
    return b"\x30" + _der_length(len(body)) + body


def block_header_hash(number: int, previous_hash: bytes, data_hash: bytes) -> bytes:
    """SHA-256 of :func:`block_header_bytes`: block n+1's previous_hash."""
    return hashlib.sha256(block_header_bytes(number, previous_hash, data_hash)).digest()


def channel_header_of(envelope_bytes: bytes) -> common_pb2.ChannelHeader:
    env = common_pb2.Envelope.FromString(envelope_bytes)
    payload = common_pb2.Payload.FromString(env.payload)
    return common_pb2.ChannelHeader.FromString(payload.header.channel_header)
