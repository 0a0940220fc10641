"""Topologies (see :mod:`algorithms.topologies.base` for the interface)."""

from algorithms.topologies.base import StaticTopology, Topology, in_neighbours, out_neighbours

__all__ = ["StaticTopology", "Topology", "in_neighbours", "out_neighbours"]
