"""End to end on the embedded ledger (executor.process): every algorithm's audited process equals
the simulator bit for bit; the estimator-origin matrix from the ledger equals the simulator's; the
privacy budget stops a process cleanly; a killed agent is restarted and the process ends complete
and verified; an organisation whose image digest differs refuses to run it."""

from __future__ import annotations

import shutil

import pytest

from algorithms import codec
from algorithms.simulator import simulate
from algorithms.topologies.static import complete, ring
from algorithms.validation import DEFAULT_FRACTION
from audit.verification import verify_model
from executor.node.supervisor import run_process
from executor.process import (
    ProcessSpec,
    collect_models,
    dataset_dir,
    estimator_origins,
    launch,
    map_dataset,
    prepare_image,
)
from executor.runtimes.sandbox import SandboxRuntime
from tests.ci import require_module
from tests.e2e.conftest import ORGS3, collab_rf_case, dpsda_case, dpsda_gaussian_case, ggm_case, vae_case
from tests.support.faults import kill_at_environment

TOPOLOGIES = {"ring": ring, "complete": complete}


def simulated(case, orgs=ORGS3, validation_fraction=0.0):
    topo = TOPOLOGIES[case.topology["kind"]](len(orgs))
    return simulate(
        case.algorithm(**case.params),
        case.datasets,
        case.rounds,
        case.topology["seed"],
        topo,
        orgs,
        validation_fraction=validation_fraction,
    )


def start(platform, case, pid, runtime="sandbox", orgs=ORGS3, engine=None):
    client = platform.client(orgs[0])
    image = prepare_image(client, case.image, runtime, engine=engine)
    for o in orgs:
        map_dataset(platform.data_root, o, "train", case.datasets[o])
    launch(
        client,
        ProcessSpec(
            pid,
            image.record.id,
            tuple(orgs),
            case.topology,
            case.params,
            case.rounds,
            "train",
            case.privacy_budget,
        ),
        consent=platform.admins(orgs),
    )
    return client, image


def assert_bit_identical(platform, client, pid, sim, orgs=ORGS3):
    """Every state, message and model digest on the ledger equals the simulator's."""
    recs = client.query_executions(pid)
    assert len(recs) == sim.rounds * len(orgs)
    for r in recs:
        assert r.status == "completed"
        out = r.result.outputs
        assert out.state == sim.state_digests[r.round][r.organisation]
        sent = {(r.organisation, m.recipient): m.digest for m in out.messages}
        assert sent == {k: v for k, v in sim.message_digests[r.round - 1].items() if k[0] == r.organisation}
    models = collect_models(platform, pid)
    assert models == {o: sim.models[o] for o in orgs}


def test_process_spec_is_validated():
    with pytest.raises(ValueError, match="rounds"):
        ProcessSpec("p", "i", ORGS3, {"kind": "ring", "seed": 1}, {}, 0)
    with pytest.raises(ValueError, match="seed"):
        ProcessSpec("p", "i", ORGS3, {"kind": "ring"}, {}, 2)
    with pytest.raises(ValueError, match="distinct"):
        ProcessSpec("p", "i", ("A", "A"), {"kind": "ring", "seed": 1}, {}, 2)
    with pytest.raises(ValueError, match="gradient_clip"):  # a private process must clip
        ProcessSpec(
            "p",
            "i",
            ORGS3,
            {"kind": "ring", "seed": 1},
            {"laplace_scale": 2.0},
            2,
            privacy_budget={"mechanism": "laplace", "epsilon": 1.0},
        )
    with pytest.raises(ValueError, match="epsilon"):
        ProcessSpec("p", "i", ORGS3, {"kind": "ring", "seed": 1}, {}, 2, privacy_budget={"epsilon": 0})


def test_each_organisation_maps_the_dataset_name_to_its_own_data(tmp_path):
    case = dpsda_case()
    p = map_dataset(tmp_path, "Org2MSP", "train", case.datasets["Org2MSP"])
    assert p == dataset_dir(tmp_path, "Org2MSP", "train") / "dataset.npz"
    with pytest.raises(Exception, match="invalid dataset"):
        dataset_dir(tmp_path, "Org2MSP", "../other")


