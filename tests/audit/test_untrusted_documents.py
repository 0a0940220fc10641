"""What an auditor is handed is untrusted (issue 33 item 3): a checkpoint signed by a peer does not
vouch for a chain head, and a checkpoint file, a bundle or an attestation nested thousands of levels
deep is refused with a clear error -- never a RecursionError traceback -- by ``ledger verify`` and
``audit verify`` alike."""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

import pytest

from api.cli import app
from audit.attestations import AttestationError, open_envelope, pae, sign_envelope, statement_checkpoint
from audit.bundles import ENVELOPE, verify_bundle
from audit.checkpoints import check_checkpoint
from audit.ledger_file import verify_ledger_file
from ledger.checkpoint import checkpoint_of, load_checkpoints, sign_checkpoint
from ledger.embedded import EmbeddedLedger
from ledger.errors import CheckpointInvalid
from tests.audit.ledgers import cli_verify, populate, runner
from tests.audit.test_bundles import cas, exported  # noqa: F401  (the exported bundle fixture)


def deep(levels: int) -> str:
    return "[" * levels + "]" * levels


# ---- who vouches for a chain head


def test_a_checkpoint_signed_by_a_peer_does_not_verify(consortium, tmp_path):
    path = tmp_path / "l.db"
    populate(consortium, path, images=2)
    with EmbeddedLedger(path, consortium, batch_timeout=0.001) as led:
        by_peer = checkpoint_of(led, consortium.peer_identity("Org1"))
        by_admin = checkpoint_of(led, consortium.identity("Org2", "Admin"))
        by_client = checkpoint_of(led, consortium.identity("Org3"))
        by_orderer = led.checkpoint()
    cp_file = tmp_path / "peer.json"
    cp_file.write_text(json.dumps(by_peer.to_json()))
    # the ledger file's verification (and its command line: exit 1, the reason said)
    with pytest.raises(CheckpointInvalid, match="peer identity of Org1MSP"):
        verify_ledger_file(path, consortium, [by_peer])
    code, out = cli_verify(path, consortium.root, "--checkpoint", str(cp_file))
    assert code == 1 and "only the orderer or an organisation's admin or client" in out["error"]
    # offline, as a bundle or an attestation carries one
    with pytest.raises(CheckpointInvalid, match="peer identity"):
        check_checkpoint(by_peer.to_json(), cas(consortium))
    # those who may vouch still do
    assert verify_ledger_file(path, consortium, [by_admin, by_client, by_orderer])["checkpoints"] == 3
    for cp in (by_admin, by_client):
        assert check_checkpoint(cp.to_json(), cas(consortium))[0] == cp


# ---- depth


def test_a_5000_deep_checkpoint_file_is_refused_clearly(consortium, tmp_path):
    path = tmp_path / "l.db"
    populate(consortium, path, images=1)
    for name, text in (("deep.json", deep(5000)), ("deep.jsonl", deep(5000) + "\n" + deep(5000) + "\n")):
        cp_file = tmp_path / name
        cp_file.write_text(text)
        with pytest.raises(CheckpointInvalid, match="nested"):
            load_checkpoints(cp_file)
        code, out = cli_verify(path, consortium.root, "--checkpoint", str(cp_file))
        assert code == 2 and "nested" in out["error"] and "Recursion" not in json.dumps(out)


def _audit_verify(bundle: Path) -> tuple[int, dict]:
    res = runner.invoke(app, ["audit", "verify", str(bundle), "--json"])
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    return res.exit_code, json.loads(res.stdout.strip().splitlines()[-1])


def test_a_100000_deep_bundle_envelope_is_refused_clearly(tmp_path):
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / ENVELOPE).write_text(deep(100_000))
    report = verify_bundle(bundle)
    assert not report.ok and any("nested" in c["detail"] for c in report.checks)
    code, out = _audit_verify(bundle)
    assert code == 1 and "nested deeper than the decoder goes" in json.dumps(out)


def test_deep_files_inside_a_bundle_are_refused_clearly(exported, tmp_path):  # noqa: F811
    for rel in ("records/process.json", "checkpoint.json"):
        bundle = tmp_path / rel.replace("/", "-")
        shutil.copytree(exported, bundle)
        (bundle / rel).write_text(deep(100_000))
        report = verify_bundle(bundle)
        assert not report.ok
        assert any("nested" in c["detail"] for c in report.checks), report.checks
        code, _ = _audit_verify(bundle)
        assert code == 1


def test_a_deep_attestation_payload_or_checkpoint_is_an_attestation_error(consortium):
    """A payload signed as it is (the signer is the attacker) and a checkpoint byproduct."""
    identity = consortium.identity("Org1")
    kind = "application/vnd.in-toto+json"
    env = sign_envelope({"x": 1}, identity, kind)
    keyid = env["signatures"][0]["keyid"]
    body = deep(100_000).encode()
    env["payload"] = base64.b64encode(body).decode()
    env["signatures"][0]["sig"] = base64.b64encode(identity.sign(pae(kind, body))).decode()
    with pytest.raises(AttestationError, match="nested"):
        open_envelope(env, {keyid: identity.certificate_pem}, "attestation")
    byproduct = {"name": "ledger-checkpoint", "content": base64.b64encode(deep(100_000).encode()).decode()}
    with pytest.raises(AttestationError, match="nested"):
        statement_checkpoint({"predicate": {"runDetails": {"byproducts": [byproduct]}}})


def test_a_signed_checkpoint_still_loads(consortium, tmp_path):
    cp = sign_checkpoint(consortium.orderer_identity(), "ch", 3, "ab" * 32)
    f = tmp_path / "cp.json"
    f.write_text(json.dumps([cp.to_json(), cp.to_json()]))
    assert load_checkpoints(f) == [cp, cp]
