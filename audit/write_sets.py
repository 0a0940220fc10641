"""Proofs that an audit bundle's public records are what the chain wrote (docs/confidentiality.md
"Audit"; docs/audit.md "Audit bundles").

A record's stored value is the canonical JSON its contract wrote (``chaincode.context`` ``put``), and
the block of the transaction that wrote it last carries that value in its write set. A bundle
(:mod:`audit.bundles`) carries, beside its records::

    proofs/writes.json          {format, namespace, writes: [{record, kind, key, tx_id, block}]}:
                                for each record file, the key and the transaction that wrote it last
    proofs/headers.json         the header fields of every block from the first such block to the
                                checkpointed head
    proofs/blocks/<n>.block     each such block whole, as its ledger host encodes it (``format``)

and :func:`check_write_proofs` shows, with these files alone:

1. the headers chain: each header's hash (recomputed, ``ledger.embedded.blocks.header_hash`` or
   ``ledger.fabric.blocks.header_hash``) is the next header's ``previous_hash``, and the last one's
   is the signed checkpoint's header hash; each block summary of the bundle in that range has its
   header's hash;
2. each carried block hashes to its header in the chain, and its data to the header's data hash;
3. the transaction is a valid transaction of that block and wrote, in the chaincode's namespace,
   the record's own key (computed here from the record: :func:`ledger.rules.record_key`);
4. the written value, joined with the private part the record carries (after checking that part
   against the written ``private_sha256``: the same join as a member's read,
   :meth:`chaincode.records.ProcessRecord.joined`, :meth:`~chaincode.records.ModelRecord.joined`,
   :meth:`~chaincode.records.ExecutionPrivate.joined`), is the record, except for the fields a
   read adds and that are never stored (:data:`READ_ONLY`).

What this does not show: that no later write changed a record before the head (a reader of the
whole chain sees that), and, on Fabric, a transaction's validity beyond the committing peer's word
(the validation flags sit in the block's metadata, which no hash covers; the exporter signs the
bundle). The embedded ledger's header covers its validation codes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from audit.report import Report
from ledger.client import ExecutionRecord, ModelRecord, ProcessRecord
from ledger.embedded import blocks as embedded_blocks
from ledger.fabric import blocks as fabric_blocks
from ledger.interface import BlockContent
from ledger.rules import record_key
from wire import bounded_json
from wire.canonical import canonical_json

WRITES = "proofs/writes.json"
HEADERS = "proofs/headers.json"

#: each ledger host's block encoding: (read a whole block, hash a header)
READERS: Mapping[str, tuple[Callable[[bytes], BlockContent], Callable[[Mapping[str, Any]], str]]] = {
    embedded_blocks.BLOCK_FORMAT: (embedded_blocks.block_content, embedded_blocks.header_hash),
    fabric_blocks.BLOCK_FORMAT: (fabric_blocks.block_content, fabric_blocks.header_hash),
}

#: fields a read adds to a record and that are never stored (``Record.view``)
READ_ONLY: Mapping[str, tuple[str, ...]] = {
    "image": ("approvals",),
    "process": ("current_round",),
    "model": ("wrapped_key",),
    "execution": (),
}


class WriteProofError(ValueError):
    """A record is not shown to be what the chain wrote (the message says where the proof breaks)."""


def block_path(number: int) -> str:
    return f"proofs/blocks/{number:08d}.block"


def _private_matches(digest: str, got: str, what: str) -> None:
    if got != digest:
        raise WriteProofError(
            f"{what}: the private part it carries hashes to {got}, the chain wrote {digest}"
        )


def expected_record(kind: str, stored: dict[str, Any], record: Mapping[str, Any]) -> dict[str, Any]:
    """The stored value ``stored`` as a member reads it, given the bundle's ``record``: with the private
    part ``record`` carries joined (checked against the stored ``private_sha256``), or ``private_purged``
    where the record says the part was purged; without :data:`READ_ONLY` fields."""
    digest = stored.get("private_sha256")
    out = stored
    if digest is not None and record.get("private_purged") is not None and kind != "process":
        out = {**stored, "private_purged": record["private_purged"]}  # a read's view of the purge
    elif digest is not None and kind == "process" and record.get("private_salt") is not None:
        terms = ProcessRecord.model_validate(record).private_terms()
        _private_matches(digest, terms.digest(), f"learning process {stored.get('id')}")
        out = ProcessRecord.model_validate(stored).joined(terms).json_object()
    elif digest is not None and kind == "model" and record.get("private_salt") is not None:
        part = ModelRecord.model_validate(record).private_part()
        _private_matches(digest, part.digest(), f"model {stored.get('id')}")
        out = ModelRecord.model_validate(stored).joined(part).json_object()
    elif digest is not None and kind == "execution" and record.get("confidential_salt") is not None:
        epart = ExecutionRecord.model_validate(record).private_part()
        _private_matches(digest, epart.digest(), f"execution record of {stored.get('organisation')}")
        out = epart.joined(stored)
    return {k: v for k, v in out.items() if k not in READ_ONLY[kind]}


def check_record(kind: str, written: bytes, record: Mapping[str, Any]) -> None:
    """WriteProofError unless ``record`` is the value ``written`` as a member reads it."""
    stored = bounded_json.loads(written, "a written value")
    if not isinstance(stored, dict):
        raise WriteProofError("the written value is not a JSON object")
    want = expected_record(kind, stored, record)
    got = {k: v for k, v in record.items() if k not in READ_ONLY[kind]}
    if canonical_json(want) != canonical_json(got):
        differ = sorted(
            k for k in set(want) | set(got) if canonical_json(want.get(k)) != canonical_json(got.get(k))
        )
        raise WriteProofError(f"differs from the value the chain wrote (fields {', '.join(differ) or '?'})")


# ------------------------------------------------------------------------------------------- export
@dataclass(frozen=True)
class RecordWrite:
    """One record of a bundle and the transaction that wrote it last."""

    record: str  # the record's file in the bundle
    kind: str
    value: Mapping[str, Any]  # the record as the bundle carries it
    tx_id: str
    block: int


def proof_files(ledger: Any, identity: Any, writes: Iterable[RecordWrite], head: int) -> dict[str, bytes]:
    """The proof files (path -> bytes) of ``writes`` up to the checkpointed block ``head``, read from
    ``ledger`` as ``identity``; WriteProofError if a record is not what its block wrote (it changed
    while the bundle was exported: export again)."""
    fmt = str(getattr(ledger, "block_format", ""))
    raw_blocks = getattr(ledger, "raw_blocks", None)
    if fmt not in READERS or raw_blocks is None:
        raise WriteProofError("this ledger host cannot hand out whole blocks")
    content_of, _ = READERS[fmt]
    writes = list(writes)
    wanted = {w.block for w in writes}
    first = min(wanted, default=head)
    headers: list[Mapping[str, Any]] = []
    contents: dict[int, BlockContent] = {}
    files: dict[str, bytes] = {}
    for raw in raw_blocks(identity, first, head):
        content = content_of(raw)
        headers.append(content.header)
        number = int(content.header["number"])
        if number in wanted:
            files[block_path(number)] = raw
            contents[number] = content
    if [int(h["number"]) for h in headers] != list(range(first, head + 1)):
        raise WriteProofError(f"the ledger did not hand out blocks {first} to {head}")
    namespace = ledger.chaincode
    entries = []
    for w in writes:
        key = record_key(w.kind, w.value)
        tx = contents[w.block].transactions.get(w.tx_id)
        value = None if tx is None else tx.writes.get(namespace, {}).get(key)
        if value is None:
            raise WriteProofError(f"{w.record}: transaction {w.tx_id} of block {w.block} did not write it")
        try:
            check_record(w.kind, value, w.value)
        except WriteProofError as exc:
            raise WriteProofError(f"{w.record} {exc}: it changed during the export; export again") from None
        entries.append({"record": w.record, "kind": w.kind, "key": key, "tx_id": w.tx_id, "block": w.block})
    files[WRITES] = canonical_json({"format": fmt, "namespace": namespace, "writes": entries})
    files[HEADERS] = canonical_json({"format": fmt, "headers": headers})
    return files


# ------------------------------------------------------------------------------------------- verify
def _header_chain(fmt: str, headers: Any, head: int, head_hash: str) -> dict[int, str]:
    """Block number -> recomputed header hash of a chain of headers ending at the checkpointed ``head``."""
    if not isinstance(headers, list) or not headers:
        raise WriteProofError("no block headers")
    _, hash_of = READERS[fmt]
    hashes: dict[int, str] = {}
    previous: tuple[int, str] | None = None
    for h in headers:
        if not isinstance(h, dict):
            raise WriteProofError("a block header is not a JSON object")
        number, digest = h.get("number"), hash_of(h)
        if not isinstance(number, int) or isinstance(number, bool):
            raise WriteProofError("a block number is not an integer")
        if previous is not None and (number != previous[0] + 1 or h.get("previous_hash") != previous[1]):
            raise WriteProofError(f"block {number} does not link to the header hash of block {previous[0]}")
        hashes[number] = digest
        previous = (number, digest)
    if previous is None or previous != (head, head_hash):
        raise WriteProofError(
            f"the headers end at block {previous and previous[0]}, not at the checkpointed "
            f"block {head} ({head_hash[:16]}…)"
        )
    return hashes


def check_write_proofs(
    report: Report,
    load_json: Callable[[str], Any],
    load_bytes: Callable[[str], bytes],
    records: Mapping[str, tuple[str, Mapping[str, Any]]],
    blocks: Mapping[int, Mapping[str, Any]],
    head: int | None,
) -> None:
    """Add the checks "record writes" (every record of ``records``, file -> (kind, record), is what
    the chain wrote) and "block headers" (the chain of headers to the checkpointed ``head``) to ``report``.
    ``blocks`` are the bundle's block summaries (checked against the headers in range)."""
    if head is None:
        report.add("record writes", False, "no valid ledger checkpoint to prove the records against", "block")
        return
    try:
        proof = load_json(WRITES)
        chain = load_json(HEADERS)
        fmt = proof["format"]
        if fmt not in READERS or chain.get("format") != fmt:
            raise WriteProofError(f"block format {fmt!r} is not one this verifier reads")
        hashes = _header_chain(fmt, chain["headers"], head, str(blocks[head]["header_hash"]))
        stale = sorted(n for n, b in blocks.items() if n in hashes and b.get("header_hash") != hashes[n])
        if stale:
            raise WriteProofError(f"the block summaries {stale} do not have their headers' hashes")
    except (WriteProofError, KeyError, TypeError, ValueError, AttributeError, OSError) as exc:
        report.add("block headers", False, f"{type(exc).__name__}: {exc}", "block")
        report.add("record writes", False, "the block headers do not reach the checkpoint", "block")
        return
    report.add("block headers", True, f"blocks {min(hashes)}–{head} chained to the checkpoint", "block")
    content_of, _ = READERS[fmt]
    namespace = proof.get("namespace")
    entries = {str(e.get("record")): e for e in proof.get("writes", []) if isinstance(e, dict)}
    failed: list[str] = []
    for rel, (kind, record) in sorted(records.items()):
        try:
            e = entries.get(rel)
            if e is None:
                raise WriteProofError("no proof")
            key = record_key(kind, record)
            if e["key"] != key:
                raise WriteProofError(f"the proof names key {e['key']!r}, the record's key is {key!r}")
            number = e["block"]
            content = content_of(load_bytes(block_path(number)))
            if content.header_hash != hashes.get(number):
                raise WriteProofError(f"block {number} is not the chain's block {number}")
            if not content.data_hash_matches:
                raise WriteProofError(f"block {number}'s transactions do not hash to its header's data hash")
            tx = content.transactions.get(e["tx_id"])
            if tx is None or tx.validation_code != "VALID":
                raise WriteProofError(f"{e['tx_id']} is not a valid transaction of block {number}")
            value = tx.writes.get(namespace, {}).get(key)
            if value is None:
                raise WriteProofError(f"transaction {e['tx_id']} did not write it in {namespace!r}")
            check_record(kind, value, record)
        except (WriteProofError, KeyError, TypeError, ValueError, AttributeError, IndexError, OSError) as exc:
            failed.append(f"{rel}: {exc}")
    extra = sorted(set(entries) - set(records))
    failed += [f"{rel}: a proof for a record the bundle does not carry" for rel in extra]
    report.add(
        "record writes",
        not failed,
        "; ".join(failed)
        if failed
        else f"{len(records)} records are the values their transactions wrote in {namespace!r} "
        f"(blocks carried whole, hashed to the chained headers)",
        "block",
    )
