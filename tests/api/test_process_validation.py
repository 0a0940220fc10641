"""One validation of a new process (executor.images.declarations.validate_process) behind the three doors:
the CLI, the gateway and the Python API refuse an unknown topology, hyper-parameters the image's
algorithm does not accept and an invalid dataset name -- and write nothing."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from api.cli import app

RF = "algorithms.collab_rf.algorithm:CollaborativeRandomForest"
DIGEST = "sha256:" + "cd" * 32
BAD = [
    ({"kind": "full", "seed": 1}, {}, "", "topology kind 'full' is not known"),
    ({"kind": "ring", "seed": 1}, {"n_trees": 3}, "", "'n_trees' is not accepted"),
    ({"kind": "ring", "seed": 1}, {"n_new": 0}, "", "n_new must be a positive integer"),
    ({"kind": "ring", "seed": 1}, {}, "../x", "dataset name '../x' is not valid"),
]


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    root = tmp_path_factory.mktemp("validation") / "home"
    runner = CliRunner()
    assert runner.invoke(app, ["init", "--orgs", "Org1,Org2", "--home", str(root)]).exit_code == 0
    r = runner.invoke(
        app, ["image", "register", "rf", "1", "--digest", DIGEST, "--algorithm", RF, "--home", str(root)]
    )
    assert r.exit_code == 0, r.stderr
    return root


@pytest.mark.parametrize("topology,hyper,dataset,needle", BAD)
def test_cli_refuses_before_writing(home, topology, hyper, dataset, needle):
    args = [
        "process",
        "create",
        "p-bad",
        "--image",
        "rf:1",
        "--consortium",
        "Org1,Org2",
        "--rounds",
        "2",
        "--topology",
        topology["kind"],
        "--seed",
        str(topology["seed"]),
        "--hyperparameters",
        json.dumps(hyper),
        "--home",
        str(home),
        "--json",
    ]
    if dataset:
        args += ["--dataset", dataset]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 2 and needle in r.stderr
    assert json.loads(r.stdout)["code"] == "INVALID_ARGUMENT"
    listed = CliRunner().invoke(app, ["process", "list", "--home", str(home), "--json"])
    assert "p-bad" not in [p["id"] for p in json.loads(listed.stdout)]


def test_cli_accepts_a_valid_spec_and_names_a_missing_dataset(home):
    """Organisation names are accepted in --consortium; a valid spec goes through, and an
    organisation that has not imported the dataset is told so (a warning, not a refusal)."""
    ok = CliRunner().invoke(
        app,
        [
            "process",
            "create",
            "p-ok",
            "--image",
            "rf:1",
            "--consortium",
            "Org1,Org2MSP",
            "--rounds",
            "1",
            "--dataset",
            "fraud",
            "--home",
            str(home),
            "--json",
        ],
    )
    assert ok.exit_code == 0, ok.stderr
    assert f"no dataset 'fraud' at {home.resolve() / 'data' / 'Org1MSP' / 'fraud'}" in ok.stderr
    got = json.loads(
        CliRunner().invoke(app, ["process", "get", "p-ok", "--home", str(home), "--json"]).stdout
    )
    assert got["consortium"] == ["Org1MSP", "Org2MSP"] and got["dataset"] == "fraud"


@pytest.fixture(scope="module")
def registered(world):
    """The image the gateway and Python cases launch (registered once, by Org1 and by Org2)."""
    world.clients["Org1MSP"].register_image("rfdecl", "1", RF, DIGEST)
    world.clients["Org2MSP"].register_image("rfpy", "1", RF, DIGEST)


@pytest.mark.parametrize("topology,hyper,dataset,needle", BAD)
def test_gateway_refuses_before_writing(world, gateways, registered, topology, hyper, dataset, needle):
    _, org1, _ = gateways["Org1MSP"]
    before = org1.get("/api/v1/health").json()["block_height"]
    r = org1.post(
        "/api/v1/processes",
        json={
            "id": "p-gw-bad",
            "image_id": "rfdecl:1",
            "consortium": ["Org1MSP"],
            "topology": topology,
            "rounds": 1,
            "hyperparameters": hyper,
            "dataset": dataset,
        },
    )
    if (
        topology["kind"] == "full" or dataset
    ):  # the OpenAPI schema itself names the kinds and the name pattern
        assert r.status_code == 422 and r.json()["code"] == "INVALID_REQUEST"
        assert ("kind" if dataset == "" else "dataset") in json.dumps(r.json()["details"])
    else:  # what only the image's algorithm can judge
        assert (
            r.status_code == 400 and r.json()["code"] == "INVALID_ARGUMENT" and needle in r.json()["message"]
        )
    assert org1.get("/api/v1/health").json()["block_height"] == before


@pytest.mark.parametrize("topology,hyper,dataset,needle", BAD)
def test_python_launch_refuses_before_writing(world, registered, topology, hyper, dataset, needle):
    from executor.images.declarations import InvalidProcessSpec
    from executor.process import ProcessSpec, launch

    c = world.clients["Org2MSP"]
    height = world.ledger.block_height(world.consortium.identity("Org2MSP"))
    with pytest.raises(InvalidProcessSpec, match=needle.replace("(", r"\(").replace(".", r"\.")):
        launch(c, ProcessSpec("p-py-bad", "rfpy:1", ("Org2MSP",), topology, hyper, 1, dataset or "default"))
    assert world.ledger.block_height(world.consortium.identity("Org2MSP")) == height


def test_cli_refuses_hyperparameters_nested_5000_deep_clearly(home):
    """JSON given on the command line is decoded with a bounded depth (issue 33 item 3): a clear
    refusal (exit 2), not a RecursionError traceback."""
    deep = "[" * 5000 + "]" * 5000
    args = ["process", "create", "p-deep", "--image", "rf:1", "--consortium", "Org1,Org2", "--rounds", "2"]
    r = CliRunner().invoke(app, [*args, "--hyperparameters", deep, "--home", str(home), "--json"])
    assert r.exit_code == 2 and not isinstance(r.exception, RecursionError)
    assert "nested deeper than the decoder goes" in r.stdout + r.stderr


@pytest.mark.parametrize("unknown", ["Org5", "Org5MSP"])
def test_cli_refuses_an_organisation_its_home_does_not_know(home, unknown):
    """A member added later must be taken into this home first (``join --force``): before, the name went
    through as an MSP id, and the process could never start (README "Deploying a consortium")."""
    args = ["process", "create", "p-unknown", "--image", "rf:1", "--consortium", f"Org1,{unknown}"]
    r = CliRunner().invoke(app, [*args, "--rounds", "2", "--topology", "ring", "--home", str(home), "--json"])
    assert r.exit_code == 2 and f"'{unknown}' is not an organisation of this consortium" in r.stderr
    assert "join --force" in r.stderr
    listed = CliRunner().invoke(app, ["process", "list", "--home", str(home), "--json"])
    assert "p-unknown" not in [p["id"] for p in json.loads(listed.stdout)]
