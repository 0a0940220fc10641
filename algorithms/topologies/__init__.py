"""Topologies (see :mod:`algorithms.topologies.base` for the interface and
:mod:`algorithms.topologies.registry` for the kinds a process may name)."""

from algorithms.topologies.base import StaticTopology, Topology, in_neighbours, out_neighbours

__all__ = ["StaticTopology", "Topology", "in_neighbours", "out_neighbours"]
