"""Input limits of every contract argument (issue 14, items 8 and 9; docs/limits.md), on every
ledger host: a refused argument is an InvalidArgument naming the limit, and nothing is written."""

from __future__ import annotations

import json

import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from chaincode.canonical import canonical_json
from chaincode.errors import InvalidArgument, InvalidState, NotFound
from chaincode.limits import (
    MAX_ARGUMENT_BYTES,
    MAX_DESCRIPTION_CHARS,
    MAX_HYPERPARAMETERS_BYTES,
    MAX_JSON_DEPTH,
    MAX_PROCESS_POLICY_ENTRIES,
    MAX_PROCESS_TASKS,
    process_size_problem,
)
from chaincode.records import PRIVATE_TERMS, RESULT_CONFIDENTIAL
from ledger.client import process_transient
from ledger.identity import sign
from tests.contracts.helpers import IMAGE_DIGEST, make_result, new_process, public_result, run_task


def nested(depth: int) -> dict:
    """A JSON object nested ``depth`` levels deep (``{}`` is 1)."""
    value: dict = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


def _image(org1, uid: str) -> str:
    return org1.register_image(f"lim-{uid}", "1", "collab-rf", IMAGE_DIGEST).id


def _create(org1, uid: str, pid: str, **kw):
    return org1.create_process(
        pid, f"lim-{uid}:1", ["Org1MSP", "Org2MSP"], {"kind": "ring", "seed": 1}, 2, **kw
    )


def test_hyperparameters_nested_900_levels_are_refused_and_nothing_breaks(org1, org2, uid):
    """The issue's request: hyper-parameters 900 levels deep. Refused with InvalidArgument (not
    committed), and every member still lists its processes."""
    _image(org1, uid)
    with pytest.raises(InvalidArgument, match="nested 901 levels deep, over the limit of 32"):
        _create(org1, uid, f"deep-{uid}", hyperparameters=nested(900))
    with pytest.raises(NotFound):
        org1.get_process(f"deep-{uid}")
    assert all(p.id != f"deep-{uid}" for p in org2.list_processes())


def test_depth_limit_is_exact(org1, uid):
    """The specification object is level 1, so hyper-parameters may be nested 31 levels deep."""
    _image(org1, uid)
    ok = _create(org1, uid, f"d31-{uid}", hyperparameters=nested(MAX_JSON_DEPTH - 1))
    assert ok.hyperparameters == nested(MAX_JSON_DEPTH - 1)
    with pytest.raises(InvalidArgument, match=f"nested {MAX_JSON_DEPTH + 1} levels deep"):
        _create(org1, uid, f"d32-{uid}", hyperparameters=nested(MAX_JSON_DEPTH))


def test_depth_limit_applies_to_every_json_argument(admins, org1, uid):
    pid = new_process(admins, org1, uid, rounds=2)
    with pytest.raises(InvalidArgument, match="task failure is nested"):
        org1.fail_task(pid, 1, "deep details", {"d": nested(40)})
    assert org1.query_executions(pid) == []
    with pytest.raises(InvalidArgument, match="query is nested"):
        org1.ledger.evaluate(
            org1.identity, "ExecutionRecord:query", json.dumps({"process_id": pid, "round": nested(40)})
        )
    # deeper than the decoder can go at all: still a typed InvalidArgument, not an internal error
    with pytest.raises(InvalidArgument, match="nested deeper than the limit"):
        org1.ledger.submit(org1.identity, "ExecutionRecord:fail_task", "[" * 200_000 + "]" * 200_000)


