"""Consortia's algorithm SDK: the public, versioned surface for writing a learning algorithm.

An algorithm written against this module runs unchanged in the in-memory simulator and, one task per
organisation and round, audited on the platform; given the same data and seed both produce the same
bytes (docs/sdk.md). It lives in its own folder or repository and imports only this module (plus its
own dependencies), never ``executor``, ``ledger``, ``api`` or the internals of ``algorithms``.

The contract (docs/design.md, "Algorithms"): a deterministic object built from JSON-able
hyper-parameters, ``type(a)(**a.params()) == a``, with

    state           = algorithm.init(data, ctx)                    # before round 1
    StepResult(...) = algorithm.step(state, inbox, data, ctx)      # rounds 1..R

``inbox`` maps each sender to the payload it addressed to this organisation in the previous round;
``StepResult.outbox`` maps out-neighbours (``ctx.out_neighbours``) to payloads. Every random draw comes
from ``ctx.rng(purpose)`` (private to the organisation) or ``ctx.shared_rng(purpose)`` (identical at
every organisation). Payloads are values :func:`encode` accepts: dicts with string keys, lists,
scalars, strings, bytes and numpy arrays.

Public here, and only here, under semantic versioning (:data:`SDK_VERSION`; every image manifest and
task manifest records the version it was built and run with):

* the step interface: :class:`Algorithm`, :class:`LocalDataset`, :class:`TaskContext`,
  :class:`StepResult`, ``Payload``;
* the codec: :func:`encode`, :func:`decode`, :class:`CodecError` (the bytes the ledger's digests cover);
* topologies: :class:`Topology`, :class:`StaticTopology`, :func:`ring`, :func:`complete`,
  :func:`cycle_with_inverse_chord`, :func:`build_topology` (a process's ``{"kind": ...}`` record, as the
  platform builds it), :func:`out_neighbours`, :func:`in_neighbours`;
* consensus helpers (seed 000, eqs. (3)-(5)): :func:`mixing_matrix`, :func:`local_consensus_update`,
  :func:`consensus_average`, :func:`sum_in_order`;
* the simulator: :func:`simulate`, :class:`SimulationResult`, :class:`ProtocolViolation`.

Everything else in the distribution is internal and may change without notice.
"""

from __future__ import annotations

from typing import Any

from algorithms.codec import CodecError, decode, encode
from algorithms.consensus import consensus_average, local_consensus_update, mixing_matrix, sum_in_order
from algorithms.simulator import ProtocolViolation, SimulationResult, simulate
from algorithms.step import SDK_VERSION, Algorithm, LocalDataset, Payload, StepResult, TaskContext
from algorithms.topologies import registry as _topology_registry
from algorithms.topologies.base import StaticTopology, Topology, in_neighbours, out_neighbours
from algorithms.topologies.static import complete, cycle_with_inverse_chord, ring


def build_topology(record: dict[str, Any], size: int) -> Topology | None:
    """The graph a process's topology record (``{"kind": ..., "seed": ..., ...}``) names for ``size``
    organisations, built exactly as the platform's tasks build it; ``None`` for ``{"kind": "none"}``.

    Raises :class:`ValueError` (``TopologyError``) naming what is wrong with the record."""
    return _topology_registry.build(record, size)


__all__ = [
    "SDK_VERSION",
    "Algorithm",
    "CodecError",
    "LocalDataset",
    "Payload",
    "ProtocolViolation",
    "SimulationResult",
    "StaticTopology",
    "StepResult",
    "TaskContext",
    "Topology",
    "build_topology",
    "complete",
    "consensus_average",
    "cycle_with_inverse_chord",
    "decode",
    "encode",
    "in_neighbours",
    "local_consensus_update",
    "mixing_matrix",
    "out_neighbours",
    "ring",
    "simulate",
    "sum_in_order",
]
