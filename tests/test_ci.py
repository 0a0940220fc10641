"""tests/ci.py: a test that lacks something on this machine is skipped, and fails under CI=true."""

from __future__ import annotations

import pytest

from tests.ci import require_module, require_program, skip_or_fail

OUTCOMES = [("true", pytest.fail.Exception), ("", pytest.skip.Exception), ("false", pytest.skip.Exception)]


@pytest.mark.parametrize("ci, outcome", OUTCOMES)
def test_missing_things_fail_under_ci_and_skip_elsewhere(monkeypatch, ci, outcome):
    monkeypatch.setenv("CI", ci)
    with pytest.raises(outcome, match="MNIST unavailable"):
        skip_or_fail("MNIST unavailable: no registry access")
    with pytest.raises(outcome, match="the sandbox runtime needs no-such-program-5b1e"):
        require_program("no-such-program-5b1e", "the sandbox runtime")
    with pytest.raises(outcome, match="module no_such_module_5b1e is not installed"):
        require_module("no_such_module_5b1e")


def test_what_is_there_is_returned(monkeypatch):
    monkeypatch.setenv("CI", "true")
    assert require_program("sh", "a shell").endswith("/sh")
    assert require_module("json").dumps([1]) == "[1]"
