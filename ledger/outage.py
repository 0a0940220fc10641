"""Riding out ledger outages: a :class:`~ledger.interface.Ledger` that waits for its host to come back
(docs/executor.md "Ledger outages"). Node agents and process runners wrap their ledger in it.

A node's peer, the peers an endorsement needs, or the orderers may be unreachable for a while (a
restart, a network cut). The agent then neither exits nor records a task failure: every ledger call it
makes goes through :class:`PatientLedger`, which retries a call that failed with a transient error
(:func:`ledger.errors.transient`: :class:`~ledger.errors.LedgerUnavailable`,
:class:`~ledger.errors.CommitTimeout`) with capped exponential backoff plus jitter, for as long as it
takes, while an answer (a contract's refusal, a refused identity or signature, an invalidated
transaction) is raised at once, as without it. :class:`LedgerOutage` keeps the state -- reachable,
or unreachable since when, what, and why -- logs each change of it once ("ledger unreachable since
…, retrying in …s", "ledger reachable again after …s"), and tells whoever asks
(the node agent's status, :mod:`executor.node.status`).

A submit whose outcome is unknown (handed to the orderers, then the connection failed) is submitted
again: the contracts refuse a second ``create_task``/``complete_task``/``fail_task`` of the same task
and a second model of the same owner, and the agent resolves each refusal by reading the record back
(:mod:`executor.node.agent`), so a retry never writes a second, different record.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from ledger.errors import outcome_unknown
from ledger.errors import transient as is_transient
from ledger.identity import Identity
from ledger.interface import BlockInfo, ChaincodeEvent, Ledger, SubmitResult

__all__ = ["Backoff", "LedgerOutage", "PatientLedger"]

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True)
class Backoff:
    """Delays between attempts: ``first`` seconds doubling up to ``cap``, each drawn uniformly from
    the upper half of that value (jitter, so that the members of a consortium that lost the same
    orderers do not all come back in the same instant)."""

    first: float = 0.5
    cap: float = 10.0

    def delay(self, attempt: int, rng: random.Random) -> float:
        """The pause after failed attempt number ``attempt`` (0 for the first failure)."""
        ceiling = min(self.cap, self.first * 2 ** min(attempt, 30))
        return float(ceiling / 2 + rng.random() * ceiling / 2)


def _utc(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class LedgerOutage:
    """Whether ``org``'s node reaches its ledger, and since when it does not.

    ``stop``: set, it ends the waiting (the pending call raises its last error). ``on_change``: called
    after each change of state (the agent writes its status file then)."""

    def __init__(
        self,
        org: str,
        *,
        backoff: Backoff = Backoff(),
        stop: threading.Event | None = None,
        on_change: Callable[[], None] | None = None,
        rng: random.Random | None = None,
    ):
        self.org = org
        self.backoff = backoff
        self.stop = stop or threading.Event()
        self.on_change = on_change
        self._rng = rng or random.Random()
        self._lock = threading.Lock()
        self.since: float | None = None  # wall-clock time of the first failure of this outage
        self.what = ""  # what could not be reached (e.g. "peer 127.0.0.1:7051")
        self.error = ""  # the last error seen
        self.retry_at: float | None = None  # wall-clock time of the next attempt
        self.outages = 0  # outages ridden out so far (tests, status)
        self._failures = 0  # consecutive failures of this outage

    # ---- state
    @property
    def unreachable(self) -> bool:
        return self.since is not None

    def waiting_for(self) -> str | None:
        """What the agent waits for, e.g. ``ledger (peer 127.0.0.1:7051) unreachable since …``; None
        while the ledger is reachable."""
        with self._lock:
            return self._waiting_for()

    def _waiting_for(self) -> str | None:
        if self.since is None:
            return None
        return f"ledger ({self.what}) unreachable since {_utc(self.since)}: {self.error}"

    def status(self) -> tuple[str | None, dict[str, Any]]:
        """(:meth:`waiting_for`, the state as plain values), read together (the agent's status file)."""
        with self._lock:
            if self.since is None:
                return None, {"reachable": True, "outages": self.outages}
            return self._waiting_for(), {
                "reachable": False,
                "unreachable_since": _utc(self.since),
                "unreachable": self.what,
                "error": self.error,
                "retry_at": _utc(self.retry_at) if self.retry_at else None,
                "outages": self.outages,
            }

    def failed(self, exc: BaseException) -> float:
        """Note a transient failure; return the pause before the next attempt. Logged once when the
        outage starts or what is unreachable changes; each further failure at debug level only."""
        what = getattr(exc, "endpoint", "") or "its host"
        what = what if " " in what or what == "its host" else f"peer {what}"
        now = time.time()
        with self._lock:
            started, changed = self.since is None, what != self.what
            if started:
                self.since, self._failures = now, 0
                self.outages += 1
            delay = self.backoff.delay(self._failures, self._rng)
            self._failures += 1
            self.what, self.error, self.retry_at = what, _one_line(exc), now + delay
        if started or changed:
            unknown = (
                "; the transaction's outcome is unknown: it is resubmitted" if outcome_unknown(exc) else ""
            )
            log.warning(
                "%s: ledger (%s) unreachable since %s, retrying in %.1fs: %s%s",
                self.org,
                what,
                _utc(self.since or now),
                delay,
                self.error,
                unknown,
            )
            self._changed()
        else:
            log.debug("%s: ledger (%s) still unreachable, retrying in %.1fs: %s", self.org, what, delay, exc)
        return delay

    def reached(self) -> None:
        """Note a call that got an answer: an outage, if any, is over (logged once)."""
        if self.since is None:  # the common case, without the lock
            return
        with self._lock:
            since, self.since, self.retry_at, self._failures = self.since, None, None, 0
        if since is not None:
            log.warning("%s: ledger reachable again after %.1fs", self.org, time.time() - since)
            self._changed()

    def _changed(self) -> None:
        if self.on_change is not None:
            try:
                self.on_change()
            except Exception:  # a status that cannot be written never stops the agent
                log.exception("%s: status not written", self.org)

    # ---- riding it out
    def call(self, fn: Callable[..., T], *args: Any, **kw: Any) -> T:
        """``fn(*args, **kw)``, retried after each transient failure until it answers (or ``stop``
        is set: then its last error is raised). Any other error is raised at once."""
        while True:
            try:
                out = fn(*args, **kw)
            except Exception as exc:
                if not is_transient(exc):
                    self.reached()  # an answer: the ledger was reached
                    raise
                if self.stop.wait(self.failed(exc)):
                    raise
                continue
            self.reached()
            return out


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:300]}"


