"""The SQLite audit index on synthetic records: upserts, pagination, artifacts, lineage, atomicity."""

from __future__ import annotations

import hashlib

import pytest

from api.index import AuditIndex, IndexCorrupted, ingest_executions
from audit.lineage import execution_node_id


def d(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def execution(pid: str, rnd: int, org: str, sender: str | None, recipient: str) -> dict:
    inputs = {
        "state": d(f"s-{org}-{rnd - 1}") if rnd > 1 else None,
        "data_commitment": d(f"data-{org}"),
        "messages": [{"sender": sender, "digest": d(f"m-{sender}-{org}-{rnd - 1}")}]
        if sender and rnd > 1
        else [],
    }
    outputs = {
        "state": d(f"s-{org}-{rnd}"),
        "messages": [{"recipient": recipient, "digest": d(f"m-{org}-{recipient}-{rnd}"), "size": 8}],
        "model": None,
    }
    return {
        "process_id": pid,
        "round": rnd,
        "organisation": org,
        "status": "completed",
        "image_digest": d("img"),
        "tx_id": f"tx-{pid}-{rnd}-{org}",
        "completed_tx_id": f"ctx-{pid}-{rnd}-{org}",
        "result": {
            "process_id": pid,
            "round": rnd,
            "organisation": org,
            "inputs": inputs,
            "outputs": outputs,
        },
    }


@pytest.fixture
def index(tmp_path):
    ix = AuditIndex(tmp_path / "ix.db")
    yield ix
    ix.close()


def chain(ix: AuditIndex, pid: str = "p", rounds: int = 4) -> None:
    """A -> B message chain: A sends to B each round, B sends to nobody that matters (C)."""
    recs = []
    for r in range(1, rounds + 1):
        recs.append((execution(pid, r, "A", None, "B"), r))
        recs.append((execution(pid, r, "B", "A", "C"), r))
        recs.append((execution(pid, r, "C", None, "A"), r))
    assert ingest_executions(ix, recs, batch=5) == 3 * rounds
    model = {
        "id": f"{pid}:B",
        "process_id": pid,
        "owner": "B",
        "digest": d("model"),
        "round": rounds,
        "image_digest": d("img"),
        "tx_id": "tx-model",
        "wrapped_key": "secret",
    }
    process = {
        "id": pid,
        "image_id": "i:1",
        "image_digest": d("img"),
        "creator": "A",
        "status": "completed",
        "rounds": rounds,
        "consortium": ["A", "B", "C"],
        "tx_id": "tx-p",
        "current_round": 5,
    }
    with ix.transaction() as t:
        t._put_model(model, 99)
        t._put_process(process, 1)


def test_lineage_follows_inputs_backwards(index):
    chain(index)
    lin = index.lineage("p:B")
    ids = {n["id"] for n in lin["nodes"]}
    # B_r depends on B_{r-1} (state) and A_{r-1} (message); A_r on A_{r-1}; C never feeds B; A_4 comes after
    assert ids == {execution_node_id("p", r, "B") for r in range(1, 5)} | {
        execution_node_id("p", r, "A") for r in range(1, 4)
    }
    assert {"from": "p/3/A", "to": "p/4/B", "kind": "message", "digest": d("m-A-B-3")} in lin["edges"]
    assert {"from": "p/3/B", "to": "p/4/B", "kind": "state", "digest": d("s-B-3")} in lin["edges"]
    assert all(e["kind"] == "data_commitment" for e in lin["external_inputs"])
    # C messages A every round but A reads nothing from it: the rule lists those links as broken
    assert sorted((x["to"], x["peer"], x["kind"]) for x in lin["broken_links"]) == [
        ("p/2/A", "C", "message"),
        ("p/3/A", "C", "message"),
    ]
    assert (
        lin["root"] == "p/4/B" and "wrapped_key" not in lin["model"] and "current_round" not in lin["process"]
    )
    assert index.lineage("nope") is None


def test_upserts_are_idempotent_and_keep_the_latest(index):
    chain(index)
    before = index.counts()
    chain(index)
    assert index.counts() == before
    rec = execution("p", 1, "A", None, "B")
    rec["status"] = "failed"
    ingest_executions(index, [(rec, 500)])
    assert index.execution("p", 1, "A")["status"] == "failed"
    assert index.execution_blocks("p")["p/1/A"] == 500


def test_pagination_and_filters(index):
    chain(index, rounds=5)
    page = index.executions("p", limit=4, offset=0)
    assert page.total == 15 and len(page.items) == 4
    rest = index.executions("p", limit=100, offset=4).items
    assert [(e["round"], e["organisation"]) for e in page.items + rest] == sorted(
        (r, o) for r in range(1, 6) for o in "ABC"
    )
    assert index.executions("p", rnd=2).total == 3 and index.executions("p", organisation="C").total == 5
    with pytest.raises(ValueError):
        index.executions("p", limit=0)
    with pytest.raises(ValueError):
        index.models(offset=-1)


def test_published_and_provenance_of_artifacts(index):
    chain(index, rounds=2)
    by_a = index.published_artifacts("p", "A")
    assert {(a["round"], a["kind"]) for a in by_a} == {
        (1, "state"),
        (1, "message"),
        (2, "state"),
        (2, "message"),
    }
    msg = d("m-A-B-1")
    prov = index.artifact(msg)
    assert [(p["round"], p["organisation"]) for p in prov["produced_by"]] == [(1, "A")]
    assert [(c["round"], c["organisation"]) for c in prov["consumed_by"]] == [(2, "B")]
    assert index.artifact(d("nothing")) == {"produced_by": [], "consumed_by": []}


def test_transactions_are_atomic(index):
    with pytest.raises(RuntimeError):
        with index.transaction() as t:
            t._put_executions([(execution("q", 1, "A", None, "B"), 3)])
            t._set_last_block(3)
            raise RuntimeError("crash in the middle of a block")
    assert index.execution("q", 1, "A") is None and index.last_block == -1


def test_events_filtering(index):
    with index.transaction() as t:
        for b in range(5):
            t._add_event(b, f"tx{b}", "TaskCompleted", "p" if b % 2 else "q", f"execution:{b}", {"b": b})
    assert [e["block"] for e in index.events(process_id="p")] == [1, 3]
    assert [e["block"] for e in index.events(process_id="p", after_block=1)] == [3]
    assert index.events(subject="execution:4")[0]["payload"] == {"b": 4}


def test_a_file_that_is_not_an_index_is_refused(tmp_path):
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"this is not sqlite" * 100)
    bad.chmod(0o600)  # private, as an index must be (tests/home/test_private_home.py)
    with pytest.raises(IndexCorrupted):
        AuditIndex(bad)
    with pytest.raises(ValueError):
        AuditIndex(tmp_path / "x.db", synchronous="SOMETIMES")


def test_an_index_of_another_schema_version_is_rebuilt(tmp_path):
    ix = AuditIndex(tmp_path / "ix.db")
    chain(ix, rounds=2)
    with ix.transaction() as t:
        t._set_last_block(42)
        t._con.execute("UPDATE meta SET value = 'old' WHERE key = 'schema'")
    ix.close()
    again = AuditIndex(tmp_path / "ix.db")
    assert again.last_block == -1 and again.counts()["executions"] == 0  # the next sync starts at block 0
    again.close()
    kept = AuditIndex(tmp_path / "ix.db")
    with kept.transaction() as t:
        t._set_last_block(7)
    kept.close()
    assert AuditIndex(tmp_path / "ix.db").last_block == 7  # same version: kept
