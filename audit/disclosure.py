"""Disclosing the inputs of an organisation's tasks to an auditor (docs/audit-replay.md).

An organisation lets an auditor re-run some of its recorded tasks (:mod:`audit.replay`). For each chosen
round it collects exactly what its task read -- its dataset file as used (``dataset.npz``) and the
secret salt of its data commitment, its previous state from its own store, each inbox message from the
sender's artifact service, opened with its own key (:meth:`exchange.rounds.RoundFiles.gather_inputs`,
the agent's own way) -- seals the bundle to the auditor's key-agreement certificate
(:func:`exchange.sealing.seal`, HPKE, ``info`` binding process, discloser and recipient), writes one
disclosure file and records the disclosure on the ledger (``Disclosure:record``: process, organisation,
rounds, recipient, digest of the sealed bundle).

The disclosure file is canonical JSON::

    {format: "consortia-disclosure/1", process_id, organisation, recipient, rounds,
     bundle_digest: sha256 of the sealed bytes, sealed: base64 of CSE2 || HPKE ciphertext}

and the sealed plaintext, canonical JSON too::

    {format: "consortia-disclosure-bundle/1", process_id, organisation, recipient, rounds,
     data_salt: hex, dataset: base64 of dataset.npz,
     tasks: [{round, state: base64 | null, inbox: {sender: base64}}]}

Only the recipient's private key opens it; nothing else of the organisation (its other rounds, its
model, the others' messages to it in other rounds) is in it.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec

from algorithms.task_manifest import data_commitment
from exchange.rounds import RoundFiles
from exchange.sealing import seal, unseal
from exchange.store import ArtifactStore
from executor.node.workers import dataset_dir
from ledger.client import ConsortiaClient, DisclosureRecord
from ledger.identity import Consortium
from wire.canonical import canonical_json, sha256_digest

FORMAT = "consortia-disclosure/1"
BUNDLE_FORMAT = "consortia-disclosure-bundle/1"
SALT_FILE = "data_salt"  #: in the organisation's agent state directory (executor.node.agent)


class DisclosureError(ValueError):
    """A disclosure cannot be made or read (the message says why)."""


def seal_info(process_id: str, organisation: str, recipient: str) -> bytes:
    """HPKE ``info`` of a disclosure bundle: binds it to (process, discloser, recipient)."""
    return f"consortia-disclosure|{process_id}|{organisation}|{recipient}".encode()


@dataclass(frozen=True)
class DisclosedTask:
    """One task's inputs as disclosed."""

    round: int
    state: bytes | None
    inbox: dict[str, bytes]
    confidential: dict[str, Any] | None = None
    """The confidential part of the task's result (metrics, data commitment, validation scores, salt:
    docs/confidentiality.md), which the recipient checks against the signed ``confidential_sha256``;
    None for a result signed in clear."""


