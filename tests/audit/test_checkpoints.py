"""audit.checkpoints (issue 14 item 5): a signed checkpoint of the chain head verifies against the
consortium (or, offline, against the organisations' CA certificates), and a chain cut short below
it or rewritten is refused -- on a live ledger and in a ledger file."""

from __future__ import annotations

import dataclasses
import json

import pytest
from typer.testing import CliRunner

from api.cli import app
from audit.checkpoints import check_checkpoint, check_on_ledger
from audit.ledger_file import verify_ledger_file
from ledger.checkpoint import Checkpoint, append_checkpoint, checkpoint_of, load_checkpoints, sign_checkpoint
from ledger.client import ConsortiaClient
from ledger.embedded import EmbeddedLedger
from ledger.errors import CheckpointInvalid, LedgerCorrupted
from ledger.identity import Consortium
from tests.audit.ledgers import DIGEST, cli_verify, populate, truncate_consistently

runner = CliRunner()


def cas(consortium: Consortium) -> dict[str, bytes]:
    return {
        o.msp_id: (o.path / "ca" / f"ca.{o.domain}-cert.pem").read_bytes() for o in consortium.organisations
    }


def test_consistent_truncation_is_detected_given_a_checkpoint(consortium, tmp_path):
    path = tmp_path / "l.db"
    populate(consortium, path, images=3)
    with EmbeddedLedger(path, consortium, batch_timeout=0.001) as led:
        keep = led.block_height(consortium.identity("Org1")) - 1
        c = ConsortiaClient(led, consortium.identity("Org2"))
        c.register_image("later-a", "1", "a", DIGEST)
        ConsortiaClient(led, consortium.identity("Org1")).revoke_image(
            "img0:1"
        )  # a later change to an earlier key
        c.register_image("later-b", "1", "a", DIGEST)
        by_orderer = led.checkpoint()
        by_org = led.checkpoint(consortium.identity("Org3", "Admin"))
    cp_file = tmp_path / "kept-outside" / "checkpoints.jsonl"
    append_checkpoint(cp_file, by_orderer)
    append_checkpoint(cp_file, by_org)
    assert load_checkpoints(cp_file) == [by_orderer, by_org]
    assert verify_ledger_file(path, consortium, [by_orderer, by_org])["checkpoints"] == 2
    truncate_consistently(path, keep)
    # without an anchor the shorter chain is indistinguishable from a young one ...
    assert verify_ledger_file(path, consortium)["blocks"] == keep + 1
    # ... with one it is caught
    for cp in (by_orderer, by_org):
        with pytest.raises(LedgerCorrupted, match="truncated") as err:
            verify_ledger_file(path, consortium, [cp])
        assert err.value.block_number == keep
    code, out = cli_verify(path, consortium.root, "--checkpoint", str(cp_file))
    assert code == 1 and "truncated" in out["error"]


def test_rewritten_chain_and_forged_checkpoints_are_refused(consortium, tmp_path):
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    populate(consortium, a, images=2, prefix="a")
    populate(consortium, b, images=2, prefix="b")  # same height, other blocks
    with EmbeddedLedger(a, consortium) as led:
        cp = led.checkpoint()
    with pytest.raises(LedgerCorrupted, match="rewritten"):
        verify_ledger_file(b, consortium, [cp])
    outsider = Consortium.generate(tmp_path / "outsider", ["Org1"])
    forged = sign_checkpoint(outsider.identity("Org1"), cp.channel, cp.block_number, cp.header_hash)
    with pytest.raises(CheckpointInvalid, match="does not verify"):
        verify_ledger_file(a, consortium, [forged])
    tampered = Checkpoint(
        cp.channel, cp.block_number + 5, cp.header_hash, cp.created, cp.signer, cp.signature
    )
    with pytest.raises(CheckpointInvalid):
        verify_ledger_file(a, consortium, [tampered])
    for field, value in (
        ("created", float("nan")),
        ("created", -1),
        ("header_hash", "AB" * 32),
        ("block_number", True),
        ("signer", "not base64!"),
    ):
        obj = cp.to_json()
        obj[field] = value
        with pytest.raises(CheckpointInvalid):
            Checkpoint.from_json(obj)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": "consortia-checkpoint/1", "block_number": -1}))
    code, out = cli_verify(a, consortium.root, "--checkpoint", str(bad))
    assert code == 2 and out["ok"] is False


def test_cli_checkpoint_then_verify(consortium, tmp_path):
    path = tmp_path / "l.db"
    populate(consortium, path, images=2)
    out = tmp_path / "cp.jsonl"
    res = runner.invoke(
        app,
        [
            "ledger",
            "checkpoint",
            str(path),
            "--crypto",
            str(consortium.root),
            "--out",
            str(out),
            "--org",
            "Org2",
            "--json",
        ],
    )
    assert res.exit_code == 0, res.stdout
    assert json.loads(res.stdout)["block_number"] == 2
    code, got = cli_verify(path, consortium.root, "--checkpoint", str(out))
    assert code == 0 and got["checkpoints"] == 1
    attacker = Consortium.generate(tmp_path / "attacker", ["Org1", "Org2", "Org3"])
    forged = tmp_path / "forged.db"
    populate(attacker, forged, images=1)
    res = runner.invoke(
        app,
        ["ledger", "checkpoint", str(forged), "--crypto", str(consortium.root), "--out", str(out), "--json"],
    )
    assert res.exit_code == 1 and len(load_checkpoints(out)) == 1  # a forged head is never vouched for