@pytest.mark.parametrize(
    "make_case",
    [collab_rf_case, ggm_case, dpsda_case, vae_case],
    ids=["collab-rf", "collabdict-ggm", "dpsda", "collabdict-vae"],
)
def test_sandbox_process_is_bit_identical_to_the_simulator(platform, make_case):
    case = make_case()
    if case.image == "collabdict-vae":
        require_module("torch")
    client, image = start(platform, case, "p-eq")
    # the heavy-import algorithms run with warm workers (one sandbox per organisation, fresh key per
    # round): that also proves warm mode equal to the simulator; the others one sandbox per task
    warm = case.image in ("collab-rf", "collabdict-vae")
    out = run_process(platform, "p-eq", SandboxRuntime, warm=warm)
    assert out.status == "completed", (out.reason, out.agent_errors)
    process = client.get_process("p-eq")
    # launch declares the default validation slice wherever the family can score one (not DPSDA)
    assert process.validation_fraction == (0 if case.image == "dpsda" else DEFAULT_FRACTION)
    sim = simulated(case, validation_fraction=process.validation_fraction)
    assert_bit_identical(platform, client, "p-eq", sim)
    # what collaboration bought each member: the ledger's signed figures are the simulator's, exactly
    gains = client.process_gains(process)
    if case.image == "dpsda":
        assert gains == () and sim.validation == {}
    else:
        assert [g.organisation for g in gains] == list(ORGS3)
        for g in gains:
            want = sim.validation[g.organisation]
            assert (g.metric, g.collaborative, g.isolated, g.rows) == (
                want["metric"],
                want["collaborative"],
                want["isolated"],
                want["rows"],
            )
            assert g.gain == want["collaborative"] - want["isolated"] and g.negative == (g.gain < 0)
        metric = {"collab-rf": "balanced_accuracy", "collabdict-ggm": "mean_log_likelihood"}.get(
            case.image, "mean_elbo"
        )
        assert {g.metric for g in gains} == {metric}
    # every model's lineage verifies, each record signed and chained back to round 1
    keys = {o: platform.consortium.encryption_key(o) for o in ORGS3}
    for o in ORGS3:
        rep = verify_model(
            platform.client(o), f"p-eq:{o}", store_root=platform.store_root, recipient_keys=keys
        )
        assert rep.ok, rep.failures
        assert {f"p-eq/1/{o}", f"p-eq/{case.rounds}/{o}"} <= set(rep.facts["lineage"])
    if case.image == "collab-rf":
        # estimator-origin matrix (seed 003 Fig. 5) from the ledger alone equals the simulator's
        orgs, matrix = estimator_origins(client, "p-eq")
        expected = [
            [
                sum(1 for e in codec.decode(sim.models[owner])["estimators"] if e["creator"] == creator)
                for creator in orgs
            ]
            for owner in orgs
        ]
        assert matrix == expected
        assert sum(map(sum, matrix)) > 0 and any(matrix[i][j] for i in range(3) for j in range(3) if i != j)
        # and each shared message's signed estimator list names exactly the estimators it carries
        r2 = client.get_execution("p-eq", 2, "Org1MSP").result.outputs.messages
        assert r2 and all(
            e[0] == "Org1MSP" and e[2].startswith("sha256:")
            for m in r2
            for e in m.json_object()["estimators"]
        )


def test_container_process_is_bit_identical_to_the_simulator(platform, engine):
    case = dpsda_case()
    from executor.runtimes.container import ContainerRuntime

    client, image = start(platform, case, "p-ctr", runtime="container", engine=engine)
    out = run_process(platform, "p-ctr", lambda: ContainerRuntime(client=engine))
    assert out.status == "completed", (out.reason, out.agent_errors)
    assert_bit_identical(platform, client, "p-ctr", simulated(case))
    assert {r.runtime for r in client.query_executions("p-ctr")} == {"container"}


