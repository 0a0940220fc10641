"""Where the image a process pins is on a node, and the check that it is the pinned one
(executor.images.resolver); the agents of a process fetching it by digest from the registry."""

from __future__ import annotations

import pytest

from executor.errors import ImageDigestMismatch
from executor.images.build import build_and_register
from executor.images.reference import parse_reference
from executor.images.resolver import verify_digest
from tests.executor.images.conftest import flip_blob


def test_verify_digest():
    d = "sha256:" + "1" * 64
    verify_digest("ref", d, d)
    with pytest.raises(ImageDigestMismatch, match="does not match the pinned digest"):
        verify_digest("ref", d, "sha256:" + "2" * 64)
    with pytest.raises(ImageDigestMismatch, match="no such local image"):
        verify_digest("ref", d, None)
    with pytest.raises(ValueError):
        verify_digest("ref", "md5:1", d)


def test_process_runs_the_bundle_each_organisation_pulled_by_digest(registry_addr, consortium, tmp_path):
    """The node agents of three organisations, each with an empty bundles folder, fetch the bundle the
    record names from the registry and verify it before running: bit-identical to the simulator.
    A second process after the archive was altered in the registry is refused by every agent."""
    from executor.node.supervisor import run_process
    from executor.process import ProcessSpec, launch, map_dataset
    from executor.runtimes.sandbox import SandboxRuntime
    from home.platform import Platform
    from ledger.embedded import EmbeddedLedger
    from tests.e2e.conftest import ORGS3, dpsda_case
    from tests.e2e.test_process import assert_bit_identical, simulated

    case = dpsda_case()
    path = tmp_path / "ledger.sqlite"
    platform = Platform(EmbeddedLedger(path, consortium), consortium, tmp_path, ledger_path=path)
    try:
        client = platform.client(ORGS3[0])
        done = build_and_register(client, case.image, "sandbox", "dpsda:reg", registry=registry_addr)
        for o in ORGS3:
            map_dataset(platform.data_root, o, "train", case.datasets[o])

        def launch_and_run(pid: str, roots: str):
            spec = ProcessSpec(pid, "dpsda:reg", ORGS3, case.topology, case.params, case.rounds, "train")
            launch(client, spec, consent=platform.admins(ORGS3))
            for o in ORGS3:
                platform.bundles_roots[o] = tmp_path / roots / o
            return run_process(platform, pid, SandboxRuntime)

        out = launch_and_run("p-reg", "bundles")
        assert out.status == "completed", (out.reason, out.agent_errors)
        assert_bit_identical(platform, client, "p-reg", simulated(case))
        for o in ORGS3:
            assert len(list((tmp_path / "bundles" / o).glob("registry-dpsda-*"))) == 1
        flip_blob(registry_addr, parse_reference(done.record.reference).digest)
        out = launch_and_run("p-tampered", "fresh")
        assert out.status == "failed" and "image refused" in out.reason
        refused = [r for r in client.query_executions("p-tampered") if r.status == "failed"]
        assert refused and all(r.failure_details["code"] == "IMAGE_TAMPERED" for r in refused)
        assert all(r.public_key == "" and r.result is None for r in refused)  # never ran: no task key
        assert not any(r.status == "completed" for r in client.query_executions("p-tampered"))
    finally:
        platform.ledger.close()
