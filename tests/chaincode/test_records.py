"""The records defined once (:mod:`chaincode.records`): what the contracts store and answer keeps its
canonical JSON byte for byte, and the signed result is validated by its type with errors that name
the key and the rule.

The golden digests were computed by the contracts as they were before the records were typed (they
built and stored dicts): the same transactions -- same creators, transaction ids, times and inputs --
must write the same bytes under the same keys and answer the same bytes. The scenario produces every
record type in every shape it can have (an image active, approved, revoked; a process created,
started, failed, aborted, with and without a privacy budget; an execution record running, completed
with a privacy block and a model, failed with and without a registered task; a model published,
granted, revoked; membership records published once and twice) and every answer type (lists, views
with approvals, a current round, a sealed key, progress, inbox)."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature, encode_dss_signature

from chaincode import dispatch
from chaincode.endorsement import GUARD, PLACEHOLDER
from chaincode.errors import InvalidArgument
from chaincode.records import (
    MODEL_PRIVATE,
    NEXT_MODEL_PRIVATE,
    PREVIOUS_EXECUTION_PRIVATE,
    PRIVATE_TERMS,
    RESULT_CONFIDENTIAL,
    ExecutionRecord,
    ModelPrivate,
    ProcessRecord,
    split_result,
)
from chaincode.stub import KeyValue, create_composite_key, implicit_collection
from ledger.client import private_terms_transient
from ledger.identity import Consortium
from wire.canonical import canonical_json

P256_ORDER = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551


GUARD_PREFIX = create_composite_key(GUARD, [])


class DictStub:
    """A world state in a dict; one transaction at a time, its writes applied when it succeeds."""

    def __init__(self) -> None:
        self.state: dict[str, bytes] = {}
        self.private: dict[tuple[str, str], bytes] = {}  # (implicit collection, key) -> value
        self.policies: dict[str, bytes] = {}  # key-level policies (not part of the compared digests)
        self.begin(b"", "", 0.0)

    def begin(
        self,
        creator: bytes,
        tx_id: str,
        timestamp: float,
        msp_id: str = "",
        transient: dict[str, bytes] | None = None,
    ) -> None:
        self.creator, self.tx_id, self.timestamp = creator, tx_id, timestamp
        self.msp_id, self.transient = msp_id, dict(transient or {})
        self.writes: dict[str, bytes | None] = {}
        self.private_writes: dict[tuple[str, str], bytes | None] = {}
        self.event: tuple[str, bytes] | None = None

    def commit(self) -> None:
        for k, v in self.writes.items():
            if v is None:
                self.state.pop(k, None)
            else:
                self.state[k] = v
        for ck, pv in self.private_writes.items():
            if pv is None:
                self.private.pop(ck, None)
            else:
                self.private[ck] = pv

    def get_msp_id(self) -> str:
        return self.msp_id

    def get_transient(self) -> dict[str, bytes]:
        return dict(self.transient)

    def get_private_data(self, collection: str, key: str) -> bytes | None:
        assert collection == implicit_collection(self.msp_id), "a peer reads its own organisation's copy"
        return self.private.get((collection, key))

    def put_private_data(self, collection: str, key: str, value: bytes) -> None:
        self.private_writes[(collection, key)] = bytes(value)

    def del_private_data(self, collection: str, key: str) -> None:
        self.private_writes[(collection, key)] = None

    def get_creator(self) -> bytes:
        return self.creator

    def get_tx_id(self) -> str:
        return self.tx_id

    def get_tx_timestamp(self) -> float:
        return self.timestamp

    def get_state(self, key: str) -> bytes | None:
        return self.state.get(key)

    def put_state(self, key: str, value: bytes) -> None:
        self.writes[key] = bytes(value)

    def del_state(self, key: str) -> None:
        self.writes[key] = None

    def set_state_validation_parameter(self, key: str, policy: bytes) -> None:
        self.policies[key] = bytes(policy)

    def get_state_validation_parameter(self, key: str) -> bytes | None:
        return self.policies.get(key)

    def get_state_by_partial_composite_key(self, object_type: str, attributes: list[str]):
        prefix = create_composite_key(object_type, attributes)
        return [KeyValue(k, v) for k, v in sorted(self.state.items()) if k.startswith(prefix)]

    def set_event(self, name: str, payload: bytes) -> None:
        self.event = (name, payload)


def _digest(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def _task_key(n: int) -> ec.EllipticCurvePrivateKey:
    return ec.derive_private_key(1_000_003 * n + 7, ec.SECP256R1())


def _sign(key: ec.EllipticCurvePrivateKey, data: bytes) -> str:
    """A deterministic (RFC 6979) low-S signature, base64 DER."""
    r, s = decode_dss_signature(key.sign(data, ec.ECDSA(hashes.SHA256(), deterministic_signing=True)))
    return base64.b64encode(encode_dss_signature(r, min(s, P256_ORDER - s))).decode()


def _pem(key: ec.EllipticCurvePrivateKey) -> str:
    return (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )


def _result(pid: str, rnd: int, org: str, peers: list[str], *, model: str | None = None, **metrics) -> dict:
    return {
        "process_id": pid,
        "round": rnd,
        "organisation": org,
        "image_digest": _digest("image a"),
        "runtime": "sandbox",
        "inputs": {
            "state": _digest(f"state {org} {rnd - 1}") if rnd > 1 else None,
            "messages": [{"sender": p, "digest": _digest(f"m {p} {org} {rnd - 1}")} for p in peers]
            if rnd > 1
            else [],
            "data_commitment": _digest(f"data {org}"),
        },
        "outputs": {
            "state": _digest(f"state {org} {rnd}"),
            "messages": [
                {
                    "recipient": p,
                    "digest": _digest(f"m {org} {p} {rnd}"),
                    "size": 100 + rnd,
                    "estimators": [[org, rnd, _digest(f"e {org} {rnd}")]],
                }
                for p in peers
            ],
            **({} if model is None else {"model": {"digest": model, "size": 4321, "estimators": [[org, 1]]}}),
        },
        "metrics": {"loss": 0.25, "n_samples": 1000, "auc": 1, **metrics},
        "started": "2026-01-01T00:00:00.000001Z",
        "finished": "2026-01-01T00:00:02.500000Z",
    }


def _privacy(eps: float, **extra) -> dict:
    return {
        "privacy_rigorous": 1,
        "epsilon_spent": eps,
        "epsilon_network_spent": 2 * eps,
        "rho_spent": eps * eps / 2,
        "rho_network_spent": eps * eps,
        **extra,
    }


def scenario(crypto_dir: Path) -> dict[str, str]:
    """Run the transactions in order; per transaction the sha256 of its answer, its writes (key and
    value, or deletion) and its event."""
    cons = Consortium.generate(crypto_dir, ["Org1", "Org2", "Org3"])
    creators = {o: cons.identity(o).serialized() for o in ("Org1", "Org2", "Org3")}
    creators |= {f"{o} admin": cons.identity(o, "Admin").serialized() for o in ("Org1", "Org2", "Org3")}
    stub = DictStub()
    out: dict[str, str] = {}
    n = 0

    def org_msp(org: str) -> str:
        return f"{org.split()[0]}MSP"

    def tx(
        name: str, org: str, function: str, *args: str, transient: dict[str, bytes] | None = None
    ) -> bytes:
        nonlocal n
        n += 1
        stub.begin(creators[org], f"tx{n:04d}", 1_800_000_000.0 + n * 1.25, org_msp(org), transient)
        answer = dispatch.invoke(stub, function, list(args))
        stub.commit()
        h = hashlib.sha256(answer)
        for k, v in sorted(stub.writes.items()):
            if k.startswith(GUARD_PREFIX) or v == PLACEHOLDER:  # the guard and placeholders are no records
                continue  # (chaincode/endorsement.py)
            h.update(b"\x01" + k.encode() + b"\x02" + (b"<deleted>" if v is None else v))
        for (c, k), v in sorted(stub.private_writes.items()):
            h.update(
                b"\x05" + c.encode() + b"\x06" + k.encode() + b"\x02" + (b"<deleted>" if v is None else v)
            )
        if stub.event is not None:
            h.update(b"\x03" + stub.event[0].encode() + b"\x04" + stub.event[1])
        out[name] = h.hexdigest()
        return answer

    def consent(org: str, function: str, *args: str) -> None:
        """A consent transaction (issue 33) between the recorded ones: its own tx ids and times, so the
        recorded transactions keep theirs; its writes count in the world state."""
        nonlocal n
        stub.begin(
            creators[f"{org} admin"],
            f"consent{n:04d}{function}{org}",
            1_800_000_000.0 + n * 1.25 + 0.5,
            org_msp(org),
        )
        dispatch.invoke(stub, function, list(args))
        stub.commit()

    j = json.dumps
    members = ["Org1MSP", "Org2MSP"]
    # images: registered (with and without an id and a description), approved, revoked
    tx(
        "image a",
        "Org1",
        "Image:register",
        j(
            {
                "name": "a",
                "version": "1.0",
                "algorithm": "collab-rf",
                "digest": _digest("image a"),
                "reference": "registry/a:1.0",
                "description": "forest",
            }
        ),
    )
    tx(
        "image b",
        "Org1",
        "Image:register",
        j({"id": "b-custom", "name": "b", "version": "2", "algorithm": "x:Y", "digest": _digest("image b")}),
    )
    tx("approve a", "Org2 admin", "Image:approve", "a:1.0", _digest("image a"))
    consent("Org3", "Image:approve", "a:1.0", _digest("image a"))
    tx("revoke b", "Org1", "Image:revoke", "b-custom", "superseded")
    tx("get a", "Org3", "Image:get", "a:1.0")
    tx("list images", "Org3", "Image:list")
    # processes: with a zCDP budget (δ), with a basic one, without; started, failed, aborted
    hyper = {"gradient_clip": 0.5, "n_new": 5, "nested": {"lr": 0.1, "layers": [64, 32]}}
    budget = {"mechanism": "gaussian", "epsilon": 4, "delta": 1e-5}
    tx(
        "create p",
        "Org1",
        "LearningProcess:create",
        j(
            {
                "id": "p",
                "image_id": "a:1.0",
                "image_digest": _digest("image a"),
                "consortium": members,
                "topology": {"kind": "ring", "extra": [1, 2]},
                "rounds": 2,
                "dataset": "adult",
            }
        ),
        transient=private_terms_transient(hyper, budget, salt="a1" * 32, description="two rounds"),
    )
    tx(
        "create q",
        "Org2",
        "LearningProcess:create",
        j(
            {
                "id": "q",
                "image_id": "a:1.0",
                "consortium": ["Org2MSP", "Org3MSP", "Org1MSP"],
                "topology": {"kind": "complete", "seed": 9},
                "rounds": 3,
            }
        ),
        transient=private_terms_transient(
            {"gradient_clip": 1}, {"mechanism": "laplace", "epsilon": 2.5, "scope": "node"}, salt="b2" * 32
        ),
    )
    tx(
        "create r",
        "Org1",
        "LearningProcess:create",
        j(
            {
                "id": "r",
                "image_id": "a:1.0",
                "consortium": members,
                "topology": {"kind": "ring", "seed": 1},
                "rounds": 1,
            }
        ),
        transient=private_terms_transient({}, None, salt="c3" * 32),
    )
    private: dict[str, dict[str, bytes]] = {}  # the transient map a member passes, by process
    for pid, orgs in (("p", ("Org1", "Org2")), ("q", ("Org1", "Org2", "Org3")), ("r", ("Org1", "Org2"))):
        stub.begin(creators["Org1"], f"read {pid}", 1_800_000_000.0 + n * 1.25 + 0.25, "Org1MSP")
        read = ProcessRecord.model_validate(json.loads(dispatch.invoke(stub, "LearningProcess:get", [pid])))
        stub.commit()
        terms_digest = read.terms_digest()
        private[pid] = {PRIVATE_TERMS: read.private_terms().canonical()}
        for org in orgs:
            consent(org, "LearningProcess:accept", pid, terms_digest)

    def complete(name: str, org: str, res: dict, salt: str, previous: bytes | None = None) -> None:
        """``org`` completes its task as the node agent does: the public form signed, the confidential
        part (a fixed salt) and the process's private terms in the transient map."""
        public, part = split_result(res, salt)
        transient = {**private[res["process_id"]], RESULT_CONFIDENTIAL: part.canonical()}
        if previous is not None:
            transient[PREVIOUS_EXECUTION_PRIVATE] = previous
        tx(
            name,
            org,
            "ExecutionRecord:complete_task",
            canonical_json(public).decode(),
            _sign(keys[org], canonical_json(public)),
            transient=transient,
        )

    tx("start p", "Org2", "LearningProcess:start", "p")
    tx("start q", "Org3", "LearningProcess:start", "q")
    tx("start r", "Org1", "LearningProcess:start", "r")
    # round 1 of p: both complete (privacy charged), messages with provenance
    keys = {org: _task_key(i) for i, org in enumerate(("Org1", "Org2", "Org3"), start=1)}
    for org in ("Org1", "Org2"):
        msp = f"{org}MSP"
        peer = [m for m in members if m != msp]
        tx(
            f"task p1 {org}",
            org,
            "ExecutionRecord:create_task",
            j({"process_id": "p", "round": 1, "public_key": _pem(keys[org]), "runtime": "sandbox"}),
        )
        res = _result("p", 1, msp, peer, **_privacy(0.5, sensitivity=2, gradient_clip=0.5))
        complete(f"complete p1 {org}", org, res, f"{n:064x}")
    tx("progress p", "Org1", "LearningProcess:progress", "p")
    tx("get p", "Org2", "LearningProcess:get", "p")
    tx("inbox p1", "Org2", "ExecutionRecord:inbox", "p", "1")
    # round 2 of p: Org1 completes with a model; Org2 registers, then fails
    res = _result("p", 2, "Org1MSP", ["Org2MSP"], model=_digest("model p"), **_privacy(0.25))
    tx(
        "task p2 Org1",
        "Org1",
        "ExecutionRecord:create_task",
        j({"process_id": "p", "round": 2, "public_key": _pem(keys["Org1"]), "runtime": "sandbox"}),
    )
    # the privacy charge continues from Org1's own copy of its round-1 private part (a read between)
    stub.begin(creators["Org1"], "read p1 Org1", 1_800_000_000.0 + n * 1.25 + 0.75, "Org1MSP")
    round1 = json.loads(dispatch.invoke(stub, "ExecutionRecord:get", ["p", "1", "Org1MSP"]))
    stub.commit()
    previous = ExecutionRecord.model_validate(round1).private_part().canonical()
    complete("complete p2 Org1", "Org1", res, f"{n:064x}", previous)
    tx(
        "task p2 Org2",
        "Org2",
        "ExecutionRecord:create_task",
        j({"process_id": "p", "round": 2, "public_key": _pem(keys["Org2"]), "runtime": "sandbox"}),
    )
    tx(
        "fail p2 Org2",
        "Org2",
        "ExecutionRecord:fail_task",
        j(
            {
                "process_id": "p",
                "round": 2,
                "reason": "out of memory",
                "details": {"exit": 137, "log": ["a", "b"]},
            }
        ),
    )
    tx("query p", "Org1", "ExecutionRecord:query", j({"process_id": "p"}))
    tx("get p2", "Org2", "ExecutionRecord:get", "p", "2", "Org1MSP")
    # q: node-scoped basic budget, a failure without a registered task, then aborted by its creator
    res = _result("q", 1, "Org3MSP", ["Org1MSP", "Org2MSP"], **_privacy(1.0))
    tx(
        "task q1 Org3",
        "Org3",
        "ExecutionRecord:create_task",
        j({"process_id": "q", "round": 1, "public_key": _pem(keys["Org3"]), "runtime": "sandbox"}),
    )
    complete("complete q1 Org3", "Org3", res, f"{n:064x}")
    tx(
        "fail q1 Org1",
        "Org1",
        "ExecutionRecord:fail_task",
        j({"process_id": "q", "round": 1, "reason": "image digest mismatch"}),
    )
    tx("abort q", "Org2", "LearningProcess:abort", "q", "")
    tx("fail p", "Org2", "LearningProcess:fail", "p", "a member failed")
    # r: no budget; completed by both with models, then the process completes
    for org in ("Org1", "Org2"):
        msp = f"{org}MSP"
        res = _result("r", 1, msp, [m for m in members if m != msp], model=_digest(f"model r {org}"))
        tx(
            f"task r1 {org}",
            org,
            "ExecutionRecord:create_task",
            j({"process_id": "r", "round": 1, "public_key": _pem(keys[org]), "runtime": "sandbox"}),
        )
        complete(f"complete r1 {org}", org, res, f"{n:064x}")
    tx("complete r", "Org1", "LearningProcess:complete", "r")
    tx("list processes", "Org1", "LearningProcess:list")
    # models: published (p: its last round completed by Org1), granted, revoked with a key rotation
    wrapped = {m: base64.b64encode(bytes([i]) * 80).decode() for i, m in enumerate(members, start=1)}
    # the processes' terms are private, so are their models' size, location, metrics and estimators
    # (docs/confidentiality.md): they travel in the transient map with a fixed salt
    model_p = ModelPrivate(
        size=4321,
        metrics={"auc": 0.9, "n": 3},
        location="store://p",
        estimators=(["Org1MSP", 1, _digest("e")],),
        salt="d4" * 32,
    )
    tx(
        "publish p",
        "Org1",
        "Model:publish",
        j(
            {
                "process_id": "p",
                "digest": _digest("model p"),
                "ciphertext_digest": _digest("ct p"),
                "wrapped_keys": wrapped,
            }
        ),
        transient={MODEL_PRIVATE: model_p.canonical()},
    )
    tx(
        "publish r",
        "Org2",
        "Model:publish",
        j(
            {
                "id": "r-model",
                "process_id": "r",
                "digest": _digest("model r Org2"),
                "ciphertext_digest": _digest("ct r"),
                "wrapped_keys": wrapped,
            }
        ),
        transient={MODEL_PRIVATE: ModelPrivate(size=10, salt="e5" * 32).canonical()},
    )
    tx(
        "grant p",
        "Org1",
        "Model:grant",
        "p:Org1MSP",
        "Org3MSP",
        base64.b64encode(b"\x03" * 80).decode(),
        transient={MODEL_PRIVATE: model_p.canonical()},
    )
    tx("get model p", "Org3", "Model:get", "p:Org1MSP")
    rotation = {
        "ciphertext_digest": _digest("ct p 2"),
        "wrapped_keys": {m: base64.b64encode(b"\x09" * 64).decode() for m in members},
    }
    moved = model_p.replace(location="store://p2", salt="f6" * 32)
    tx(
        "revoke p",
        "Org1",
        "Model:revoke",
        "p:Org1MSP",
        "Org3MSP",
        j(rotation),
        transient={MODEL_PRIVATE: model_p.canonical(), NEXT_MODEL_PRIVATE: moved.canonical()},
    )
    tx("list models", "Org2", "Model:list")
    # membership: published once and twice (version, created kept), with and without a gateway
    tx(
        "member Org1",
        "Org1",
        "Membership:publish",
        j({"artifact_endpoint": "https://org1.example:7443/", "tls_ca_digest": _digest("ca1")}),
    )
    tx(
        "member Org2",
        "Org2",
        "Membership:publish",
        j(
            {
                "artifact_endpoint": "https://[::1]:8443",
                "gateway_endpoint": "https://10.0.0.2:9443",
                "tls_ca_digest": _digest("ca2"),
            }
        ),
    )
    tx(
        "member Org1 again",
        "Org1",
        "Membership:publish",
        j({"artifact_endpoint": "https://org1.example:7444", "tls_ca_digest": _digest("ca1b")}),
    )
    tx("list members", "Org3", "Membership:list")
    tx("get member", "Org3", "Membership:get", "Org1MSP")
    out["world state"] = hashlib.sha256(
        canonical_json(
            {
                k: v.decode()
                for k, v in stub.state.items()
                if not k.startswith(GUARD_PREFIX) and v != PLACEHOLDER
            }
        )
    ).hexdigest()
    return out


