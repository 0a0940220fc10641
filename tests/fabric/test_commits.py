"""CommitWatcher (ledger/fabric/commits.py) against scripted filtered block streams: what it
settles, and that no caller is left waiting when the stream fails, is refused or is closed."""

from __future__ import annotations

import queue
import threading
import time

import grpc
import pytest
from fabric_protos.common import common_pb2
from fabric_protos.peer import events_pb2

from ledger.errors import CommitTimeout
from ledger.fabric.commits import CommitWatcher, WatcherFailed


class _Cancelled(grpc.RpcError):
    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.CANCELLED


class FakeCall:
    """A live DeliverFiltered call: yields what the test puts, blocks in between, ends on cancel."""

    def __init__(self) -> None:
        self.items: queue.Queue[object] = queue.Queue()
        self.cancelled = threading.Event()

    def __iter__(self):
        while True:
            item = self.items.get()
            if item is _CANCEL:
                raise _Cancelled()
            if isinstance(item, BaseException):
                raise item
            yield item

    def cancel(self) -> None:
        self.cancelled.set()
        self.items.put(_CANCEL)

    def block(self, number: int, *txs: tuple[str, int]) -> None:
        self.items.put(
            events_pb2.DeliverResponse(
                filtered_block=events_pb2.FilteredBlock(
                    number=number,
                    filtered_transactions=[
                        events_pb2.FilteredTransaction(txid=t, tx_validation_code=c) for t, c in txs
                    ],
                )
            )
        )


_CANCEL = object()


def _watcher(**kwargs) -> tuple[CommitWatcher, list, list]:
    calls: list[FakeCall] = []
    starts: list = []

    def open_stream(start):
        starts.append(start)
        call = FakeCall()
        calls.append(call)
        if len(calls) == 1:
            call.block(4)  # the newest block when the stream opens
        return call

    return CommitWatcher(open_stream, **kwargs), calls, starts


def test_settles_registered_transactions_and_tracks_the_height():
    seen: list[int] = []
    w, calls, starts = _watcher(on_block=seen.append)
    try:
        assert starts == [None] and w.height == 5
        w.expect("a")
        w.expect("b")
        calls[0].block(5, ("x", 0), ("a", 0))  # x: another client's transaction
        calls[0].block(6, ("b", 11))  # 11: MVCC_READ_CONFLICT
        assert w.wait("a", 5) == (0, 5) and w.wait("b", 5) == (11, 6)
        assert w.wait_height(7, 5) and not w.wait_height(8, 0.1)
        assert seen == [4, 5, 6] and not w._waiting
        with pytest.raises(ValueError, match="not registered"):
            w.wait("x", 1)
    finally:
        w.close()


def test_a_broken_stream_reopens_after_the_last_block_and_misses_nothing():
    w, calls, starts = _watcher()
    try:
        w.expect("a")
        calls[0].block(5)
        calls[0].items.put(_Unavailable())
        for _ in range(50):  # reopened after a 0.2 s back-off
            if len(calls) == 2:
                break
            time.sleep(0.1)
        assert starts == [None, 6]
        calls[1].block(6, ("a", 0))
        assert w.wait("a", 5) == (0, 6)
    finally:
        w.close()


class _Unavailable(grpc.RpcError):
    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAVAILABLE


def test_a_refusal_fails_the_waiters_so_the_caller_asks_commit_status():
    w, calls, _ = _watcher()
    w.expect("a")
    calls[0].items.put(events_pb2.DeliverResponse(status=common_pb2.FORBIDDEN))
    with pytest.raises(WatcherFailed, match="FORBIDDEN"):
        w.wait("a", 5)
    with pytest.raises(WatcherFailed):
        w.expect("b")
    w.close()


def test_timeout_close_and_a_silent_peer_leave_no_one_waiting():
    w, calls, _ = _watcher()
    w.expect("late")
    with pytest.raises(CommitTimeout):
        w.wait("late", 0.2)
    assert not w._waiting
    w.expect("a")
    result: list[object] = []
    t = threading.Thread(target=lambda: result.append(pytest.raises(WatcherFailed, w.wait, "a", 30)))
    t.start()
    w.close()
    t.join(5)
    assert not t.is_alive() and result and calls[0].cancelled.is_set()

    silent: list[FakeCall] = []

    def never(start):
        silent.append(FakeCall())
        return silent[-1]

    with pytest.raises(WatcherFailed, match="no block"):
        CommitWatcher(never, first_block_timeout=0.2, name="peer0")
    assert silent[0].cancelled.wait(5)
