"""Each agent refuses on its own (issue 33 item 1; executor/consent.py): a task its organisation has not
accepted -- even if the ledger says otherwise -- or that its local policy (``[consent]`` of
consortia.toml) forbids is refused on the ledger with the reason, and nothing runs."""

from __future__ import annotations

import numpy as np
import pytest

from algorithms.step import LocalDataset
from executor.consent import ConsentPolicy, consent_problem, give_consent
from executor.process import ProcessSpec, launch, map_dataset
from executor.runtimes.sandbox import SandboxRuntime
from home.platform import Platform
from ledger.embedded import EmbeddedLedger
from ledger.errors import NotFound
from ledger.identity import Consortium

ORGS = ("Org1MSP", "Org2MSP")
DIGEST = "sha256:" + "ab" * 32


@pytest.fixture
def platform(tmp_path):
    consortium = Consortium.generate(tmp_path / "crypto", ["Org1", "Org2", "Org3"])
    ledger = EmbeddedLedger(tmp_path / "ledger.db", consortium, batch_timeout=0.002)
    p = Platform(ledger, consortium, tmp_path / "home", tmp_path / "ledger.db")
    p.client(ORGS[0]).register_image("avg", "1", "custom:Algorithm", DIGEST, "bundle:none")
    yield p
    ledger.close()


def _process(p: Platform, pid: str, consent: bool = True, budget=None, hyper=None):
    spec = ProcessSpec(pid, "avg:1", ORGS, {"kind": "ring", "seed": 1}, hyper or {}, 2, "mine", budget)
    launch(p.client(ORGS[0]), spec, consent=p.admins(ORGS) if consent else None, start=consent)
    return p.client(ORGS[1]).get_process(pid)


def test_the_agents_own_check_of_acceptance_and_approval(platform):
    org2 = platform.client(ORGS[1])
    process = _process(platform, "p1", consent=False)
    image = org2.get_image("avg:1")
    assert consent_problem(org2, process, image) == "Org2MSP has not accepted learning process p1"
    platform.admins(ORGS)[ORGS[1]].accept_process("p1")
    assert consent_problem(org2, process, image) == f"Org2MSP has not approved image avg:1 ({DIGEST})"
    platform.admins(ORGS)[ORGS[1]].approve_image("avg:1", DIGEST, datasets=["other"])
    image = org2.get_image("avg:1")
    assert "for datasets ['other'], not for 'mine'" in consent_problem(org2, process, image)
    platform.admins(ORGS)[ORGS[1]].approve_image("avg:1", DIGEST)
    image = org2.get_image("avg:1")
    assert consent_problem(org2, process, image) is None
    # the ledger "says" other terms than those accepted: refused
    lying = process.replace(rounds=3)
    assert "accepted learning process p1 with terms" in consent_problem(org2, lying, image)
    # private terms other than those the chain's hash binds (docs/confidentiality.md): refused
    lying = process.replace(hyperparameters={"eps": 1.0})
    assert "private terms of learning process p1 as read do not match" in consent_problem(org2, lying, image)
    platform.admins(ORGS)[ORGS[1]].revoke_image_approval("avg:1", "no longer")
    assert "was revoked" in consent_problem(org2, process, org2.get_image("avg:1"))


def test_the_local_policy_can_require_more(platform):
    org2 = platform.client(ORGS[1])
    budget = {"mechanism": "laplace", "epsilon": 2.0}
    process = _process(platform, "p2", budget=budget, hyper={"gradient_clip": 1.0})
    image = org2.get_image("avg:1")
    assert consent_problem(org2, process, image, ConsentPolicy()) is None
    assert "dataset 'mine' is not among ['public']" in consent_problem(
        org2, process, image, ConsentPolicy(datasets=("public",))
    )
    assert "ε = 2.0 is over ε ≤ 1.0" in consent_problem(org2, process, image, ConsentPolicy(max_epsilon=1.0))
    assert consent_problem(org2, process, image, ConsentPolicy(max_epsilon=2.0)) is None
    # approved by the owner (its registration) and Org2: 2 members; Org3 is not a member
    assert consent_problem(org2, process, image, ConsentPolicy(min_approvals=2)) is None
    assert "approved by 2 member(s) ['Org1MSP', 'Org2MSP'], fewer than 3" in consent_problem(
        org2, process, image, ConsentPolicy(min_approvals=3)
    )
    unbudgeted = _process(platform, "p3")
    assert "needs a privacy budget" in consent_problem(
        org2, unbudgeted, image, ConsentPolicy(max_epsilon=1.0)
    )


def test_a_refusal_is_on_the_ledger_and_nothing_runs(platform, monkeypatch):
    for org in ORGS:
        features = np.random.default_rng(0).normal(size=(8, 3))
        map_dataset(platform.data_root, org, "mine", LocalDataset(features, name=org))
    _process(platform, "p4")
    agent = platform.agent(ORGS[1], SandboxRuntime()).start()
    agent.consent = ConsentPolicy(datasets=("public",))
    started = []
    monkeypatch.setattr(type(agent.pool), "worker", lambda *a, **k: started.append(a))
    try:
        outcome = agent.run_process_round("p4")
    finally:
        agent.close()
    assert outcome.status == "failed" and "local policy: dataset 'mine'" in outcome.detail
    record = platform.client(ORGS[0]).get_execution("p4", 1, ORGS[1])
    assert record.status == "failed" and record.failure_details == {"code": "CONSENT_REFUSED"}
    assert record.public_key == "" and started == []  # no task key, no worker
    assert platform.client(ORGS[0]).get_process("p4").status == "failed"


def test_the_consent_table_of_consortia_toml(tmp_path):
    from home.errors import ConfigError
    from home.settings import read_config

    f = tmp_path / "consortia.toml"
    f.write_text('[consent]\nmin_approvals = 2\ndatasets = ["adult"]\nmax_epsilon = 1.5\n')
    assert read_config(f).consent == ConsentPolicy(min_approvals=2, datasets=("adult",), max_epsilon=1.5)
    f.write_text("[consent]\nmax_epsilon_total = 1\n")
    with pytest.raises(
        ConfigError, match=r"unknown key \[consent\] max_epsilon_total.*did you mean 'max_epsilon'"
    ):
        read_config(f)
    f.write_text("[consent]\nmin_approvals = -1\n")
    with pytest.raises(ConfigError, match="min_approvals"):
        read_config(f)


def test_give_consent_needs_a_member(platform):
    _process(platform, "p5", consent=False)
    outsider = {"Org3MSP": platform.admins(["Org3MSP"])["Org3MSP"]}
    with pytest.raises(NotFound, match="is a member"):
        give_consent(outsider, "p5")
