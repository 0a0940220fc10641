"""Offline audit bundles of a model: export from the ledger, verify with no network and no ledger.

Layout of a bundle (a directory)::

    bundle.dsse.json                 DSSE envelope, signed by the exporting organisation, whose payload
                                     is the manifest {format, model_id, exporter, created, files: {path: sha256}}
    records/image.json               the ledger records, canonical JSON
    records/process.json
    records/model.json               (without any organisation's sealed data key)
    records/executions/<round>-<org>.json
    attestations/<round>-<org>.dsse.json   in-toto Statement v1 (SLSA Provenance v1) in DSSE, signed by
                                     the executing organisation (audit.attestations)
    blocks/<number>.json             header hash, previous hash, data hash, transaction ids and
                                     validation codes of every block holding one of the records' transactions,
                                     and of the checkpointed head block
    proofs/                          for each record, the transaction that wrote it last, that block
                                     whole, and the headers from it to the checkpointed head
                                     (audit.write_sets)
    checkpoint.json                  a signed checkpoint of the ledger's chain head at export (block number +
                                     header hash, signed by the exporter; ledger.checkpoint) -- every
                                     attestation carries the same checkpoint
    certificates/ca/<MSP>.pem        the organisations' CA certificates (trust anchors, or pinned with --ca)
    certificates/signers/<hex>.pem   certificates of the signers, named by keyid

:func:`verify_bundle` checks, with the files alone: the manifest signature and the exporter's
certificate chain; that the files on disk are exactly those of the manifest with the same SHA-256
(so any changed byte names its file); every attestation's signature, signer organisation and
certificate chain, and that its statement says what the execution record says; every execution
(task signature, pinned image); the lineage by the one rule of :mod:`audit.lineage` (whole, every
execution linked to what the round before signed); the model digest and estimators; that every
transaction id is a valid transaction of an included block, with consecutive blocks chained; and
the chain-head checkpoint: signed by a trusted organisation, its block included with the same
header hash, no included block beyond it, and every attestation's checkpoint valid and at or after
the block of the record it attests; and that every record is the value the chain wrote, joined with
the private part it carries (:func:`audit.write_sets.check_write_proofs`).

The checkpoint is the bundle's anchor against truncation: ``consortia ledger verify --checkpoint
<bundle>/checkpoint.json`` checks that the ledger still reaches the head the bundle saw.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from cryptography.exceptions import UnsupportedAlgorithm

from audit.attestations import (
    AttestationError,
    attest_execution,
    certificate_keyid,
    check_statement,
    open_envelope,
    sign_envelope,
)
from audit.checkpoints import check_checkpoint
from audit.lineage import check_execution, check_lineage
from audit.report import Report
from audit.signatures import CertificateInvalid, check_certificate
from audit.verification import IndexView, transaction_locator
from audit.write_sets import RecordWrite, WriteProofError, check_write_proofs, proof_files
from ledger.checkpoint import checkpoint_of
from ledger.client import ConsortiaClient
from ledger.errors import CheckpointInvalid
from ledger.identity import Identity
from wire import bounded_json
from wire.canonical import canonical_json

FORMAT = "consortia-audit-bundle/3"
MANIFEST_TYPE = "application/vnd.consortia.audit-bundle+json"
ENVELOPE = "bundle.dsse.json"


class BundleError(Exception):
    """The bundle cannot be written or read at all (not a verification failure)."""


def _write(root: Path, rel: str, data: bytes, files: dict[str, str]) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    files[rel] = hashlib.sha256(data).hexdigest()


def _node(e: Mapping[str, Any]) -> str:
    return f"{e['round']:06d}-{e['organisation']}"


def export_bundle(
    out: str | os.PathLike[str],
    client: ConsortiaClient,
    model_id: str,
    *,
    signers: Mapping[str, Identity],
    ca_certificates: Mapping[str, bytes],
    index: IndexView | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Write the audit bundle of ``model_id`` into the new directory ``out``.

    ``client`` reads the ledger (as the exporting organisation, which signs the manifest);
    ``signers`` holds the identities that may attest executions -- an execution is attested only by
    its own organisation, so executions of organisations without a signer here are included as
    ledger records (with their task signatures) but without an attestation. Returns a summary."""
    root = Path(out)
    if root.exists() and any(root.iterdir()):
        raise BundleError(f"{root} exists and is not empty")
    root.mkdir(parents=True, exist_ok=True)

    def ev(function: str, *args: str) -> Any:
        return json.loads(client.ledger.evaluate(client.identity, function, *args))

    model = {k: v for k, v in ev("Model:get", model_id).items() if k != "wrapped_key"}
    process = {
        k: v for k, v in ev("LearningProcess:get", model["process_id"]).items() if k != "current_round"
    }
    image = ev("Image:get", process["image_id"])
    executions = [
        e
        for e in ev("ExecutionRecord:query", json.dumps({"process_id": process["id"]}))
        if e["status"] == "completed"
    ]
    # the transaction that wrote each record last (read after the record: the proof checks they agree)
    named: list[tuple[str, str, dict[str, Any], str]] = [
        ("records/image.json", "image", image, _last_write(ev, "Image:history", image["id"])),
        (
            "records/process.json",
            "process",
            process,
            _last_write(ev, "LearningProcess:history", process["id"]),
        ),
        ("records/model.json", "model", model, _last_write(ev, "Model:history", model_id)),
    ]
    for e in executions:
        last = _last_write(ev, "ExecutionRecord:history", e["process_id"], str(e["round"]), e["organisation"])
        named.append((f"records/executions/{_node(e)}.json", "execution", e, last))
    # the head after every record was read: no record's transaction lies beyond it
    checkpoint = checkpoint_of(client.ledger, client.identity)
    files: dict[str, str] = {}
    _write(root, "checkpoint.json", canonical_json(checkpoint.to_json()), files)
    _write(root, "records/image.json", canonical_json(image), files)
    _write(root, "records/process.json", canonical_json(process), files)
    _write(root, "records/model.json", canonical_json(model), files)
    certs: dict[str, bytes] = {
        certificate_keyid(client.identity.certificate_pem): client.identity.certificate_pem
    }
    attested = 0
    for i, e in enumerate(executions):
        _write(root, f"records/executions/{_node(e)}.json", canonical_json(e), files)
        signer = signers.get(e["organisation"])
        if signer is not None:
            env = attest_execution(e, signer, checkpoint)
            certs[certificate_keyid(signer.certificate_pem)] = signer.certificate_pem
            _write(root, f"attestations/{_node(e)}.dsse.json", canonical_json(env), files)
            attested += 1
        if progress:
            progress(i + 1, len(executions))
    txs = {model["tx_id"], process["tx_id"], image["tx_id"]} | {last for *_, last in named}
    for e in executions:
        txs |= {e["tx_id"], e.get("completed_tx_id") or e["tx_id"]}
    blocks = {checkpoint.block_number}
    locate = transaction_locator(client.ledger, index)
    if locate is None:
        raise BundleError("this ledger host cannot find a transaction's block: export with the audit index")
    where: dict[str, int] = {}
    for tx in sorted(txs):
        number = locate(tx)
        if number is None:
            raise BundleError(f"transaction {tx} is not on the ledger")
        blocks.add(number)
        where[tx] = number
    writes = [RecordWrite(rel, kind, value, last, where[last]) for rel, kind, value, last in named]
    try:
        proofs = proof_files(client.ledger, client.identity, writes, checkpoint.block_number)
    except WriteProofError as exc:
        raise BundleError(str(exc)) from None
    for rel, data in sorted(proofs.items()):
        _write(root, rel, data, files)
    for number in sorted(blocks):
        b = client.ledger.block(client.identity, number)
        info = {
            "number": b.number,
            "header_hash": b.header_hash,
            "previous_hash": b.previous_hash,
            "data_hash": b.data_hash,
            "tx_ids": list(b.tx_ids),
            "validation_codes": list(b.validation_codes),
        }
        _write(root, f"blocks/{number:08d}.json", canonical_json(info), files)
    for msp, pem in sorted(ca_certificates.items()):
        _write(root, f"certificates/ca/{msp}.pem", pem, files)
    for keyid, pem in sorted(certs.items()):
        _write(root, f"certificates/signers/{keyid.split(':', 1)[1]}.pem", pem, files)
    manifest = {
        "format": FORMAT,
        "model_id": model_id,
        "exporter": client.identity.msp_id,
        "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "files": files,
    }
    (root / ENVELOPE).write_bytes(canonical_json(sign_envelope(manifest, client.identity, MANIFEST_TYPE)))
    return {
        "path": str(root),
        "model_id": model_id,
        "files": len(files) + 1,
        "executions": len(executions),
        "attestations": attested,
        "blocks": len(blocks),
        "checkpoint": {"block_number": checkpoint.block_number, "header_hash": checkpoint.header_hash},
    }


