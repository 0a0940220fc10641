"""Bad input ends the process ``failed`` with the reason on the ledger, whichever door created it.

A process whose organisations have no data folder for its dataset, or whose data has labels outside
the classes the image declares ({1, 2} for the collaborative forest's {0, 1}), passes creation (a
creator cannot see the other organisations' disks) and is refused by each organisation's node agent
before any task key is registered: every task ``failed`` with the reason (the path named), the
process ``failed``, nothing left ``running``. Created through the CLI (``consortia process create
--start``), the gateway (``POST /api/v1/processes`` + ``/start``) and the Python API
(``executor.process.launch``). An unknown topology never gets that far: the three doors refuse it
before writing (tests/api/test_process_validation.py); one that reaches the ledger anyway (straight
to the contract) fails the same way (tests/executor/test_bad_input.py)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from algorithms.step import LocalDataset
from executor.node.supervisor import run_process
from executor.process import ProcessSpec, dataset_dir, launch, map_dataset, prepare_image
from executor.runtimes.sandbox import SandboxRuntime
from tests.ci import require_program


@pytest.fixture(autouse=True, scope="module")
def _bubblewrap():
    require_program("bwrap", "the sandbox runtime")


ORGS = ("Org1MSP", "Org2MSP", "Org3MSP")
PARAMS = {"n_new": 2, "n_share": 1, "n_max": 4, "schedule": ["FIT", "SHARE"]}
TOPOLOGY = {"kind": "ring", "seed": 3}


def _home(platform):
    """Make the platform's root a home (consortia.toml) so that the CLI opens the same ledger."""
    from home.layout import Layout
    from home.settings import write_config

    layout = Layout(
        platform.root, ledger_file=platform.ledger_path.name, crypto_dir=str(platform.consortium.root)
    )
    write_config(layout, platform.consortium)
    return platform.root


def _by_cli(platform, pid, image_id, dataset):
    from typer.testing import CliRunner

    from api.cli import app

    home = _home(platform)
    args = ["process", "create", pid, "--image", image_id, "--consortium", ",".join(ORGS), "--rounds", "2"]
    args += ["--topology", TOPOLOGY["kind"], "--seed", str(TOPOLOGY["seed"]), "--dataset", dataset]
    args += ["--hyperparameters", json.dumps(PARAMS), "--start", "--home", str(home), "--json"]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1])["status"] == "running"


def _by_gateway(platform, pid, image_id, dataset):
    from fastapi.testclient import TestClient

    from api.gateway import create_app
    from exchange.store import ArtifactStore
    from tests.api.conftest import make_gateway

    world = SimpleNamespace(
        ledger=platform.ledger,
        consortium=platform.consortium,
        stores={ORGS[0]: ArtifactStore.at(platform.store_root / ORGS[0])},
    )
    gw = make_gateway(world, ORGS[0], platform.root / "gateway")
    with TestClient(create_app(gw)) as http:
        http.headers["Authorization"] = f"Bearer {gw.tokens.issue('User1')}"
        body = {
            "id": pid,
            "image_id": image_id,
            "consortium": list(ORGS),
            "topology": TOPOLOGY,
            "rounds": 2,
            "hyperparameters": PARAMS,
            "dataset": dataset,
        }
        r = http.post("/api/v1/processes", json=body)
        assert r.status_code in (200, 201), r.text
        r = http.post(f"/api/v1/processes/{pid}/start")  # not before every member accepted
        assert r.status_code == 409 and r.json()["code"] == "CONSENT_MISSING", r.text
        # each member's admin approves the image and accepts, through its own organisation's gateway
        for org in ORGS:
            world.stores[org] = ArtifactStore.at(platform.store_root / org)
            own = gw if org == ORGS[0] else make_gateway(world, org, platform.root / f"gateway-{org}")
            with TestClient(create_app(own)) as member:
                member.headers["Authorization"] = f"Bearer {own.tokens.issue('Admin')}"
                if org != ORGS[0]:
                    r = member.post(
                        f"/api/v1/images/{image_id}/approve", json={"digest": digest_of(platform, image_id)}
                    )
                    assert r.status_code in (200, 201), r.text
                r = member.post(f"/api/v1/processes/{pid}/accept", json={})
                assert r.status_code in (200, 201) and r.json()["decision"] == "accepted", r.text
            if own is not gw:
                own.index.close()
        r = http.post(f"/api/v1/processes/{pid}/start")
        assert r.status_code == 200 and r.json()["status"] == "running", r.text
    gw.index.close()


def digest_of(platform, image_id):
    return platform.client(ORGS[0]).get_image(image_id).digest


def _by_python(platform, pid, image_id, dataset):
    spec = ProcessSpec(pid, image_id, ORGS, TOPOLOGY, PARAMS, 2, dataset)
    assert launch(platform.client(ORGS[0]), spec, consent=platform.admins(ORGS)).status == "running"


DOORS = {"cli": _by_cli, "gateway": _by_gateway, "python": _by_python}


def _no_data(platform, dataset):
    """Nobody has a folder for ``dataset``: each agent names its own missing path."""
    return {o: [str(dataset_dir(platform.data_root, o, dataset)), "does not exist"] for o in ORGS}


def _labels_1_2(platform, dataset):
    rng = np.random.default_rng(0)
    for o in ORGS:
        y = rng.integers(1, 3, size=40)
        map_dataset(platform.data_root, o, dataset, LocalDataset(rng.normal(size=(40, 3)), y))
    return {o: ["labels [2] of dataset"] for o in ORGS}


CASES = {"missing-data-folder": _no_data, "labels-outside-classes": _labels_1_2}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("door", sorted(DOORS))
def test_bad_input_ends_the_process_failed_with_the_reason(platform, door, case):
    pid = f"p-{door}-{case}"
    dataset = case.replace("-", "")
    needles = CASES[case](platform, dataset)
    image = prepare_image(platform.client(ORGS[0]), "collab-rf", "sandbox")
    DOORS[door](platform, pid, image.record.id, dataset)
    out = run_process(platform, pid, SandboxRuntime, timeout=300)
    assert out.status == "failed", (out.reason, out.agent_errors)
    process = platform.client(ORGS[1]).get_process(pid)  # as another member reads it on the ledger
    assert process.status == "failed"
    raw = platform.ledger.evaluate(
        platform.consortium.identity(ORGS[2]), "ExecutionRecord:query", json.dumps({"process_id": pid})
    )
    records = json.loads(raw)
    assert records and not [r for r in records if r["status"] == "running"]
    for r in records:
        assert r["status"] == "failed"
        assert all(n in r["failure_reason"] for n in needles[r["organisation"]]), r["failure_reason"]
    assert any(all(n in process.status_reason for n in needles[o]) for o in ORGS), process.status_reason
