"""Issue 14 items 2-5 on the embedded host: ``ledger verify`` trusts only the consortium's
certificates, never writes into what it audits, judges certificates at each block's time, and
detects truncation below a signed checkpoint."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import shutil
import sqlite3
import time
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from typer.testing import CliRunner

from api.cli import app
from ledger.checkpoint import Checkpoint, append_checkpoint, load_checkpoints, sign_checkpoint
from ledger.client import ConsortiaClient
from ledger.embedded import EmbeddedLedger
from ledger.embedded.verify import verify_ledger_file
from ledger.errors import AccessDenied, CheckpointInvalid, LedgerCorrupted, LedgerError
from ledger.identity import Consortium, Identity

DIGEST = "sha256:" + "ab" * 32
runner = CliRunner()


@pytest.fixture(scope="module")
def consortium(tmp_path_factory) -> Consortium:
    return Consortium.generate(tmp_path_factory.mktemp("crypto"), ["Org1", "Org2", "Org3"])


def populate(consortium: Consortium, path: Path, images: int = 3, prefix: str = "img") -> None:
    with EmbeddedLedger(path, consortium, batch_timeout=0.001) as led:
        c = ConsortiaClient(led, consortium.identity("Org1"))
        for i in range(images):
            c.register_image(f"{prefix}{i}", "1", "a", DIGEST)


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def cli_verify(path: Path, crypto: Path, *extra: str) -> tuple[int, dict]:
    res = runner.invoke(app, ["ledger", "verify", str(path), "--crypto", str(crypto), "--json", *extra])
    return res.exit_code, json.loads(res.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------------------- item 2


def test_ledger_written_under_attacker_cas_with_the_same_msp_ids_is_refused(consortium, tmp_path):
    attacker = Consortium.generate(tmp_path / "attacker", ["Org1", "Org2", "Org3"])
    assert attacker.msp_ids == consortium.msp_ids
    forged = tmp_path / "forged.db"
    populate(attacker, forged)
    assert verify_ledger_file(forged, attacker)["valid_transactions"] == 3  # consistent in itself
    before = sha(forged)
    with pytest.raises(LedgerCorrupted, match="block 0.*not the consortium's Org1MSP CA") as err:
        verify_ledger_file(forged, consortium)
    assert err.value.block_number == 0
    code, out = cli_verify(forged, consortium.root)
    assert code == 1 and out["ok"] is False and out["block"] == 0
    with pytest.raises(LedgerError, match="belongs to a channel that is not this consortium"):
        EmbeddedLedger(forged, consortium)
    assert sha(forged) == before


def test_genesis_with_the_real_cas_but_blocks_signed_by_another_orderer_is_refused(consortium, tmp_path):
    """The genesis block may name the real CAs and still be forged: every block's signer must be
    the consortium's orderer certificate (here: a rogue orderer CA's, same MSP id)."""
    rogue = Consortium.generate(tmp_path / "rogue", ["Org1", "Org2", "Org3"])
    # the rogue keeps the real organisations but swaps in its own orderer organisation
    mixed = tmp_path / "mixed"
    shutil.copytree(consortium.root, mixed)
    shutil.rmtree(mixed / "ordererOrganizations")
    shutil.copytree(rogue.root / "ordererOrganizations", mixed / "ordererOrganizations")
    path = tmp_path / "rogue-orderer.db"
    populate(Consortium(mixed), path)
    with pytest.raises(LedgerCorrupted, match="block 0") as err:
        verify_ledger_file(path, consortium)
    assert err.value.block_number == 0


def test_blocks_signed_by_another_certificate_of_the_orderer_ca_are_refused(consortium, tmp_path):
    """Byte for byte: a second orderer certificate, even one issued by the consortium's own orderer
    CA, is not the consortium's orderer."""
    d = consortium.orderer_domain
    ca_dir = consortium.root / "ordererOrganizations" / d / "ca"
    ca_key = serialization.load_pem_private_key((ca_dir / "priv_sk").read_bytes(), None)
    ca = x509.load_pem_x509_certificate((ca_dir / f"ca.{d}-cert.pem").read_bytes())
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(
            x509.Name(
                [
                    x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "orderer"),
                    x509.NameAttribute(NameOID.COMMON_NAME, f"rogue-orderer.{d}"),
                ]
            )
        )
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .sign(ca_key, hashes.SHA256())
    )
    path = tmp_path / "second-orderer.db"
    with EmbeddedLedger(path, consortium, batch_timeout=0.001) as led:
        led._orderer = Identity("OrdererMSP", cert.public_bytes(serialization.Encoding.PEM), key)
        ConsortiaClient(led, consortium.identity("Org1")).register_image("o", "1", "a", DIGEST)
    with pytest.raises(LedgerCorrupted, match="not the consortium's orderer") as err:
        verify_ledger_file(path, consortium)
    assert err.value.block_number == 1


# ------------------------------------------------------------------------------- item 3