# computed by the contracts before the records were typed (they built and stored dicts); "approve a",
# "get a" and "world state" recomputed with issue 33 (an approval is signed by the organisation's admin;
# Org3's approval and the members' acceptances are in the world state); the process records' ("create
# *", "start *", "get p", "abort q", "fail p", "complete r", "list processes", "world state") with issue
# 32 (hyper-parameters and budget went private: the public record carries ``private_sha256``, each
# member's collection a copy); the execution records' ("complete *", "query p", "get p2", "world state")
# with issue 32's results in the public form (the task key signs confidential_sha256, the metrics, data
# commitment and privacy charge go in each member's copy); the process and execution records' again with
# issue 32's last slice (the description went into the private terms, the messages' senders and
# recipients into the results' confidential parts; "inbox p1" answers the same bytes, routed from the
# members' copies): every other transaction's answer, writes and event are unchanged
GOLDEN: dict[str, str] = {
    "image a": "34f2a719a6b99b33d0858304a2d4923e27364037bd33a3283007f14b79c7d69c",
    "image b": "70a6149114d3460085ad202702185d8f26070a08e69277c39eac4291de075178",
    "approve a": "ac6c4532ba69abdf767ec3c263a344d43638176a311385ad04eea7223840b963",
    "revoke b": "591792508c03eac8d794e149dc78532dd5fc65dd2d7bceee96da3a67a76fbba0",
    "get a": "70eaa58ba159edd949ec4f31e90a2e30da7b6e9f5ed67c9c99cecbd6bd010dd0",
    "list images": "231c63885e70f2fe8c3629ae7c90f763cadf2532f25397460c100ec23f3eef49",
    "create p": "12246d460d88fb56a1854b1364ec911d4c0569c132c646b500af48edeaaa0bec",
    "create q": "9e5c8cd656e6af0d52531d90c72de3705be0a6db705ac55aea6525d93c6fe73e",
    "create r": "93ed1fab427839743b99f051e1d51a687e781dea03f51857eba546a3fc3f095e",
    "start p": "6a62c41b0e874a1d0bc0c6a0e3c92fc9d2c651d1f2aad8c3a2223b53f7bfb09f",
    "start q": "9ce850b405b166600c130d81614f7270e64ca1bdec338a4b0d161fe6812dce34",
    "start r": "af331da8681073cb14d53e6bc53a750fe2a099b2b2cad864f48cdaf5a6f1228c",
    "task p1 Org1": "253a0046312c13b04dc96ec22b69da4baee901696e4b9f21725151f9edb66ba6",
    "complete p1 Org1": "ec33549365c47f6d9ede2f73862626c818c8ea4b6e2080726fe9616434eaefb7",
    "task p1 Org2": "cc9d63052ddd9750c2b30df1b987a8509a3bda838420dbf469f76c4788874319",
    "complete p1 Org2": "dc8d1ba7f8c214ee769c5f27b396ce1d035f39144274aafac963e4382e7b4b9c",
    "progress p": "99f51fae8a36562c8e12db0fe0820fa9d63c18214858c85c8a1e9960d49dad2b",
    "get p": "f2738c31f18f7afd724e996fd9f22c30915cb75f3b48d0626443e4dff2d21a04",
    "inbox p1": "5cd4a397f68e5715e0018a9405200ca6858c297e2353a76290279cd0f48cc370",
    "task p2 Org1": "e24341a00fb98ce0a1217073926a770c202702cc48871f19e3fee55e7590c7d3",
    "complete p2 Org1": "d0503b64df701adb36db2ff0a54896c705477e18915d92801905b7f07c3f71b0",
    "task p2 Org2": "845dd5b0a924dee143e7ab717a7f6eb756c1cd80aff6c827dd811f66d01f5a67",
    "fail p2 Org2": "67e46aae618c4ff0ac20529cb3a9b0c121b513b5922e8723581fd7923bfea0c1",
    "query p": "617bb59a35c89a1c5c0d4cd0a4cc2c659af31b1ec58b992e276676c381146c0e",
    "get p2": "fa6cf6da6b94febd5257c7241d670eedfbdefd734b32868fe44c66b6fc2fd6db",
    "task q1 Org3": "fbb99d49502240c8b4b194a7532a1729a9f8f6919acafbee3694fe2de1a6c533",
    "complete q1 Org3": "d5afb3fe1976bc475fa99ffbc27daf058133aaa4fc81bfdc8c94d9b79149c101",
    "fail q1 Org1": "18b4c4a2f85fc5849370421e558d99c83990882867f728bc56049b28086ce075",
    "abort q": "3a59f6d901b01ca7a23f3f8c728581adf1dc870ae5d4bf4dc292bc0339ecf463",
    "fail p": "182c14f72113750ac6b7cd127a317fa8770058352d73018a97f00eff29a3c9e3",
    "task r1 Org1": "1d4be2e0c86d83366036232f3291f7bd0f05b68a37aad78b5523626aba148cbd",
    "complete r1 Org1": "abbff5f270952b6ce0d02e72f48ca8262af088c12b6f29a3535db625ed3559e0",
    "task r1 Org2": "bb1f94ca1332ab95739e5d0aaac823a6624ce15770c468c5012ae1befa2ef21f",
    "complete r1 Org2": "1f106973f361bbaafec52c3694fb40323a2f4cd6236529bf1c9f94b51a577d72",
    "complete r": "ebe3f428d2cf9f0d9ccb1bdc53240d48a128bbb0c061454c48c5e93920d3c6ec",
    "list processes": "f0326cb3fa5982a72801b9c521bbfc5f62ea404bc3fd0ddd5876f176e6d99d6d",
    "publish p": "ec67020467748da8cd693282cb95080a95f4438d292bd255d6b42f85cc00d56a",
    "publish r": "4bfc20ce01f8acb57250f799f9dcd547fa9bee4d4226021dc06031fd9a466112",
    "grant p": "9c6ef068926abdaefe7a420f5e8ec054670073e1f156d94949febc1b1e65fde0",
    "get model p": "b91cecd3142641f52d203d9458abed9c75f4659a5eb7b3a48856bdea74b338c2",
    "revoke p": "ef32254c6b24027bca0bfd7576e6e6e5c56d68b61d937e08e601e9abba6af88f",
    "list models": "9f392f689fa3dd2391a919869ecf7e33f57ef29c4229448726625beae5885b5f",
    "member Org1": "f07311687b2bd8c527da15090d0ca6088b20df26691d9da5de169e30bd678e3c",
    "member Org2": "9dc94f775ff2fdd3618a482979aa9da6076f8e43e39875b1eb9148cab7b4629c",
    "member Org1 again": "fb703df6e6702d81c1ecf9d11442e476f95500fa36ef0eafed73e9ebb4fc7e1e",
    "list members": "e849d8258b812972af7c2a431018f341fce75be2598ccb3833552c93fdb2939f",
    "get member": "ae0caa122c0a3d6cd0bf481923cc71bc34633e17a3da5c82a17cde3974b14d11",
    "world state": "0dedf85768e162f8bb9a5b114fefb53bf8022401dbc98c22f9be4bf641c8dc3f",
}


