"""audit.report: the one report type -- ok only when every check passed, failures named, a check
function's error fails its check and a bug propagates."""

from __future__ import annotations

import pytest

from audit.report import Check, Report


def test_report():
    r = Report("x")
    assert not r.ok  # no checks is not a pass
    r.add("a", True)
    r.run("b", lambda: (_ for _ in ()).throw(ValueError("boom")))
    assert not r.ok and [c.row() for c in r.failures] == [
        {"check": "b", "kind": "", "ok": False, "detail": "boom"}
    ]
    assert r.failures[0]["check"] == "b" and r.failures[0].subject == "b"
    assert r.to_dict()["failures"] == 1 and r.to_dict()["checks"][0] == {
        "check": "a",
        "kind": "",
        "ok": True,
        "detail": "",
    }
    assert "facts" not in r.to_dict()


def test_kinds_facts_and_the_detail_of_a_passing_check():
    r = Report("model:m", facts={"lineage": ["p/1/A"]})
    assert r.run("execution p/1/A", lambda x: f"checked {x}", "it", kind="execution")
    assert r.add("history p/1/A", True, kind="history")
    assert not r.run("model", lambda: (_ for _ in ()).throw(KeyError("digest")), kind="model")
    assert r.counts() == {"execution": 1, "history": 1, "model": 1}
    assert r.checks[0] == Check("execution", "execution p/1/A", True, "checked it")
    assert r.failures == [Check("model", "model", False, "'digest'")]
    assert r.to_dict()["facts"] == {"lineage": ["p/1/A"]} and r.to_dict()["ok"] is False


def test_a_bug_in_a_check_propagates():
    r = Report("x")
    with pytest.raises(ZeroDivisionError):
        r.run("c", lambda: 1 / 0)
    assert r.checks == []