def test_zero_byte_file_is_refused_and_left_empty(consortium, tmp_path):
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    with pytest.raises(LedgerCorrupted, match="no genesis block"):
        verify_ledger_file(empty, consortium)
    code, out = cli_verify(empty, consortium.root)
    assert code == 1 and out["ok"] is False and "no genesis block" in out["error"]
    assert empty.read_bytes() == b""
    missing = tmp_path / "missing.db"
    code, out = cli_verify(missing, consortium.root)
    assert code == 3 and not missing.exists()  # no ledger: not found (docs/cli.md exit codes)


def test_emptied_ledger_is_refused_and_byte_unchanged(consortium, tmp_path):
    path = tmp_path / "emptied.db"
    populate(consortium, path)
    con = sqlite3.connect(path)
    for table in ("blocks", "state", "history", "events", "txs"):
        con.execute(f"DELETE FROM {table}")
    con.commit()
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    before = sha(path)
    with pytest.raises(LedgerCorrupted, match="no genesis block"):
        verify_ledger_file(path, consortium)
    code, out = cli_verify(path, consortium.root)
    assert code == 1 and out["ok"] is False
    assert sha(path) == before
    con = sqlite3.connect(path)
    assert con.execute("SELECT COUNT(*) FROM blocks").fetchone()[0] == 0
    con.close()


def test_verify_of_a_good_ledger_leaves_the_file_byte_unchanged(consortium, tmp_path):
    path = tmp_path / "good.db"
    populate(consortium, path)
    before = sha(path)
    code, out = cli_verify(path, consortium.root)
    assert code == 0 and out == {"ok": True, "blocks": 4, "transactions": 3, "valid_transactions": 3}
    assert sha(path) == before


# ------------------------------------------------------------------------------- item 4


def short_lived_identity(consortium: Consortium, org: str, lifetime: float) -> Identity:
    """A client identity of ``org`` issued by its real CA, valid for ``lifetime`` seconds from now."""
    o = consortium.organisation(org)
    ca_key = serialization.load_pem_private_key((o.path / "ca" / "priv_sk").read_bytes(), None)
    ca = consortium.ca_certificate(org)
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(
            x509.Name(
                [
                    x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "client"),
                    x509.NameAttribute(NameOID.COMMON_NAME, f"ShortLived@{o.domain}"),
                ]
            )
        )
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=1))
        .not_valid_after(now + dt.timedelta(seconds=lifetime))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    return Identity(o.msp_id, cert.public_bytes(serialization.Encoding.PEM), key)


def test_blocks_signed_by_a_since_expired_certificate_still_verify(consortium, tmp_path):
    path = tmp_path / "expiring.db"
    ident = short_lived_identity(consortium, "Org1", lifetime=3)
    with EmbeddedLedger(path, consortium, batch_timeout=0.001) as led:
        r = ConsortiaClient(led, ident).register_image("short", "1", "a", DIGEST)
        assert led.transaction_block(r.tx_id)[1] == "VALID"
        ConsortiaClient(led, consortium.identity("Org2")).register_image("after", "1", "a", DIGEST)
    time.sleep(max(0.0, ident.certificate.not_valid_after_utc.timestamp() - time.time()) + 1.2)
    assert dt.datetime.now(dt.UTC) > ident.certificate.not_valid_after_utc
    stats = verify_ledger_file(path, consortium)  # judged at the block's timestamp, not now
    assert stats == {"blocks": 3, "transactions": 2, "valid_transactions": 2}
    with EmbeddedLedger(path, consortium) as led:
        assert led.verify()["valid_transactions"] == 2
        with pytest.raises(AccessDenied, match="expired"):  # ... and is refused for new transactions
            ConsortiaClient(led, ident).register_image("late", "1", "a", DIGEST)


# ------------------------------------------------------------------------------- item 5


def truncate_consistently(path: Path, keep_through: int) -> None:
    """What an attacker with write access does: delete the last blocks and every row derived from
    them, restoring each key's state to its last version in the kept blocks."""
    con = sqlite3.connect(path)
    con.execute("BEGIN")
    changed = [k for (k,) in con.execute("SELECT key FROM state WHERE block > ?", (keep_through,))]
    changed += [
        k for (k,) in con.execute("SELECT DISTINCT key FROM history WHERE block > ?", (keep_through,))
    ]
    for key in set(changed):
        prev = con.execute(
            "SELECT value, block, txnum, is_delete FROM history WHERE key = ? AND block <= ? "
            "ORDER BY block DESC, txnum DESC LIMIT 1",
            (key, keep_through),
        ).fetchone()
        con.execute("DELETE FROM state WHERE key = ?", (key,))
        if prev is not None and not prev[3]:
            con.execute("INSERT INTO state VALUES (?, ?, ?, ?)", (key, prev[0], prev[1], prev[2]))
    for table, col in (("history", "block"), ("events", "block"), ("txs", "block"), ("blocks", "number")):
        con.execute(f"DELETE FROM {table} WHERE {col} > ?", (keep_through,))
    con.execute("COMMIT")
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()


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
