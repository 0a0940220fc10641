"""``TransactionContext.history`` over a stub that records how much history it was asked for: a
page reads only up to one version past its end and closes the host's iterator; the unpaged call
keeps its answer."""

from __future__ import annotations

import json

import pytest

from chaincode.context import TransactionContext
from chaincode.errors import InvalidArgument
from chaincode.limits import DEFAULT_HISTORY_PAGE, history_page_request
from chaincode.stub import KeyModification


class HistoryStub:
    def __init__(self, n: int):
        self.versions = [KeyModification(f"tx{i}", b'{"v":%d}' % i, 1.5 + i, False) for i in range(n)]
        self.read = 0
        self.closed = False

    def get_history_for_key(self, key, *, newest_first=False):
        versions = self.versions[::-1] if newest_first else self.versions
        try:
            for m in versions:
                self.read += 1
                yield m
        finally:
            self.closed = True


def _ctx(n: int) -> tuple[TransactionContext, HistoryStub]:
    ctx = TransactionContext.__new__(TransactionContext)  # no creator needed to read history
    ctx.stub = stub = HistoryStub(n)  # type: ignore[assignment]
    return ctx, stub


def _page(n: int, limit: str, after: str = "") -> tuple[dict, HistoryStub]:
    ctx, stub = _ctx(n)
    return json.loads(bytes(ctx.history("k", limit, after))), stub


def test_unpaged_history_is_every_version_oldest_first():
    ctx, _ = _ctx(3)
    got = json.loads(bytes(ctx.history("k")))
    assert [h["tx_id"] for h in got] == ["tx0", "tx1", "tx2"]
    assert got[0] == {
        "is_delete": False,
        "timestamp": "1970-01-01T00:00:01.500000Z",
        "tx_id": "tx0",
        "value": {"v": 0},
    }
    assert json.loads(bytes(_ctx(0)[0].history("k"))) == []


def test_a_page_reads_one_version_past_its_end_and_closes_the_iterator():
    page, stub = _page(1000, "10")
    assert [h["tx_id"] for h in page["items"]] == [f"tx{i}" for i in range(999, 989, -1)]
    assert page["next"] == "tx990" and stub.read == 11 and stub.closed


def test_page_boundaries():
    assert _page(0, "5")[0] == {"items": [], "next": None}  # empty history
    page, stub = _page(4, "2", "tx2")  # the bookmark's page: an exact multiple, nothing more
    assert [h["tx_id"] for h in page["items"]] == ["tx1", "tx0"] and page["next"] is None and stub.closed
    assert _page(4, "2", "tx0")[0] == {"items": [], "next": None}  # bookmark of the last version
    assert len(_page(300, "", "tx299")[0]["items"]) == DEFAULT_HISTORY_PAGE
    with pytest.raises(InvalidArgument, match="not a version"):
        _page(4, "2", "tx9")


@pytest.mark.parametrize("limit", ["0", "1001", "-3", "x", "+5", "5 ", "9" * 5000])
def test_bad_limits(limit):
    with pytest.raises(InvalidArgument, match="limit"):
        history_page_request(limit, "")


def test_page_requests():
    assert history_page_request("", "") is None
    assert history_page_request("7", "") == (7, None)
    assert history_page_request("", "ab12") == (DEFAULT_HISTORY_PAGE, "ab12")
    for bad in ("a/b", "x" * 129, "é"):
        with pytest.raises(InvalidArgument, match="bookmark"):
            history_page_request("5", bad)
