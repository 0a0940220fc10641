import numpy as np
import pytest

from algorithms.simulator import context, simulate
from algorithms.topologies import registry
from algorithms.topologies.periodic import dpsda_graphs
from algorithms.topologies.random_links import RandomLinks
from algorithms.topologies.static import cycle_with_inverse_chord, ring


def test_the_registry_builds_what_the_constructors_build():
    for spec, direct in (
        ({"kind": "ring", "seed": 3}, ring(5)),
        ({"kind": "cic", "seed": 0}, cycle_with_inverse_chord(5)),
        ({"kind": "random_links", "seed": 4, "period": 3}, RandomLinks(5, 4, 3)),
    ):
        built = registry.build(spec, 5)
        for rnd in (1, 2, 7):
            assert np.array_equal(built.adjacency(rnd), direct.adjacency(rnd))
    assert np.array_equal(
        registry.build({"kind": "dpsda_graphs", "seed": 0}, 7).adjacency(2), dpsda_graphs().adjacency(2)
    )
    assert registry.build({"kind": "none", "seed": 0}, 3) is None


def test_problems_name_every_reason():
    assert registry.problems({"kind": "ring", "seed": 1}, 4) == []
    found = registry.problems({"kind": "full", "seed": "x"})
    assert "topology kind 'full' is not known" in found[0] and "seed must be an integer" in found[1]
    assert "no parameter 'q'" in registry.problems({"kind": "erdos_renyi", "seed": 1, "q": 1})[0]
    assert "needs the parameter p" in registry.problems({"kind": "erdos_renyi", "seed": 1})[0]
    assert "integer >= 1" in registry.problems({"kind": "random_links", "seed": 1, "period": 0})[0]
    assert "prime" in registry.problems({"kind": "cic", "seed": 1}, 4)[0]
    assert "defined for [7]" in registry.problems({"kind": "dpsda_digraphs", "seed": 1}, 5)[0]
    with pytest.raises(registry.TopologyError, match="not known"):
        registry.build({"kind": "hypercube", "seed": 0}, 3)


def test_simulator_takes_a_topology_record():
    orgs = ("A", "B", "C", "D", "E")
    spec = {"kind": "random_links", "seed": 9, "period": 2}
    for rnd in (1, 2, 3):
        assert context(9, rnd, 3, "C", orgs, registry.build(spec, 5)) == context(
            9, rnd, 3, "C", orgs, RandomLinks(5, 9, 2)
        )
    with pytest.raises(ValueError, match="not known"):
        simulate(None, {o: None for o in orgs}, 1, 0, topology={"kind": "x", "seed": 0})
