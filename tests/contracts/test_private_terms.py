"""A process's private terms (docs/confidentiality.md): its hyper-parameters, privacy budget and description go into
its members' implicit collections, and the public record carries their salted SHA-256. On both hosts:
a two-member process (Org1, Org2) in the three-organisation channel; the members read the values, Org3
is refused, and neither the chain nor Org3's private store or peer folder holds them in clear (Org1's
does: the positive control)."""

from __future__ import annotations

import base64
import json
import sqlite3
import time
import uuid
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from audit.lineage import check_private_terms
from audit.signatures import check_record_signature
from chaincode.canonical import canonical_json
from chaincode.records import PRIVATE_TERMS, RESULT_CONFIDENTIAL, PrivateTerms
from ledger.client import ConsortiaClient, private_terms_transient, process_transient
from ledger.embedded import EmbeddedLedger
from ledger.embedded.store import private_store_path
from ledger.errors import Forbidden, InvalidArgument, InvalidState, NotFound, PrivateDataMismatch
from ledger.identity import sign
from tests.contracts.helpers import (
    IMAGE_DIGEST,
    complete,
    consent,
    make_result,
    new_process,
    private_metrics,
    public_result,
)
from tests.support.fabric import eventually

MEMBERS = ("Org1MSP", "Org2MSP")


def _distinctive() -> tuple[dict, dict, str, list[bytes]]:
    """Hyper-parameters, a budget and a description (free text naming a client) no other test writes,
    and the clear-text needles to search for."""
    tag = f"tag-{uuid.uuid4()}"
    description = f"churn model for client desc-{uuid.uuid4()}"
    lr = 0.12345678901234567 + uuid.uuid4().int % 10**6 * 1e-13  # a 17-significant-digit float
    epsilon = 7.654321098765432 + uuid.uuid4().int % 10**6 * 1e-12
    hyper = {"lr": lr, "tag": tag, "gradient_clip": 0.5}
    budget = {"mechanism": "laplace", "epsilon": epsilon}
    needles = [tag.encode(), repr(lr).encode(), repr(epsilon).encode(), description.encode()]
    return hyper, budget, description, needles


def _files(paths: list[Path]) -> list[Path]:
    out = []
    for p in paths:
        out += [f for f in p.rglob("*") if f.is_file()] if p.is_dir() else [p]
    return out


def _holding(paths: list[Path], needle: bytes) -> list[str]:
    """The files among ``paths`` (folders searched recursively; SQLite side files included) whose
    bytes contain ``needle``."""
    hits = []
    for p in _files(paths):
        for side in (p, p.with_name(p.name + "-wal"), p.with_name(p.name + "-shm")):
            if side.exists() and side.is_file() and needle in side.read_bytes():
                hits.append(str(side))
    return sorted(set(hits))


def _org_files(host_name: str, ledger, org: int) -> list[Path]:
    """What organisation ``org`` keeps: on the embedded host, the ledger file (blocks and public state)
    and its private store; on Fabric, its peer's folder (block files, state, private data store)."""
    if host_name == "fabric":
        from tests.support.fabric import shared_fabric

        net = shared_fabric().network
        return [net.net / "data" / net.peer_name(org - 1)]
    return [Path(ledger.path), private_store_path(ledger.path, f"Org{org}MSP")]


