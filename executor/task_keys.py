"""Task keys: a fresh ECDSA P-256 key pair per task (seed 003 §IV-C).

The public key (PEM) is registered in the execution record *before* the task runs; the private
key is written only into a key directory that is mounted read-only into the task's container or
sandbox, owned by the task's user with mode 0400, and destroyed after the run. It is never
logged (``repr`` hides it) and never sent to the ledger.
"""

from __future__ import annotations

import base64
import binascii
import os
import shutil
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from ledger.client import Record
from ledger.identity import load_public_key_pem, public_key_pem, sign, verify
from wire.canonical import canonical_json

KEY_FILE = "task_key.pem"
TASK_UID = 10001  # the unprivileged user of algorithm images (algorithm-images/base)
TASK_GID = 10001


@dataclass(frozen=True)
class TaskKey:
    private_key: ec.EllipticCurvePrivateKey = field(repr=False)

    @classmethod
    def generate(cls) -> TaskKey:
        return cls(ec.generate_private_key(ec.SECP256R1()))

    @cached_property
    def public_key_pem(self) -> str:
        """The public key's PEM (encoded once: registered on the ledger, checked against the manifest)."""
        return public_key_pem(self.private_key.public_key())

    def private_pem(self) -> bytes:
        return self.private_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )

    def sign(self, data: bytes) -> bytes:
        return sign(self.private_key, data)

    def __repr__(self) -> str:
        return f"TaskKey(public={self.public_key_pem.splitlines()[1][:16]}...)"

    def hand_over(
        self, key_dir: str | os.PathLike[str], uid: int | None = TASK_UID, gid: int | None = TASK_GID
    ) -> Path:
        """Write the private key for the task: directory 0500 and file 0400, owned by the task's
        user when we may chown (root); returns the key file path."""
        d = Path(key_dir)
        d.mkdir(parents=True, exist_ok=True)
        path = d / KEY_FILE
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o400)
        try:
            os.write(fd, self.private_pem())
        finally:
            os.close(fd)
        if uid is not None and os.geteuid() == 0:
            os.chown(path, uid, gid if gid is not None else uid)
            os.chown(d, uid, gid if gid is not None else uid)
        d.chmod(0o500)
        return path


def destroy_key_dir(key_dir: str | os.PathLike[str]) -> None:
    """Overwrite and remove a handed-over key (best effort against later disk reads)."""
    d = Path(key_dir)
    if not d.exists():
        return
    d.chmod(0o700)
    p = d / KEY_FILE
    if p.exists():
        p.chmod(0o600)
        size = p.stat().st_size
        with open(p, "r+b") as f:
            f.write(b"\0" * size)
            f.flush()
            os.fsync(f.fileno())
    shutil.rmtree(d, ignore_errors=True)


class TaskSignatureInvalid(ValueError):
    """A task signature does not verify with the task key (the message says why)."""


def check_task_signature(public_pem: str | bytes, signed: Any, signature: bytes | str) -> None:
    """The one off-chain check of a task signature, the way the execution-record contract checks it:
    a low-S ECDSA P-256/SHA-256 signature by the registered task key (PEM).

    ``signed`` is the bytes signed (a task's ``manifest.json``), or a JSON value or record whose
    canonical JSON was signed (an execution record's ``result``; the record-level check is
    ``audit.signatures.check_record_signature``). ``signature`` is the DER signature, or its base64
    text as records carry it. Raises :class:`TaskSignatureInvalid`."""
    try:
        key = load_public_key_pem(public_pem)
    except (ValueError, TypeError) as exc:
        raise TaskSignatureInvalid(f"malformed task key: {exc}") from None
    if isinstance(signature, str):
        try:
            signature = base64.b64decode(signature, validate=True)
        except (ValueError, binascii.Error):
            raise TaskSignatureInvalid("malformed signature: not base64") from None
    if isinstance(signed, bytes):
        data = signed
    else:
        data = signed.canonical() if isinstance(signed, Record) else canonical_json(signed)
    if not verify(key, data, signature):
        raise TaskSignatureInvalid("signature does not verify with the registered task key")


def verify_task_signature(public_pem: str | bytes, data: bytes, signature: bytes) -> bool:
    """:func:`check_task_signature` as a boolean."""
    try:
        check_task_signature(public_pem, data, signature)
        return True
    except TaskSignatureInvalid:
        return False