def _last_write(ev: Callable[..., Any], function: str, *key: str) -> str:
    """The id of the transaction that wrote a record last (its history's newest version)."""
    page = ev(function, *key, "1", "")
    items = page.get("items") if isinstance(page, dict) else None
    if not items:
        raise BundleError(f"{function} {' '.join(key)}: the record has no history")
    return str(items[0]["tx_id"])


def _load_json(root: Path, rel: str) -> Any:
    data = (root / rel).read_bytes()
    obj = bounded_json.loads(data, rel)
    if canonical_json(obj) != data:
        raise ValueError(f"{rel} is not canonical JSON")
    return obj


def _issuing_ca(cert_pem: bytes, cas: Mapping[str, bytes], what: str) -> str:
    """The MSP whose CA issued and signed the certificate."""
    errors = []
    for msp, ca in cas.items():
        try:
            check_certificate(cert_pem, ca, what)
            return msp
        except CertificateInvalid as exc:
            errors.append(str(exc))
    raise AttestationError(f"{what}: certificate is not issued by any organisation's CA")


def _check_files(report: Report, root: Path, listed: dict[str, str]) -> None:
    """The files on disk are exactly those listed, each with the listed SHA-256."""
    present = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()} - {ENVELOPE}
    for rel in sorted(present - set(listed)):
        report.add(f"file {rel}", False, "not listed in the signed manifest", "file")
    for rel in sorted(set(listed) - present):
        report.add(f"file {rel}", False, "listed in the manifest but missing", "file")
    changed = [
        rel
        for rel in sorted(present & set(listed))
        if hashlib.sha256((root / rel).read_bytes()).hexdigest() != listed[rel]
    ]
    for rel in changed:
        report.add(
            f"file {rel}", False, "SHA-256 differs from the signed manifest: the file was changed", "file"
        )
    if not changed and present == set(listed):
        report.add("file digests", True, f"{len(listed)} files match the signed manifest", "file")


