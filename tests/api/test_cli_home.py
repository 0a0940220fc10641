"""``consortia init`` and the one home layout (home/): a new user's first command."""

from __future__ import annotations

import json
import tomllib

import pytest
from typer.testing import CliRunner

from api.cli import app
from home.errors import LedgerNotFound
from home.layout import Layout
from home.ledger import open_ledger
from home.settings import load
from ledger.identity import Consortium

runner = CliRunner()


def run(*args: str, code: int = 0):
    result = runner.invoke(app, list(args))
    assert result.exit_code == code, (result.stdout, result.stderr)
    return result


def test_init_makes_a_home_the_cli_then_uses(tmp_path):
    home = tmp_path / "h"
    info = json.loads(run("init", "--orgs", "Acme,Beta,Gamma", "--home", str(home), "--json").stdout)
    assert (
        info["organisations"] == ["AcmeMSP", "BetaMSP", "GammaMSP"]
        and info["default_organisation"] == "AcmeMSP"
    )
    cfg = tomllib.loads((home / "consortia.toml").read_text())
    assert cfg["ledger"] == {
        "backend": "embedded",
        "path": "ledger.db",
        "policy": "TWO",
        "batch_timeout": 0.01,
    }
    assert cfg["consortium"]["organisations"] == ["AcmeMSP", "BetaMSP", "GammaMSP"]
    for msp in info["organisations"]:
        org = cfg["organisations"][msp]
        assert (home / org["identity"] / "signcerts").is_dir()  # the identity it names exists
        assert org["data"] == f"data/{msp}" and org["artifacts"] == f"artifacts/{msp}"
        assert (home / org["data"]).is_dir() and (home / org["artifacts"]).is_dir()
    assert Consortium(home / "crypto").msp_ids == ("AcmeMSP", "BetaMSP", "GammaMSP")
    assert (home / "ledger.db").is_file()
    # the CLI's default organisation is the home's first one, not a hard-coded Org1
    rec = json.loads(
        run(
            "image",
            "register",
            "svm",
            "1",
            "--digest",
            "sha256:" + "ab" * 32,
            "--algorithm",
            "svm",
            "--home",
            str(home),
            "--json",
        ).stdout
    )
    assert rec["owner"] == "AcmeMSP"
    listed = json.loads(run("image", "list", "--home", str(home), "--org", "Beta", "--json").stdout)
    assert [i["id"] for i in listed] == ["svm:1"]


def test_init_refuses_an_existing_home_and_bad_names(tmp_path):
    home = tmp_path / "h"
    run("init", "--orgs", "Org1,Org2", "--home", str(home))
    r = run("init", "--orgs", "Org1,Org2", "--home", str(home), code=2)
    assert "already holds a consortium" in r.stderr and "--force" in r.stderr and r.stdout == ""
    run("init", "--orgs", "Org1,Org2,Org3", "--home", str(home), "--force")
    assert load(home).organisations == ("Org1MSP", "Org2MSP", "Org3MSP")
    for bad in ("Org1,Org1", "Org-1", "Org1MSP", ""):
        assert run("init", "--orgs", bad, "--home", str(tmp_path / "x"), code=2).stderr
    assert not (tmp_path / "x" / "consortia.toml").exists()


def test_a_missing_ledger_is_an_error_naming_the_path_and_init(tmp_path):
    home = tmp_path / "h"
    run("init", "--orgs", "Org1,Org2", "--home", str(home))
    (home / "ledger.db").unlink()
    r = run("process", "list", "--home", str(home), "--json", code=3)
    assert str(home / "ledger.db") in r.stderr and "consortia init" in r.stderr
    assert not (home / "ledger.db").exists()  # nothing was created behind the user's back
    with pytest.raises(LedgerNotFound):
        open_ledger(load(home), Consortium(home / "crypto"))
    open_ledger(load(home), Consortium(home / "crypto"), create=True).close()  # only when asked
    assert (home / "ledger.db").is_file()
    # a folder that is not a home at all names `consortia init` too
    r = run("image", "list", "--home", str(tmp_path / "elsewhere"), code=3)
    assert "consortia init" in r.stderr and r.stdout == ""


