"""Reading Fabric blocks as the ``qscc`` system chaincode returns them: the validation flags the
committing peer wrote into the block metadata, the :class:`ledger.interface.BlockInfo` summary,
and whether a block carries a chaincode event (docs/fabric.md "Gateway client")."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from fabric_protos.common import common_pb2
from fabric_protos.ledger.rwset import rwset_pb2
from fabric_protos.ledger.rwset.kvrwset import kv_rwset_pb2
from fabric_protos.peer import proposal_pb2, proposal_response_pb2, transaction_pb2
from google.protobuf.message import DecodeError

from ledger.fabric.proposal import block_header_hash, chaincode_event_of, channel_header_of
from ledger.interface import BlockContent, BlockInfo, TransactionWrites

#: the encoding of a block that ``FabricLedger.raw_blocks`` hands out: a serialized ``common.Block``
BLOCK_FORMAT = "fabric-common-block/1"

_VALID = transaction_pb2.TxValidationCode.Value("VALID")


def validation_flags(block: common_pb2.Block) -> bytes:
    """One ``TxValidationCode`` byte per transaction (empty if the block has not been validated)."""
    if len(block.metadata.metadata) > common_pb2.TRANSACTIONS_FILTER:
        flags: bytes = block.metadata.metadata[common_pb2.TRANSACTIONS_FILTER]
        return flags
    return b""


def block_info(block: common_pb2.Block) -> BlockInfo:
    """Number, hashes, transaction ids (``""`` for an undecodable envelope), validation codes
    and the first transaction's timestamp."""
    h = block.header
    tx_ids: list[str] = []
    timestamp = 0.0
    for env in block.data.data:
        try:
            chdr = channel_header_of(env)
        except Exception:
            tx_ids.append("")
            continue
        tx_ids.append(chdr.tx_id)
        if not timestamp:
            timestamp = chdr.timestamp.seconds + chdr.timestamp.nanos / 1e9
    flags = validation_flags(block)
    codes = tuple(
        transaction_pb2.TxValidationCode.Name(flags[i]) if i < len(flags) else "NOT_VALIDATED"
        for i in range(len(tx_ids))
    )
    return BlockInfo(
        number=h.number,
        header_hash=block_header_hash(h.number, h.previous_hash, h.data_hash).hex(),
        previous_hash=h.previous_hash.hex(),
        data_hash=h.data_hash.hex(),
        tx_ids=tuple(tx_ids),
        validation_codes=codes,
        timestamp=timestamp,
    )


def block_has_events(block: common_pb2.Block, chaincode: str) -> bool:
    """Whether a block holds a valid transaction that emitted an event of ``chaincode``."""
    flags = validation_flags(block)
    for i, env in enumerate(block.data.data):
        if i >= len(flags) or flags[i] != _VALID:
            continue
        try:
            event = chaincode_event_of(common_pb2.Envelope.FromString(env))
        except Exception:  # a config or otherwise undecodable envelope carries no chaincode event
            continue
        if event is not None and event.chaincode_id == chaincode and event.event_name:
            return True
    return False


def header_hash(header: Mapping[str, Any]) -> str:
    """The header hash (hex) of a block whose header is ``{number, previous_hash, data_hash}`` (hex):
    SHA-256 of the header's ASN.1 DER (:func:`ledger.fabric.proposal.block_header_hash`)."""
    if set(header) != {"number", "previous_hash", "data_hash"}:
        raise ValueError("a Fabric block header has the fields number, previous_hash, data_hash")
    number = header["number"]
    if not isinstance(number, int) or isinstance(number, bool) or number < 0:
        raise ValueError("a block number is a non-negative integer")
    return block_header_hash(
        number, bytes.fromhex(header["previous_hash"]), bytes.fromhex(header["data_hash"])
    ).hex()


def _writes(envelope: bytes) -> tuple[str, dict[str, dict[str, bytes | None]]] | None:
    """(transaction id, namespace -> key -> value) of an endorser transaction; None for any other
    envelope (a channel configuration)."""
    payload = common_pb2.Payload.FromString(common_pb2.Envelope.FromString(envelope).payload)
    chdr = common_pb2.ChannelHeader.FromString(payload.header.channel_header)
    if chdr.type != common_pb2.HeaderType.Value("ENDORSER_TRANSACTION"):
        return None
    out: dict[str, dict[str, bytes | None]] = {}
    for action in transaction_pb2.Transaction.FromString(payload.data).actions:
        cap = transaction_pb2.ChaincodeActionPayload.FromString(action.payload)
        prp = proposal_response_pb2.ProposalResponsePayload.FromString(cap.action.proposal_response_payload)
        results = proposal_pb2.ChaincodeAction.FromString(prp.extension).results
        for ns in rwset_pb2.TxReadWriteSet.FromString(results).ns_rwset:
            kv = kv_rwset_pb2.KVRWSet.FromString(ns.rwset)
            got = out.setdefault(ns.namespace, {})
            for w in kv.writes:
                got[w.key] = None if w.is_delete else bytes(w.value)
    return chdr.tx_id, out


def block_content(raw: bytes) -> BlockContent:
    """A serialized ``common.Block`` read back: header, recomputed header hash, whether the data hashes
    to the header's data hash (SHA-256 of the envelopes' concatenated bytes, Fabric's
    ``protoutil.ComputeBlockDataHash``), and each endorser transaction's public writes with the
    validation code its committing peer set (the metadata, which no hash covers)."""
    try:
        block = common_pb2.Block.FromString(raw)
    except DecodeError as exc:
        raise ValueError(f"not a serialized Fabric block: {exc}") from None
    h = block.header
    header = {"number": h.number, "previous_hash": h.previous_hash.hex(), "data_hash": h.data_hash.hex()}
    flags = validation_flags(block)
    txs: dict[str, TransactionWrites] = {}
    for i, env in enumerate(block.data.data):
        try:
            got = _writes(env)
        except DecodeError:  # an envelope that does not decode wrote nothing anyone can prove
            continue
        if got is None:
            continue
        code = transaction_pb2.TxValidationCode.Name(flags[i]) if i < len(flags) else "NOT_VALIDATED"
        if got[0] not in txs or code == "VALID":
            txs[got[0]] = TransactionWrites(code, got[1])
    matches = hashlib.sha256(b"".join(block.data.data)).digest() == h.data_hash
    return BlockContent(header, header_hash(header), matches, txs)