def test_members_read_the_private_terms_and_nobody_else_holds_them(
    host_name, ledger, org1, org2, org3, admins, uid
):
    hyper, budget, description, needles = _distinctive()
    pid = new_process(
        admins,
        org1,
        uid,
        MEMBERS,
        rounds=1,
        privacy_budget=budget,
        hyperparameters=hyper,
        start=False,
        description=description,
    )
    for member in (org1, org2):
        read = eventually(lambda member=member: member.get_process(pid))
        assert read.hyperparameters == hyper and read.description == description
        assert read.privacy_budget is not None and read.privacy_budget.epsilon == budget["epsilon"]
        assert read.private_sha256 == read.private_terms().digest()
        listed = next(p for p in member.list_processes() if p.id == pid)
        assert listed.hyperparameters == hyper
    assert org1.get_process(pid).terms_digest() == eventually(lambda: org2.get_process(pid)).terms_digest()
    with pytest.raises(Forbidden):
        org3.get_process(pid)
    # the public record (what every organisation's blocks and history carry): the hash, no value
    public = org1.process_history(pid)[-1].value
    text = json.dumps(public)
    assert "hyperparameters" not in public and "privacy_budget" not in public and "description" not in public
    assert public["private_sha256"] == org1.get_process(pid).private_sha256
    assert all(n.decode() not in text for n in needles)
    # acceptance binds the terms through the hash; the process starts and a round is charged
    consent(admins, pid, MEMBERS)
    org1.start_process(pid)
    key = ec.generate_private_key(ec.SECP256R1())
    org1.create_task(pid, 1, key.public_key(), "sandbox")
    result = make_result(pid, 1, "Org1MSP", metrics=private_metrics(0.5))
    complete(org1, key, result)
    assert org1.get_execution(pid, 1, "Org1MSP").privacy is not None  # charged against the private budget
    # the bytes: Org3 holds no clear-text value anywhere; Org1's store or peer does
    if host_name == "embedded":
        ledger.close()  # the WAL is checkpointed: every byte is in the files searched
    org3_files, org1_files = _org_files(host_name, ledger, 3), _org_files(host_name, ledger, 1)
    for needle in needles:
        assert _holding(org3_files, needle) == [], needle
        assert _holding(org1_files, needle), needle  # the positive control


def test_private_terms_in_the_arguments_are_refused(org1, uid):
    org1.register_image(f"img-{uid}", "1", "collab-rf", IMAGE_DIGEST)
    spec = {
        "id": f"args-{uid}",
        "image_id": f"img-{uid}:1",
        "consortium": list(MEMBERS),
        "topology": {"kind": "ring"},
        "rounds": 1,
    }
    for named in ({"hyperparameters": {"lr": 0.1}}, {"description": "for client X"}):
        with pytest.raises(
            InvalidArgument, match=f"names \\['{next(iter(named))}'\\].*go in the transient map"
        ):
            org1.ledger.submit(
                org1.identity,
                "LearningProcess:create",
                json.dumps({**spec, **named}),
                transient=private_terms_transient({}, None),
            )
    with pytest.raises(InvalidArgument, match="none was given"):
        org1.ledger.submit(org1.identity, "LearningProcess:create", json.dumps(spec))
    with pytest.raises(InvalidArgument, match="salt"):
        org1.ledger.submit(
            org1.identity,
            "LearningProcess:create",
            json.dumps(spec),
            transient={PRIVATE_TERMS: canonical_json({"hyperparameters": {}, "salt": "short"})},
        )
    with pytest.raises(NotFound):
        org1.get_process(f"args-{uid}")


def test_complete_task_refuses_private_terms_that_do_not_match_the_hash(org1, admins, uid):
    budget = {"mechanism": "laplace", "epsilon": 4.0}
    pid = new_process(
        admins, org1, uid, MEMBERS, rounds=1, privacy_budget=budget, hyperparameters={"gradient_clip": 1.0}
    )
    key = ec.generate_private_key(ec.SECP256R1())
    org1.create_task(pid, 1, key.public_key(), "sandbox")
    public, part = public_result(make_result(pid, 1, "Org1MSP", metrics=private_metrics(0.5)))
    raw, sig = canonical_json(public).decode(), base64.b64encode(sign(key, canonical_json(public))).decode()
    confidential = {RESULT_CONFIDENTIAL: part.canonical()}
    mine = org1.get_process(pid).private_terms()
    looser = mine.replace(privacy_budget=mine.privacy_budget.replace(epsilon=400.0))  # a bigger budget
    for terms in (looser, mine.replace(salt="0" * 64)):
        with pytest.raises(
            PrivateDataMismatch, match=f"learning process {pid} do not match the on-chain hash"
        ):
            org1.ledger.submit(
                org1.identity,
                "ExecutionRecord:complete_task",
                raw,
                sig,
                transient={PRIVATE_TERMS: terms.canonical(), **confidential},
                endorsing_organisations=list(MEMBERS),
            )
    with pytest.raises(InvalidArgument, match="transient map"):
        org1.ledger.submit(org1.identity, "ExecutionRecord:complete_task", raw, sig, transient=confidential)
    assert org1.get_execution(pid, 1, "Org1MSP").status == "running"
    transient = {**(process_transient(org1.get_process(pid)) or {}), **confidential}
    org1.ledger.submit(
        org1.identity,
        "ExecutionRecord:complete_task",
        raw,
        sig,
        transient=transient,
        endorsing_organisations=list(MEMBERS),
    )
    assert org1.get_execution(pid, 1, "Org1MSP").status == "completed"


