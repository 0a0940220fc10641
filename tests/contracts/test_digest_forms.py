"""Identifiers and digests are matched whole (issue 33 item 3): a digest ending in a newline
(``"sha256:<64 hex>\\n"``) -- which ``re.match`` with ``^...$`` let through, since ``$`` also matches
before a final newline -- is refused by every contract that stores one, on both ledger hosts."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from ledger.errors import InvalidArgument
from tests.contracts.helpers import complete, make_result, new_process
from wire.canonical import is_digest

GOOD = "sha256:" + "ab" * 32
TRAILING = (GOOD + "\n", GOOD + "\r\n", GOOD + " ", "\n" + GOOD)


def test_is_digest_matches_the_whole_string():
    assert is_digest(GOOD)
    for bad in TRAILING:
        assert not is_digest(bad), repr(bad)


@pytest.mark.parametrize("bad", TRAILING[:2])
def test_membership_publish_refuses_a_digest_with_a_trailing_newline(org1, bad):
    with pytest.raises(InvalidArgument):
        org1.publish_membership("https://127.0.1.1:8443", bad)


@pytest.mark.parametrize("bad", TRAILING[:2])
def test_image_register_refuses_a_digest_with_a_trailing_newline(org1, uid, bad):
    with pytest.raises(InvalidArgument):
        org1.register_image(f"nl-{uid}", "1", "collab-rf", bad)


def test_complete_task_refuses_a_digest_with_a_trailing_newline(admins, org1, uid):
    pid = new_process(admins, org1, uid, consortium=("Org1MSP",), rounds=1)
    key = ec.generate_private_key(ec.SECP256R1())
    org1.create_task(pid, 1, key.public_key(), "sandbox")
    result = make_result(pid, 1, "Org1MSP")
    result["outputs"]["state"] += "\n"
    with pytest.raises(InvalidArgument):
        complete(org1, key, result)
    assert org1.get_execution(pid, 1, "Org1MSP").status == "running"  # nothing stored
    good = make_result(pid, 1, "Org1MSP")
    assert complete(org1, key, good).status == "completed"
