"""Block and transaction formats of the embedded ledger (canonical JSON, Fabric's structure).

A transaction carries the client's proposal, the endorsed response (result, read/write set,
event) and the endorsements (peer identity + signature over response||endorser), and is signed
by the client. A block carries its transactions, the validation code of each, the previous
block's header hash, and the orderer's signature over its header:

    header      = canonical({number, previous_hash, data_hash, codes_hash, timestamp})
    header_hash = sha256(header)      data_hash = sha256(canonical(transactions | config))
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from chaincode.canonical import canonical_json
from ledger.interface import BlockContent, TransactionWrites
from wire import bounded_json

#: the encoding of a stored block (``EmbeddedLedger.raw_blocks``): its body's canonical JSON
BLOCK_FORMAT = "consortia-embedded-block/1"

VALID = "VALID"
MVCC_READ_CONFLICT = "MVCC_READ_CONFLICT"
PHANTOM_READ_CONFLICT = "PHANTOM_READ_CONFLICT"
ENDORSEMENT_POLICY_FAILURE = "ENDORSEMENT_POLICY_FAILURE"
DUPLICATE_TXID = "DUPLICATE_TXID"
BAD_CREATOR_SIGNATURE = "BAD_CREATOR_SIGNATURE"
BAD_PROPOSAL_TXID = "BAD_PROPOSAL_TXID"
INVALID_OTHER_REASON = "INVALID_OTHER_REASON"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def unb64(text: str) -> bytes:
    return base64.b64decode(text.encode("ascii"), validate=True)


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def compute_tx_id(nonce: bytes, creator: bytes) -> str:
    """Fabric's ComputeTxID: hex(sha256(nonce || creator))."""
    return sha256_hex(nonce + creator)


def signed_part(tx: dict[str, Any]) -> bytes:
    """What the client signs in a transaction envelope."""
    return canonical_json(
        {"proposal": tx["proposal"], "response": tx["response"], "endorsements": tx["endorsements"]}
    )


def endorsement_message(response: dict[str, Any] | bytes, endorser: bytes) -> bytes:
    """What an endorsing peer signs: the proposal response payload followed by its identity.
    ``response`` may be given as its canonical JSON already: every endorsement of one transaction signs
    the same payload, encoded once (not once per endorser: a response carries the record written)."""
    return (response if isinstance(response, bytes) else canonical_json(response)) + endorser


def data_of(body: dict[str, Any]) -> Any:
    return body["config"] if body["number"] == 0 else body["transactions"]


def header_bytes(body: dict[str, Any]) -> bytes:
    return canonical_json(
        {
            "number": body["number"],
            "previous_hash": body["previous_hash"],
            "data_hash": body["data_hash"],
            "codes_hash": sha256_hex(canonical_json(body["validation_codes"])),
            "timestamp": body["timestamp"],
        }
    )


def make_body(
    number: int,
    previous_hash: str,
    timestamp: float,
    transactions: list[dict[str, Any]],
    codes: list[str],
    config: dict[str, Any] | None = None,
    data_json: bytes | None = None,
) -> dict[str, Any]:
    """A block body; ``data_json``: the canonical JSON of ``transactions`` if the caller has it."""
    body: dict[str, Any] = {
        "number": number,
        "previous_hash": previous_hash,
        "timestamp": timestamp,
        "transactions": transactions,
        "validation_codes": codes,
    }
    if number == 0:
        body["config"] = config
    body["data_hash"] = sha256_hex(data_json if number and data_json else canonical_json(data_of(body)))
    return body


_SPLICE = b'"transactions":0'


def body_json(body: dict[str, Any], transactions_json: bytes) -> bytes:
    """``canonical_json(body)`` with the transactions' canonical JSON (already encoded for the data
    hash) spliced in instead of encoded a second time: the body is encoded with ``0`` in their
    place, which the one top-level ``"transactions":0`` then becomes (no other value can contain it:
    the other values are numbers, hex, base64 and validation codes)."""
    text = canonical_json({**body, "transactions": 0})
    if text.count(_SPLICE) != 1:
        raise ValueError("block body does not encode its transactions exactly once")
    return text.replace(_SPLICE, b'"transactions":' + transactions_json)


#: the fields of a block header (what :func:`header_bytes` encodes and its hash covers)
HEADER_FIELDS = ("number", "previous_hash", "data_hash", "codes_hash", "timestamp")


def header_hash(header: Mapping[str, Any]) -> str:
    """The header hash of a block whose header fields are ``header`` (exactly :data:`HEADER_FIELDS`;
    ValueError otherwise)."""
    if set(header) != set(HEADER_FIELDS):
        raise ValueError(f"a block header has the fields {', '.join(HEADER_FIELDS)}")
    return sha256_hex(canonical_json({k: header[k] for k in HEADER_FIELDS}))


def block_content(raw: bytes) -> BlockContent:
    """A stored block (its body's canonical JSON) read back: header fields (the validation codes
    covered by ``codes_hash``), recomputed header hash, data hash check, each transaction's writes."""
    body = bounded_json.loads(raw, "a block")  # also read from an audit bundle: bounded depth
    header = json.loads(header_bytes(body))
    txs: dict[str, TransactionWrites] = {}
    if body["number"] != 0:
        for tx, code in zip(body["transactions"], body["validation_codes"], strict=True):
            writes = {k: None if v is None else unb64(v) for k, v in tx["response"]["rwset"]["writes"]}
            tx_id = tx["proposal"]["tx_id"]
            if tx_id not in txs or code == VALID:
                txs[tx_id] = TransactionWrites(code, {tx["proposal"]["chaincode"]: writes})
    matches = sha256_hex(canonical_json(data_of(body))) == body["data_hash"]
    return BlockContent(header, header_hash(header), matches, txs)
