"""The same audited process on the real Fabric network (ledger/fabric): a small DPSDA process among
the network's three organisations ends completed, bit-identical to the simulator, and every model's
lineage verifies against the Fabric ledger; a user algorithm folder made by ``algorithm new`` outside
the repository ends completed with the model digests ``consortia simulate`` printed, bit-identical to
``consortia_sdk.simulate``. Skipped where the Fabric binaries are not installed."""

from __future__ import annotations

import secrets

import pytest

import consortia_sdk
from audit.verification import verify_model
from executor.images.recipe import cache_root
from executor.node.supervisor import run_process
from executor.process import (
    ProcessSpec,
    launch,
    map_dataset,
    prepare_image,
)
from executor.runtimes.sandbox import SandboxRuntime
from home.platform import Platform
from tests.ci import require_module
from tests.e2e.conftest import dpsda_case
from tests.e2e.test_own_algorithm import (
    algorithm_class,
    assert_models_are_the_simulated,
    made_checked_simulated,
)
from tests.e2e.test_process import assert_bit_identical, simulated

pytestmark = pytest.mark.fabric


@pytest.fixture(scope="module")
def fabric_platform(tmp_path_factory):
    from tests.support.fabric import shared_fabric

    fab = shared_fabric()
    ledger = fab.ledger()
    yield Platform(ledger, fab.consortium, tmp_path_factory.mktemp("fabric-nodes"))
    ledger.close()


def test_audited_process_on_fabric_equals_the_simulator_and_verifies(fabric_platform):
    p = fabric_platform
    orgs = tuple(p.consortium.msp_ids)[:3]
    case = dpsda_case(orgs=orgs, rounds=3)
    pid = f"p-fabric-{secrets.token_hex(4)}"  # the network persists across sessions
    client = p.client(orgs[0])
    image = prepare_image(client, case.image, "sandbox")
    for o in orgs:
        map_dataset(p.data_root, o, "train", case.datasets[o])
    spec = ProcessSpec(pid, image.record.id, orgs, case.topology, case.params, case.rounds, "train")
    launch(client, spec, consent=p.admins(orgs))
    out = run_process(p, pid, SandboxRuntime, timeout=600)
    assert out.status == "completed", (out.reason, out.agent_errors)
    assert_bit_identical(p, client, pid, simulated(case, orgs), orgs)
    keys = {o: p.consortium.encryption_key(o) for o in orgs}
    for o in orgs:
        rep = verify_model(p.client(o), f"{pid}:{o}", store_root=p.store_root, recipient_keys=keys)
        assert rep.ok, rep.failures


@pytest.mark.parametrize("template", ["sklearn", "torch"])
def test_own_algorithm_outside_the_repository_on_fabric_equals_the_simulator(
    fabric_platform, tmp_path, monkeypatch, template
):
    """A folder made by ``algorithm new --template sklearn|torch`` outside the repository, checked and simulated
    by the CLI on CSV files, built, registered and run audited on the real Fabric network: its final model
    digests are those ``consortia simulate`` printed, and every digest equals ``consortia_sdk.simulate``'s."""
    if template == "torch":
        require_module("torch")
    p = fabric_platform
    orgs = tuple(p.consortium.msp_ids)[:3]
    topology, rounds = {"kind": "ring", "seed": 5}, 2
    made = made_checked_simulated(tmp_path / "work", template, orgs, topology, rounds)
    pid = f"p-own-{secrets.token_hex(4)}"  # the network persists across sessions
    client = p.client(orgs[0])
    image = prepare_image(client, str(made.folder), "sandbox", image_id=f"own-{template}-{pid}:0.1.0")
    for o in orgs:
        map_dataset(p.data_root, o, "train", made.datasets[o])
    launch(
        client,
        ProcessSpec(pid, image.record.id, orgs, topology, made.params, rounds, "train"),
        consent=p.admins(orgs),
    )
    out = run_process(p, pid, SandboxRuntime, timeout=600, warm=True)
    assert out.status == "completed", (out.reason, out.agent_errors)
    assert_models_are_the_simulated(p, pid, made, orgs)
    cls = algorithm_class(
        made.folder, cache_root() / "bundles" / image.reference.split(":", 1)[1], monkeypatch
    )
    fraction = client.get_process(pid).validation_fraction
    sim = consortia_sdk.simulate(
        cls(**made.params),
        made.datasets,
        rounds,
        5,
        consortia_sdk.ring(3),
        orgs,
        validation_fraction=fraction,
    )
    assert_bit_identical(p, client, pid, sim, orgs)
