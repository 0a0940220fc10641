"""The ledger benchmark's submit phase (benchmarks.ledger_fabric.submit_figures with the workloads of
benchmarks.ledger_workloads), on the embedded ledger: the public and the private submit workloads run in
alternating blocks, each block writes its own records, and each kind's figures count what it committed."""

from __future__ import annotations

import os
from functools import partial

import pytest

import benchmarks.ledger_fabric as ledger_fabric
from benchmarks.ledger_workloads import bench_private_submit, bench_submit, prepare_private_submit
from ledger.client import ConsortiaClient
from ledger.embedded import EmbeddedLedger
from ledger.identity import Consortium


def test_public_and_private_submits_alternate_and_each_counts_its_own(tmp_path, monkeypatch):
    monkeypatch.setattr(ledger_fabric, "IDLE_SECONDS", 0.01)
    cons = Consortium.generate(tmp_path / "crypto", ["Org1", "Org2", "Org3"])
    clients, total = 3, 60  # two blocks of each kind, ten submits per client per block (CPU ticks are 10 ms)
    order: list[tuple[str, int]] = []

    def logged(kind, work):
        def run(k):
            order.append((kind, k))
            return work(k)

        return run

    with EmbeddedLedger(tmp_path / "ledger.db", cons, batch_timeout=0.002) as led:
        org1 = ConsortiaClient(led, cons.identity("Org1"))
        prepare_private_submit(org1)
        out = ledger_fabric.submit_figures(
            {"bench": os.getpid()},
            logged("public", ledger_fabric.in_blocks(partial(bench_submit, led, cons), clients, total)),
            logged(
                "private", ledger_fabric.in_blocks(partial(bench_private_submit, led, cons), clients, total)
            ),
            0.0,
            lambda counts, seconds: {"swept": list(counts)},
            lambda: led.block_height(cons.identity("Org1")),
        )
        images = [
            r for r in org1.list_images() if r.name.startswith("bench-") and r.name != "bench-private-image"
        ]
        processes = [p for p in org1.list_processes() if p.id.startswith("bench-private-")]

    assert ledger_fabric.SUBMIT_BLOCKS == 2
    assert order == [("public", 0), ("private", 0), ("public", 1), ("private", 1)]
    # every submit committed a record of its own: blocks never overwrite each other's
    assert out["fabric_submits"] == len(images) == total
    assert out["private_submits"] == len(processes) == total
    assert len({p.id for p in processes}) == total
    # each process is among every organisation, with hyper-parameters and a budget of its own
    assert {p.consortium for p in processes} == {("Org1MSP", "Org2MSP", "Org3MSP")}
    assert len({p.hyperparameters["bench_marker"] for p in processes}) == total
    assert all(p.privacy_budget is not None for p in processes)
    # the CPU figures are per submit of each kind, and the ratio is theirs
    assert out["fabric_cpu_ms_per_submit"] > 0 and out["private_cpu_ms_per_submit"] > 0
    assert out["private_over_public_cpu"] == pytest.approx(
        out["private_cpu_ms_per_submit"] / out["fabric_cpu_ms_per_submit"]
    )
    assert out["private_submit_tps"] > 0 and out["private_submit_p99_ms"] >= out["private_submit_p50_ms"] > 0
    assert out["swept"] == list(ledger_fabric.CAPACITY_CLIENTS)
