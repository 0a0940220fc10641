"""The model seal: one label binds a model's ciphertext and its sealed data keys to (process, owner,
model digest); each organisation on the access list opens its own copy of the key, no other."""

from __future__ import annotations

import base64
from types import SimpleNamespace

import pytest

from exchange.errors import DecryptionError
from exchange.model_seal import model_aad, model_key_info, open_data_key, open_model, seal_model
from exchange.sealing import decrypt_payload
from ledger.errors import Forbidden
from wire.canonical import sha256_digest

PAYLOAD = b"final model of Org1 " * 50
RECORD = {"id": "p:Org1MSP", "process_id": "p", "owner": "Org1MSP", "digest": sha256_digest(PAYLOAD)}


def test_labels_name_process_owner_and_digest():
    assert model_aad(RECORD) == f"consortia-model|p|Org1MSP|{RECORD['digest']}".encode()
    assert model_key_info(RECORD) == b"consortia-model-key|" + model_aad(RECORD)
    as_record = SimpleNamespace(process_id="p", owner="Org1MSP", digest=RECORD["digest"])  # a ModelRecord
    assert model_aad(as_record) == model_aad(RECORD)


def test_each_organisation_on_the_list_opens_the_model(consortium):
    ciphertext, wrapped = seal_model(PAYLOAD, RECORD, consortium, ["Org1MSP", "Org2MSP"])
    assert PAYLOAD not in ciphertext and set(wrapped) == {"Org1MSP", "Org2MSP"}
    for org in ("Org1MSP", "Org2MSP"):
        assert open_model(ciphertext, wrapped[org], consortium.encryption_key(org), RECORD) == PAYLOAD
    with pytest.raises(DecryptionError):  # Org3 is not on the list: Org2's copy is not its own
        open_model(ciphertext, wrapped["Org2MSP"], consortium.encryption_key("Org3MSP"), RECORD)
    other = {**RECORD, "process_id": "q"}  # the same bytes passed off as another process's model
    with pytest.raises(DecryptionError):
        open_model(ciphertext, wrapped["Org1MSP"], consortium.encryption_key("Org1MSP"), other)


def test_the_data_key_opens_for_its_holder_only(consortium):
    ciphertext, wrapped = seal_model(PAYLOAD, RECORD, consortium, ["Org1MSP", "Org2MSP"])
    rec = {**RECORD, "wrapped_key": base64.b64encode(wrapped["Org2MSP"]).decode()}
    key = open_data_key(consortium, "Org2MSP", rec)
    assert decrypt_payload(key, ciphertext, model_aad(RECORD)) == PAYLOAD
    with pytest.raises(Forbidden, match="does not open"):
        open_data_key(consortium, "Org3MSP", rec)
    with pytest.raises(Forbidden, match="holds no sealed key"):
        open_data_key(consortium, "Org3MSP", {**RECORD, "wrapped_key": ""})
