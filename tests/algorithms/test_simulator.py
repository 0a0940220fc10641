"""The in-memory simulator (algorithms/simulator.py) on a small consensus-averaging algorithm."""

from __future__ import annotations

import numpy as np
import pytest

from algorithms.simulator import ProtocolViolation, simulate
from algorithms.step import LocalDataset, StepResult, TaskContext
from algorithms.topologies.static import complete, ring


class NeighbourAverage:
    """x <- mean of own x and the neighbours' x of the previous round (plus seeded jitter)."""

    name = "neighbour-average"

    def __init__(self, jitter: float = 0.0):
        self.jitter = jitter

    def params(self):
        return {"jitter": self.jitter}

    def init(self, data: LocalDataset, ctx: TaskContext):
        return {"x": data.features.mean(axis=0)}

    def step(self, state, inbox, data, ctx: TaskContext) -> StepResult:
        xs = [state["x"]] + [m["x"] for m in inbox.values()]
        x = np.mean(xs, axis=0) + self.jitter * ctx.rng().standard_normal(state["x"].shape)
        return StepResult(
            state={"x": x},
            outbox={o: {"x": x} for o in ctx.out_neighbours},
            metrics={"norm": float(np.linalg.norm(x))},
            model={"x": x},
        )


def _data(n_orgs=4, seed=0):
    rng = np.random.default_rng(seed)
    return {f"Org{i}MSP": LocalDataset(rng.standard_normal((10 + i, 3)) + i) for i in range(n_orgs)}


def test_messages_flow_round_by_round_and_converge():
    data = _data()
    res = simulate(NeighbourAverage(), data, rounds=60, seed=1, topology=complete(4))
    means = np.array([d.features.mean(axis=0) for d in data.values()])
    for org in data:
        # on the complete graph, average of the initial means is reached after one exchange
        assert np.allclose(res.model(org)["x"], means.mean(axis=0))
    assert len(res.metrics) == 60 and set(res.metrics[0]) == set(data)
    assert len(res.message_digests[0]) == 12  # every ordered pair on the complete graph


def test_deterministic_from_seed_and_sensitive_to_it():
    data = _data()
    a = simulate(NeighbourAverage(0.1), data, rounds=5, seed=7, topology=ring(4))
    b = simulate(NeighbourAverage(0.1), data, rounds=5, seed=7, topology=ring(4))
    c = simulate(NeighbourAverage(0.1), data, rounds=5, seed=8, topology=ring(4))
    assert a.state_digests == b.state_digests and a.models == b.models
    assert a.state_digests[-1] != c.state_digests[-1]


def test_context_gives_round_position_and_neighbours():
    seen = []

    class Probe(NeighbourAverage):
        def step(self, state, inbox, data, ctx):
            seen.append((ctx.round, ctx.organisation, ctx.position, ctx.out_neighbours, tuple(sorted(inbox))))
            return super().step(state, inbox, data, ctx)

    data = _data(3)
    simulate(Probe(), data, rounds=2, seed=0, topology=ring(3))
    assert seen[0] == (1, "Org0MSP", 0, ("Org1MSP", "Org2MSP"), ())
    assert seen[3][0] == 2 and seen[3][4] == ("Org1MSP", "Org2MSP")


def test_protocol_violations_are_refused():
    class Selfish(NeighbourAverage):
        def step(self, state, inbox, data, ctx):
            r = super().step(state, inbox, data, ctx)
            r.outbox = {ctx.organisation: {"x": 1}}
            return r

    with pytest.raises(ProtocolViolation, match="itself"):
        simulate(Selfish(), _data(2), rounds=1, seed=0, topology=complete(2))
    with pytest.raises(ValueError, match="topology has"):
        simulate(NeighbourAverage(), _data(2), rounds=1, seed=0, topology=complete(3))


def test_private_and_shared_rngs():
    ctx = lambda org, rnd: TaskContext(5, rnd, 3, org, ("A", "B"))
    assert ctx("A", 1).rng().random() == ctx("A", 1).rng().random()
    assert ctx("A", 1).rng().random() != ctx("B", 1).rng().random()
    assert ctx("A", 1).rng().random() != ctx("A", 2).rng().random()
    assert ctx("A", 1).shared_rng("init").random() == ctx("B", 1).shared_rng("init").random()


def test_without_a_topology_nothing_is_exchanged_and_the_caller_is_told():
    import warnings

    from algorithms.simulator import NoTopologyWarning

    data = _data()
    with pytest.warns(NoTopologyWarning, match="without a topology"):
        silent = simulate(NeighbourAverage(), data, rounds=3, seed=1)
    assert all(not d for d in silent.message_digests)  # no neighbours: no messages at all
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # saying "none" is explicit: no warning
        said = simulate(NeighbourAverage(), data, rounds=3, seed=1, topology={"kind": "none"})
    assert said.models == silent.models
    ringed = simulate(NeighbourAverage(), data, rounds=3, seed=1, topology={"kind": "ring", "seed": 0})
    assert ringed.models != silent.models and all(ringed.message_digests)