def test_oversized_arguments_are_refused(org1, uid):
    """The issue's 8 MiB hyper-parameter object and 20 MiB description; the per-field limits below
    the argument limit; and an oversized plain (non-JSON) argument."""
    _image(org1, uid)
    big = {f"k{i}": "x" * 1000 for i in range(8 * 1024)}  # ~8 MiB
    with pytest.raises(
        InvalidArgument, match=f"over the limit of {MAX_ARGUMENT_BYTES} bytes per contract argument"
    ):
        _create(org1, uid, f"big-{uid}", hyperparameters=big)
    with pytest.raises(InvalidArgument, match="per contract argument"):
        _create(org1, uid, f"desc-{uid}", description="d" * (20 * 1024 * 1024))
    medium = {f"k{i}": "x" * 1000 for i in range(80)}  # ~80 KiB: within the argument limit
    with pytest.raises(
        InvalidArgument, match=f"hyperparameters is .* over the limit of {MAX_HYPERPARAMETERS_BYTES}"
    ):
        _create(org1, uid, f"med-{uid}", hyperparameters=medium)
    with pytest.raises(
        InvalidArgument, match=f"process description is .* over the limit of {MAX_DESCRIPTION_CHARS}"
    ):
        _create(org1, uid, f"long-{uid}", description="d" * (MAX_DESCRIPTION_CHARS + 1))
    with pytest.raises(InvalidArgument, match="image description"):
        org1.register_image(
            f"lim2-{uid}", "1", "a", IMAGE_DIGEST, description="d" * (MAX_DESCRIPTION_CHARS + 1)
        )
    with pytest.raises(InvalidArgument, match="process description must be a string"):
        org1.ledger.submit(
            org1.identity,
            "LearningProcess:create",
            json.dumps(
                {
                    "id": f"obj-{uid}",
                    "image_id": f"lim-{uid}:1",
                    "consortium": ["Org1MSP"],
                    "topology": {"kind": "ring"},
                    "rounds": 1,
                }
            ),
            transient={PRIVATE_TERMS: canonical_json({"description": {"not": "text"}, "salt": "0" * 64})},
        )
    with pytest.raises(InvalidArgument, match="argument 2 is .* bytes"):
        org1.revoke_image(f"lim-{uid}:1", "r" * (MAX_ARGUMENT_BYTES + 1))
    for pid in (f"big-{uid}", f"desc-{uid}", f"med-{uid}", f"long-{uid}", f"obj-{uid}"):
        with pytest.raises(NotFound):
            org1.get_process(pid)
    assert org1.get_image(f"lim-{uid}:1").status == "active"
    ok = _create(org1, uid, f"ok-{uid}", description="d" * MAX_DESCRIPTION_CHARS)
    assert len(ok.description) == MAX_DESCRIPTION_CHARS


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_non_finite_numbers_are_invalid_arguments(admins, org1, uid, literal):
    """NaN/Infinity (and a literal that overflows to infinity) in any JSON argument: InvalidArgument,
    not InternalError, and nothing written."""
    _image(org1, uid)
    spec = (
        '{"id": "nan-%s", "image_id": "lim-%s:1", "consortium": ["Org1MSP"], "topology": {"kind": "ring"},'  # noqa: UP031
        ' "rounds": 1, "hyperparameters": {"lr": %s}}' % (uid, uid, literal)
    )
    with pytest.raises(InvalidArgument, match="not finite|finite number"):
        org1.ledger.submit(org1.identity, "LearningProcess:create", spec)
    with pytest.raises(NotFound):
        org1.get_process(f"nan-{uid}")
    pid = new_process(admins, org1, uid, rounds=1)
    key = ec.generate_private_key(ec.SECP256R1())
    org1.create_task(pid, 1, key.public_key(), "sandbox")
    public, part = public_result(make_result(pid, 1, "Org1MSP", recipients=("Org1MSP",)))
    text = canonical_json(public).decode().replace('"size":10', f'"size":{literal}')
    assert literal in text
    with pytest.raises(InvalidArgument, match="not finite|finite number"):
        org1.ledger.submit(
            org1.identity,
            "ExecutionRecord:complete_task",
            text,
            __import__("base64").b64encode(sign(key, text.encode())).decode(),
            transient={
                **(process_transient(org1.get_process(pid)) or {}),
                RESULT_CONFIDENTIAL: part.canonical(),
            },
        )
    assert org1.get_execution(pid, 1, "Org1MSP").status == "running"