def verify_bundle(path: str | os.PathLike[str], trusted_cas: Mapping[str, bytes] | None = None) -> Report:
    """Verify an audit bundle offline (see the module docstring for the checks).

    ``trusted_cas`` pins the organisations' CA certificates; without it the bundle's own CA
    certificates are the trust anchors (they are covered by the signed manifest). Never raises
    on a damaged bundle: every problem is a failed check."""
    report = Report(f"bundle:{path}")
    try:
        return _verify_bundle(Path(path), trusted_cas, report)
    except (
        KeyError,
        TypeError,
        ValueError,
        AttributeError,
        IndexError,
        OSError,
        UnsupportedAlgorithm,
    ) as exc:
        report.add("bundle structure", False, f"{type(exc).__name__}: {exc}", "file")
        return report


def _verify_bundle(root: Path, trusted_cas: Mapping[str, bytes] | None, report: Report) -> Report:
    if not (root / ENVELOPE).is_file():
        report.add("bundle", False, f"{root} has no {ENVELOPE}", "file")
        return report
    # 1. the signed manifest
    try:
        envelope = _load_json(root, ENVELOPE)
    except (ValueError, UnicodeDecodeError) as exc:
        report.add(ENVELOPE, False, f"not a canonical JSON DSSE envelope ({exc})", "manifest")
        return report
    certs = {}
    for p in sorted((root / "certificates" / "signers").glob("*.pem")):
        certs["sha256:" + p.stem] = p.read_bytes()
    cas = {p.stem: p.read_bytes() for p in sorted((root / "certificates" / "ca").glob("*.pem"))}
    anchors = dict(trusted_cas) if trusted_cas is not None else cas
    try:
        if not isinstance(envelope, dict) or envelope.get("payloadType") != MANIFEST_TYPE:
            raise AttestationError(f"{ENVELOPE} is not a Consortia bundle manifest")
        manifest, keyid = open_envelope(envelope, certs, ENVELOPE)
        msp = _issuing_ca(certs[keyid], anchors, "exporter")
        if (
            not isinstance(manifest, dict)
            or manifest.get("format") != FORMAT
            or manifest.get("exporter") != msp
        ):
            raise AttestationError(
                f"manifest format or exporter ({manifest.get('exporter')}) does not match "
                f"its signer's organisation {msp}"
            )
        report.add("manifest signature", True, f"signed by {msp}", "manifest")
    except AttestationError as exc:
        report.add("manifest signature", False, str(exc), "manifest")
        # name the changed files too, from the manifest as written (its signature did not verify)
        try:
            unverified = bounded_json.loads(base64.b64decode(envelope["payload"]), "manifest")
            _check_files(report, root, unverified["files"])
        except (ValueError, KeyError, TypeError, AttributeError):
            pass
        return report
    # 2. the files are exactly the manifest's
    listed: dict[str, str] = manifest["files"]
    _check_files(report, root, listed)
    # 3. the records
    try:
        image = _load_json(root, "records/image.json")
        process = _load_json(root, "records/process.json")
        model = _load_json(root, "records/model.json")
        named = {
            p.stem: _load_json(root, p.relative_to(root).as_posix())
            for p in sorted((root / "records" / "executions").glob("*.json"))
        }
        executions = list(named.values())
        blocks = {
            b["number"]: b
            for b in (
                _load_json(root, p.relative_to(root).as_posix())
                for p in sorted((root / "blocks").glob("*.json"))
            )
        }
    except (ValueError, KeyError, TypeError, OSError) as exc:
        report.add("records", False, f"unreadable record: {exc}", "record")
        return report
    if not all(isinstance(x, dict) for x in (image, process, model, *executions)):
        report.add("records", False, "a record is not a JSON object", "record")
        return report
    if model.get("id") != manifest.get("model_id"):
        report.add(
            "model",
            False,
            f"records/model.json is {model.get('id')}, the manifest names {manifest.get('model_id')}",
            "model",
        )
    for name, e in named.items():
        report.run(f"execution {name}", check_execution, e, process, kind="execution")
    lineage = check_lineage(report, model, process, image, executions)
    report.facts = {"model_id": model.get("id"), "lineage": sorted(lineage.nodes)}
    # 4. the chain-head checkpoint
    head = _check_checkpoint(report, root, anchors, blocks)
    # 5. attestations
    by_node = named
    where = {tx: n for n, b in blocks.items() for tx in b.get("tx_ids", ())}
    for p in sorted((root / "attestations").glob("*.dsse.json")):
        node = p.name[: -len(".dsse.json")]
        name = f"attestation {node}"
        try:
            env = _load_json(root, f"attestations/{p.name}")
            statement, keyid = open_envelope(env, certs, name)
            signer = _issuing_ca(certs[keyid], anchors, name)
            record = by_node.get(node)
            if record is None:
                raise AttestationError(f"{name} has no execution record in the bundle")
            if signer != record["organisation"]:
                raise AttestationError(
                    f"{name} is signed by {signer}, not by the executing organisation "
                    f"{record['organisation']}"
                )
            cp_obj = check_statement(statement, record)
            if cp_obj is None:
                raise AttestationError(f"{name} carries no ledger checkpoint")
            cp, _ = check_checkpoint(cp_obj, anchors, f"{name} ledger checkpoint")
            done = where.get(record.get("completed_tx_id") or record["tx_id"])
            if done is None or done > cp.block_number:
                raise AttestationError(
                    f"{name}: its ledger checkpoint (block {cp.block_number}) does not reach "
                    f"the block of the record it attests ({done})"
                )
            if head is not None and cp.block_number > head:
                raise AttestationError(
                    f"{name}: its ledger checkpoint (block {cp.block_number}) is beyond the "
                    f"bundle's checkpoint (block {head})"
                )
        except (AttestationError, CheckpointInvalid, ValueError, KeyError, TypeError, AttributeError) as exc:
            report.add(name, False, f"{type(exc).__name__}: {exc}", "attestation")
        else:
            report.add(name, True, f"signed by {signer}", "attestation")
    # 6. transactions in blocks, blocks chained
    try:
        _check_blocks(report, model, process, image, named, blocks)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        report.add("blocks", False, f"malformed record or block: {type(exc).__name__} {exc}", "block")
    # 7. every record is the value its transaction wrote, in a block chained to the checkpoint
    records = {
        "records/image.json": ("image", image),
        "records/process.json": ("process", process),
        "records/model.json": ("model", model),
        **{f"records/executions/{n}.json": ("execution", e) for n, e in named.items()},
    }
    check_write_proofs(
        report,
        lambda rel: _load_json(root, rel),
        lambda rel: (root / rel).read_bytes(),
        records,
        blocks,
        head,
    )
    return report


