"""The CLI package (issue 18 item 4): one session per command, always closed; processes created
through executor.process.launch; the model data key opened by exchange.model_seal; names accepted in
positional organisation arguments; errors of every command on stderr with the documented codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from api.cli import app, session
from api.cli.output import EXIT_NOT_FOUND, EXIT_REFUSED, EXIT_USAGE
from exchange.model_seal import open_data_key
from ledger.errors import Forbidden
from tests.api.test_cli_conventions import home  # noqa: F401 -- the same world, one per module

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()


def invoke(home: Path, *args: str, org: str = "Org1"):
    return runner.invoke(app, [*args, "--home", str(home), "--org", org, "--json"])


def test_every_command_closes_its_session_even_when_refused(home, monkeypatch):
    opened, closed = [], []
    real_init, real_close = session.Session.__init__, session.Session.close

    def init(self, *a, **kw):
        real_init(self, *a, **kw)
        opened.append(self)

    def close(self):
        closed.append(self)
        real_close(self)

    monkeypatch.setattr(session.Session, "__init__", init)
    monkeypatch.setattr(session.Session, "close", close)
    assert invoke(home, "image", "list").exit_code == 0
    assert invoke(home, "image", "get", "nope:1").exit_code == EXIT_NOT_FOUND  # refused mid-command
    assert invoke(home, "token", "list").exit_code == 0  # (token commands never closed theirs)
    assert invoke(home, "provenance", "process", "proc-0").exit_code == 0  # index opened too
    assert len(opened) == 4 and closed == opened


def test_the_ledger_is_opened_by_the_one_factory(home, monkeypatch):
    seen = []
    real = session.open_home_ledger

    def spy(settings, consortium):
        seen.append(settings.ledger_path)
        return real(settings, consortium)

    monkeypatch.setattr(session, "open_home_ledger", spy)
    assert invoke(home, "process", "list").exit_code == 0
    assert seen == [home.resolve() / "ledger.db"]


def test_process_create_goes_through_launch_and_accepts_names(home, monkeypatch):
    import executor.process

    calls = []
    real = executor.process.launch

    def spy(client, spec, *, start=True, consent=None):
        calls.append((spec, start))
        return real(client, spec, start=start, consent=consent)

    monkeypatch.setattr(executor.process, "launch", spy)
    common = ["--image", "rf:1", "--consortium", "Org1, Org2", "--rounds", "1", "--topology", "ring"]
    r = invoke(home, "process", "create", "p-names", *common)
    assert r.exit_code == 0, r.output
    rec = json.loads(r.stdout)
    assert rec["status"] == "created" and rec["consortium"] == ["Org1MSP", "Org2MSP"]
    assert rec["image_digest"] == json.loads(invoke(home, "image", "get", "rf:1").stdout)["digest"]
    r = invoke(home, "process", "create", "p-started", *common, "--start")
    assert r.exit_code == 0 and json.loads(r.stdout)["status"] == "running"
    assert [(s.process_id, s.consortium, start) for s, start in calls] == [
        ("p-names", ("Org1MSP", "Org2MSP"), False),
        ("p-started", ("Org1MSP", "Org2MSP"), True),
    ]
    # the specification's own checks (distinct members) are bad input, before anything is written
    r = invoke(
        home, "process", "create", "p-twice", *common[:2], "--consortium", "Org1,Org1MSP", "--rounds", "1"
    )
    assert r.exit_code == EXIT_USAGE and "distinct" in r.stderr
    assert invoke(home, "process", "get", "p-twice").exit_code == EXIT_NOT_FOUND


def test_positional_organisations_accept_names_and_refuse_strangers(home):
    r = invoke(home, "model", "grant", "proc-0:Org1MSP", "Org4")
    assert r.exit_code == 0, r.output
    assert "Org4MSP" in json.loads(r.stdout)["access"] and "wrapped_key" not in r.stdout
    r = invoke(home, "model", "grant", "proc-0:Org1MSP", "Nobody")
    assert r.exit_code == EXIT_USAGE and "not an organisation" in r.stderr
    r = invoke(home, "model", "revoke", "proc-0:Org1MSP", "Nobody")
    assert r.exit_code == EXIT_USAGE
    r = invoke(home, "provenance", "execution", "proc-0", "2", "Org3")
    assert r.exit_code == 0 and all(h["value"]["organisation"] == "Org3MSP" for h in json.loads(r.stdout))
    # a model this organisation cannot open: the contract's refusal, not a traceback
    r = invoke(home, "model", "grant", "proc-0:Org1MSP", "Org3", org="Org4")
    assert r.exit_code == EXIT_REFUSED and r.stderr.strip()


def test_open_data_key_is_public_and_refuses_without_a_sealed_key(home):
    from ledger.identity import Consortium

    with pytest.raises(Forbidden, match="holds no sealed key"):
        open_data_key(Consortium(home / "crypto"), "Org1MSP", {"id": "m", "wrapped_key": ""})


def test_ledger_commands_report_errors_on_stderr(home, tmp_path):
    crypto = str(home / "crypto")
    r = runner.invoke(app, ["ledger", "verify", str(home / "ledger.db"), "--crypto", str(tmp_path / "none")])
    assert r.exit_code == EXIT_USAGE and r.stdout == "" and "ledger not verified" in r.stderr
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"not a ledger")
    r = runner.invoke(app, ["ledger", "verify", str(bad), "--crypto", crypto])  # a file that does not verify
    assert r.exit_code == EXIT_REFUSED and r.stdout == "" and "is not a readable ledger file" in r.stderr
    r = runner.invoke(app, ["ledger", "verify", str(bad), "--crypto", crypto, "--json"])
    out = json.loads(r.stdout)
    assert out["ok"] is False and out["error"] and r.stderr.strip()
    args = ["ledger", "checkpoint", str(bad), "--crypto", crypto, "--out", str(tmp_path / "cp.json")]
    r = runner.invoke(app, args)
    assert r.exit_code == EXIT_REFUSED and r.stdout == "" and "the ledger does not verify" in r.stderr
    assert not (tmp_path / "cp.json").exists()
    r = runner.invoke(app, ["ledger", "verify", str(home / "ledger.db"), "--crypto", crypto])
    assert r.exit_code == 0 and "ledger verified" in r.stdout and r.stderr == ""


def test_ledger_commands_on_a_missing_file_are_not_found(home, tmp_path):
    crypto, missing = str(home / "crypto"), tmp_path / "none.db"
    for args in (["verify"], ["checkpoint", "--out", str(tmp_path / "cp.json")]):
        r = runner.invoke(app, ["ledger", *args, str(missing), "--crypto", crypto])
        assert r.exit_code == EXIT_NOT_FOUND and r.stdout == "" and f"no ledger file at {missing}" in r.stderr
    assert not missing.exists() and not (tmp_path / "cp.json").exists()


def test_node_and_network_take_json_through_the_app():
    r = runner.invoke(app, ["network", "status", "--help"])
    assert r.exit_code == 0 and "--json" in r.stdout and "--output" in r.stdout
    r = runner.invoke(app, ["node", "run", "--help"])
    assert r.exit_code == 0 and "--json" in r.stdout and "--output" in r.stdout and "--org" in r.stdout


def test_process_watch_prints_square_brackets_literally(home):
    r = runner.invoke(app, ["process", "watch", "proc-0", "--home", str(home)])
    assert r.exit_code == 0 and "proc-0 [completed] round 3" in r.stdout


def test_python_dash_m_and_the_version(tmp_path):
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "api.cli", "--version"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        timeout=120,
    )
    assert proc.returncode == 0 and proc.stdout.startswith("consortia ") and proc.stderr == ""


def test_every_command_has_json_and_dash_o():
    import typer.main

    missing = []

    def walk(cmd, path):
        if hasattr(cmd, "commands"):  # a group (typer may bring its own click)
            for name, sub in cmd.commands.items():
                walk(sub, f"{path} {name}")
        elif path not in ("consortia node", "consortia network"):  # their own --json (test above)
            opts = {o for p in cmd.params for o in p.opts}
            if not {"--json", "-o", "--output"} <= opts:
                missing.append(path)

    walk(typer.main.get_command(app), "consortia")
    assert missing == []


def test_demo_json_reports_a_refusal_on_both_streams(tmp_path):
    r = runner.invoke(app, ["demo", "--backend", "nope", "--out", str(tmp_path / "d"), "--json"])
    assert r.exit_code == EXIT_USAGE and "unknown backend" in r.stderr
    assert json.loads(r.stdout) == {
        "ok": False,
        "code": "demo failed",
        "message": f"the demo ended with exit code 2 (details on stderr; folder {tmp_path / 'd'})",
        "exit_code": 2,
    }


def test_serve_json_prints_where_it_listens(home):
    import socket
    import subprocess
    import sys

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "api.cli", "serve", "--home", str(home), "--org", "Org2"]
        + ["--port", str(port), "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    try:
        line = proc.stdout.readline()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    info = json.loads(line)
    assert info["organisation"] == "Org2MSP" and info["url"] == f"http://127.0.0.1:{port}"


def test_dash_o_json_is_json_and_wide_is_the_whole_table(home):
    as_json = runner.invoke(app, ["image", "list", "--home", str(home), "--json"])
    dash_o = runner.invoke(app, ["image", "list", "--home", str(home), "-o", "json"])
    assert dash_o.exit_code == 0 and json.loads(dash_o.stdout) == json.loads(as_json.stdout)
    wide = runner.invoke(app, ["image", "list", "--home", str(home), "-o", "wide"])
    assert wide.exit_code == 0 and all(i["digest"] in wide.stdout for i in json.loads(as_json.stdout))
    r = runner.invoke(app, ["image", "get", "nope:1", "--home", str(home), "-o", "json"])
    assert r.exit_code == EXIT_NOT_FOUND and json.loads(r.stdout)["code"] == "NOT_FOUND"
    r = runner.invoke(app, ["audit", "verify", str(home / "none"), "--ca", str(home / "none"), "-o", "json"])
    assert r.exit_code == EXIT_NOT_FOUND and json.loads(r.stdout)["ok"] is False
    r = runner.invoke(app, ["image", "list", "--home", str(home), "-o", "yaml"])
    assert r.exit_code == EXIT_USAGE and r.stdout == ""