def test_every_record_and_answer_keeps_its_canonical_json(tmp_path):
    got = scenario(tmp_path)
    assert got == GOLDEN


def test_a_result_is_validated_by_its_type_with_errors_naming_the_key():
    from chaincode.records import ExecutionResult, check_result

    good = _result("p", 2, "Org1MSP", ["Org2MSP"], model=_digest("m"), **_privacy(0.1, sensitivity=2))
    parsed = check_result(good)
    assert isinstance(parsed, ExecutionResult) and parsed.json_object() == good  # nothing converted
    assert parsed.canonical() == canonical_json(good)
    # the numeric profile a task computed under (docs/reproducibility.md) is optional and kept as signed
    profile = {"name": "x86-64-v2", "version": 1, "digest": _digest("profile")}
    with_profile = check_result({**good, "numeric_profile": profile})
    assert with_profile.json_object() == {**good, "numeric_profile": profile}
    assert "numeric_profile" not in parsed.json_object()
    # so is the version of the algorithm SDK it ran with (docs/sdk.md)
    assert check_result({**good, "sdk": "1.0.0"}).json_object() == {**good, "sdk": "1.0.0"}
    for change, message in (
        ({"extra": 1}, "execution result has unknown fields ['extra']"),
        ({"round": 2.0}, "round must be a positive integer, got 2.0"),
        ({"round": True}, "round must be a positive integer, got True"),
        ({"round": 0}, "round must be a positive integer, got 0"),
        ({"runtime": "docker"}, "result.runtime must be one of ('container', 'sandbox', 'inprocess')"),
        (
            {"image_digest": "sha256:x"},
            "result.image_digest must be a digest sha256:<64 hex>, got 'sha256:x'",
        ),
        ({"metrics": {"loss": True}}, "metric 'loss' must be a finite number"),
        ({"metrics": {"int": "1"}}, "metric 'int' must be a finite number"),
        ({"metrics": []}, "result.metrics must be an object"),
        ({"process_id": "bad id"}, "field 'process_id' = 'bad id' does not match"),
        ({"process_id": ""}, "field 'process_id' must be a non-empty string"),
        ({"organisation": ""}, "field 'organisation' must be a non-empty string"),
        ({"started": 5}, "result.started must be a string"),
        ({"inputs": []}, "result.inputs must be a JSON object"),
        ({"inputs": {**good["inputs"], "more": 1}}, "result.inputs has unknown fields ['more']"),
        ({"inputs": {"messages": []}}, "result.inputs lacks required fields ['data_commitment']"),
        (
            {"inputs": {**good["inputs"], "state": "x"}},
            "result.inputs.state must be a digest sha256:<64 hex>, got 'x'",
        ),
        ({"outputs": {**good["outputs"], "model": 3}}, "result.outputs.model must be an object"),
        (
            {"outputs": {**good["outputs"], "model": {"size": 1}}},
            "result.outputs.model.digest must be a digest",
        ),
        (
            {"outputs": {**good["outputs"], "model": {"digest": _digest("m"), "size": "1"}}},
            "result.outputs.model.size must be an integer",
        ),
        (
            {
                "outputs": {
                    **good["outputs"],
                    "messages": [{"recipient": "Org2MSP", "digest": _digest("m"), "size": 1.5}],
                }
            },
            "output message size must be an integer",
        ),
        ({"outputs": {**good["outputs"], "messages": ["x"]}}, "each output message needs a recipient"),
        ({"numeric_profile": "x86-64-v2/1"}, "result.numeric_profile must be a JSON object"),
        ({"numeric_profile": {**profile, "os": "x"}}, "result.numeric_profile has unknown fields ['os']"),
        ({"numeric_profile": {"name": "x86-64-v2"}}, "result.numeric_profile lacks required fields"),
        ({"numeric_profile": {**profile, "name": "a b"}}, "result.numeric_profile.name must be a string"),
        (
            {"numeric_profile": {**profile, "version": "1"}},
            "result.numeric_profile.version must be a positive",
        ),
        ({"numeric_profile": {**profile, "version": 0}}, "result.numeric_profile.version must be a positive"),
        ({"numeric_profile": {**profile, "digest": "x"}}, "result.numeric_profile.digest must be a digest"),
        ({"sdk": "1.0"}, "result.sdk must be an SDK version MAJOR.MINOR.PATCH, got '1.0'"),
        ({"sdk": 1}, "result.sdk must be an SDK version MAJOR.MINOR.PATCH, got 1"),
    ):
        with pytest.raises(InvalidArgument) as err:
            check_result({**good, **change})
        assert err.value.message.startswith(message), (change, err.value.message)
    missing = {k: v for k, v in good.items() if k not in ("outputs", "metrics")}
    with pytest.raises(InvalidArgument, match=r"lacks required fields \['metrics', 'outputs'\]"):
        check_result(missing)
    with pytest.raises(InvalidArgument, match="execution result must be a JSON object"):
        check_result([good])


