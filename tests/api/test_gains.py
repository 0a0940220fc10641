"""What collaboration bought each member, in every door: ``consortia process get`` (table and JSON) and the
gateway's process and timeline answers list each member's metric alone and together and its gain, from the
last round's signed results; a member whose gain is negative is warned before its model is written (``model
get --out``), and the gateway's model answers carry the flag."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from api.cli import app
from tests.api.conftest import make_gateway
from tests.api.world import build_world, ring_process

runner = CliRunner()
PID = "p-gain"
# organisation -> (isolated, collaborative) balanced accuracy on its own validation slice
SCORES = {"Org1MSP": (0.70, 0.85), "Org2MSP": (0.90, 0.80), "Org3MSP": (0.60, 0.60)}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    w = build_world(tmp_path_factory.mktemp("gains"), processes=0)
    ring_process(w, PID, validation=SCORES)
    ring_process(w, "p-plain")  # no validation slice declared
    yield w
    w.ledger.close()


@pytest.fixture(scope="module")
def home(world):
    world.ledger.close()  # the CLI opens the ledger file itself (the gateway test reopens it)
    return world.root


def cli(home, *args: str, org: str = "Org1", code: int = 0, as_json: bool = True):
    result = runner.invoke(app, [*args, "--home", str(home), "--org", org, *(["--json"] if as_json else [])])
    assert result.exit_code == code, result.output
    return result


def test_the_gateway_answers_carry_the_gains_and_the_negative_flag(world, tmp_path):
    # runs first: the CLI tests below close the world's ledger (the CLI opens the file itself)
    from fastapi.testclient import TestClient

    from api.gateway import create_app

    gw = make_gateway(world, "Org2MSP", tmp_path / "gw")
    try:
        with TestClient(create_app(gw), raise_server_exceptions=False) as client:
            client.headers["Authorization"] = f"Bearer {gw.tokens.issue('User1')}"
            process = client.get(f"/api/v1/processes/{PID}").json()
            assert [(g["organisation"], g["negative"]) for g in process["gains"]] == [
                ("Org1MSP", False),
                ("Org2MSP", True),
                ("Org3MSP", False),
            ]
            timeline = client.get(f"/api/v1/processes/{PID}/timeline").json()
            assert timeline["process"]["gains"] == process["gains"]
            model = client.get(f"/api/v1/models/{PID}:Org2MSP").json()
            assert model["gain"]["negative"] is True and model["gain"]["gain"] == pytest.approx(-0.1)
            download = client.get(f"/api/v1/models/{PID}:Org2MSP/download")
            assert download.status_code == 200, download.text
            assert download.content == world.models[f"{PID}:Org2MSP"]
            assert download.headers["X-Consortia-Gain-Negative"] == "true"
            assert download.headers["X-Consortia-Gain"].startswith("balanced_accuracy 0.9 0.8 ")
            assert client.get(f"/api/v1/models/{PID}:Org1MSP").json()["gain"]["negative"] is False
            plain = client.get("/api/v1/processes/p-plain").json()
            assert plain.get("gains") is None and plain["validation_fraction"] == 0
    finally:
        gw.index.close()


def test_process_get_shows_each_members_gain_over_training_alone(home):
    got = json.loads(cli(home, "process", "get", PID).stdout.strip().splitlines()[-1])
    assert got["validation_fraction"] == 0.2
    gains = {g["organisation"]: g for g in got["gains"]}
    assert list(gains) == ["Org1MSP", "Org2MSP", "Org3MSP"]
    for org, (isolated, collaborative) in SCORES.items():
        g = gains[org]
        assert (g["metric"], g["isolated"], g["collaborative"], g["rows"]) == (
            "balanced_accuracy",
            isolated,
            collaborative,
            12,
        )
        assert g["gain"] == pytest.approx(collaborative - isolated)
        assert g["negative"] is (collaborative < isolated)
    assert [o for o, g in gains.items() if g["negative"]] == ["Org2MSP"]

    table = cli(home, "process", "get", PID, as_json=False).output
    assert "what collaboration bought each member" in table
    rows = {line.split("│")[1].strip(): line for line in table.splitlines() if line.count("│") >= 6}
    assert "+0.1500" in rows["Org1MSP"] and "better" in rows["Org1MSP"]
    assert "-0.1000" in rows["Org2MSP"] and "WORSE than training alone" in rows["Org2MSP"]
    assert "+0.0000" in rows["Org3MSP"] and "same" in rows["Org3MSP"]


def test_a_process_without_a_slice_shows_no_gains(home):
    got = json.loads(cli(home, "process", "get", "p-plain").stdout.strip().splitlines()[-1])
    assert got["gains"] is None and got["validation_fraction"] == 0
    assert "what collaboration bought" not in cli(home, "process", "get", "p-plain", as_json=False).output


def test_a_member_whose_gain_is_negative_is_warned_before_its_model_is_written(home, tmp_path):
    out = tmp_path / "org2.bin"
    result = cli(home, "model", "get", f"{PID}:Org2MSP", "--out", str(out), org="Org2")
    assert "warning: model p-gain:Org2MSP is WORSE than training alone" in result.stderr
    assert "balanced_accuracy 0.9 alone -> 0.8 together" in result.stderr
    got = json.loads(result.stdout.strip().splitlines()[-1])
    assert got["gain"]["negative"] is True and got["downloaded_to"] == str(out) and out.is_file()
    # a member that gained is not warned
    fine = cli(home, "model", "get", f"{PID}:Org1MSP", "--out", str(tmp_path / "org1.bin"))
    assert "WORSE" not in fine.stderr
    assert json.loads(fine.stdout.strip().splitlines()[-1])["gain"]["negative"] is False