@dataclass(frozen=True)
class Bundle:
    """The opened bundle: what the disclosing organisation's tasks of ``rounds`` read."""

    process_id: str
    organisation: str
    recipient: str
    data_salt: str
    dataset: bytes
    tasks: tuple[DisclosedTask, ...]
    private_terms: dict[str, Any] | None = None
    """The process's private terms (hyper-parameters, budget, salt), which the recipient checks against
    the process's ``private_sha256``; None for a process whose terms are in clear."""

    @property
    def rounds(self) -> tuple[int, ...]:
        return tuple(t.round for t in self.tasks)

    def to_json(self) -> bytes:
        def b64(b: bytes) -> str:
            return base64.b64encode(b).decode()

        return canonical_json(
            {
                "format": BUNDLE_FORMAT,
                "process_id": self.process_id,
                "organisation": self.organisation,
                "recipient": self.recipient,
                "rounds": list(self.rounds),
                "data_salt": self.data_salt,
                "dataset": b64(self.dataset),
                "tasks": [
                    {
                        "round": t.round,
                        "state": None if t.state is None else b64(t.state),
                        "inbox": {s: b64(m) for s, m in sorted(t.inbox.items())},
                        "confidential": t.confidential,
                    }
                    for t in self.tasks
                ],
                "private_terms": self.private_terms,
            }
        )

    @classmethod
    def from_json(cls, raw: bytes) -> Bundle:
        try:
            d = json.loads(raw)
            if d.get("format") != BUNDLE_FORMAT:
                raise DisclosureError(f"not a disclosure bundle ({d.get('format')!r})")
            tasks = tuple(
                DisclosedTask(
                    int(t["round"]),
                    None if t["state"] is None else base64.b64decode(t["state"], validate=True),
                    {str(s): base64.b64decode(m, validate=True) for s, m in t["inbox"].items()},
                    t.get("confidential"),
                )
                for t in d["tasks"]
            )
            return cls(
                str(d["process_id"]),
                str(d["organisation"]),
                str(d["recipient"]),
                str(d["data_salt"]),
                base64.b64decode(d["dataset"], validate=True),
                tasks,
                d.get("private_terms"),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            if isinstance(exc, DisclosureError):
                raise
            raise DisclosureError(f"the disclosure bundle does not follow its format: {exc!r}") from None


@dataclass(frozen=True)
class Disclosure:
    """A disclosure file: its public header and the sealed bundle."""

    process_id: str
    organisation: str
    recipient: str
    rounds: tuple[int, ...]
    sealed: bytes

    @property
    def bundle_digest(self) -> str:
        """``sha256`` of the sealed bytes: what the ledger's disclosure record names."""
        return sha256_digest(self.sealed)

    def to_json(self) -> bytes:
        return canonical_json(
            {
                "format": FORMAT,
                "process_id": self.process_id,
                "organisation": self.organisation,
                "recipient": self.recipient,
                "rounds": list(self.rounds),
                "bundle_digest": self.bundle_digest,
                "sealed": base64.b64encode(self.sealed).decode(),
            }
        )

    def write(self, path: str | Path) -> Path:
        p = Path(path)
        p.write_bytes(self.to_json())
        p.chmod(0o600)
        return p

    @classmethod
    def from_json(cls, raw: bytes) -> Disclosure:
        try:
            d = json.loads(raw)
            if not isinstance(d, dict) or d.get("format") != FORMAT:
                raise DisclosureError(
                    f"not a disclosure file (format {d.get('format') if isinstance(d, dict) else d!r})"
                )
            out = cls(
                str(d["process_id"]),
                str(d["organisation"]),
                str(d["recipient"]),
                tuple(int(r) for r in d["rounds"]),
                base64.b64decode(d["sealed"], validate=True),
            )
        except (ValueError, KeyError, TypeError) as exc:
            if isinstance(exc, DisclosureError):
                raise
            raise DisclosureError(f"not a disclosure file: {exc!r}") from None
        if d.get("bundle_digest") != out.bundle_digest:
            raise DisclosureError(
                f"the file names bundle digest {d.get('bundle_digest')}, its sealed bytes hash to {out.bundle_digest}"
            )
        return out

    @classmethod
    def read(cls, path: str | Path) -> Disclosure:
        try:
            return cls.from_json(Path(path).read_bytes())
        except OSError as exc:
            raise DisclosureError(f"cannot read disclosure {path}: {exc}") from None

    def open(self, private_key: ec.EllipticCurvePrivateKey) -> Bundle:
        """The bundle, opened with the recipient's key-agreement key (:class:`exchange.errors.DecryptionError`
        if the key is not the recipient's or the bytes were altered); its header must match the file's."""
        bundle = Bundle.from_json(
            unseal(private_key, self.sealed, seal_info(self.process_id, self.organisation, self.recipient))
        )
        if (bundle.process_id, bundle.organisation, bundle.recipient, bundle.rounds) != (
            self.process_id,
            self.organisation,
            self.recipient,
            self.rounds,
        ):
            raise DisclosureError(
                "the sealed bundle names another process, organisation, recipient or rounds"
            )
        return bundle


def parse_rounds(text: str, rounds: int) -> list[int]:
    """``"1,3"``, ``"2-4"`` or ``"all"`` as a sorted list of rounds in 1..``rounds``."""
    if text.strip() == "all":
        return list(range(1, rounds + 1))
    out: set[int] = set()
    try:
        for part in text.split(","):
            lo, _, hi = part.strip().partition("-")
            out.update(range(int(lo), int(hi or lo) + 1))
    except ValueError:
        raise DisclosureError(f"rounds {text!r}: give R1,R2, R1-R2 or all") from None
    bad = sorted(r for r in out if not 1 <= r <= rounds)
    if not out or bad:
        raise DisclosureError(f"rounds {text!r}: the process has rounds 1..{rounds}")
    return sorted(out)


def recipient_of(consortium: Consortium, to: str) -> tuple[str, x509.Certificate]:
    """The auditor named by ``to``: an organisation of the consortium (name, MSP id or domain; its
    key-agreement certificate, checked against its CA), or a key-agreement certificate file (PEM)
    issued by the CA of one of them."""
    path = Path(to)
    if path.is_file():
        try:
            cert = x509.load_pem_x509_certificate(path.read_bytes())
        except ValueError as exc:
            raise DisclosureError(f"{to} is not a PEM certificate: {exc}") from None
        for o in consortium.organisations:
            ca = consortium.ca_certificate(o.msp_id)
            pub = ca.public_key()
            if cert.issuer != ca.subject or not isinstance(pub, ec.EllipticCurvePublicKey):
                continue
            try:
                pub.verify(cert.signature, cert.tbs_certificate_bytes, ec.ECDSA(hashes.SHA256()))
            except InvalidSignature:
                continue
            return o.msp_id, cert
        raise DisclosureError(
            f"the certificate {to} is not issued by the CA of any organisation of the consortium"
        )
    try:
        msp = consortium.organisation(to).msp_id
    except KeyError:
        raise DisclosureError(
            f"{to!r} is neither an organisation of the consortium ({', '.join(consortium.msp_ids)}) nor a certificate file"
        ) from None
    return msp, consortium.encryption_certificate(msp)


def collect(
    client: ConsortiaClient,
    consortium: Consortium,
    store: ArtifactStore,
    data_root: Path,
    state_dir: Path,
    process_id: str,
    rounds: Sequence[int],
    recipient: str,
) -> Bundle:
    """The inputs of ``client``'s organisation's tasks of ``rounds``, gathered as its agent gathered them;
    each checked against the digests its own signed record names (a disclosure that would not replay is
    refused here, not discovered by the auditor)."""
    org = client.organisation
    process = client.get_process(process_id)
    data_file = dataset_dir(data_root, process.dataset) / "dataset.npz"
    try:
        dataset = data_file.read_bytes()
        salt = (state_dir / SALT_FILE).read_text().strip()
    except OSError as exc:
        raise DisclosureError(f"cannot read {org}'s data or commitment salt: {exc}") from None
    files = RoundFiles(client, store, consortium)
    tasks = []
    for rnd in sorted(rounds):
        record = client.get_execution(process_id, rnd, org)
        if record.status != "completed" or record.result is None:
            raise DisclosureError(
                f"{org}'s task of round {rnd} of {process_id} is {record.status}, not completed"
            )
        # the messages were accepted when the task ran; their signed sizes bound what is fetched again
        signed = (
            [m.size for e in client.round_inbox(process_id, rnd - 1) for m in e.messages] if rnd > 1 else []
        )
        if any(size is None for size in signed):
            raise DisclosureError(f"a message of round {rnd - 1} of {process_id} has no signed size")
        state, inbox = files.gather_inputs(process, rnd, max((s for s in signed if s is not None), default=0))
        ins = record.result.inputs  # this member's read: the confidential part joined
        if data_commitment(salt, dataset) != ins.data_commitment:
            raise DisclosureError(
                f"{data_file} with this node's salt is not the data its task of round {rnd} committed to "
                f"({ins.data_commitment}): the data changed since"
            )
        part = None if record.private_sha256 is None else record.private_part().result.json_object()
        tasks.append(DisclosedTask(rnd, state, dict(inbox), part))
    terms = None if process.private_sha256 is None else process.private_terms().json_object()
    return Bundle(process_id, org, recipient, salt, dataset, tuple(tasks), terms)


def disclose(
    client: ConsortiaClient,
    consortium: Consortium,
    store: ArtifactStore,
    data_root: Path,
    state_dir: Path,
    process_id: str,
    rounds: Sequence[int],
    to: str,
) -> tuple[Disclosure, DisclosureRecord]:
    """Collect, seal to the auditor ``to`` (:func:`recipient_of`) and record on the ledger."""
    recipient, certificate = recipient_of(consortium, to)
    if recipient == client.organisation:
        raise DisclosureError("an organisation does not disclose to itself")
    bundle = collect(client, consortium, store, data_root, state_dir, process_id, rounds, recipient)
    sealed = seal(certificate, bundle.to_json(), seal_info(process_id, bundle.organisation, recipient))
    disclosure = Disclosure(process_id, bundle.organisation, recipient, bundle.rounds, sealed)
    record = client.record_disclosure(process_id, disclosure.rounds, recipient, disclosure.bundle_digest)
    return disclosure, record


def summary(
    disclosure: Disclosure, record: DisclosureRecord | None = None, path: Path | None = None
) -> dict[str, Any]:
    """What ``consortia audit disclose`` prints."""
    out: dict[str, Any] = {
        "process_id": disclosure.process_id,
        "organisation": disclosure.organisation,
        "recipient": disclosure.recipient,
        "rounds": list(disclosure.rounds),
        "bundle_digest": disclosure.bundle_digest,
        "bytes": len(disclosure.sealed),
    }
    if record is not None:
        out |= {"recorded": record.created, "tx_id": record.tx_id, "disclosed_by": record.disclosed_by}
    if path is not None:
        out["file"] = str(path)
    return out
