"""Building the index from ledger events: visibility per organisation, resumable after a crash."""

from __future__ import annotations

import time

import pytest

import api.follower as follower
from api.follower import IndexFollower, sync
from api.index import AuditIndex
from tests.api.world import ring_process


def rows(ix: AuditIndex) -> dict:
    q = lambda sql: sorted(ix._q(sql))  # noqa: E731
    return {
        "executions": q("SELECT process_id, round, organisation, record FROM executions"),
        "artifacts": q("SELECT * FROM artifacts"),
        "models": q("SELECT id, record FROM models"),
        "processes": q("SELECT id, record FROM processes"),
        "events": q("SELECT block, tx_id, name, subject, payload FROM events"),
    }


def test_member_sees_everything_outsider_only_public_records(world, tmp_path):
    ix1 = AuditIndex(tmp_path / "org1.db")
    ix4 = AuditIndex(tmp_path / "org4.db")
    sync(ix1, world.clients["Org1MSP"])
    sync(ix4, world.clients["Org4MSP"])
    c1, c4 = ix1.counts(), ix4.counts()
    assert c1["executions"] == 9 and c1["models"] == 3 and c1["processes"] >= 1
    assert c4["executions"] == 0 and c4["models"] == 0 and c4["processes"] == 0
    assert c4["images"] == c1["images"] >= 1  # images are public to the channel
    assert ix4.events(process_id="proc-0") == []
    assert (
        ix1.last_block == ix4.last_block == world.ledger.block_height(world.clients["Org1MSP"].identity) - 1
    )


def test_resumes_after_a_crash_without_duplicates(world, tmp_path, monkeypatch):
    client = world.clients["Org2MSP"]
    reference = AuditIndex(tmp_path / "ref.db")
    sync(reference, client)
    crashed = AuditIndex(tmp_path / "crashed.db")
    applied = {"n": 0}
    real_apply = follower._apply

    def dying_apply(index, block, items):
        if applied["n"] == 7:
            raise KeyboardInterrupt("killed")
        applied["n"] += 1
        real_apply(index, block, items)

    monkeypatch.setattr(follower, "_apply", dying_apply)
    with pytest.raises(KeyboardInterrupt):
        sync(crashed, client)
    partial = crashed.last_block
    assert 0 <= partial < reference.last_block
    monkeypatch.setattr(follower, "_apply", real_apply)
    sync(crashed, client)
    assert crashed.last_block == reference.last_block
    assert rows(crashed) == rows(reference)
    assert sync(crashed, client) == 0


def test_follower_thread_indexes_new_processes(world, tmp_path):
    ix = AuditIndex(tmp_path / "live.db")
    f = IndexFollower(ix, world.clients["Org3MSP"], interval=0.05).start()
    try:
        ring_process(world, "proc-follow", rounds=2, publish=False)
        deadline = time.time() + 20
        done = lambda: (
            ix.executions("proc-follow").total == 6  # noqa: E731
            and (ix.process("proc-follow") or {}).get("status") == "completed"
        )
        while time.time() < deadline and not done():
            time.sleep(0.05)
        assert ix.executions("proc-follow").total == 6
        assert ix.process("proc-follow")["status"] == "completed"
        assert f.last_error == ""
    finally:
        f.stop()
    with pytest.raises(ValueError):
        IndexFollower(ix, world.clients["Org3MSP"], interval=0)


def test_an_altered_private_copy_is_not_indexed_and_following_goes_on(tmp_path):
    """Org1's copy of a process's private terms is rewritten in its private store: the follower does not
    index a record it cannot vouch for (the read names the mismatch), and indexes the rest of the
    chain: the process's execution records and every later block."""
    import sqlite3

    from ledger.embedded.store import private_store_path
    from tests.api.world import build_world

    w = build_world(tmp_path / "w", processes=0)
    try:
        ring_process(w, "proc-altered", rounds=1, publish=False)
        store = sqlite3.connect(private_store_path(w.ledger.path, "Org1MSP"))
        try:
            changed = store.execute(
                "UPDATE private_writes SET value = CAST(REPLACE(CAST(value AS TEXT), '\"salt\"', "
                '\'"extra":1,"salt"\') AS BLOB) '
                # the process's private terms only (the execution records' copies have a salt too)
                "WHERE CAST(value AS TEXT) LIKE '%\"hyperparameters\"%'"
            ).rowcount
            store.commit()
        finally:
            store.close()
        assert changed >= 1
        ix = AuditIndex(tmp_path / "org1.db")
        sync(ix, w.clients["Org1MSP"])
        assert ix.process("proc-altered") is None
        assert ix.executions("proc-altered").total == 3
        assert ix.last_block == w.ledger.block_height(w.clients["Org1MSP"].identity) - 1
    finally:
        w.ledger.close()
