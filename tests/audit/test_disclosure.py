"""audit.disclosure without a process: rounds, the auditor named by organisation or certificate, the
disclosure file's format, its sealing to the recipient and its header bound to the sealed bundle.
(A disclosure of a real process and its replay: tests/e2e/test_replay.py.)"""

from __future__ import annotations

import json

import pytest

from audit.disclosure import (
    Bundle,
    DisclosedTask,
    Disclosure,
    DisclosureError,
    parse_rounds,
    recipient_of,
    seal_info,
)
from exchange.errors import DecryptionError
from exchange.sealing import seal


def test_rounds():
    assert parse_rounds("all", 4) == [1, 2, 3, 4]
    assert parse_rounds("3,1", 4) == [1, 3]
    assert parse_rounds("2-4", 6) == [2, 3, 4]
    for bad in ("0", "5", "x", "1,,2", ""):
        with pytest.raises(DisclosureError):
            parse_rounds(bad, 4)


def test_the_auditor_by_organisation_or_by_certificate(consortium, tmp_path):
    msp, cert = recipient_of(consortium, "Org2")
    assert msp == "Org2MSP" and cert == consortium.encryption_certificate("Org2MSP")
    pem = tmp_path / "auditor.pem"
    org3 = consortium.organisation("Org3MSP")
    pem.write_bytes((org3.path / "encryption" / "cert.pem").read_bytes())
    assert recipient_of(consortium, str(pem))[0] == "Org3MSP"
    # a certificate no CA of the consortium issued (the CA's own certificate is self-issued by another key)
    from ledger.identity import Consortium

    other = Consortium.generate(tmp_path / "other", ["Org9"])
    foreign = tmp_path / "foreign.pem"
    foreign.write_bytes((other.organisation("Org9").path / "encryption" / "cert.pem").read_bytes())
    with pytest.raises(DisclosureError, match="not issued by the CA"):
        recipient_of(consortium, str(foreign))
    with pytest.raises(DisclosureError, match="neither an organisation"):
        recipient_of(consortium, "Org7")


def _disclosure(consortium, to="Org3MSP") -> Disclosure:
    bundle = Bundle(
        "p1",
        "Org1MSP",
        to,
        "ab" * 32,
        b"data",
        (DisclosedTask(1, None, {}), DisclosedTask(2, b"s", {"Org2MSP": b"m"})),
    )
    sealed = seal(consortium.encryption_certificate(to), bundle.to_json(), seal_info("p1", "Org1MSP", to))
    return Disclosure("p1", "Org1MSP", to, (1, 2), sealed)


def test_the_file_round_trips_and_opens_only_for_its_recipient(consortium, tmp_path):
    d = _disclosure(consortium)
    path = d.write(tmp_path / "d.json")
    assert path.stat().st_mode & 0o777 == 0o600
    back = Disclosure.read(path)
    assert back == d and back.bundle_digest == d.bundle_digest
    bundle = back.open(consortium.encryption_key("Org3MSP"))
    assert bundle.tasks[1] == DisclosedTask(2, b"s", {"Org2MSP": b"m"}) and bundle.dataset == b"data"
    for other in ("Org1MSP", "Org2MSP"):
        with pytest.raises(DecryptionError):
            back.open(consortium.encryption_key(other))


def test_a_header_that_does_not_match_the_sealed_bundle_is_refused(consortium, tmp_path):
    d = _disclosure(consortium)
    raw = json.loads(d.to_json())
    raw["organisation"] = "Org2MSP"  # the seal's info binds the discloser: it no longer opens
    moved = Disclosure.from_json(json.dumps(raw).encode())
    with pytest.raises(DecryptionError):
        moved.open(consortium.encryption_key("Org3MSP"))
    raw = json.loads(d.to_json())
    raw["rounds"] = [1]  # not bound by the seal: the bundle inside says otherwise
    with pytest.raises(DisclosureError, match="another process, organisation, recipient or rounds"):
        Disclosure.from_json(json.dumps(raw).encode()).open(consortium.encryption_key("Org3MSP"))
    raw = json.loads(d.to_json())
    raw["bundle_digest"] = "sha256:" + "0" * 64
    with pytest.raises(DisclosureError, match="hash to"):
        Disclosure.from_json(json.dumps(raw).encode())
    with pytest.raises(DisclosureError, match="not a disclosure file"):
        Disclosure.from_json(b'{"format": "x"}')
    with pytest.raises(DisclosureError, match="not a disclosure file"):
        Disclosure.from_json(b"[1")
