"""The ``consortia`` CLI journeys against an embedded ledger in a Consortia home, with --json."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from api.cli import app
from tests.api.world import IMAGE_DIGEST, build_world

ROOT = Path(__file__).resolve().parents[2]

runner = CliRunner()


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> tuple[Path, dict[str, bytes]]:
    root = tmp_path_factory.mktemp("home")
    w = build_world(root)
    models = dict(w.models)
    w.ledger.close()  # the CLI opens the ledger file itself
    return root, models


def cli(home: Path, *args: str, org: str = "Org1", code: int = 0) -> dict | list:
    result = runner.invoke(app, [*args, "--home", str(home), "--org", org, "--json"])
    assert result.exit_code == code, result.output
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_image_journey(home):
    root, _ = home
    rec = cli(root, "image", "register", "svm", "1", "--digest", IMAGE_DIGEST, "--algorithm", "svm")
    assert rec["owner"] == "Org1MSP" and rec["id"] == "svm:1"
    assert "svm:1" in [i["id"] for i in cli(root, "image", "list")]
    approval = cli(
        root,
        "image",
        "approve",
        "svm:1",
        "--digest",
        IMAGE_DIGEST,
        "--dataset",
        "adult",
        "--dataset",
        "spam",
        "--expires",
        "2999-01-01T00:00:00Z",
        org="Org2",
    )  # signed by Org2's admin (the consent commands' default --user)
    assert approval["organisation"] == "Org2MSP" and approval["datasets"] == ["adult", "spam"]
    err = cli(
        root, "image", "approve", "svm:1", "--digest", IMAGE_DIGEST, "--user", "User1", org="Org3", code=1
    )
    assert err["code"] == "FORBIDDEN" and "only admin identities" in err["message"]
    revoked = cli(root, "image", "revoke-approval", "svm:1", "--reason", "changed our mind", org="Org2")
    assert revoked["revoked_reason"] == "changed our mind" and revoked["revoked"]
    err = cli(root, "image", "revoke", "svm:1", org="Org2", code=1)
    assert err["code"] == "FORBIDDEN"
    assert cli(root, "image", "revoke", "svm:1", "--reason", "old")["status"] == "revoked"
    assert cli(root, "image", "get", "svm:1")["status"] == "revoked"
    hist = cli(root, "provenance", "image", "svm:1")
    assert [h["value"]["status"] for h in hist] == ["active", "revoked"]


def test_consent_journey(home):
    """create -> start refused -> accept (each member's admin) -> terms -> start; decline ends it."""
    root, _ = home
    common = ["--image", "rf:1", "--consortium", "Org1MSP,Org2MSP", "--rounds", "1", "--dataset", "adult"]
    assert cli(root, "process", "create", "p-consent", *common)["status"] == "created"
    assert cli(root, "process", "start", "p-consent", code=1)["code"] == "CONSENT_MISSING"
    terms = cli(root, "process", "terms", "p-consent", org="Org2")
    assert terms["terms"]["dataset"] == "adult" and terms["waiting_for"] == ["Org1MSP", "Org2MSP"]
    # the private terms are shown to the member reviewing them; the terms bind their hash
    assert terms["private_terms"]["privacy_budget"] is None and "hyperparameters" in terms["private_terms"]
    assert terms["terms"]["private_sha256"].startswith("sha256:")
    wrong = cli(root, "process", "accept", "p-consent", "--terms", "sha256:" + "0" * 64, org="Org2", code=1)
    assert wrong["code"] == "CONSENT_MISSING"
    for org in ("Org1", "Org2"):
        answer = cli(root, "process", "accept", "p-consent", "--terms", terms["terms_digest"], org=org)
        assert answer["decision"] == "accepted" and answer["role"] == "admin"
    assert cli(root, "process", "terms", "p-consent")["waiting_for"] == []
    assert cli(root, "process", "start", "p-consent")["status"] == "running"
    assert cli(root, "process", "create", "p-decline", *common)["status"] == "created"
    answer = cli(root, "process", "decline", "p-decline", "--reason", "not on our data", org="Org2")
    assert answer["decision"] == "declined"
    declined = cli(root, "process", "get", "p-decline")
    assert (
        declined["status"] == "declined"
        and declined["status_reason"] == "declined by Org2MSP: not on our data"
    )


def test_accept_approving_the_image(home):
    """`process accept --approve-image`: a member approves the digest the terms pin and accepts in one
    command (the owner only accepts); terms that changed since they were reviewed write nothing."""
    root, _ = home
    cli(root, "image", "register", "rfc", "1", "--digest", IMAGE_DIGEST, "--algorithm", "collab-rf")
    common = ["--image", "rfc:1", "--consortium", "Org1MSP,Org2MSP", "--rounds", "1", "--dataset", "adult"]
    assert cli(root, "process", "create", "p-one-go", *common)["status"] == "created"
    terms = cli(root, "process", "terms", "p-one-go", org="Org2")["terms_digest"]
    stale = ("process", "accept", "p-one-go", "--terms", "sha256:" + "0" * 64, "--approve-image")
    assert cli(root, *stale, org="Org2", code=1)["code"] == "CONSENT_MISSING"
    assert cli(root, "image", "get", "rfc:1")["approvals"] == []  # nothing approved
    assert cli(root, "process", "terms", "p-one-go")["waiting_for"] == ["Org1MSP", "Org2MSP"]
    for org in ("Org1", "Org2"):
        answer = cli(root, "process", "accept", "p-one-go", "--terms", terms, "--approve-image", org=org)
        assert answer["decision"] == "accepted" and answer["terms_digest"] == terms
    approvals = cli(root, "image", "get", "rfc:1")["approvals"]
    assert [(a["organisation"], a["digest"], a["datasets"]) for a in approvals] == [
        ("Org2MSP", IMAGE_DIGEST, [])
    ]
    assert cli(root, "process", "start", "p-one-go")["status"] == "running"


def test_process_journey(home):
    root, _ = home
    rec = cli(
        root,
        "process",
        "create",
        "p-cli",
        "--image",
        "rf:1",
        "--consortium",
        "Org1MSP,Org2MSP",
        "--rounds",
        "2",
        "--epsilon",
        "1.5",
        "--hyperparameters",
        '{"depth": 3, "gradient_clip": 1.0}',
        "--start",
    )
    assert rec["status"] == "running" and rec["privacy_budget"]["epsilon"] == 1.5
    assert "p-cli" in [p["id"] for p in cli(root, "process", "list", org="Org2")]
    assert cli(root, "process", "get", "p-cli", org="Org3", code=1)["code"] == "FORBIDDEN"
    assert cli(root, "process", "abort", "p-cli", "--reason", "stop")["status"] == "aborted"
    watched = cli(root, "process", "watch", "p-cli", "--timeout", "1", code=1)
    assert watched["status"] == "aborted" and watched["completed_tasks"] == 0
    done = cli(root, "process", "watch", "proc-0")
    assert done["status"] == "completed"
    # which member stands where (issue 27 item 6): every one completed its 3 rounds
    assert [(m["last_completed_round"], m["task"]) for m in done["members"]] == [(3, "completed")] * 3
    timeline = cli(root, "provenance", "process", "p-cli")
    names = ["ProcessCreated", "ProcessAnswered", "ProcessAnswered", "ProcessStatus", "ProcessStatus"]
    assert [e["name"] for e in timeline] == names  # created, accepted by both members, started, aborted


def test_provenance_queries(home):
    root, _ = home
    arts = cli(root, "provenance", "artifacts", "proc-0", "--by", "Org2MSP")
    assert {a["organisation"] for a in arts} == {"Org2MSP"} and {a["round"] for a in arts} == {1, 2, 3}
    msg = next(a for a in arts if a["kind"] == "message" and a["round"] == 1)
    prov = cli(root, "provenance", "artifact", msg["digest"])
    assert (
        prov["produced_by"][0]["organisation"] == "Org2MSP"
        and prov["consumed_by"][0]["organisation"] == "Org3MSP"
    )
    hist = cli(root, "provenance", "execution", "proc-0", "1", "Org2MSP")
    assert [h["value"]["status"] for h in hist] == ["running", "completed"]
    lin = cli(root, "provenance", "model", "proc-0:Org2MSP")
    assert lin["root"] == "proc-0/3/Org2MSP" and len(lin["nodes"]) == 6


@pytest.fixture
def org1_serves(home):
    """Org1's artifact service (``consortia artifacts serve``, as its host runs it) on 127.0.1.1, its
    endpoint in Org1's membership record: the others fetch Org1's model there, never from its folder."""
    from exchange.locations import publish_own_membership
    from ledger.client import ConsortiaClient
    from ledger.embedded import EmbeddedLedger
    from ledger.identity import Consortium

    root, _ = home
    with socket.socket() as sock:
        sock.bind(("127.0.1.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "api.cli", "artifacts", "serve", "--home", str(root), "--org", "Org1"]
        + ["--listen", f"127.0.1.1:{port}"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        url = proc.stdout.readline().strip().rpartition(" at ")[2]
        assert url == f"https://127.0.1.1:{port}"
        consortium = Consortium(root / "crypto")
        with EmbeddedLedger(root / "ledger.db", consortium) as ledger:
            publish_own_membership(ConsortiaClient(ledger, consortium.identity("Org1")), consortium, url)
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


def test_a_model_is_not_read_from_its_owners_folder(home, tmp_path):
    """One machine, every organisation's store under the home: without the owner's service a member
    cannot download the owner's model (exit 3, no location), though its folder is right there."""
    root, _ = home
    err = cli(root, "model", "get", "proc-0:Org2MSP", "--out", str(tmp_path / "m"), org="Org3", code=3)
    assert err["code"] == "LocationUnknown" and not (tmp_path / "m").exists()
    assert (root / "artifacts" / "Org2MSP" / "sha256").is_dir()


def test_model_journey_and_audit_bundle(home, tmp_path, org1_serves):
    root, models = home
    listed = cli(root, "model", "list", org="Org3")
    assert {m["id"] for m in listed} >= {"proc-0:Org1MSP"} and all("wrapped_key" not in m for m in listed)
    out = tmp_path / "model.bin"
    got = cli(root, "model", "get", "proc-0:Org1MSP", "--out", str(out), org="Org3")
    assert out.read_bytes() == models["proc-0:Org1MSP"] and got["downloaded_to"] == str(out)
    assert cli(root, "model", "get", "proc-0:Org1MSP", org="Org4", code=1)["code"] == "FORBIDDEN"
    granted = cli(root, "model", "grant", "proc-0:Org1MSP", "Org4")
    assert "Org4MSP" in granted["access"]
    revoked = cli(root, "model", "revoke", "proc-0:Org1MSP", "Org4")
    assert "Org4MSP" not in revoked["access"]
    # the revocation rotated the data key: new ciphertext, and the remaining members still download it
    assert revoked["ciphertext_digest"] != granted["ciphertext_digest"] and revoked["key_version"] == 2
    got = cli(root, "model", "get", "proc-0:Org1MSP", "--out", str(out), org="Org3")
    assert out.read_bytes() == models["proc-0:Org1MSP"]
    assert cli(root, "model", "verify", "proc-0:Org1MSP", org="Org2")["ok"] is True
    bundle = tmp_path / "bundle"
    summary = cli(root, "audit", "export", "proc-0:Org1MSP", "--out", str(bundle))
    assert summary["executions"] == 9 and summary["attestations"] == 9
    result = runner.invoke(app, ["audit", "verify", str(bundle), "--json"])
    assert result.exit_code == 0 and json.loads(result.stdout)["ok"] is True
    target = bundle / "records" / "model.json"
    target.write_bytes(target.read_bytes().replace(b"Org1MSP", b"Org2MSP", 1))
    result = runner.invoke(app, ["audit", "verify", str(bundle), "--json"])
    report = json.loads(result.stdout)
    assert result.exit_code == 1 and not report["ok"]
    assert any(c["check"] == "file records/model.json" and not c["ok"] for c in report["checks"])


def test_tokens_and_index(home):
    root, _ = home
    tok = cli(root, "token", "issue", "--user", "User1", org="Org2")
    assert tok["token"].startswith("cst_Org2MSP_")
    ids = [t["token_id"] for t in cli(root, "token", "list", org="Org2")]
    assert len(ids) == 1
    assert cli(root, "token", "revoke", ids[0], org="Org2")["revoked"] is True
    assert cli(root, "token", "list", org="Org2") == []
    idx = cli(root, "index", "sync", org="Org3")
    assert idx["executions"] == 9 and idx["last_block"] >= 0
    assert cli(root, "index", "sync", org="Org3")["new_events"] == 0  # resumes: nothing new to index


def test_unknown_organisation_is_a_usage_error(home):
    root, _ = home
    result = runner.invoke(app, ["image", "list", "--home", str(root), "--org", "Nope"])
    assert result.exit_code == 2


def test_node_run_and_network_are_sub_commands(monkeypatch):
    monkeypatch.delenv("CONSORTIA_HOME", raising=False)
    result = runner.invoke(app, ["node", "run", "--help"])
    assert result.exit_code == 0 and "Follow the ledger" in result.output
    result = runner.invoke(app, ["node", "run", "--org", "Org1MSP"])
    assert result.exit_code == 2 and result.stdout == ""  # what is missing is named on stderr
    assert "--consortium, --ledger, --data, --store, --state are required" in result.stderr
    result = runner.invoke(app, ["network", "--help"])
    assert result.exit_code == 0 and "up" in result.output and "deploy" in result.output
    assert "channel" in result.output and "chaincode" in result.output


def test_process_get_and_list_show_the_ledgers_rigorous_epsilon_first(home):
    root, _ = home
    # proc-0: 3 rounds of ε0 = 0.5 per member, node scope, budget 3 (tests/api/world.py)
    got = cli(root, "process", "get", "proc-0")
    assert got["privacy"]["rigorous"] is True and got["privacy"]["epsilon_spent"] == 1.5
    assert got["privacy"]["epsilon_budget"] == 3.0 and got["privacy"]["cap_epsilon"] == 10.0
    listed = {p["id"]: p for p in cli(root, "process", "list")}
    assert listed["proc-0"]["privacy"] == got["privacy"]
    table = runner.invoke(app, ["process", "get", "proc-0", "--home", str(root), "--org", "Org1"])
    assert table.exit_code == 0, table.output
    rows = [line for line in table.output.splitlines() if "│" in line or "|" in line]
    assert "privacy" in rows[0] and "rigorous ε spent 1.5 of budget 3 (δ = 0, node scope" in table.output
    wide = runner.invoke(app, ["process", "list", "--home", str(root)], env={"COLUMNS": "300"})
    assert "ε 1.5 / 3 (δ = 0, rigorous)" in wide.output, wide.output
    over = ("process", "create", "p-over", "--image", "rf:1", "--consortium", "Org1MSP", "--rounds", "1")
    err = cli(root, *over, "--epsilon", "12", "--hyperparameters", '{"gradient_clip": 1.0}', code=2)
    assert err["code"] == "INVALID_ARGUMENT" and "cap on rigorous ε" in err["message"]