def test_the_ledger_keeps_checkpoints_outside_its_file(consortium, tmp_path):
    """``checkpoint_file``: the embedded host appends an orderer-signed checkpoint every
    ``checkpoint_every`` blocks and at close -- the anchor an organisation keeps beside (not in)
    the ledger file; a later consistent truncation is caught with it."""
    path, kept = tmp_path / "l.db", tmp_path / "anchors" / "checkpoints.jsonl"
    with EmbeddedLedger(
        path, consortium, batch_timeout=0.001, checkpoint_file=kept, checkpoint_every=2
    ) as led:
        c = ConsortiaClient(led, consortium.identity("Org1"))
        for i in range(5):
            c.register_image(f"k{i}", "1", "a", DIGEST)
        height = led.block_height(c.identity)
    cps = load_checkpoints(kept)
    assert [cp.block_number for cp in cps] == [2, 4, 5] and height == 6
    assert all(cp.signer_msp_id == "OrdererMSP" for cp in cps)
    assert verify_ledger_file(path, consortium, cps)["checkpoints"] == 3
    truncate_consistently(path, 3)
    with pytest.raises(LedgerCorrupted, match="truncated"):
        verify_ledger_file(path, consortium, cps)
    with pytest.raises(ValueError):
        EmbeddedLedger(tmp_path / "x.db", consortium, checkpoint_every=0)


def test_checkpoint_on_a_live_ledger(consortium, tmp_path):
    """``check_on_ledger``: the signer is a consortium identity and the live chain reaches the
    checkpointed head (the same checks run on Fabric in tests/fabric/test_audit_integrity.py)."""
    with EmbeddedLedger(tmp_path / "l.db", consortium, batch_timeout=0.001) as led:
        org1, org2 = consortium.identity("Org1"), consortium.identity("Org2")
        membership = consortium.membership()
        ConsortiaClient(led, org1).register_image("live", "1", "a", DIGEST)
        cp = checkpoint_of(led, org1)
        assert check_on_ledger(cp, led, org2, membership) == "Org1MSP"
        ConsortiaClient(led, org1).register_image("later", "1", "a", DIGEST)  # the chain grows past it
        assert check_on_ledger(cp, led, org2, membership) == "Org1MSP"
        beyond = sign_checkpoint(org1, led.channel, led.block_height(org1) + 3, "ab" * 32)
        with pytest.raises(LedgerCorrupted, match="truncated"):
            check_on_ledger(beyond, led, org2, membership)
        with pytest.raises(LedgerCorrupted, match="rewritten"):
            check_on_ledger(
                sign_checkpoint(org1, led.channel, cp.block_number, "cd" * 32), led, org2, membership
            )
        with pytest.raises(CheckpointInvalid, match="channel"):
            check_on_ledger(
                sign_checkpoint(org1, "elsewhere", cp.block_number, cp.header_hash), led, org2, membership
            )
        outsider = Consortium.generate(tmp_path / "outsider", ["Org1"]).identity("Org1")
        with pytest.raises(CheckpointInvalid, match="does not verify"):
            check_on_ledger(
                sign_checkpoint(outsider, led.channel, cp.block_number, cp.header_hash), led, org2, membership
            )


def test_offline_check_against_the_organisations_cas(consortium, tmp_path):
    """``check_checkpoint``: with the CA certificates alone (an audit bundle, an attestation)."""
    with EmbeddedLedger(tmp_path / "l.db", consortium, batch_timeout=0.001) as led:
        cp = checkpoint_of(led, consortium.identity("Org2"))
    got, signer = check_checkpoint(cp.to_json(), cas(consortium))
    assert got == cp and signer == "Org2MSP"
    with pytest.raises(CheckpointInvalid, match="whose CA is not trusted"):
        check_checkpoint(cp.to_json(), {"Org1MSP": cas(consortium)["Org1MSP"]})
    other = Consortium.generate(tmp_path / "other", ["Org1", "Org2"])
    with pytest.raises(CheckpointInvalid, match="does not verify against its CA"):  # same CA name, other key
        check_checkpoint(cp.to_json(), cas(other))
    moved = dict(cp.to_json(), block_number=cp.block_number + 1)  # claims another head
    with pytest.raises(CheckpointInvalid, match="signature does not verify"):
        check_checkpoint(moved, cas(consortium))
    with pytest.raises(CheckpointInvalid, match="my checkpoint: not a consortia-checkpoint/1"):
        check_checkpoint({"format": "x"}, cas(consortium), "my checkpoint")
    # signed at a time its certificate was not valid (the certificate is younger than the signature)
    early = dataclasses.replace(cp, created=cp.created - 10 * 365 * 86400, signature=b"")
    early = dataclasses.replace(early, signature=consortium.identity("Org2").sign(early.signed_bytes()))
    with pytest.raises(CheckpointInvalid, match="not valid when it signed"):
        check_checkpoint(early.to_json(), cas(consortium))