def test_membership_records_on_a_shared_ledger_do_not_send_a_one_machine_run_away(platform):
    # every organisation has published an artifact endpoint where nothing listens (as test runs and demos
    # do on a ledger they share); a process whose organisations share one store root still reads each
    # message where it is indexed, checked against the sender's signed digest, and completes
    from exchange.locations import publish_own_membership

    for i, o in enumerate(ORGS3, start=1):
        publish_own_membership(platform.client(o), platform.consortium, f"https://127.0.{i}.1:9")
    case = dpsda_case()
    client, _ = start(platform, case, "p-members")
    out = run_process(platform, "p-members", SandboxRuntime)
    assert out.status == "completed", (out.reason, out.agent_errors)
    assert_bit_identical(platform, client, "p-members", simulated(case))


def test_privacy_budget_refuses_the_round_that_would_exceed_it(platform):
    # σ = 2, clipped so that Δ = 2nL̂√d = 1: every node's release spends ε0 = 0.5, every round 3 × 0.5 on the
    # network (the budget's default scope); a budget of 3.2 covers two rounds of releases, not three
    case = dpsda_case(budget=3.2, rounds=5)
    client, _ = start(platform, case, "p-dp")
    out = run_process(platform, "p-dp", SandboxRuntime)
    assert out.status == "failed" and "privacy budget exceeded" in out.reason
    recs = client.query_executions("p-dp")
    by_round = {}
    for r in recs:
        by_round.setdefault(r.round, []).append(r)
    assert all(r.status == "completed" for rnd in (1, 2) for r in by_round[rnd])
    assert max(r.epsilon_total for rnd in (1, 2) for r in by_round[rnd]) == pytest.approx(3.0)
    for r in by_round[2]:  # the ledger keeps both observers and the accounting used
        priv = r.privacy.json_object()  # the block as stored
        assert priv["accounting"] == "basic" and priv["scope"] == "network" and priv["rigorous"] is True
        assert priv["node"]["epsilon"] == pytest.approx(1.0) and priv["network"]["epsilon"] == pytest.approx(
            3.0
        )
        assert (
            priv["sensitivity"] == pytest.approx(1.0)
            and priv["gradient_clip"] == case.params["gradient_clip"]
        )
    failed = [r for r in recs if r.status == "failed"]
    assert failed and all(r.round == 3 for r in failed)
    refused = [r for r in failed if r.failure_reason.startswith("privacy budget exceeded")]
    assert refused and all(r.failure_details["code"] == "PRIVACY_BUDGET_EXCEEDED" for r in refused)
    assert all(r.status in ("failed", "running") for r in by_round[3])  # no round-3 result was accepted
    assert not any(r.round > 3 for r in recs)  # the process stopped there
    assert client.process_history("p-dp")[-1].value["status"] == "failed"


def test_a_gaussian_process_with_a_budget_runs_audited_and_charged_by_the_ledger(platform):
    # DPSDA's Gaussian mode, Poisson sampling, budget ε = 10 at δ = 1e-5: the ledger charges every round
    # from the recorded z, q and δ (chaincode.privacy.gaussian_epsilon), the process completes, equals the
    # simulator bit for bit, and every member's model verifies
    from chaincode.privacy import gaussian_epsilon

    case = dpsda_gaussian_case()
    client, _ = start(platform, case, "p-gauss")
    out = run_process(platform, "p-gauss", SandboxRuntime)
    assert out.status == "completed", (out.reason, out.agent_errors)
    assert_bit_identical(platform, client, "p-gauss", simulated(case))
    for r in client.query_executions("p-gauss"):
        priv = r.privacy.json_object()
        releases = min(r.round, case.rounds - 1)
        assert priv["mechanism"] == "gaussian" and priv["accounting"] == "rdp"
        assert priv["network"]["releases"] == releases
        assert r.epsilon_total == gaussian_epsilon(1.5, 0.1, False, releases, 1e-5)[2] <= 10.0
        # the image's own running figure (fractional Rényi orders too) is never above the ledger's
        assert r.result.metrics["epsilon_network_total"] <= r.epsilon_total * (1 + 1e-9)
    keys = {o: platform.consortium.encryption_key(o) for o in ORGS3}
    for o in ORGS3:
        rep = verify_model(
            platform.client(o), f"p-gauss:{o}", store_root=platform.store_root, recipient_keys=keys
        )
        assert rep.ok, rep.failures


