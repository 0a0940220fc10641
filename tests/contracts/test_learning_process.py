"""LearningProcess contract rules, through the Ledger interface."""

from __future__ import annotations

import pytest

from chaincode.errors import AlreadyExists, Forbidden, ImageMismatch, InvalidArgument, InvalidState, NotFound
from tests.contracts.helpers import IMAGE_DIGEST, consent, lone_co_endorser, new_process, run_task


def test_create_pins_the_image_digest(org1, uid):
    img = org1.register_image(f"i-{uid}", "1", "collab-rf", IMAGE_DIGEST)
    p = org1.create_process(
        f"p-{uid}",
        img.id,
        ["Org1MSP", "Org2MSP"],
        {"kind": "ring", "seed": 3},
        4,
        hyperparameters={"n_new": 10, "gradient_clip": 1.0},
        privacy_budget={"mechanism": "laplace", "epsilon": 2.0},
        dataset="creditcard",
    )
    assert p.image_digest == IMAGE_DIGEST and p.algorithm == "collab-rf"
    assert p.status == "created" and p.creator == "Org1MSP" and p.rounds == 4
    assert p.topology == {"kind": "ring", "seed": 3}
    got = org1.get_process(p.id)
    # the budget is stored with its accounting and scope resolved (no δ: basic composition; network observer)
    assert got.current_round == 1 and got.privacy_budget.json_object() == {
        "mechanism": "laplace",
        "epsilon": 2.0,
        "accounting": "basic",
        "scope": "network",
    }


def test_create_refusals(org1, org2, uid):
    img = org1.register_image(f"i-{uid}", "1", "a", IMAGE_DIGEST)
    ok = dict(image_id=img.id, consortium=["Org1MSP", "Org2MSP"], topology={"kind": "ring"}, rounds=2)
    with pytest.raises(NotFound, match="not registered"):
        org1.create_process(f"a-{uid}", **{**ok, "image_id": f"missing-{uid}:1"})
    with pytest.raises(ImageMismatch):
        org1.create_process(f"b-{uid}", **ok, image_digest="sha256:" + "11" * 32)
    with pytest.raises(Forbidden, match="not part of"):
        org1.create_process(f"c-{uid}", **{**ok, "consortium": ["Org2MSP", "Org3MSP"]})
    with pytest.raises(InvalidArgument, match="twice"):
        org1.create_process(f"d-{uid}", **{**ok, "consortium": ["Org1MSP", "Org1MSP"]})
    with pytest.raises(InvalidArgument, match="rounds"):
        org1.create_process(f"e-{uid}", **{**ok, "rounds": 0})
    with pytest.raises(InvalidArgument, match="epsilon"):
        org1.create_process(
            f"f-{uid}",
            **ok,
            privacy_budget={"mechanism": "laplace", "epsilon": -1},
            hyperparameters={"gradient_clip": 1.0},
        )
    with pytest.raises(InvalidArgument, match="seed"):
        org1.create_process(f"g-{uid}", **{**ok, "topology": {"kind": "ring", "seed": -5}})
    for bad in (1, 1.5, -0.1, True, "0.2"):  # a slice of every row (or more) leaves nothing to train on
        with pytest.raises(InvalidArgument, match=r"validation_fraction must be a number in \[0, 1\)"):
            org1.create_process(f"v-{uid}", **ok, validation_fraction=bad)
    org1.create_process(f"h-{uid}", **ok)
    with pytest.raises(AlreadyExists):
        org2.create_process(f"h-{uid}", **ok)
    org1.revoke_image(img.id, "bad")
    with pytest.raises(InvalidState, match="revoked"):
        org1.create_process(f"i-{uid}", **ok)


def test_a_validation_fraction_is_recorded_as_a_term_only_when_declared(org1, uid):
    img = org1.register_image(f"i-{uid}", "1", "collab-rf", IMAGE_DIGEST)
    spec = dict(
        image_id=img.id,
        consortium=["Org1MSP"],
        topology={"kind": "ring", "seed": 1},
        rounds=2,
        co_endorsers=lone_co_endorser(["Org1MSP"]),
    )
    sliced = org1.create_process(f"s-{uid}", **spec, validation_fraction=0.25)
    assert sliced.validation_fraction == 0.25 and sliced.terms()["validation_fraction"] == 0.25
    assert org1.get_process(sliced.id).json_object()["validation_fraction"] == 0.25
    plain = org1.create_process(f"n-{uid}", **spec)  # not declared: stored as before, no such term
    assert plain.validation_fraction == 0 and "validation_fraction" not in plain.terms()
    assert "validation_fraction" not in org1.get_process(plain.id).json_object()


def test_non_member_cannot_read_or_act(admins, org1, org3, uid):
    pid = new_process(admins, org1, uid, start=False)
    with pytest.raises(Forbidden, match="not a member"):
        org3.get_process(pid)
    with pytest.raises(Forbidden):
        org3.start_process(pid)
    with pytest.raises(Forbidden):
        org3.process_history(pid)
    assert pid not in {p.id for p in org3.list_processes()}
    assert pid in {p.id for p in org1.list_processes()}


def test_status_transitions(admins, org1, org2, uid):
    pid = new_process(admins, org1, uid, start=False, rounds=1)
    with pytest.raises(InvalidState, match="cannot complete"):
        org1.complete_process(pid)
    consent(admins, pid, ("Org1MSP", "Org2MSP"))
    assert org2.start_process(pid).status == "running"
    with pytest.raises(InvalidState):
        org1.start_process(pid)
    with pytest.raises(InvalidState, match="not completed by"):
        org1.complete_process(pid)
    run_task(org1, pid, 1)
    run_task(org2, pid, 1)
    assert org1.get_process(pid).current_round == 2
    done = org2.complete_process(pid)
    assert done.status == "completed"
    with pytest.raises(InvalidState):
        org1.abort_process(pid)
    with pytest.raises(InvalidState):
        org1.fail_process(pid, "late")
    statuses = [h.value["status"] for h in org1.process_history(pid)]
    assert statuses == ["created", "running", "completed"]


