"""The node agent's task journal: per-task recovery state under ``<state>/<process>/<round>/``
(docs/executor.md "Node agent").

A task's key is sealed to the organisation's own key-agreement certificate (0600) and written
*before* the key is registered on the ledger (``create_task``); after a restart the same key is
reused, so a record whose public key is already registered can still be completed. The entry is
removed once the record is final (completed or failed).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from exchange.sealing import seal, unseal
from executor.task_keys import TaskKey
from ledger.identity import Consortium


class TaskJournal:
    """Per-task recovery state under ``<state>/<process>/<round>/``: the task key sealed to the
    organisation's own key-agreement certificate (0600), removed once the record is final."""

    def __init__(self, root: Path, consortium: Consortium, org: str):
        self.root = root
        self.cert = consortium.encryption_certificate(org)
        self._key_loader: Callable[[], ec.EllipticCurvePrivateKey] = lambda: consortium.encryption_key(org)

    def _dir(self, pid: str, rnd: int) -> Path:
        return self.root / pid.replace("/", "_") / f"{rnd:06d}"

    def _info(self, pid: str, rnd: int) -> bytes:
        return f"consortia-task-key|{pid}|{rnd}".encode()

    def load_key(self, pid: str, rnd: int) -> TaskKey | None:
        p = self._dir(pid, rnd) / "task_key.sealed"
        if not p.exists():
            return None
        pem = unseal(self._key_loader(), p.read_bytes(), self._info(pid, rnd))
        key = serialization.load_pem_private_key(pem, None)
        assert isinstance(key, ec.EllipticCurvePrivateKey)
        return TaskKey(key)

    def save_key(self, pid: str, rnd: int, key: TaskKey) -> None:
        d = self._dir(pid, rnd)
        d.mkdir(parents=True, exist_ok=True)
        tmp = d / "task_key.sealed.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(seal(self.cert, key.private_pem(), self._info(pid, rnd)))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, d / "task_key.sealed")

    def work_dir(self, pid: str, rnd: int) -> Path:
        return self._dir(pid, rnd) / "work"

    def forget_process(self, pid: str) -> None:
        d = self.root / pid.replace("/", "_")
        if d.is_dir():
            for r in d.iterdir():
                if r.name.isdigit():
                    self.forget(pid, int(r.name))

    def forget(self, pid: str, rnd: int) -> None:
        d = self._dir(pid, rnd)
        p = d / "task_key.sealed"
        if p.exists():
            p.unlink()
        shutil.rmtree(d / "work", ignore_errors=True)
