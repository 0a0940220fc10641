"""Reading Fabric blocks as the ``qscc`` system chaincode returns them: the validation flags the
committing peer wrote into the block metadata, the :class:`ledger.interface.BlockInfo` summary,
and whether a block carries a chaincode event (docs/fabric.md "Gateway client")."""

from __future__ import annotations

from fabric_protos.common import common_pb2
from fabric_protos.peer import transaction_pb2

from ledger.fabric.proposal import block_header_hash, chaincode_event_of, channel_header_of
from ledger.interface import BlockInfo

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