def test_a_signed_result_is_answered_exactly_as_signed():
    """The client's dict and the gateway's JSON of an execution record carry its result as signed:
    no default added (``outputs.model``, ``started``, a message's ``size`` stay absent), provenance
    keys kept; the record itself is answered with every field. The JSON Schema of the answer still
    describes the result."""
    from pydantic import TypeAdapter

    from chaincode.records import ExecutionRecord

    signed = _result("p", 1, "Org1MSP", ["Org2MSP"])
    del signed["started"], signed["outputs"]["messages"][0]["size"]
    stored = {
        "process_id": "p",
        "round": 1,
        "organisation": "Org1MSP",
        "image_digest": _digest("image a"),
        "runtime": "sandbox",
        "public_key": "PEM",
        "status": "completed",
        "created": "t",
        "tx_id": "x",
        "result": signed,
    }
    rec = ExecutionRecord.model_validate(stored)
    assert rec.json_object() == stored and rec.canonical() == canonical_json(stored)
    assert rec.to_dict()["result"] == signed and rec.to_dict()["failure_details"] == {}
    answered = json.loads(TypeAdapter(ExecutionRecord).dump_json(rec))
    assert answered["result"] == signed and answered["completed_tx_id"] == ""
    schema = TypeAdapter(ExecutionRecord).json_schema(mode="serialization")
    assert schema["properties"]["result"]["anyOf"][0] == {"$ref": "#/$defs/ExecutionResult"}
    assert "ResultOutputs" in schema["$defs"] and "OutputMessage" in schema["$defs"]


