"""Issue 33 "Must show", on both ledger hosts: Org1 registers an image that forwards ``data.features``
to its neighbours and keeps what it receives in its model, and creates a process naming Org2 with
Org2's dataset name (docs/consent.md).

* Org2's agent runs nothing until Org2 accepts;
* ``start`` is refused without Org2's acceptance;
* with Org2's acceptance but no approval of the image, ``create_task`` is refused, and Org2's agent
  refuses on its own (on the ledger, with the reason), whatever the ledger let through;
* after Org2 approves a different digest (another image), ``create_task`` is still refused;
* with everything approved, the output-declaration check on Org2's host refuses the raw rows before
  they are sealed: the task fails with the reason, no message of Org2 is on the ledger, and Org1's
  model does not hold Org2's rows.
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import numpy as np
import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from algorithms import numeric_profile
from algorithms.step import SDK_VERSION, LocalDataset
from executor.consent import give_consent
from executor.node.supervisor import run_process
from executor.process import ProcessSpec, launch, map_dataset, prepare_image
from executor.runtimes.sandbox import SandboxRuntime
from home.platform import Platform
from ledger.errors import ConsentMissing, NotFound

ORGS = ("Org1MSP", "Org2MSP")

EXFILTRATE = '''"""An image that exfiltrates: it forwards its organisation's feature rows to its neighbours and
keeps what it receives in its model (the attack of issue 33)."""

import numpy as np

from algorithms.step import StepResult


class Exfiltrate:
    name = "exfiltrate"

    def params(self):
        return {}

    def init(self, data, ctx):
        return {"kept": np.zeros((0, data.features.shape[1]))}

    def step(self, state, inbox, data, ctx):
        kept = np.concatenate([state["kept"], *(np.asarray(m["rows"]) for m in inbox.values())])
        out = {j: {"rows": np.asarray(data.features, dtype=np.float64)} for j in ctx.out_neighbours}
        model = {"kept": kept} if ctx.round == ctx.rounds else None
        return StepResult(state={"kept": kept}, outbox=out, metrics={"kept": float(len(kept))}, model=model)
'''


def exfiltrating_recipe(root: Path, tag: str) -> Path:
    """An image folder (as in algorithm-images/) whose algorithm forwards the raw rows. It declares
    honestly what its messages look like, and (as every image must, unless it says so) no raw rows."""
    folder = root / f"exfiltrate-{tag}"
    folder.mkdir(parents=True)
    (folder / "exfiltrate.py").write_text(EXFILTRATE)
    rows = {"type": "ndarray", "dtypes": ["<f8"], "ndim": [2]}
    meta = {
        "name": f"exfiltrate-{tag}",
        "version": "1.0.0",
        "algorithm": "exfiltrate:Exfiltrate",
        "sdk": SDK_VERSION,
        "numeric_profile": numeric_profile.PROFILE.id,
        "description": "forwards data.features to its neighbours (issue 33's attack)",
        "outputs": {
            "message": {"max_bytes": 1 << 20, "schema": {"type": "object", "properties": {"rows": rows}}},
            "model": {"max_bytes": 1 << 20, "schema": {"type": "object", "properties": {"kept": rows}}},
            "raw_rows": False,
        },
    }
    (folder / "image.json").write_text(json.dumps(meta))
    return folder


def _rows(seed: int) -> LocalDataset:
    return LocalDataset(np.random.default_rng(seed).normal(size=(16, 4)), name=f"private-{seed}")


def _task_key():
    return ec.generate_private_key(ec.SECP256R1()).public_key()


def _records(client, pid):
    return {(r.organisation, r.round): r for r in client.query_executions(pid)}


def must_show(platform: Platform, tmp_path: Path, shared: bool = False) -> None:
    """``shared``: the ledger holds other tests' processes (Fabric): Org2's agent is asked about this
    process only, never to follow the whole ledger."""
    tag = secrets.token_hex(3)  # the Fabric ledger outlives a run
    dataset = "org2-private"
    org1, org2 = platform.client(ORGS[0]), platform.client(ORGS[1])
    admins = platform.admins(ORGS)
    private = {ORGS[0]: _rows(1), ORGS[1]: _rows(2)}
    for org in ORGS:
        map_dataset(platform.data_root, org, dataset, private[org])
    exfil = prepare_image(org1, str(exfiltrating_recipe(tmp_path, tag)), "sandbox", image_id=f"exfil-{tag}:1")
    benign = prepare_image(org1, "average-consensus", "sandbox", image_id=f"avg-{tag}:1")
    assert exfil.digest != benign.digest

    def create(pid: str) -> None:
        topology = {"kind": "complete", "seed": 1}
        launch(org1, ProcessSpec(pid, exfil.record.id, ORGS, topology, {}, 1, dataset), start=False)

    # -- 1. named, not asked: Org2's agent runs nothing; start is refused
    pid = f"exfil-{tag}"
    create(pid)
    agent2 = platform.agent(ORGS[1], SandboxRuntime())
    try:
        if not shared:
            assert agent2.run_once() == []  # a created process is not run
        assert agent2.run_process_round(pid).status == "waiting"
        assert _records(org1, pid) == {}
        admins[ORGS[0]].accept_process(pid)  # Org1 accepts its own process
        with pytest.raises(ConsentMissing, match=r"not accepted by \['Org2MSP'\]"):
            org1.start_process(pid)
        assert org1.get_process(pid).status == "created"

        # -- 2. Org2 accepts, but approved no image: create_task is refused by the contract
        answer = admins[ORGS[1]].accept_process(pid)
        assert answer.terms_digest == org2.get_process(pid).terms_digest()
        assert org1.start_process(pid).status == "running"
        with pytest.raises(ConsentMissing, match=f"Org2MSP has not approved image {exfil.record.id}"):
            org2.create_task(pid, 1, _task_key(), "sandbox")

        # -- 3. Org2 approves another digest (the benign image): still refused
        admins[ORGS[1]].approve_image(benign.record.id, benign.digest)
        with pytest.raises(ConsentMissing, match=f"Org2MSP has not approved image {exfil.record.id}"):
            org2.create_task(pid, 1, _task_key(), "sandbox")
        with pytest.raises(NotFound):
            org2.get_execution(pid, 1, ORGS[1])

        # ... and Org2's agent refuses on its own, on the ledger, before any worker starts
        outcome = agent2.run_process_round(pid)
        assert outcome.status == "failed" and "consent refused" in outcome.detail
        assert f"Org2MSP has not approved image {exfil.record.id}" in outcome.detail
        refused = org2.get_execution(pid, 1, ORGS[1])
        assert refused.status == "failed" and refused.failure_details["code"] == "CONSENT_REFUSED"
        assert refused.runtime == "" and refused.result is None  # no task was ever registered
        assert org1.get_process(pid).status == "failed"
    finally:
        agent2.close()

    # -- 4. everything approved: the host's output check refuses the raw rows before sealing
    pid2 = f"exfil2-{tag}"
    create(pid2)
    admins[ORGS[1]].approve_image(exfil.record.id, exfil.digest, datasets=[dataset])
    give_consent(admins, pid2)
    org1.start_process(pid2)
    out = run_process(platform, pid2, SandboxRuntime, timeout=600)
    assert out.status == "failed", out
    process = org1.get_process(pid2)
    assert process.status == "failed" and "output refused" in process.status_reason
    assert "raw feature rows" in process.status_reason and "raw rows never leave" in process.status_reason
    records = _records(org1, pid2)
    # each host refuses its own rows: neither message is sealed, stored or named on the ledger; the first
    # refusal ends the process, after which the other's fail_task is refused (its record stays running)
    assert all(r.result is None for r in records.values()), records
    failed = [r for r in records.values() if r.status == "failed"]
    assert failed, records
    for rec in failed:
        assert "output refused" in rec.failure_reason and "raw feature rows" in rec.failure_reason
        assert rec.failure_details["code"] == "OUTPUT_DECLARATION"
    for org in ORGS:
        assert not (platform.store_root / org / "messages" / pid2).exists(), org  # no message indexed
    with pytest.raises(NotFound):
        org1.get_model(f"{pid2}:{ORGS[0]}")


def test_consent_and_output_declaration_on_the_embedded_ledger(platform, tmp_path):
    must_show(platform, tmp_path)


@pytest.mark.fabric
def test_consent_and_output_declaration_on_fabric(tmp_path):
    from tests.support.fabric import shared_fabric

    fab = shared_fabric()
    ledger = fab.ledger()
    try:
        must_show(Platform(ledger, fab.consortium, tmp_path / "nodes"), tmp_path, shared=True)
    finally:
        ledger.close()
