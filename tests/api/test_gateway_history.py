"""``GET /api/v1/models/{id}/history``: the whole history without query parameters (oldest first,
as before paging), one page newest first with ``limit``/``after``; bad values are 422 or 400."""

from __future__ import annotations

import pytest

MID = "proc-0:Org1MSP"


@pytest.fixture
def org2(gateways):
    return gateways["Org2MSP"][1]


def test_history_pages(org2):
    whole = org2.get(f"/api/v1/models/{MID}/history").json()
    assert isinstance(whole, list) and whole
    newest_first = whole[::-1]
    first = org2.get(f"/api/v1/models/{MID}/history", params={"limit": 1})
    assert first.status_code == 200, first.text
    page = first.json()
    assert page["items"] == newest_first[:1]
    assert page["next"] == (newest_first[0]["tx_id"] if len(whole) > 1 else None)
    seen, after = [], None
    while True:
        params = {"limit": 1} if after is None else {"limit": 1, "after": after}
        page = org2.get(f"/api/v1/models/{MID}/history", params=params).json()
        seen += page["items"]
        after = page["next"]
        if after is None:
            break
    assert seen == newest_first
    everything = org2.get(f"/api/v1/models/{MID}/history", params={"limit": 1000}).json()
    assert everything == {"items": newest_first, "next": None}
    last = org2.get(f"/api/v1/models/{MID}/history", params={"after": whole[0]["tx_id"]}).json()
    assert last == {"items": [], "next": None}


@pytest.mark.parametrize(
    "params",
    [{"limit": 0}, {"limit": 1001}, {"limit": "x"}, {"after": ""}, {"after": "a/b"}, {"after": "a" * 129}],
)
def test_bad_page_parameters_are_422(org2, params):
    r = org2.get(f"/api/v1/models/{MID}/history", params=params)
    assert r.status_code == 422 and r.json()["code"] == "INVALID_REQUEST", r.text


def test_unknown_bookmark_is_400(org2):
    r = org2.get(f"/api/v1/models/{MID}/history", params={"limit": 5, "after": "ab" * 32})
    assert r.status_code == 400 and r.json()["code"] == "INVALID_ARGUMENT", r.text


def test_page_parameters_are_declared(org2):
    op = org2.get("/openapi.json").json()["paths"]["/api/v1/models/{model_id}/history"]["get"]
    declared = {p["name"]: p["schema"] for p in op["parameters"] if p["in"] == "query"}
    assert set(declared) == {"limit", "after"}
    limit = declared["limit"]["anyOf"][0]
    assert limit["minimum"] == 1 and limit["maximum"] == 1000
