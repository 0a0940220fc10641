"""CLI conventions (issue 16 item 6): errors on stderr with stable exit codes, --version, a help
line on every command, whole ids in tables, --json on node and network, names wherever ids are,
a malformed digest is an error, "[completed]" is printed as such."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

from api.cli import app
from tests.api.world import IMAGE_DIGEST, build_world

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    root = tmp_path_factory.mktemp("conv")
    build_world(root).ledger.close()
    return root


def test_version_and_a_help_line_on_every_command():
    r = runner.invoke(app, ["--version"])
    assert r.exit_code == 0 and r.stdout.startswith("consortia ") and r.stdout.split()[1][0].isdigit()
    missing = []

    def walk(cmd, path):
        if hasattr(cmd, "commands"):  # a group (typer may bring its own click)
            for name, sub in cmd.commands.items():
                walk(sub, f"{path} {name}")
        elif not (cmd.help or "").strip():
            missing.append(path)

    walk(typer.main.get_command(app), "consortia")
    assert missing == []
    helps = runner.invoke(app, ["model", "--help"]).stdout + runner.invoke(app, ["ledger", "--help"]).stdout
    assert "inspect" not in helps and "export" in helps


def test_errors_go_to_stderr_with_stable_codes(home):
    r = runner.invoke(app, ["image", "get", "nope:1", "--home", str(home)])
    assert r.exit_code == 3 and r.stdout == "" and "NOT_FOUND" in r.stderr  # not found
    r = runner.invoke(app, ["image", "revoke", "rf:1", "--home", str(home), "--org", "Org2"])
    assert r.exit_code == 1 and r.stdout == "" and "FORBIDDEN" in r.stderr  # refused
    r = runner.invoke(app, ["image", "list", "--home", str(home), "--org", "Nobody"])
    assert r.exit_code == 2 and r.stdout == ""  # usage
    r = runner.invoke(app, ["image", "get", "nope:1", "--home", str(home), "--json"])
    assert r.exit_code == 3 and json.loads(r.stdout)["code"] == "NOT_FOUND"  # --json: also on stdout


def test_malformed_digest_is_an_error_not_an_empty_result(home):
    for args in (
        ["provenance", "artifact", "sha256:xyz"],
        ["provenance", "artifact", "abc"],
        ["image", "register", "x", "1", "--digest", "sha256:12", "--algorithm", "a"],
        ["image", "approve", "rf:1", "--digest", "md5:00"],
    ):
        r = runner.invoke(app, [*args, "--home", str(home)])
        assert r.exit_code == 2 and "not sha256:<64" in r.stderr, args
    ok = runner.invoke(app, ["provenance", "artifact", IMAGE_DIGEST, "--home", str(home), "--json"])
    assert ok.exit_code == 0


def test_tables_show_whole_ids_and_markup_is_not_swallowed(home):
    r = runner.invoke(app, ["provenance", "artifacts", "proc-0", "--by", "Org2", "--home", str(home)])
    assert r.exit_code == 0 and "…" not in r.stdout
    digests = json.loads(
        runner.invoke(
            app, ["provenance", "artifacts", "proc-0", "--by", "Org2", "--home", str(home), "--json"]
        ).stdout
    )
    assert digests and all(a["digest"] in r.stdout for a in digests)  # names accepted in --by
    hist = runner.invoke(app, ["provenance", "execution", "proc-0", "1", "Org2", "--home", str(home)])
    assert hist.exit_code == 0 and '"status": "completed"' in hist.stdout and "…" not in hist.stdout
    # a value in square brackets is printed, not taken for Rich markup (as "[completed]" was)
    r = runner.invoke(
        app,
        [
            "image",
            "register",
            "br",
            "1",
            "--digest",
            IMAGE_DIGEST,
            "--algorithm",
            "a",
            "--description",
            "[completed] by [bold]us[/bold]",
            "--home",
            str(home),
        ],
    )
    assert r.exit_code == 0 and "[completed] by [bold]us[/bold]" in r.stdout


def test_node_and_network_accept_json_and_names(monkeypatch):
    env = {"PYTHONPATH": str(ROOT)}
    monkeypatch.delenv("CONSORTIA_HOME", raising=False)
    for spelling, as_json in ((["--json"], True), (["-o", "json"], True), (["--output=json"], True)):
        r = runner.invoke(app, ["node", "run", "--org", "Org1", *spelling])
        assert r.exit_code == 2 and "--consortium" in r.stderr, spelling
        assert json.loads(r.stdout) == {
            "ok": False,
            "code": "usage",
            "message": r.stderr.partition(": ")[2].strip(),
        }
    for spelling in (["-o", "wide"], ["-o", "table"], []):
        r = runner.invoke(app, ["node", "run", "--org", "Org1", *spelling])
        assert r.exit_code == 2 and "--consortium" in r.stderr and r.stdout == "", spelling
    r = runner.invoke(app, ["node", "run", "--org", "Org1", "-o", "yaml"])
    assert r.exit_code == 2 and "'-o' / '--output'" in r.output and "yaml" in r.output
    # fabric-network/network is a thin wrapper of `consortia network`: the same options and conventions
    proc = subprocess.run(
        [str(ROOT / "fabric-network" / "network"), "up", "--help"],
        capture_output=True,
        text=True,
        env={**env, "PATH": "/usr/bin:/bin", "HOME": str(Path.home())},
        timeout=60,
    )
    assert proc.returncode == 0 and "--json" in proc.stdout and "--output" in proc.stdout
    r = runner.invoke(app, ["network", "up", "--hosts", "Org1=10.1.2.3", "-o", "json"])
    assert r.exit_code == 2 and "10.1.2.3 is not a loopback address" in r.stderr
    assert json.loads(r.stdout)["code"] == "bad network option" and len(r.stderr.splitlines()) == 1
    r = runner.invoke(app, ["network", "channel", "inspect", "--block", "/nonexistent/x.block", "--json"])
    assert r.exit_code == 1 and r.stderr.startswith("ChannelError: no block at /nonexistent/x.block")


def test_model_ids_take_the_organisation_by_name_or_msp_id(home):
    def answer(*args):
        r = runner.invoke(app, [*args, "--home", str(home), "--json"])
        assert r.exit_code == 0, r.stderr
        return json.loads(r.stdout)

    by_msp = answer("model", "get", "proc-0:Org1MSP")
    assert by_msp["id"] == "proc-0:Org1MSP" and answer("model", "get", "proc-0:Org1") == by_msp
    lineage = answer("provenance", "model", "proc-0:Org1")
    assert lineage == answer("provenance", "model", "proc-0:Org1MSP") and lineage["nodes"]
    r = runner.invoke(app, ["model", "get", "proc-0:Nobody", "--home", str(home)])
    assert r.exit_code == 3 and "NOT_FOUND" in r.stderr  # an unknown organisation: the contract's answer


def test_audit_verify_accepts_the_consortium_crypto_folder(home, tmp_path):
    bundle = tmp_path / "bundle"
    r = runner.invoke(
        app, ["audit", "export", "proc-0:Org1MSP", "--out", str(bundle), "--home", str(home), "--json"]
    )
    assert r.exit_code == 0, r.stderr
    r = runner.invoke(app, ["audit", "verify", str(bundle), "--ca", str(home / "crypto"), "--json"])
    assert r.exit_code == 0 and json.loads(r.stdout)["ok"] is True
    r = runner.invoke(app, ["audit", "verify", str(bundle), "--ca", str(tmp_path / "empty"), "--json"])
    assert r.exit_code == 3


def test_wide_tables_show_every_column(home):
    def listing(*output):
        r = runner.invoke(app, ["process", "list", "--home", str(home), *output])
        assert r.exit_code == 0, r.stderr
        return r.stdout

    table, wide = listing(), listing("-o", "wide")
    assert listing("-o", "table") == table and "rounds" in table and "image_digest" not in table
    for field in ("rounds", "image_digest", "hyperparameters", "status_reason", "tx_id"):
        assert field in wide, field
    assert json.loads(listing("-o", "json"))[0]["image_digest"] in wide  # whole values, never cut


def test_every_command_takes_the_one_output_option():
    """-o table|wide|json (and its alias --json) on every command, the node's, network's and artifact
    service's included."""
    without = []

    def walk(cmd, path):
        if hasattr(cmd, "commands"):
            for name, sub in cmd.commands.items():
                walk(sub, f"{path} {name}")
            return
        options = {o: p for p in cmd.params for o in getattr(p, "opts", [])}
        output = options.get("-o")
        if output is None or output.name != "output" or options.get("--json") is None:
            without.append(path)

    walk(typer.main.get_command(app), "consortia")
    assert without == []
