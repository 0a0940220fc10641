"""Paged history reads (``<Contract>:history`` with a limit and a bookmark), on both ledger hosts:
pages are newest first, ``next`` is the transaction id of a page's oldest version while older ones
exist, and the pages together are the whole history reversed."""

from __future__ import annotations

import pytest

from chaincode.errors import InvalidArgument
from chaincode.limits import MAX_HISTORY_PAGE
from ledger.client import HistoryPage
from tests.contracts.helpers import new_process, run_task
from tests.contracts.test_model import _publish, _rotation, digest_of

CA_DIGEST = "sha256:" + "cd" * 32


def _model_with_versions(admins, org1, consortium, uid: str) -> str:
    """A model whose record has 4 versions: published, Org3 granted, revoked, granted again."""
    from exchange.sealing import seal

    pid = new_process(admins, org1, uid, rounds=1)
    run_task(org1, pid, 1, model_digest=digest_of("model-Org1MSP"))
    rec, _ = _publish(org1, consortium, pid, members=("Org1MSP", "Org2MSP"))
    sealed3 = seal(consortium.encryption_certificate("Org3MSP"), b"k" * 32, b"model-key")
    org1.grant_model(rec.id, "Org3MSP", sealed3)
    org1.revoke_model(rec.id, "Org3MSP", *_rotation(consortium, ("Org1MSP", "Org2MSP"))[:2])
    org1.grant_model(rec.id, "Org3MSP", sealed3)
    return rec.id


def test_model_history_pages(admins, org1, org2, consortium, uid):
    model_id = _model_with_versions(admins, org1, consortium, uid)
    whole = org1.model_history(model_id)  # the unpaged answer: every version, oldest first
    assert [len(h.value["access"]) for h in whole] == [2, 3, 2, 3]
    newest_first = whole[::-1]

    first = org2.model_history(model_id, 2)
    assert isinstance(first, HistoryPage)
    assert list(first.items) == newest_first[:2] and first.next == newest_first[1].tx_id
    # an exact multiple of the page size: the last page says there is nothing more
    second = org2.model_history(model_id, 2, first.next)
    assert list(second.items) == newest_first[2:] and second.next is None
    # a page size that does not divide the history
    page = org2.model_history(model_id, 3)
    assert list(page.items) == newest_first[:3] and page.next == newest_first[2].tx_id
    rest = org2.model_history(model_id, 3, page.next)
    assert list(rest.items) == newest_first[3:] and rest.next is None
    # one page holding everything; the largest page size
    for size in (4, MAX_HISTORY_PAGE):
        assert org2.model_history(model_id, size) == HistoryPage(items=tuple(newest_first), next=None)
    # the bookmark of the oldest version: an empty page, nothing more
    assert org2.model_history(model_id, 2, whole[0].tx_id) == HistoryPage(items=(), next=None)
    # a bookmark without a limit: the default page size
    assert org2.model_history(model_id, after=newest_first[0].tx_id).items == tuple(newest_first[1:])
    # iterating over the pages reads the whole history, newest first
    pages = list(org2.history_pages("Model:history", model_id, limit=3))
    assert [len(p.items) for p in pages] == [3, 1]
    assert [h for p in pages for h in p.items] == newest_first


def test_bad_page_limit_is_refused(admins, org1, consortium, uid):
    model_id = _model_with_versions(admins, org1, consortium, uid)
    for limit in ("0", "-1", "1.5", "abc", " 2", str(MAX_HISTORY_PAGE + 1), "9" * 5000, "\u0661"):
        with pytest.raises(InvalidArgument, match="limit"):
            org1.ledger.evaluate(org1.identity, "Model:history", model_id, limit, "")


def test_bad_bookmark_is_refused(admins, org1, consortium, uid):
    pid = new_process(admins, org1, uid, rounds=1, start=False)
    with pytest.raises(InvalidArgument, match="not a version"):
        org1.history_page("LearningProcess:history", pid, limit=5, after="ab" * 32)
    with pytest.raises(InvalidArgument, match="bookmark"):
        org1.history_page("LearningProcess:history", pid, limit=5, after="a b")
    with pytest.raises(InvalidArgument, match="bookmark"):
        org1.history_page("LearningProcess:history", pid, limit=5, after="a" * 129)


def test_every_contract_pages_its_history(admins, org1, uid):
    """The other contracts share the paging: the newest versions come first."""
    pid = new_process(admins, org1, uid, rounds=1)
    whole = org1.process_history(pid)
    assert org1.history_page("LearningProcess:history", pid, limit=1).items == (whole[-1],)
    image = org1.history_page("Image:history", f"img-{uid}:1", limit=10)
    assert image.next is None and image.items == tuple(org1.image_history(f"img-{uid}:1")[::-1])
    published = [org1.publish_membership(f"https://m{i}-{uid}.example.com:7443", CA_DIGEST) for i in range(3)]
    page = org1.history_page("Membership:history", "Org1MSP", limit=2)
    assert [h.tx_id for h in page.items] == [published[2].tx_id, published[1].tx_id]
    older = org1.history_page("Membership:history", "Org1MSP", limit=1, after=page.next)
    assert [h.tx_id for h in older.items] == [published[0].tx_id]
