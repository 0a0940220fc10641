"""What one organisation's gateway holds (:class:`Gateway`): its ledger connection, crypto, audit
index, API tokens and artifact store, and the follower that keeps the index in step."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from api.follower import IndexFollower, sync
from api.index import AuditIndex
from api.tokens import AuthenticationError, TokenStore
from exchange.store import ArtifactStore
from ledger.client import ConsortiaClient, Record
from ledger.identity import Consortium, Identity
from ledger.interface import Ledger

#: the default bound of an uploaded disclosure: its data, states and inboxes, sealed and in base64 (a
#: collaborative-RF process of 6 rounds on 60 rows discloses about 46 KB; a member's CSV of 100 000 rows of 20
#: features about 40 MB)
MAX_DISCLOSURE_BYTES = 64 * 1024 * 1024


@dataclass
class Gateway:
    """Everything one organisation's gateway holds: its ledger connection, crypto, index, tokens."""

    ledger: Ledger
    consortium: Consortium
    msp_id: str
    index: AuditIndex
    tokens: TokenStore
    artifacts: ArtifactStore
    follow_interval: float = 0.25
    _clients: dict[str, ConsortiaClient] = field(default_factory=dict)
    _sync_lock: threading.Lock = field(default_factory=threading.Lock)
    follower: IndexFollower | None = None
    mtls: bool = False  # accept TLS client certificates (api.mtls) when no token is sent
    disclosures: dict[str, Any] = field(default_factory=dict)  # uploaded for replay, by bundle digest
    #: the largest disclosure file ``POST /api/v1/replays`` accepts (``consortia serve --max-disclosure-mib``)
    max_disclosure_bytes: int = MAX_DISCLOSURE_BYTES
    replays: dict[str, dict[str, Any]] = field(default_factory=dict)  # the verdicts, by bundle digest

    def client(self, user: str = "User1") -> ConsortiaClient:
        c = self._clients.get(user)
        if c is None:
            try:
                identity: Identity = self.consortium.identity(self.msp_id, user)
            except (FileNotFoundError, StopIteration, KeyError):
                raise AuthenticationError(f"user {user} has no identity in {self.msp_id}") from None
            c = self._clients[user] = ConsortiaClient(self.ledger, identity)
        return c

    def refresh(self) -> None:
        """Bring the index up to the ledger's height now (after a write, before answering)."""
        with self._sync_lock:
            sync(self.index, self.client())

    def written(self, result: Any) -> dict[str, Any]:
        """The answer of a write: its record (:func:`record`; a plain dict as it is), once the index
        has caught up with it -- so the write shows in the lists of every gateway at once."""
        self.refresh()
        return result if isinstance(result, dict) else record(result)

    def current(self) -> None:
        """Index reads see every committed block: catch up first if the follower is behind."""
        if self.index.last_block < self.ledger.block_height(self.client().identity) - 1:
            self.refresh()

    def start(self) -> None:
        self.refresh()
        if self.follow_interval > 0 and self.follower is None:
            self.follower = IndexFollower(self.index, self.client(), self.follow_interval, self._sync_lock)
            self.follower.start()

    def stop(self) -> None:
        if self.follower is not None:
            self.follower.stop()
            self.follower = None


def record(obj: Record) -> dict[str, Any]:
    """A typed ledger record (:mod:`chaincode.records`) as a plain dict: every field and unknown keys
    (depth-safe: :meth:`Record.to_dict` copies no nested JSON value)."""
    return obj.to_dict()