def test_a_gaussian_round_over_the_budget_stops_the_process(platform):
    from chaincode.privacy import gaussian_epsilon

    spent = [gaussian_epsilon(1.5, 0.1, False, r, 1e-5)[2] for r in (1, 2, 3)]
    case = dpsda_gaussian_case(budget=(spent[1] + spent[2]) / 2)  # two releases fit, not three
    client, _ = start(platform, case, "p-gauss-over")
    out = run_process(platform, "p-gauss-over", SandboxRuntime)
    assert out.status == "failed" and "privacy budget exceeded" in out.reason
    recs = client.query_executions("p-gauss-over")
    assert {r.round for r in recs if r.status == "completed"} == {1, 2}
    assert max(r.epsilon_total for r in recs) == spent[1]
    refused = [r for r in recs if r.status == "failed"]
    assert refused and all(r.round == 3 for r in refused)
    assert all(r.failure_details["code"] == "PRIVACY_BUDGET_EXCEEDED" for r in refused)


def test_killed_agent_is_restarted_and_the_process_ends_complete_and_verified(platform):
    case = dpsda_case()
    client, _ = start(platform, case, "p-kill")
    out = run_process(
        platform,
        "p-kill",
        SandboxRuntime,
        agents="processes",
        agent_env={"Org2MSP": kill_at_environment("during_run", 2)},
    )
    assert out.status == "completed", (out.reason, out.agent_errors, out.restarts)
    assert out.restarts == {"Org2MSP": 1}
    assert_bit_identical(platform, client, "p-kill", simulated(case))
    for r in client.query_executions("p-kill"):  # created once, completed once
        states = [h.value["status"] for h in client.execution_history("p-kill", r.round, r.organisation)]
        assert states == ["running", "completed"]
    keys = {o: platform.consortium.encryption_key(o) for o in ORGS3}
    assert all(
        verify_model(
            platform.client(o), f"p-kill:{o}", store_root=platform.store_root, recipient_keys=keys
        ).ok
        for o in ORGS3
    )


def change_org3_bundle(tmp_path, platform, image) -> str:
    """Org3's local copy of the bundle differs by one byte from the one the process pins: its digest."""
    from executor.images.bundle import bundle_digest
    from executor.images.recipe import cache_root

    genuine = cache_root() / "bundles" / image.reference.split(":", 1)[1]
    local = tmp_path / "org3-bundles" / genuine.name
    shutil.copytree(genuine, local)
    target = local / "image" / "entrypoint.py"
    target.chmod(0o644)
    target.write_bytes(target.read_bytes() + b"\n# changed\n")
    assert bundle_digest(local) != image.digest
    platform.bundles_roots["Org3MSP"] = local.parent
    return bundle_digest(local)


def test_organisation_with_a_different_image_digest_refuses_and_the_process_reports_it(tmp_path, platform):
    case = dpsda_case()
    client, image = start(platform, case, "p-img")
    local_digest = change_org3_bundle(tmp_path, platform, image)
    out = run_process(platform, "p-img", SandboxRuntime)
    assert out.status == "failed" and "image refused" in out.reason and "Org3MSP" in out.reason
    rec = client.get_execution("p-img", 1, "Org3MSP")
    assert rec.status == "failed" and rec.public_key == "" and rec.result is None  # never ran: no task key
    assert rec.failure_details["pinned"] == image.digest
    assert rec.failure_details["local"] == local_digest
    assert not any(
        r.organisation == "Org3MSP" and r.status == "completed" for r in client.query_executions("p-img")
    )
