"""audit.signatures: the one record-signature check (on executor.task_keys' primitive) and the
certificate-issuance check."""

from __future__ import annotations

import base64
import datetime as dt

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

from audit.signatures import CertificateInvalid, check_certificate, check_record_signature
from executor.task_keys import TaskKey, TaskSignatureInvalid
from ledger.client import ExecutionRecord
from wire.canonical import canonical_json


def signed_record() -> tuple[dict, TaskKey]:
    k = TaskKey.generate()
    digest = "sha256:" + "0" * 64
    result = {
        "process_id": "p",
        "round": 1,
        "organisation": "Org1MSP",
        "image_digest": digest,
        "runtime": "sandbox",
        "inputs": {"state": None, "messages": [], "data_commitment": digest},
        "outputs": {"state": digest, "messages": [{"recipient": "Org2MSP", "digest": digest, "size": 3}]},
        "metrics": {"loss": 0.5},
    }
    sig = base64.b64encode(k.sign(canonical_json(result))).decode()
    record = {
        "process_id": "p",
        "round": 1,
        "organisation": "Org1MSP",
        "public_key": k.public_key_pem,
        "signature": sig,
        "result": result,
    }
    return record, k


def test_a_record_dict_and_a_typed_record_verify():
    record, k = signed_record()
    check_record_signature(record)
    typed = ExecutionRecord.model_validate(
        {
            "process_id": "p",
            "round": 1,
            "organisation": "Org1MSP",
            "image_digest": record["result"]["image_digest"],
            "runtime": "sandbox",
            "public_key": k.public_key_pem,
            "status": "completed",
            "created": "",
            "tx_id": "",
            "result": record["result"],
            "signature": record["signature"],
        }
    )
    check_record_signature(typed)  # the typed record: its result's canonical JSON is what was signed
    with pytest.raises(TaskSignatureInvalid, match="Org1MSP for round 1 of p: signature does not verify"):
        check_record_signature(typed.replace(result={**record["result"], "round": 2}))


def test_every_tampering_of_a_record_is_refused_naming_the_record():
    record, _ = signed_record()
    for changed, why in (
        ({"result": {**record["result"], "metrics": {"loss": 0.0}}}, "does not verify"),
        ({"public_key": TaskKey.generate().public_key_pem}, "does not verify"),
        ({"public_key": "not a pem"}, "malformed task key"),
        ({"signature": "not base64!"}, "not base64"),
        ({"signature": None}, "not base64|does not verify"),
    ):
        with pytest.raises(TaskSignatureInvalid, match=why) as err:
            check_record_signature({**record, **changed})
        assert "task signature of Org1MSP for round 1 of p" in str(err.value)
    with pytest.raises(TaskSignatureInvalid):
        check_record_signature({})


def _cert(subject_cn: str, issuer: x509.Name, key, signer, *, ca: bool = False) -> x509.Certificate:
    now = dt.datetime.now(dt.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject_cn)]))
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .sign(signer, hashes.SHA256())
    )


def pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def test_certificate_issued_by_its_ca_and_no_other():
    ca_key, other_key, leaf_key = (ec.generate_private_key(ec.SECP256R1()) for _ in range(3))
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "ca.org1")])
    ca = _cert("ca.org1", ca_name, ca_key, ca_key, ca=True)
    leaf = _cert("User1@org1", ca_name, leaf_key, ca_key)
    assert check_certificate(pem(leaf), pem(ca), "signer") == leaf
    other_ca = _cert(
        "ca.org2",
        x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "ca.org2")]),
        other_key,
        other_key,
        ca=True,
    )
    with pytest.raises(CertificateInvalid, match="signer: certificate is not issued by the CA CN=ca.org2"):
        check_certificate(pem(leaf), pem(other_ca), "signer")
    same_name = _cert("ca.org1", ca_name, other_key, other_key, ca=True)  # same name, another key
    with pytest.raises(CertificateInvalid, match="does not verify against its CA"):
        check_certificate(pem(leaf), pem(same_name), "signer")
    with pytest.raises(CertificateInvalid, match="not valid PEM"):
        check_certificate(b"garbage", pem(ca), "signer")
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    rsa_ca = _cert("ca.org1", ca_name, rsa_key, rsa_key, ca=True)
    with pytest.raises(CertificateInvalid, match="not an ECDSA key"):
        check_certificate(pem(_cert("u", ca_name, leaf_key, rsa_key)), pem(rsa_ca), "signer")


def test_the_consortium_cas_issue_the_consortium_identities(tmp_path):
    from ledger.identity import Consortium

    c = Consortium.generate(tmp_path / "crypto", ["Org1", "Org2"])
    ca = {o.msp_id: (o.path / "ca" / f"ca.{o.domain}-cert.pem").read_bytes() for o in c.organisations}
    ident = c.identity("Org2MSP")
    check_certificate(ident.certificate_pem, ca["Org2MSP"], "signer")
    with pytest.raises(CertificateInvalid, match="not issued"):
        check_certificate(ident.certificate_pem, ca["Org1MSP"], "signer")