def test_a_results_parties_are_confidential_and_older_forms_keep_theirs():
    """``split_result`` moves each message's sender and recipient into the confidential part (the
    signed form keeps digests, sizes and provenance); a member's join restores them, and the part
    rebuilt from the join hashes to the signed ``confidential_sha256``. A result signed before the
    parties were confidential (``confidential_sha256`` without ``confidential_parties``) keeps its
    parties in its signed form."""
    from chaincode.records import ExecutionResult, ResultConfidential, signed_result, split_result

    full = _result("p", 2, "Org1MSP", ["Org2MSP", "Org3MSP"])
    public, part = split_result(full, "ab" * 32)
    assert public["confidential_parties"] is True and b'"recipient"' not in canonical_json(public)
    assert b'"sender"' not in canonical_json(public)
    assert [m["size"] for m in public["outputs"]["messages"]] == [102, 102]
    assert part.senders == ["Org2MSP", "Org3MSP"] and part.recipients == ["Org2MSP", "Org3MSP"]
    result = ExecutionResult.model_validate(public)
    joined = result.joined(part)
    assert [m.recipient for m in joined.outputs.messages] == ["Org2MSP", "Org3MSP"]
    assert [m.sender for m in joined.inputs.messages] == ["Org2MSP", "Org3MSP"]
    assert joined.signed_form() == public  # a joined read verifies over what was signed
    assert joined.confidential_part("ab" * 32).digest() == public["confidential_sha256"]
    # older: the parties were signed in clear next to the hash; they stay in the signed form
    older = {k: v for k, v in full.items() if k not in ("metrics",)}
    older["inputs"] = {k: v for k, v in full["inputs"].items() if k != "data_commitment"}
    old_part = ResultConfidential(  # as split_result made it then (validation given, null)
        metrics=full["metrics"], data_commitment=_digest("data Org1MSP"), validation=None, salt="cd" * 32
    )
    older["confidential_sha256"] = old_part.digest()
    assert signed_result(older) == older
    old_joined = ExecutionResult.model_validate(older).joined(old_part)
    assert old_joined.signed_form() == older
    assert old_joined.confidential_part("cd" * 32).digest() == older["confidential_sha256"]