def test_one_layout_for_cli_platform_and_config(tmp_path):
    from home.platform import Platform

    home = tmp_path / "h"
    run("init", "--orgs", "Org1,Org2", "--home", str(home))
    settings = load(home)
    platform = Platform(None, Consortium(settings.crypto), home, settings.ledger_path)
    layout = Layout(home.resolve())
    assert (
        settings.paths.data("Org1MSP"),
        settings.paths.store_root,
        settings.paths.state_root,
        settings.ledger_path,
        settings.crypto,
    ) == (layout.data("Org1MSP"), layout.store_root, layout.state_root, layout.ledger, layout.crypto)
    assert (platform.data_root, platform.store_root, platform.state_root) == (
        layout.data_root,
        layout.store_root,
        layout.state_root,
    )
    cfg = tomllib.loads((home / "consortia.toml").read_text())
    assert home / cfg["organisations"]["Org1MSP"]["artifacts"] == platform.store_root / "Org1MSP"
    assert home / cfg["organisations"]["Org1MSP"]["data"] == platform.data_root / "Org1MSP"
    assert "--data" in (cmd := platform.agent_command("Org1MSP", "p", "sandbox")) and cmd[
        cmd.index("--data") + 1
    ] == str(layout.data("Org1MSP"))


def test_the_config_names_the_identity_and_data_each_organisation_uses(tmp_path):
    import shutil

    home = tmp_path / "h"
    run("init", "--orgs", "Org1,Org2", "--home", str(home))
    cfg = (home / "consortia.toml").read_text()
    # Org2's node keeps its data elsewhere and acts with Admin's identity instead of User1's
    cfg = cfg.replace('data = "data/Org2MSP"', 'data = "elsewhere/org2-data"').replace(
        "users/User1@org2.example.com/msp", "users/Admin@org2.example.com/msp"
    )
    (home / "consortia.toml").write_text(cfg)
    assert load(home).paths.data("Org2MSP") == home.resolve() / "elsewhere" / "org2-data"
    from home.platform import Platform

    cmd = Platform(None, Consortium(home / "crypto"), home, home / "ledger.db").agent_command(
        "Org2MSP", "p", "sandbox"
    )
    assert cmd[cmd.index("--data") + 1] == str(home.resolve() / "elsewhere" / "org2-data")  # the agents too
    rec = json.loads(
        run(
            "image",
            "register",
            "svm",
            "1",
            "--digest",
            "sha256:" + "ab" * 32,
            "--algorithm",
            "svm",
            "--org",
            "Org2",
            "--home",
            str(home),
            "--json",
        ).stdout
    )
    assert rec["registered_by"].startswith("Admin@org2")
    (tmp_path / "d.csv").write_text("a,b\n1,2\n3,4\n")
    run("data", "import", str(tmp_path / "d.csv"), "--dataset", "d", "--org", "Org2", "--home", str(home))
    assert (home / "elsewhere" / "org2-data" / "d" / "dataset.npz").is_file()
    shutil.rmtree(
        home / "crypto" / "peerOrganizations" / "org2.example.com" / "users" / "Admin@org2.example.com"
    )
    r = run("image", "list", "--org", "Org2", "--home", str(home), code=3)
    assert "Admin@org2.example.com/msp" in r.stderr and "consortia.toml" in r.stderr


@pytest.mark.parametrize(
    "old, new, words",
    [
        ('backend = "embedded"', 'backnd = "embedded"', "unknown key [ledger] backnd"),
        ("batch_timeout = 0.01", 'batch_timeout = "soon"', "[ledger] batch_timeout = 'soon'"),
    ],
)
def test_a_misspelt_or_mistyped_key_is_refused_naming_it_and_the_file(tmp_path, old, new, words):
    home = tmp_path / "h"
    run("init", "--orgs", "Org1,Org2", "--home", str(home))
    cfg = home / "consortia.toml"
    cfg.write_text(cfg.read_text().replace(old, new))
    r = run("image", "list", "--home", str(home), code=2)
    assert words in r.stderr and str(cfg.resolve()) in r.stderr and r.stdout == ""
    out = json.loads(run("image", "list", "--home", str(home), "--json", code=2).stdout)
    assert words in out["message"] and out["code"] == "bad home" and out["ok"] is False
