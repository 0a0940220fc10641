"""Commit statuses from one filtered block stream per peer (docs/fabric.md "Commit statuses").

A Gateway client learns that its transaction committed by asking ``CommitStatus``: one signed
request per transaction, which the peer checks (an ECDSA verification and an ACL) and answers
once the transaction is in a block. A :class:`CommitWatcher` reads the peer's
``Deliver.DeliverFiltered`` stream instead: for each block the peer commits, its number and each
transaction's id and validation code. It settles the transactions registered with it
(:meth:`CommitWatcher.expect` before the transaction is sent, :meth:`CommitWatcher.wait` after). The
stream is signed once when it opens, and a block costs the peer one small message however many
transactions it holds. The watcher also knows how far its peer has committed, which read-your-writes
waits on instead of asking the peer its height.

The stream starts at the block that is newest when it opens; a transaction registered after that
commits in a later block, so none is missed. A broken stream is opened again from the block after
the last one seen, so no block is missed either. A stream the peer refuses (an identity without
the right to read blocks) fails the watcher: :meth:`wait` raises :class:`WatcherFailed` and the
caller asks ``CommitStatus``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import grpc
from fabric_protos.common import common_pb2

from ledger.errors import CommitTimeout, LedgerError

log = logging.getLogger(__name__)

OpenStream = Callable[[int | None], Any]  # start block (None: the newest) -> a DeliverFiltered call
# a peer that refuses the stream or does not offer it: ask CommitStatus instead
_REFUSED = (
    grpc.StatusCode.PERMISSION_DENIED,
    grpc.StatusCode.UNAUTHENTICATED,
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.UNIMPLEMENTED,
)
_FIRST_BLOCK_TIMEOUT_S = 10.0
_MAX_BACKOFF_S = 5.0


class WatcherFailed(LedgerError):
    """The filtered block stream was refused, broke for good or never started: ask ``CommitStatus``."""


class WatcherClosed(WatcherFailed):
    """The watcher was closed by its owner (before anything else failed it)."""


class _Waiter:
    __slots__ = ("done", "result")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.result: tuple[int, int] | None = None  # (TxValidationCode, block number)


class CommitWatcher:
    """One peer's committed blocks, from one ``DeliverFiltered`` stream read on a thread of its own.

    ``open_stream(start)`` opens the stream from block ``start`` (None: the newest block);
    ``on_block(number)`` is told each block the peer committed. The constructor returns once the
    first block arrived, and raises :class:`WatcherFailed` if it does not within
    ``first_block_timeout`` seconds."""

    def __init__(
        self,
        open_stream: OpenStream,
        on_block: Callable[[int], None] = lambda n: None,
        *,
        name: str = "",
        first_block_timeout: float = _FIRST_BLOCK_TIMEOUT_S,
    ):
        self._open = open_stream
        self._on_block = on_block
        self.name = name
        self._lock = threading.Condition()
        self._waiting: dict[str, _Waiter] = {}
        self._height = 0  # blocks 0 .. height-1 are committed on the peer (as far as seen)
        self._started = False
        self._failure: WatcherFailed | None = None
        self._call: Any = None
        self._closed = False
        threading.Thread(target=self._run, daemon=True, name=f"fabric-commits {name}").start()
        with self._lock:
            if not self._lock.wait_for(
                lambda: self._started or self._failure is not None, first_block_timeout
            ):
                self._fail(WatcherFailed(f"no block from {name} within {first_block_timeout} s"))
            failure = self._failure
        if failure is not None:
            self.close()  # ends the stream and its thread; the first failure is the one kept
            raise failure

    # ---- the caller's side
    @property
    def height(self) -> int:
        with self._lock:
            return self._height

    @property
    def failed(self) -> bool:
        with self._lock:
            return self._failure is not None

    def expect(self, tx_id: str) -> None:
        """Register ``tx_id`` before it is sent: its commit is settled when its block arrives."""
        with self._lock:
            if self._failure is not None:
                raise self._failure
            self._waiting.setdefault(tx_id, _Waiter())

    def forget(self, tx_id: str) -> None:
        """Drop a registration (the transaction was not sent after all)."""
        with self._lock:
            self._waiting.pop(tx_id, None)

    def wait(self, tx_id: str, timeout: float) -> tuple[int, int]:
        """(TxValidationCode, block number) of a registered transaction; :class:`CommitTimeout`
        after ``timeout`` seconds, :class:`WatcherFailed` if the stream failed meanwhile."""
        with self._lock:
            waiter = self._waiting.get(tx_id)
        if waiter is None:
            raise ValueError(f"transaction {tx_id} was not registered with expect()")
        waiter.done.wait(timeout)
        with self._lock:
            self._waiting.pop(tx_id, None)
            if waiter.result is not None:
                return waiter.result
            if self._failure is not None:
                raise self._failure
        raise CommitTimeout(tx_id, timeout)

    def wait_height(self, height: int, timeout: float) -> bool:
        """Whether the peer committed blocks up to ``height - 1`` within ``timeout`` seconds."""
        with self._lock:
            return self._lock.wait_for(
                lambda: self._height >= height or self._failure is not None, timeout
            ) and (self._height >= height)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            call = self._call
            self._fail(WatcherClosed(f"commit watcher of {self.name} closed"))
        if call is not None:
            call.cancel()

    # ---- the stream's side
    def _fail(self, failure: WatcherFailed) -> None:
        """Fail every waiter (hold ``_lock``)."""
        if self._failure is None:
            self._failure = failure
        for waiter in self._waiting.values():
            waiter.done.set()
        self._lock.notify_all()

    def _settle(self, block: Any) -> None:
        number = block.number
        self._on_block(number)  # first: whoever this block wakes sees the peer's height updated
        with self._lock:
            self._height = max(self._height, number + 1)
            self._started = True
            for tx in block.filtered_transactions:
                waiter = self._waiting.get(tx.txid)
                if waiter is not None and waiter.result is None:
                    waiter.result = (tx.tx_validation_code, number)
                    waiter.done.set()
            self._lock.notify_all()

    def _run(self) -> None:
        start: int | None = None
        backoff = 0.2
        while True:
            with self._lock:
                if self._closed or self._failure is not None:
                    return
            try:
                call = self._open(start)
                with self._lock:
                    self._call = call
                    if self._closed:
                        call.cancel()
                        return
                for resp in call:
                    if resp.WhichOneof("Type") == "filtered_block":
                        self._settle(resp.filtered_block)
                        start, backoff = resp.filtered_block.number + 1, 0.2
                    elif resp.WhichOneof("Type") == "status":
                        if resp.status in (
                            common_pb2.FORBIDDEN,
                            common_pb2.BAD_REQUEST,
                            common_pb2.NOT_FOUND,
                        ):
                            raise WatcherFailed(
                                f"{self.name} refused the filtered block stream: {common_pb2.Status.Name(resp.status)}"
                            )
                        break  # the peer ended the stream: open it again
            except WatcherFailed as exc:
                with self._lock:
                    self._fail(exc)
                return
            except grpc.RpcError as err:
                with self._lock:
                    if self._closed:
                        return
                    if err.code() in _REFUSED:
                        self._fail(
                            WatcherFailed(f"{self.name} refused the filtered block stream: {err.code().name}")
                        )
                        return
                log.info("filtered block stream of %s broken (%s); reopening", self.name, err.code().name)
            except Exception as exc:  # a malformed stream or a failure to sign: no more watching
                with self._lock:
                    self._fail(
                        WatcherFailed(f"filtered block stream of {self.name} failed: {type(exc).__name__}")
                    )
                return
            time.sleep(backoff)
            backoff = min(backoff * 2, _MAX_BACKOFF_S)