class PatientLedger:
    """A :class:`ledger.interface.Ledger` whose calls ride out outages of ``ledger``
    (:meth:`LedgerOutage.call`); everything else is ``ledger``'s, unchanged."""

    def __init__(self, ledger: Ledger, outage: LedgerOutage):
        self.inner = ledger
        self.outage = outage
        self.channel = ledger.channel
        self.chaincode = ledger.chaincode

    def submit(
        self,
        identity: Identity,
        function: str,
        *args: str,
        transient: Mapping[str, bytes] | None = None,
        endorsing_organisations: Sequence[str] | None = None,
        timeout: float = 60.0,
    ) -> SubmitResult:
        return self.outage.call(
            self.inner.submit,
            identity,
            function,
            *args,
            transient=transient,
            endorsing_organisations=endorsing_organisations,
            timeout=timeout,
        )

    def evaluate(self, identity: Identity, function: str, *args: str) -> bytes:
        return self.outage.call(self.inner.evaluate, identity, function, *args)

    def events(
        self, identity: Identity, start_block: int = 0, timeout: float | None = None
    ) -> Iterator[ChaincodeEvent]:
        """``ledger``'s events; a transient failure ends the iteration after the backoff pause (events
        only wake the agent, which then reads the ledger again)."""
        try:
            for ev in self.inner.events(identity, start_block=start_block, timeout=timeout):
                self.outage.reached()
                yield ev
        except Exception as exc:
            if not is_transient(exc):
                raise
            self.outage.stop.wait(self.outage.failed(exc))

    def block_height(self, identity: Identity) -> int:
        return self.outage.call(self.inner.block_height, identity)

    def block(self, identity: Identity, number: int) -> BlockInfo:
        return self.outage.call(self.inner.block, identity, number)

    def close(self) -> None:
        self.inner.close()

    def __getattr__(self, name: str) -> Any:  # host-specific extras (e.g. the embedded ledger's path)
        return getattr(self.inner, name)