def _check_checkpoint(
    report: Report, root: Path, anchors: Mapping[str, bytes], blocks: dict[int, dict[str, Any]]
) -> int | None:
    """The bundle's chain-head checkpoint; returns its block number (None if it failed)."""
    try:
        cp, signer = check_checkpoint(_load_json(root, "checkpoint.json"), anchors)
        included = blocks.get(cp.block_number)
        if included is None or included.get("header_hash") != cp.header_hash:
            raise AttestationError(
                f"the checkpointed block {cp.block_number} is not in the bundle with the "
                f"checkpoint's header hash"
            )
        beyond = sorted(n for n in blocks if n > cp.block_number)
        if beyond:
            raise AttestationError(f"blocks {beyond} lie beyond the checkpointed head {cp.block_number}")
    except (AttestationError, CheckpointInvalid, OSError, ValueError) as exc:
        report.add("ledger checkpoint", False, str(exc), "checkpoint")
        return None
    report.add(
        "ledger checkpoint",
        True,
        f"block {cp.block_number} ({cp.header_hash[:16]}…) of channel {cp.channel}, signed by {signer}",
        "checkpoint",
    )
    return cp.block_number


def _check_blocks(
    report: Report,
    model: dict[str, Any],
    process: dict[str, Any],
    image: dict[str, Any],
    executions: dict[str, dict[str, Any]],
    blocks: dict[int, dict[str, Any]],
) -> None:
    txs = {model["tx_id"]: "model", process["tx_id"]: "process", image["tx_id"]: "image"}
    for name, e in executions.items():
        txs.setdefault(e["tx_id"], f"execution {name}")
        txs.setdefault(e.get("completed_tx_id") or e["tx_id"], f"execution {name}")
    where = {tx: (n, b["validation_codes"][i]) for n, b in blocks.items() for i, tx in enumerate(b["tx_ids"])}
    missing = [f"{what} ({tx})" for tx, what in sorted(txs.items()) if where.get(tx, (0, ""))[1] != "VALID"]
    report.add(
        "transactions in blocks",
        not missing,
        "not valid transactions of an included block: " + ", ".join(missing)
        if missing
        else f"{len(txs)} transactions in {len(blocks)} blocks",
        "block",
    )
    broken = [
        n for n in blocks if n - 1 in blocks and blocks[n]["previous_hash"] != blocks[n - 1]["header_hash"]
    ]
    report.add(
        "block chain",
        not broken,
        f"previous_hash mismatch at blocks {broken}" if broken else "consecutive blocks are chained",
        "block",
    )
