"""The capacity sweep (benchmarks.ledger_capacity): the knee is the fewest clients reaching 90 % of the
best throughput, and a real sweep on the embedded ledger commits what it counts."""

from __future__ import annotations

import pytest

from benchmarks.ledger_capacity import capacity_sweep, knee
from ledger.client import ConsortiaClient
from ledger.embedded import EmbeddedLedger
from ledger.identity import Consortium


def point(clients, tps, p50=1.0):
    return {"clients": clients, "tps": tps, "p50_ms": p50, "p99_ms": 2 * p50, "submits": 1}


def test_knee_is_the_fewest_clients_at_ninety_percent_of_the_best():
    pts = [point(1, 50, 10), point(4, 190, 20), point(16, 205, 70), point(64, 200, 300)]
    k = knee(pts)
    assert k["capacity_tps"] == 205 and k["knee_clients"] == 4 and k["knee_p50_ms"] == 20
    assert k["saturated"] is True
    # still climbing at the last point: the capacity is a lower bound, and says so
    rising = knee([point(1, 50), point(4, 120), point(16, 200)])
    assert rising["knee_clients"] == 16 and rising["saturated"] is False


def test_a_real_sweep_counts_only_committed_submits(tmp_path):
    cons = Consortium.generate(tmp_path / "crypto", ["Org1", "Org2"])
    with EmbeddedLedger(tmp_path / "ledger.db", cons, batch_timeout=0.002) as led:
        out = capacity_sweep(led, cons, (1, 3), 0.3, "embedded")
        sweep = out["embedded_capacity_sweep"]
        assert [p["clients"] for p in sweep] == [1, 3]
        assert out["embedded_capacity_tps"] == pytest.approx(max(p["tps"] for p in sweep), abs=1e-3)
        assert out["embedded_capacity_tps"] > 0
        registered = ConsortiaClient(led, cons.identity("Org1")).list_images()
        assert sum(1 for r in registered if r.name.startswith("cap-")) == sum(p["submits"] for p in sweep)
