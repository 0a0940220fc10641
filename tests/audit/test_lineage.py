"""audit.lineage: the one lineage rule -- each input linked to the execution of the round before
whose signed output has that digest -- and the checks of a lineage's records.

The rule replaces two walks: the node's (by (organisation, round-1), with an exact inbox) and the
gateway's (by (digest, latest earlier round)). It keeps both strengths: a replayed *older* output
(which the gateway's walk linked to its older producer and accepted) and an unread message (which only
the node's walk caught) are broken links everywhere now."""

from __future__ import annotations

import copy
import hashlib

import pytest

from audit.lineage import (
    Lineage,
    check_execution,
    check_lineage,
    check_lineage_complete,
    check_links,
    check_model,
    execution_node_id,
    node_round,
    record_lineage,
)
from audit.report import Report


def d(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def ring_lineage(executions: list[dict], owner: str = "Org2MSP", rnd: int = 3) -> Lineage:
    return record_lineage("proc-0", executions, owner, rnd)


def find(executions: list[dict], rnd: int, org: str) -> dict:
    return next(e for e in executions if e["round"] == rnd and e["organisation"] == org)


def broken_details(executions: list[dict]) -> str:
    with pytest.raises(ValueError, match="broken link") as err:
        check_links(executions)
    return str(err.value)


# ------------------------------------------------------------------------------- the rule


def test_the_lineage_of_a_ring_model(ledger_view):
    _, executions, _, _ = ledger_view
    lin = ring_lineage(executions)
    # ring Org1 -> Org2 -> Org3 -> Org1: Org2's round-3 model descends from its own rounds, Org1's
    # rounds 1-2 (messages to Org2) and Org3's round 1 (its message to Org1 in round 1)
    assert set(lin.nodes) == {
        "proc-0/3/Org2MSP",
        "proc-0/2/Org2MSP",
        "proc-0/1/Org2MSP",
        "proc-0/2/Org1MSP",
        "proc-0/1/Org1MSP",
        "proc-0/1/Org3MSP",
    }
    assert lin.root == "proc-0/3/Org2MSP" and lin.nodes[0] == lin.root and lin.broken == []
    assert all(node_round(e["from"]) == node_round(e["to"]) - 1 for e in lin.edges)
    assert {e["kind"] for e in lin.edges} == {"state", "message"}
    assert {x["kind"] for x in lin.external} == {"data_commitment"} and len(lin.external) == 6
    assert check_links(executions) == "9 executions, 12 links to the round before verified"


def repeating(rounds: int = 5, unchanged: frozenset[int] = frozenset({3, 4})) -> list[dict]:
    """Two organisations messaging each other; in ``unchanged`` rounds state and messages repeat the
    round before's digests (collaborative RF's SHARE rounds)."""
    out, state, inbox = [], {"A": None, "B": None}, {"A": [], "B": []}
    for r in range(1, rounds + 1):
        base = r
        while base in unchanged and base > 1:
            base -= 1
        sent = {}
        for org, peer in (("A", "B"), ("B", "A")):
            new = d(f"s-{org}-{base}")
            msg = d(f"m-{org}-{base}")
            out.append(
                {
                    "process_id": "p",
                    "round": r,
                    "organisation": org,
                    "result": {
                        "inputs": {"state": state[org], "messages": inbox[org], "data_commitment": d(org)},
                        "outputs": {"state": new, "messages": [{"recipient": peer, "digest": msg}]},
                    },
                }
            )
            state[org] = new
            sent[peer] = [{"sender": org, "digest": msg}]
        inbox = sent
    return out


def test_repeated_digests_are_linked_by_their_round():
    execs = repeating()
    assert (
        find(execs, 4, "A")["result"]["inputs"]["state"] == find(execs, 2, "A")["result"]["outputs"]["state"]
    )
    lin = record_lineage("p", execs, "A", 5)
    assert set(lin.nodes) == {
        execution_node_id("p", r, o) for r in range(1, 6) for o in "AB" if (r, o) != (5, "B")
    }
    assert lin.broken == [] and all(node_round(e["from"]) == node_round(e["to"]) - 1 for e in lin.edges)
    # round 4 read the state round 3 output again: linked to round 3, not to round 2 (same digest)
    into4 = [e for e in lin.edges if e["to"] == "p/4/A" and e["kind"] == "state"]
    assert [e["from"] for e in into4] == ["p/3/A"]
    assert check_links(execs).startswith("10 executions")


def test_a_replayed_older_state_is_a_broken_link(ledger_view):
    """Stronger than the retired gateway walk: round 3 reading the state Org2 output in round 1 (a
    real earlier output, so that walk linked it to round 1) is not what round 2 signed."""
    _, executions, _, _ = ledger_view
    replayed = copy.deepcopy(executions)
    r1 = find(replayed, 1, "Org2MSP")["result"]["outputs"]["state"]
    find(replayed, 3, "Org2MSP")["result"]["inputs"]["state"] = r1
    assert "proc-0/3/Org2MSP read previous state" in broken_details(replayed)
    assert "which Org2MSP did not output in round 2" in broken_details(replayed)
    lin = ring_lineage(replayed)
    assert [b["to"] for b in lin.broken] == ["proc-0/3/Org2MSP"]
    assert "proc-0/1/Org2MSP" not in [e["from"] for e in lin.edges if e["to"] == "proc-0/3/Org2MSP"]


def test_a_replayed_older_message_is_a_broken_link(ledger_view):
    _, executions, _, _ = ledger_view
    replayed = copy.deepcopy(executions)
    old = find(replayed, 1, "Org1MSP")["result"]["outputs"]["messages"][0]["digest"]  # Org1 -> Org2, round 1
    find(replayed, 3, "Org2MSP")["result"]["inputs"]["messages"][0]["digest"] = old
    details = broken_details(replayed)
    assert "read message from Org1MSP" in details and "did not output in round 2" in details
    # ... and the message Org1 did send it in round 2 is now unread
    assert "did not read the message" in details


def test_a_message_never_sent_or_a_state_never_produced(ledger_view):
    _, executions, _, _ = ledger_view
    never = copy.deepcopy(executions)
    find(never, 3, "Org1MSP")["result"]["inputs"]["messages"][0]["digest"] = "sha256:" + "1" * 64
    assert "read message from Org3MSP sha256:" + "1" * 64 in broken_details(never)
    stale = copy.deepcopy(executions)
    find(stale, 2, "Org1MSP")["result"]["inputs"]["state"] = "sha256:" + "2" * 64
    assert "proc-0/2/Org1MSP read previous state" in broken_details(stale)


def test_an_unread_message_is_a_broken_link(ledger_view):
    """The node's inbox rule: a round reads every message addressed to it in the round before."""
    _, executions, _, _ = ledger_view
    unread = copy.deepcopy(executions)
    find(unread, 2, "Org3MSP")["result"]["inputs"]["messages"] = []
    details = broken_details(unread)
    assert "proc-0/2/Org3MSP did not read the message" in details and "Org2MSP sent it in round 1" in details


def test_round_one_starts_from_nothing_and_later_rounds_from_a_state(ledger_view):
    _, executions, _, _ = ledger_view
    first = copy.deepcopy(executions)
    find(first, 1, "Org3MSP")["result"]["inputs"]["state"] = find(first, 1, "Org1MSP")["result"]["outputs"][
        "state"
    ]
    assert "(round 1 starts from no input)" in broken_details(first)
    stateless = copy.deepcopy(executions)
    find(stateless, 2, "Org3MSP")["result"]["inputs"]["state"] = None
    assert "proc-0/2/Org3MSP read no previous state" in broken_details(stateless)
    with pytest.raises(ValueError, match="no completed execution"):
        check_links([dict(e, result=None) for e in executions])


# ------------------------------------------------------------------------------- the records


def test_check_execution_refusals(ledger_view):
    process, executions, _, _ = ledger_view
    e = executions[0]
    assert check_execution(e, process).endswith("task signature and pinned image verified")
    bad = copy.deepcopy(e)
    bad["result"]["metrics"]["loss"] = 42.0
    with pytest.raises(ValueError, match="task signature"):
        check_execution(bad, process)
    with pytest.raises(ValueError, match="pins"):
        check_execution(e, dict(process, image_digest="sha256:" + "0" * 64))
    with pytest.raises(ValueError, match="pins"):
        check_execution(dict(e, image_digest="sha256:" + "0" * 64), process)
    with pytest.raises(ValueError, match="not completed"):
        check_execution(dict(e, status="running"), process)
    with pytest.raises(ValueError, match="result.runtime"):
        check_execution(dict(e, runtime="container"), process)
    with pytest.raises(ValueError, match="result.organisation"):
        check_execution(
            dict(e, organisation="Org3MSP" if e["organisation"] != "Org3MSP" else "Org1MSP"), process
        )
    with pytest.raises(ValueError, match="not of process"):
        check_execution(e, dict(process, id="other"))


def test_check_model(ledger_view):
    process, executions, model, image = ledger_view
    assert (
        check_model(model, process, executions, image)
        == f"model {model['digest']} produced by Org2MSP in round 3"
    )
    with pytest.raises(ValueError, match="is not the digest"):
        check_model(dict(model, digest="sha256:" + "3" * 64), process, executions)
    with pytest.raises(ValueError, match="no completed last-round"):
        check_model(model, process, [e for e in executions if e["round"] < 3])
    with pytest.raises(ValueError, match="estimator list differs"):
        check_model(dict(model, estimators=model["estimators"][:1]), process, executions)
    with pytest.raises(ValueError, match="names round 2"):
        check_model(dict(model, round=2), process, executions)
    with pytest.raises(ValueError, match="the process pins"):
        check_model(dict(model, image_digest="sha256:" + "4" * 64), process, executions)
    with pytest.raises(ValueError, match="the process pinned"):
        check_model(model, process, executions, dict(image, digest="sha256:" + "5" * 64))
    with pytest.raises(ValueError, match="belongs to"):
        check_model(model, dict(process, id="other"), executions)


def test_check_lineage_complete(ledger_view):
    _, executions, _, _ = ledger_view
    lin = ring_lineage(executions)
    by_node = {execution_node_id(e["process_id"], e["round"], e["organisation"]): e for e in executions}
    assert check_lineage_complete(lin, by_node) == "6 executions, each organisation back to round 1"
    assert check_lineage_complete(lin, by_node, set(lin.nodes))
    with pytest.raises(ValueError, match="not completed records: \\['proc-0/2/Org1MSP'\\]"):
        check_lineage_complete(lin, {k: v for k, v in by_node.items() if k != "proc-0/2/Org1MSP"})
    with pytest.raises(ValueError, match="stops before round 1 for Org1MSP \\(round 2\\)"):
        check_lineage_complete(Lineage(lin.root, [n for n in lin.nodes if n != "proc-0/1/Org1MSP"]), by_node)
    with pytest.raises(ValueError, match="missing \\['proc-0/1/Org3MSP'\\], extra \\['proc-0/3/Org3MSP'\\]"):
        check_lineage_complete(lin, by_node, set(lin.nodes) - {"proc-0/1/Org3MSP"} | {"proc-0/3/Org3MSP"})
    with pytest.raises(ValueError, match="the lineage is empty"):
        check_lineage_complete(Lineage("x"), by_node)


def test_check_lineage_adds_the_shared_checks(ledger_view):
    process, executions, model, image = ledger_view
    report = Report("model")
    lin = check_lineage(report, model, process, image, executions)
    assert report.ok and len(lin.nodes) == 6
    assert [(c.kind, c.subject) for c in report.checks] == [
        ("lineage", "lineage complete"),
        ("chain", "lineage links"),
        ("model", "model"),
        ("process", "private terms"),
    ]
    # the process's private terms, carried by a member's read, must hash to the chain's private_sha256
    assert "carried, matching the on-chain hash" in report.checks[-1].detail
    report = Report("model")
    check_lineage(report, model, {**process, "hyperparameters": {"n_new": 99}}, image, executions)
    assert [c.subject for c in report.failures] == ["private terms"]
    assert "but the chain records sha256:" in report.failures[0].detail
    broken = copy.deepcopy(executions)
    find(broken, 2, "Org2MSP")["result"]["inputs"]["state"] = None
    report = Report("model")
    check_lineage(report, model, process, image, broken)
    # the walk no longer reaches Org2's round 1, and the link check says why
    assert [c.subject for c in report.failures] == ["lineage complete", "lineage links"]
    assert "stops before round 1 for Org2MSP (round 2)" in report.failures[0].detail
    assert "proc-0/2/Org2MSP read no previous state" in report.failures[1].detail
