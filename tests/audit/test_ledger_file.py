"""audit.ledger_file (issue 14 items 2-4): ``ledger verify`` trusts only the consortium's
certificates, never writes into what it audits, and judges certificates at each block's time.
Truncation below a signed checkpoint: tests/audit/test_checkpoints.py."""

from __future__ import annotations

import datetime as dt
import shutil
import sqlite3
import time
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from audit.ledger_file import verify_ledger_file
from ledger.client import ConsortiaClient
from ledger.embedded import EmbeddedLedger
from ledger.errors import AccessDenied, LedgerCorrupted, LedgerError
from ledger.identity import Consortium, Identity
from tests.audit.ledgers import DIGEST, cli_verify, populate, sha

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
    with EmbeddedLedger(path, consortium) as led:  # and while the ledger is open
        assert verify_ledger_file(led.path, consortium)["valid_transactions"] == 2
        with pytest.raises(AccessDenied, match="expired"):  # ... and is refused for new transactions
            ConsortiaClient(led, ident).register_image("late", "1", "a", DIGEST)


# ------------------------------------------------------------------------------- changed bytes


def _populated(consortium, path: Path) -> None:
    with EmbeddedLedger(path, consortium) as led:
        c = ConsortiaClient(led, consortium.identity("Org1"))
        c.register_image("alpha", "1", "a", DIGEST)
        c.register_image("tamper-target", "1", "zzzunique", DIGEST)
        c.register_image("omega", "1", "a", DIGEST)


def _block_of(path: Path, name: str) -> int:
    con = sqlite3.connect(path)
    for number, body in con.execute("SELECT number, body FROM blocks ORDER BY number"):
        if name.encode() in body:
            con.close()
            return number
    raise AssertionError("not found")


def test_any_changed_byte_in_records_is_found_and_named(consortium, tmp_path):
    clean = tmp_path / "clean.db"
    _populated(consortium, clean)
    assert verify_ledger_file(clean, consortium) == {"blocks": 4, "transactions": 3, "valid_transactions": 3}
    target_block = _block_of(clean, "zzzunique")
    raw = clean.read_bytes()
    marker = b"zzzunique"
    offsets = []
    start = 0
    while (i := raw.find(marker, start)) >= 0:
        offsets.append(i)
        start = i + 1
    assert len(offsets) >= 3  # block body (proposal args), world state value, history value
    for n, off in enumerate(offsets):
        for delta in (0, 4):
            bad = tmp_path / f"bad-{n}-{delta}.db"
            data = bytearray(raw)
            data[off + delta] ^= 0x01
            bad.write_bytes(bytes(data))
            with EmbeddedLedger(bad, consortium):  # the host opens it; the verification finds the change
                with pytest.raises(LedgerCorrupted) as err:
                    verify_ledger_file(bad, consortium)
            assert err.value.block_number == target_block, str(err.value)
            assert f"block {target_block}" in str(err.value)


def test_changed_byte_in_block_header_hash_is_named(consortium, tmp_path):
    path = tmp_path / "l.db"
    _populated(consortium, path)
    con = sqlite3.connect(path)
    (h,) = con.execute("SELECT header_hash FROM blocks WHERE number = 2").fetchone()
    con.close()
    raw = bytearray(path.read_bytes())
    off = raw.find(h.encode())
    raw[off] = ord("0") if raw[off] != ord("0") else ord("1")
    path.write_bytes(bytes(raw))
    with EmbeddedLedger(path, consortium):
        with pytest.raises(LedgerCorrupted, match=r"block 2") as err:
            verify_ledger_file(path, consortium)
    assert err.value.block_number == 2