def test_a_private_copy_altered_in_a_members_store_is_detected(embedded_consortium, tmp_path, uid):
    """Embedded host: Org2's stored copy is rewritten in its private store; its read names the process
    and the hash, while Org1's copy still reads."""
    with EmbeddedLedger(tmp_path / "l.db", embedded_consortium, batch_timeout=0.002) as led:
        org1, org2 = (ConsortiaClient(led, embedded_consortium.identity(o)) for o in ("Org1", "Org2"))
        admins = {m: ConsortiaClient(led, embedded_consortium.identity(m[:-3], "Admin")) for m in MEMBERS}
        pid = new_process(admins, org1, uid, MEMBERS, rounds=1, hyperparameters={"lr": 0.05}, start=False)
        store = sqlite3.connect(private_store_path(led.path, "Org2MSP"))
        try:
            (value,) = store.execute("SELECT value FROM private_writes").fetchone()
            altered = PrivateTerms.from_json(value).replace(hyperparameters={"lr": 0.5})
            assert store.execute("UPDATE private_writes SET value = ?", (altered.canonical(),)).rowcount == 1
            store.commit()
        finally:
            store.close()
        with pytest.raises(
            PrivateDataMismatch,
            match=f"private copy of learning process {pid} .* does not match the on-chain hash",
        ):
            org2.get_process(pid)
        assert org1.get_process(pid).hyperparameters == {"lr": 0.05}


def test_members_purge_a_finished_process_private_terms_and_the_hash_stays(
    host_name, ledger, org1, org2, org3, admins, uid
):
    hyper, budget, description, needles = _distinctive()
    pid = new_process(
        admins,
        org1,
        uid,
        MEMBERS,
        rounds=1,
        privacy_budget=budget,
        hyperparameters=hyper,
        start=False,
        description=description,
    )
    digest = eventually(lambda: org2.get_process(pid)).private_sha256
    # a round completed with a confidential result: its private part is purged with the terms
    consent(admins, pid, MEMBERS)
    org1.start_process(pid)
    key = ec.generate_private_key(ec.SECP256R1())
    org1.create_task(pid, 1, key.public_key(), "sandbox")
    metric = 0.3141592653589793 + uuid.uuid4().int % 10**6 * 1e-13
    complete(org1, key, make_result(pid, 1, "Org1MSP", metrics=private_metrics(0.5, loss=metric)))
    needles.append(repr(metric).encode())
    record_digest = eventually(lambda: org2.get_execution(pid, 1, "Org1MSP")).private_sha256
    assert record_digest is not None
    with pytest.raises(InvalidState, match="purged only once it is completed"):
        org1.purge_process_private(pid)
    org1.abort_process(pid, "retention test")
    with pytest.raises(Forbidden):
        org3.ledger.submit(org3.identity, "LearningProcess:purge_private", pid)
    purged = org2.purge_process_private(pid)
    assert purged.private_purged is not None and purged.private_sha256 == digest
    for member in (org1, org2):
        read = eventually(lambda member=member: member.get_process(pid))
        while read.private_purged is None:  # Org1's peer commits the purge a moment later on Fabric
            time.sleep(0.5)
            read = member.get_process(pid)
        assert read.private_sha256 == digest and read.hyperparameters == {} and read.privacy_budget is None
        assert check_private_terms(read.to_dict()).startswith(
            f"purged on {read.private_purged}, hash-attested"
        )
        record = eventually(lambda member=member: member.get_execution(pid, 1, "Org1MSP"))
        assert record.private_purged == read.private_purged and record.private_sha256 == record_digest
        assert record.result is not None and record.result.metrics == {} and record.confidential_salt is None
        check_record_signature(record)  # the public form still verifies
        assert [r.private_purged for r in member.query_executions(pid)] == [read.private_purged]
    with pytest.raises(InvalidState, match="purged already"):
        org1.purge_process_private(pid)
    if host_name == "embedded":  # the stores keep no copy (SQLite's secure_delete; the WAL checkpointed)
        ledger.close()
        for org in (1, 2):
            for needle in needles:
                assert _holding([private_store_path(ledger.path, f"Org{org}MSP")], needle) == [], needle
