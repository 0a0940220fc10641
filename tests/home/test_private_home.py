"""A home is its owner's only (issue 33 item 3): ``consortia init`` made ledger.db 0644 in a 0755
home and the gateway's index.db (and its -wal/-shm) 0644, so any local user read every record the
contracts refuse to non-members. Now homes and their folders are 0700, ledgers, indexes and the
configuration 0600, and a home or a ledger/index file open to others is refused at start with a clear
error (not repaired: the owner must learn it was exposed)."""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

from api.cli import app
from api.index import AuditIndex
from home.errors import HomeError
from home.ledger import open_ledger
from ledger.client import ConsortiaClient
from ledger.identity import Consortium

runner = CliRunner()
DIGEST = "sha256:" + "ab" * 32


@pytest.fixture(autouse=True)
def _usual_umask():
    old = os.umask(0o022)  # what most machines use: new files 0644, new folders 0755
    yield
    os.umask(old)


def mode(p: Path) -> int:
    return stat.S_IMODE(os.stat(p).st_mode)


def cli(*args: str) -> tuple[int, dict]:
    res = runner.invoke(app, [*args, "--json"])
    return res.exit_code, json.loads(res.stdout.strip().splitlines()[-1])


def test_init_makes_a_private_home_ledger_and_index(tmp_path):
    home = tmp_path / "h"
    code, _ = cli("init", "--orgs", "Org1,Org2", "--home", str(home))
    assert code == 0
    assert mode(home) == 0o700
    assert mode(home / "ledger.db") == 0o600 and mode(home / "consortia.toml") == 0o600
    for d in ("data/Org1MSP", "artifacts/Org1MSP", "gateways/Org1MSP"):
        assert mode(home / d) == 0o700, d
    with open_ledger(home) as led:  # the ledger in use: its WAL and shared memory too
        ConsortiaClient(led, Consortium(home / "crypto").identity("Org1")).register_image(
            "a", "1", "x", DIGEST
        )
        for p in (home / "ledger.db-wal", home / "ledger.db-shm"):
            assert mode(p) == 0o600, p
    # the gateway's audit index, as the CLI opens it
    assert cli("index", "sync", "--home", str(home))[0] == 0
    files = sorted(home.glob("gateways/Org1MSP/index.db*"))
    assert files and all(mode(p) == 0o600 for p in files), [(p.name, oct(mode(p))) for p in files]
    index = home / "gateways" / "Org1MSP" / "index.db"
    index.chmod(0o644)
    code, out = cli("index", "sync", "--home", str(home))
    assert code == 2 and "audit index" in out["message"] and "chmod 600" in out["message"]


def test_a_home_open_to_others_is_refused_at_start(tmp_path):
    home = tmp_path / "h"
    assert cli("init", "--orgs", "Org1,Org2", "--home", str(home))[0] == 0
    home.chmod(0o755)
    with pytest.raises(HomeError, match=r"open to other users .*mode 0755.*chmod 700"):
        open_ledger(home)
    code, out = cli("image", "list", "--home", str(home))
    assert code == 2 and "chmod 700" in out["message"]
    home.chmod(0o700)
    (home / "ledger.db").chmod(0o644)
    with pytest.raises(HomeError, match=r"ledger file .*ledger.db is open to other users .*mode 0644"):
        open_ledger(home)
    code, out = cli("image", "list", "--home", str(home))
    assert code == 2 and "chmod 600" in out["message"]
    (home / "ledger.db").chmod(0o600)
    assert cli("image", "list", "--home", str(home))[0] == 0  # fixed by its owner: used again


def test_an_index_open_to_others_is_refused(tmp_path):
    path = tmp_path / "gw" / "index.db"
    AuditIndex(path).close()
    assert mode(path) == 0o600 and mode(path.parent) == 0o700
    path.chmod(0o644)
    with pytest.raises(HomeError, match=r"audit index .*index.db is open to other users"):
        AuditIndex(path)
    path.chmod(0o600)
    Path(str(path) + "-wal").write_bytes(b"")
    Path(str(path) + "-wal").chmod(0o640)
    with pytest.raises(HomeError, match=r"index.db-wal is open to other users"):
        AuditIndex(path)


@pytest.mark.timeout(60)  # before the fix the agent started and followed the ledger for ever
def test_a_node_agent_refuses_a_home_open_to_others(tmp_path):
    home = tmp_path / "h"
    assert cli("init", "--orgs", "Org1,Org2", "--home", str(home))[0] == 0
    (home / "ledger.db").chmod(0o644)
    code, answer = cli("node", "run", "--home", str(home), "--org", "Org1", "--runtime", "sandbox")
    assert code == 2 and answer["code"] == "bad home"
    assert re.search(r"ledger file .*mode 0644.*chmod 600", answer["message"]), answer
    # a ledger file given with the home is its owner's only too
    elsewhere = tmp_path / "elsewhere.db"
    elsewhere.write_bytes((home / "ledger.db").read_bytes())
    elsewhere.chmod(0o644)
    (home / "ledger.db").chmod(0o600)
    code, answer = cli("node", "run", "--home", str(home), "--org", "Org1", "--ledger", str(elsewhere))
    assert code == 2 and "elsewhere.db is open to other users" in answer["message"], answer
