"""Who may read an organisation's artifacts: the authorisation rule of its artifact service
(docs/artifacts.md "Authorisation rule").

Readers come from the ledger, never from the request (:class:`LedgerReaders`):

* a **message** -- sealed bytes the organisation stored for one recipient -- is found through the
  organisation's own message index (:mod:`exchange.messages`) and is readable by that recipient only once
  the organisation's *completed* execution record of that process and round names an output message to
  that recipient with the indexed payload digest (an execution record never changes once completed, so a
  confirmation is kept);
* a **model ciphertext** is readable by the organisations on the access list of the model record (owned
  by this organisation) whose ``ciphertext_digest`` it is -- read at every request, so a revocation takes
  effect at once;
* the organisation itself may read its own artifacts; everything else is refused.

While the organisation's own ledger cannot be reached (:func:`ledger.errors.transient`) nothing can be
confirmed: the request is answered "unavailable" (:class:`exchange.errors.ArtifactUnreachable`, HTTP
503), which the asking organisation waits out as it waits for a node that restarts, instead of a
refusal that would fail its task.

:class:`StaticReaders` fixes readers in advance (benchmarks and tests of the transport).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from exchange.errors import ArtifactUnreachable
from exchange.store import ArtifactStore
from ledger.client import ConsortiaClient, ExecutionRecord, ModelRecord
from ledger.errors import ContractError, LedgerError, transient


class Readers(Protocol):
    def may_read(self, organisation: str, digest: str) -> bool:
        """Whether ``organisation`` may read the artifact ``digest`` (False if unknown)."""
        ...

    def may_read_message(
        self, organisation: str, process_id: str, round: int, recipient: str, entry: Mapping[str, Any]
    ) -> bool:
        """Whether ``organisation`` may read the index ``entry`` of the message to ``recipient`` in that
        round (and so the sealed bytes it names)."""
        ...


def _stored(entry: Mapping[str, Any]) -> str | None:
    stored = entry.get("stored")
    digest = stored.get("digest") if isinstance(stored, Mapping) else None
    return digest if isinstance(digest, str) else None


class StaticReaders:
    """Readers fixed in advance (digest -> organisations)."""

    def __init__(self, readers: Mapping[str, Iterable[str]]):
        self._readers = {d: frozenset(orgs) for d, orgs in readers.items()}

    def may_read(self, organisation: str, digest: str) -> bool:
        return organisation in self._readers.get(digest, frozenset())

    def may_read_message(
        self, organisation: str, process_id: str, round: int, recipient: str, entry: Mapping[str, Any]
    ) -> bool:
        stored = _stored(entry)
        return organisation == recipient and stored is not None and self.may_read(organisation, stored)


class LedgerReaders:
    """Who may read an artifact of ``store``'s organisation, decided from the ledger (``client``: a
    client of that organisation)."""

    def __init__(self, client: ConsortiaClient, store: ArtifactStore):
        self.client = client
        self.store = store
        self.org = store.organisation
        self._confirmed: dict[str, set[str]] = {}  # stored digest -> recipients the ledger confirmed
        self._completed: dict[tuple[str, int], ExecutionRecord] = {}  # own completed records
        self._lock = threading.Lock()

    def may_read(self, organisation: str, digest: str) -> bool:
        if organisation == self.org:
            return True
        with self._lock:
            known = digest in self._confirmed
        if not known:
            self._confirm_indexed(digest)
        with self._lock:
            if organisation in self._confirmed.get(digest, ()):
                return True
        try:
            models: list[ModelRecord] = self.client.list_models()
        except LedgerError as exc:
            raise self._unavailable(exc) from None
        return any(
            m.owner == self.org and m.ciphertext_digest == digest and organisation in m.access for m in models
        )

    def _unavailable(self, exc: LedgerError) -> Exception:
        """``exc`` as the service's answer: unavailable for now if the ledger is unreachable."""
        if transient(exc):
            return ArtifactUnreachable(f"{self.org} cannot ask its ledger now: {exc}")
        return exc

    def may_read_message(
        self, organisation: str, process_id: str, round: int, recipient: str, entry: Mapping[str, Any]
    ) -> bool:
        stored = _stored(entry)
        if organisation != recipient or stored is None:
            return False
        with self._lock:
            if recipient in self._confirmed.get(stored, ()):
                return True
        return self._confirm(process_id, round, recipient, entry.get("payload_digest"), stored)

    def _record(self, process_id: str, round: int) -> ExecutionRecord | None:
        """This organisation's completed record of that round (kept: it never changes), or None."""
        with self._lock:
            rec = self._completed.get((process_id, round))
        if rec is not None:
            return rec
        try:
            rec = self.client.get_execution(process_id, round, self.org)
        except LedgerError as exc:
            if transient(exc):  # cannot be confirmed now: unavailable, not refused
                raise self._unavailable(exc) from None
            return None
        except ContractError:  # not on the ledger (yet): not confirmed
            return None
        if rec.status != "completed" or rec.result is None:
            return None
        with self._lock:
            if len(self._completed) > 10_000:
                self._completed.clear()
            self._completed[(process_id, round)] = rec
        return rec

    def _confirm(self, process_id: str, round: int, recipient: str, payload_digest: Any, stored: str) -> bool:
        rec = self._record(process_id, round)
        if rec is None or rec.result is None:
            return False
        sent = rec.result.outputs.messages
        if not any(m.recipient == recipient and m.digest == payload_digest for m in sent):
            return False
        with self._lock:
            self._confirmed.setdefault(stored, set()).add(recipient)
        return True

    def _confirm_indexed(self, digest: str) -> None:
        """Confirm every index entry that names ``digest`` (a request for an artifact whose index entry
        was not asked for first): a walk of the organisation's message index."""
        for p in (self.store.home / "messages").glob("*/*/*.json"):
            try:
                entry = json.loads(p.read_text())
                if _stored(entry) != digest:
                    continue
                pid, rnd = p.parent.parent.name, int(p.parent.name)
            except (OSError, ValueError, AttributeError):
                continue
            self._confirm(pid, rnd, p.stem, entry.get("payload_digest"), digest)
