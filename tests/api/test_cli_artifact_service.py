"""``consortia artifacts serve``: an organisation's artifact service from the command line (it reads the
home, so it lives in the CLI above ``exchange``): its own artifacts to its own organisation, 403 to the
others, and refusals with the documented exit codes."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from api.cli import app
from api.cli.output import EXIT_NOT_FOUND, EXIT_USAGE
from exchange.client import ArtifactClient
from exchange.errors import ArtifactError, ArtifactForbidden
from exchange.store import ArtifactStore
from exchange.tls import ClientTLS
from ledger.embedded import EmbeddedLedger
from ledger.identity import Consortium

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()


@pytest.fixture(scope="module")
def consortium(tmp_path_factory):
    return Consortium.generate(tmp_path_factory.mktemp("crypto"), ["Org1", "Org2"])


def _port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def test_the_service_hands_its_own_artifacts_to_its_own_organisation_only(tmp_path, consortium):
    """On 127.0.2.1 without a home: Org2's own artifacts to Org2, 403 to Org1; --json says where."""
    EmbeddedLedger(tmp_path / "ledger.sqlite", consortium).close()
    digest = ArtifactStore(tmp_path / "store", "Org2MSP").put(b"Org2's own bytes").digest
    port = _port("127.0.2.1")
    args = ["--org", "Org2", "--consortium", str(consortium.root), "--store", str(tmp_path / "store")]
    args += ["--ledger", str(tmp_path / "ledger.sqlite"), "--listen", f"127.0.2.1:{port}", "--json"]
    env = {k: v for k, v in os.environ.items() if k != "CONSORTIA_HOME"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "api.cli", "artifacts", "serve", *args],
        cwd=ROOT,
        env={**env, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        url = f"https://127.0.2.1:{port}"
        assert json.loads(proc.stdout.readline()) == {"organisation": "Org2MSP", "url": url}
        deadline = time.monotonic() + 10
        while True:
            try:
                got = ArtifactClient(url, "Org2MSP", ClientTLS(consortium, "Org2MSP"), retries=0).get(digest)
                break
            except ArtifactError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        assert got == b"Org2's own bytes"
        with pytest.raises(ArtifactForbidden):
            ArtifactClient(url, "Org2MSP", ClientTLS(consortium, "Org1MSP"), retries=0).get(digest)
    finally:
        proc.terminate()
        proc.wait(10)


def test_refusals_have_the_documented_exit_codes(tmp_path, consortium, monkeypatch):
    monkeypatch.delenv("CONSORTIA_HOME", raising=False)
    ledger = tmp_path / "ledger.sqlite"
    EmbeddedLedger(ledger, consortium).close()
    base = ["artifacts", "serve", "--consortium", str(consortium.root), "--store", str(tmp_path / "store")]

    def run(*extra: str):
        return runner.invoke(app, [*base, *extra])

    # not a loopback address, a malformed address, an unknown organisation: usage (2)
    r = run("--org", "Org1", "--ledger", str(ledger), "--listen", "10.0.0.1:8443")
    assert r.exit_code == EXIT_USAGE and "loopback" in r.output
    r = run("--org", "Org1", "--ledger", str(ledger), "--listen", "127.0.0.1")
    assert r.exit_code == EXIT_USAGE and "host:port" in r.output
    r = run("--org", "Org9", "--ledger", str(ledger))
    assert r.exit_code == EXIT_USAGE and "--org" in r.output
    # no organisation, no ledger and no home: usage (2)
    assert run("--ledger", str(ledger)).exit_code == EXIT_USAGE
    assert run("--org", "Org1").exit_code == EXIT_USAGE
    # a ledger file that is not there is not created: not found (3)
    r = run("--org", "Org1", "--ledger", str(tmp_path / "none.sqlite"), "--json")
    assert r.exit_code == EXIT_NOT_FOUND and json.loads(r.stdout)["code"] == "no ledger"
    assert not (tmp_path / "none.sqlite").exists()