def test_abort_only_by_creator(admins, org1, org2, uid):
    pid = new_process(admins, org1, uid)
    with pytest.raises(Forbidden, match="only the creator"):
        org2.abort_process(pid, "no")
    rec = org1.abort_process(pid, "data issue")
    assert rec.status == "aborted" and rec.status_reason == "data issue"


def test_fail_needs_reason(admins, org1, org2, uid):
    pid = new_process(admins, org1, uid)
    with pytest.raises(InvalidArgument):
        org2.fail_process(pid, "")
    rec = org2.fail_process(pid, "privacy budget exhausted")
    assert rec.status == "failed" and rec.status_reason == "privacy budget exhausted"


def test_current_round_is_derived_from_execution_records(admins, org1, org2, uid):
    pid = new_process(admins, org1, uid, rounds=3)
    assert org1.get_process(pid).current_round == 1
    run_task(org1, pid, 1)
    assert org1.get_process(pid).current_round == 1  # Org2 has not finished round 1
    run_task(org2, pid, 1)
    assert org2.get_process(pid).current_round == 2
    run_task(org2, pid, 2)
    run_task(org1, pid, 2)
    run_task(org1, pid, 3)
    run_task(org2, pid, 3)
    assert org1.get_process(pid).current_round == 4


def test_progress_follows_every_round_of_a_long_process(admins, org1, org2, org3, uid):
    """``progress`` and ``get`` find the current round by bisection over the rounds that hold records;
    checked at every step of a 7-round process against what the records say (each partial round
    included), so an off-by-one in the bisection at any height fails."""
    pid = new_process(admins, org1, uid, rounds=7)
    for rnd in range(1, 8):
        for org, done_before in ((org2, ()), (org1, ("Org2MSP",))):
            p = org1.process_progress(pid)
            assert (p.current_round, p.completed) == (rnd, done_before)
            assert p.completed_tasks == 2 * (rnd - 1) + len(done_before)
            assert org2.get_process(pid).current_round == rnd
            run_task(org, pid, rnd)
    p = org2.process_progress(pid)
    assert (p.status, p.rounds, p.organisations) == ("running", 7, 2)
    assert (p.current_round, p.completed, p.completed_tasks) == (8, (), 14)
    assert org1.get_process(pid).current_round == 8
    with pytest.raises(Forbidden):
        org3.process_progress(pid)
    with pytest.raises(NotFound):
        org1.process_progress(f"{pid}-none")


def test_a_failed_task_keeps_the_round_current(admins, org1, org2, uid):
    pid = new_process(admins, org1, uid, rounds=3)
    run_task(org1, pid, 1)
    run_task(org2, pid, 1)
    org2.fail_task(pid, 2, "out of memory")
    p = org1.process_progress(pid)
    assert (p.current_round, p.completed, p.completed_tasks) == (2, (), 2)
    assert org1.get_process(pid).current_round == 2


@pytest.mark.parametrize(
    "budget, hyper, match",
    [
        ({"mechanism": "laplace", "epsilon": 1.0}, {"n_new": 5}, "gradient_clip"),
        ({"mechanism": "laplace", "epsilon": 1.0}, {"gradient_clip": 0}, "gradient_clip"),
        ({"mechanism": "laplace", "epsilon": 1.0}, {"gradient_clip": None}, "gradient_clip"),
        ({"mechanism": "laplace", "epsilon": 1.0, "accounting": "zcdp"}, {"gradient_clip": 1.0}, "delta"),
        ({"mechanism": "laplace", "epsilon": 1.0, "delta": 0.0}, {"gradient_clip": 1.0}, "delta"),
        ({"mechanism": "laplace", "epsilon": 1.0, "delta": 1.5}, {"gradient_clip": 1.0}, "delta"),
        (
            {"mechanism": "laplace", "epsilon": 1.0, "accounting": "advanced"},
            {"gradient_clip": 1.0},
            "accounting",
        ),
        ({"mechanism": "laplace", "epsilon": 1.0, "scope": "everyone"}, {"gradient_clip": 1.0}, "scope"),
        ({"mechanism": "laplace", "epsilon": 1.0, "sigma": 2}, {"gradient_clip": 1.0}, "unknown"),
    ],
)
def test_private_process_needs_clipping_and_a_sound_accounting(org1, uid, budget, hyper, match):
    img = org1.register_image(f"i-{uid}", "1", "dpsda", IMAGE_DIGEST)
    with pytest.raises(InvalidArgument, match=match):
        org1.create_process(
            f"p-{uid}",
            img.id,
            ["Org1MSP", "Org2MSP"],
            {"kind": "ring"},
            2,
            hyperparameters=hyper,
            privacy_budget=budget,
        )
    with pytest.raises(NotFound):  # nothing was written
        org1.get_process(f"p-{uid}")
    ok = org1.create_process(
        f"q-{uid}",
        img.id,
        ["Org1MSP", "Org2MSP"],
        {"kind": "ring"},
        2,
        hyperparameters={"gradient_clip": 0.5},
        privacy_budget={"mechanism": "laplace", "epsilon": 1.0, "delta": 1e-5, "scope": "node"},
    )
    assert ok.privacy_budget.json_object() == {
        "mechanism": "laplace",
        "epsilon": 1.0,
        "delta": 1e-5,
        "accounting": "zcdp",
        "scope": "node",
    }