def test_fail_task_refuses_a_future_round(admins, org1, org2, uid):
    """Round 2 is not open while round 1 is incomplete: fail_task applies create_task's rule."""
    pid = new_process(admins, org1, uid, rounds=3)
    run_task(org1, pid, 1)
    with pytest.raises(InvalidState, match="round 2 .* is not open"):
        org1.fail_task(pid, 2, "claimed failure of a round that has not started")
    with pytest.raises(InvalidState, match="round 4 is closed"):
        org1.fail_task(pid, 4, "no such round")
    assert [(r.round, r.organisation) for r in org1.query_executions(pid)] == [(1, "Org1MSP")]
    run_task(org2, pid, 1)
    assert org1.fail_task(pid, 2, "now round 2 is open").status == "failed"


def test_fail_task_refuses_a_process_that_is_not_running(admins, org1, org2, uid):
    created = new_process(admins, org1, uid, rounds=2, start=False)
    with pytest.raises(InvalidState, match="the process is created"):
        org2.fail_task(created, 1, "not started yet")
    pid = new_process(admins, org1, f"{uid}b", rounds=2)
    key = ec.generate_private_key(ec.SECP256R1())
    org2.create_task(pid, 1, key.public_key(), "sandbox")  # a task that was running when the process ended
    org1.abort_process(pid, "stopped by its creator")
    with pytest.raises(InvalidState, match="the process is aborted"):
        org2.fail_task(pid, 1, "after the abort")
    with pytest.raises(InvalidState, match="the process is aborted"):
        org1.fail_task(pid, 1, "after the abort, no task")
    assert org2.get_execution(pid, 1, "Org2MSP").status == "running"
    with pytest.raises(NotFound):
        org1.get_execution(pid, 1, "Org1MSP")


def test_over_long_reasons_are_refused_not_cut(admins, org1, uid):
    """A reason over its limit used to be cut silently; now it is refused and nothing changes."""
    image_id = _image(org1, uid)
    with pytest.raises(
        InvalidArgument, match="revocation reason is 513 characters long, over the limit of 512"
    ):
        org1.revoke_image(image_id, "r" * 513)
    assert org1.get_image(image_id).status == "active"
    pid = new_process(admins, org1, uid, rounds=1)
    with pytest.raises(InvalidArgument, match="reason is 1025 characters long, over the limit of 1024"):
        org1.abort_process(pid, "a" * 1025)
    with pytest.raises(InvalidArgument, match="over the limit of 1024"):
        org1.fail_process(pid, "f" * 1025)
    assert org1.get_process(pid).status == "running"
    assert org1.abort_process(pid, "a" * 1024).status_reason == "a" * 1024
    assert org1.revoke_image(image_id, "r" * 512).revoked_reason == "r" * 512


def test_a_process_too_large_to_create_in_one_transaction_is_refused(org1, uid):
    """Creation writes a placeholder under every (round, member) record key (docs/ledger.md, "Who endorses
    what"): rounds x members is bounded, and so is rounds x members^2 (the policy names every member)."""
    _image(org1, uid)
    for pid, members, rounds in (
        (f"big-{uid}", ["Org1MSP"], MAX_PROCESS_TASKS + 1),
        (f"wide-{uid}", ["Org1MSP", "Org2MSP", "Org3MSP"], MAX_PROCESS_POLICY_ENTRIES // 9 + 1),
    ):
        with pytest.raises(InvalidArgument, match="too large to create"):
            org1.create_process(pid, f"lim-{uid}:1", members, {"kind": "ring", "seed": 1}, rounds)
        with pytest.raises(NotFound):
            org1.get_process(pid)
    assert process_size_problem(MAX_PROCESS_TASKS, 1) is None  # the bounds themselves are allowed
    assert process_size_problem(MAX_PROCESS_POLICY_ENTRIES // 256, 16) is None
