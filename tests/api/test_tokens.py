"""API tokens: random, stored hashed, bound to a user of the gateway's organisation."""

from __future__ import annotations

import json
import stat

import pytest

from api.tokens import AuthenticationError, TokenStore, WrongOrganisation


def test_issue_and_authenticate(tmp_path):
    store = TokenStore(tmp_path / "tokens.json", "Org1MSP")
    token = store.issue("User1")
    owner = store.authenticate(token)
    assert owner.msp_id == "Org1MSP" and owner.user == "User1" and len(owner.token_id) == 12
    raw = (tmp_path / "tokens.json").read_text()
    assert token not in raw and token.split("_")[-1] not in raw  # only the hash is stored
    assert stat.S_IMODE((tmp_path / "tokens.json").stat().st_mode) == 0o600
    assert store.issue("User1") != token  # random each time


def test_refusals(tmp_path):
    store = TokenStore(tmp_path / "tokens.json", "Org1MSP")
    token = store.issue("User1")
    with pytest.raises(AuthenticationError, match="missing"):
        store.authenticate(None)
    with pytest.raises(AuthenticationError, match="malformed"):
        store.authenticate("hello")
    with pytest.raises(AuthenticationError, match="unknown"):
        store.authenticate(token[:-1] + ("A" if token[-1] != "A" else "B"))
    other = TokenStore(tmp_path / "other.json", "Org2MSP").issue("User1")
    with pytest.raises(WrongOrganisation) as err:
        store.authenticate(other)
    assert err.value.status == 403


def test_a_copied_entry_of_another_organisation_is_refused(tmp_path):
    """Even if someone copies another gateway's token hash into this store, the binding holds."""
    org2 = TokenStore(tmp_path / "org2.json", "Org2MSP")
    token = org2.issue("User1")
    store = TokenStore(tmp_path / "tokens.json", "Org1MSP")
    forged = token.replace("cst_Org2MSP_", "cst_Org1MSP_")
    data = json.loads((tmp_path / "org2.json").read_text())
    import hashlib

    data = {hashlib.sha256(forged.encode()).hexdigest(): next(iter(data.values()))}
    (tmp_path / "tokens.json").write_text(json.dumps(data))
    with pytest.raises(WrongOrganisation):
        store.authenticate(forged)


def test_revoke(tmp_path):
    store = TokenStore(tmp_path / "tokens.json", "Org1MSP")
    token = store.issue("User1")
    tid = store.authenticate(token).token_id
    with pytest.raises(ValueError):
        store.revoke(tid[:4])
    assert store.revoke(tid) and not store.revoke(tid)
    with pytest.raises(AuthenticationError):
        store.authenticate(token)


def test_user_names_are_validated(tmp_path):
    with pytest.raises(ValueError):
        TokenStore(tmp_path / "t.json", "Org1MSP").issue("bad user")
