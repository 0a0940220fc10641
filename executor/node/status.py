"""A node agent's status file: what it is doing and what it waits for (docs/executor.md "Ledger outages").

The agent rewrites ``<state>/<org>/status.json`` (0600, atomically) whenever its ledger becomes
unreachable or reachable again and whenever a process's outcome changes; ``consortia node status``
(:mod:`api.cli.node`) and ``consortia process watch`` read it on the organisation's own
host. It is the organisation's own file: no other organisation reads it (they see the ledger only).
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

STATUS_FILE = "status.json"
KEEP_PROCESSES = 50  # processes listed (the most recently changed)


def now_utc() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class ProcessState:
    """The agent's last outcome in one process (:class:`executor.node.agent.RoundOutcome`)."""

    round: int
    status: str  # completed | failed | waiting | done
    detail: str
    since: str  # when this outcome was first seen (UTC)


@dataclass
class AgentStatus:
    organisation: str
    pid: int
    updated: str
    waiting_for: str | None
    """The ledger outage it rides out (``ledger (peer …) unreachable since …``), else the processes
    whose round it waits for, else None."""
    ledger: dict[str, Any]
    processes: dict[str, ProcessState] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> AgentStatus:
        raw = json.loads(text)
        procs = {pid: ProcessState(**p) for pid, p in (raw.pop("processes", None) or {}).items()}
        return cls(**raw, processes=procs)


def waiting_for(outage: str | None, processes: dict[str, ProcessState]) -> str | None:
    """The one line that says what the agent waits for."""
    if outage:
        return outage
    waits = [f"{pid} round {p.round}: {p.detail}" for pid, p in processes.items() if p.status == "waiting"]
    return "; ".join(waits) or None


def write_status(state_dir: Path, status: AgentStatus) -> None:
    """Write ``status`` to ``state_dir/status.json`` (0600; replaced atomically)."""
    state_dir.mkdir(parents=True, exist_ok=True)
    tmp = state_dir / f".{STATUS_FILE}.{os.getpid()}.{threading.get_ident()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(status.to_json())
    os.replace(tmp, state_dir / STATUS_FILE)


def read_status(state_dir: Path) -> AgentStatus | None:
    """The status the agent of ``state_dir`` last wrote, or None (no agent ran there yet)."""
    try:
        return AgentStatus.from_json((state_dir / STATUS_FILE).read_text())
    except FileNotFoundError:
        return None
