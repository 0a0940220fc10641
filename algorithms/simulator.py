"""The in-memory simulator: all organisations in one process, messages in memory.

It is the unaudited baseline of the platform (docs/design.md, "Algorithms"): every state and
message is passed through :mod:`algorithms.codec` exactly as the platform stores it in the
artifact store, so a simulation and an audited run of the same process produce the same
bytes, and the digests recorded here can be compared with the ledger's.

Round r (1..R): each organisation, in consortium order, runs ``step`` with the messages
addressed to it in round r-1 and its own state; messages it sends in round r are delivered
in round r+1. Messages sent in the last round are recorded but not delivered.

Same bytes also need the same floating-point kernels: a simulation runs under the numeric profile the
images run under (:mod:`algorithms.numeric_profile`, docs/reproducibility.md) and refuses with
:class:`~algorithms.numeric_profile.NumericProfileError` in a process that was not started under it
(its kernels were chosen when numpy and glibc were loaded, so nothing can change them from here);
``$CONSORTIA_NUMERIC_PROFILE=host`` simulates with this machine's own kernels instead, and the
result records which profile it was computed under.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from algorithms import codec, numeric_profile, validation
from algorithms.step import Algorithm, LocalDataset, StepResult, TaskContext
from algorithms.topologies import registry
from algorithms.topologies.base import Topology, in_neighbours, out_neighbours


class ProtocolViolation(RuntimeError):
    """An algorithm broke the step contract (unknown recipient, message to itself, ...)."""


@dataclass
class SimulationResult:
    """Everything a simulation produced, as bytes and digests (the platform's currency)."""

    consortium: tuple[str, ...]
    rounds: int
    states: dict[str, bytes]  # final encoded state per organisation
    models: dict[str, bytes]  # final encoded model per organisation
    metrics: list[dict[str, dict[str, float]]]  # per round: organisation -> metrics
    state_digests: list[dict[str, str]]  # per round (0 = init): organisation -> digest
    message_digests: list[dict[tuple[str, str], str]] = field(
        default_factory=list
    )  # per round: (sender, recipient) -> digest
    numeric_profile: dict[str, Any] | None = None  # the profile's record; None: this machine's kernels
    # with a validation slice: organisation -> its signed result's validation block (algorithms.validation)
    validation: dict[str, dict[str, Any]] = field(default_factory=dict)

    def model(self, org: str) -> Any:
        return codec.decode(self.models[org])

    def state(self, org: str) -> Any:
        return codec.decode(self.states[org])


def context(
    seed: int, rnd: int, rounds: int, org: str, consortium: Sequence[str], topology: Topology | None
) -> TaskContext:
    """The task context of ``org`` in round ``rnd`` (shared by simulator and platform)."""
    consortium = tuple(consortium)
    i = consortium.index(org)
    if topology is None or rnd == 0:
        outs: tuple[str, ...] = ()
        ins: tuple[str, ...] = ()
    else:
        outs = tuple(consortium[j] for j in out_neighbours(topology, rnd, i))
        ins = tuple(consortium[j] for j in in_neighbours(topology, rnd, i))
    return TaskContext(
        process_seed=seed,
        round=rnd,
        rounds=rounds,
        organisation=org,
        consortium=consortium,
        out_neighbours=outs,
        in_neighbours=ins,
    )


def check_outbox(result: StepResult, ctx: TaskContext) -> None:
    for recipient in result.outbox:
        if recipient == ctx.organisation:
            raise ProtocolViolation(f"{ctx.organisation} addressed a message to itself in round {ctx.round}")
        if recipient not in ctx.consortium:
            raise ProtocolViolation(
                f"{ctx.organisation} addressed a message to {recipient!r}, not a member of the consortium"
            )


class NoTopologyWarning(UserWarning):
    """:func:`simulate` was called without a topology (no organisation has neighbours)."""


def simulate(
    algorithm: Algorithm,
    datasets: Mapping[str, LocalDataset],
    rounds: int,
    seed: int,
    topology: Topology | Mapping[str, Any] | None = None,
    consortium: Sequence[str] | None = None,
    on_round: Callable[[int, dict[str, StepResult]], None] | None = None,
    validation_fraction: float = 0.0,
) -> SimulationResult:
    """Run ``algorithm`` for ``rounds`` rounds over all organisations in memory.

    ``topology`` is a graph, or a process's topology record ``{kind, seed, ...}`` built by the same
    registry the platform's tasks use (:mod:`algorithms.topologies.registry`); ``{"kind": "none"}``
    says that organisations have no neighbours (an algorithm that aggregates without a graph, or
    training alone). Leaving it out means the same but warns (:class:`NoTopologyWarning`): with no
    neighbours an algorithm that exchanges messages over a graph exchanges nothing.

    ``validation_fraction`` > 0 is a process's validation slice (:mod:`algorithms.validation`): every
    organisation trains on the rest of its rows, and after the last round its collaborative model and the
    model it would have got alone are scored on the slice, exactly as its last task does on the platform
    (``SimulationResult.validation``: organisation -> the signed result's ``validation`` block).

    Raises :class:`~algorithms.numeric_profile.NumericProfileError` if the selected numeric profile
    is not in effect in this process (module doc); :class:`~algorithms.validation.ValidationSliceError`
    if an organisation's data cannot be split as declared."""
    profile = numeric_profile.selected()
    if profile is not None:
        profile.require()
    consortium = tuple(consortium or datasets.keys())
    if topology is None:
        warnings.warn(
            "simulate() without a topology: no organisation has neighbours, so nothing is exchanged over "
            'a graph; pass topology={"kind": "none"} to say so, or the process\'s topology record',
            NoTopologyWarning,
            stacklevel=2,
        )
    if isinstance(topology, Mapping):
        topology = registry.build(topology, len(consortium))
    if topology is not None and topology.size != len(consortium):
        raise ValueError(f"topology has {topology.size} nodes, consortium has {len(consortium)}")
    missing = [o for o in consortium if o not in datasets]
    if missing:
        raise ValueError(f"no dataset for {missing}")
    held_out: dict[str, LocalDataset] = {}
    if validation.check_fraction(validation_fraction):
        if not validation.supports(algorithm):
            raise validation.ValidationUnsupported(
                f"{algorithm.name} cannot score a validation slice (validation_fraction {validation_fraction:g})"
            )
        split = {o: validation.split(datasets[o], validation_fraction, seed, o) for o in consortium}
        datasets = {o: train for o, (train, _) in split.items()}
        held_out = {o: slice_ for o, (_, slice_) in split.items()}

    states: dict[str, bytes] = {}
    models: dict[str, bytes] = {}
    for org in consortium:
        ctx = context(seed, 0, rounds, org, consortium, topology)
        states[org] = codec.encode(algorithm.init(datasets[org], ctx))
    state_digests = [{o: codec.digest(s) for o, s in states.items()}]
    metrics_log: list[dict[str, dict[str, float]]] = []
    message_log: list[dict[tuple[str, str], str]] = []
    inboxes: dict[str, dict[str, bytes]] = {o: {} for o in consortium}
    assessed: dict[str, validation.Assessment] = {}

    for rnd in range(1, rounds + 1):
        next_inboxes: dict[str, dict[str, bytes]] = {o: {} for o in consortium}
        round_metrics: dict[str, dict[str, float]] = {}
        round_messages: dict[tuple[str, str], str] = {}
        results: dict[str, StepResult] = {}
        for org in consortium:
            ctx = context(seed, rnd, rounds, org, consortium, topology)
            inbox = {sender: codec.decode(b) for sender, b in sorted(inboxes[org].items())}
            res = algorithm.step(codec.decode(states[org]), inbox, datasets[org], ctx)
            check_outbox(res, ctx)
            states[org] = codec.encode(res.state)
            for recipient, payload in sorted(res.outbox.items()):
                blob = codec.encode(payload)
                next_inboxes[recipient][org] = blob
                round_messages[(org, recipient)] = codec.digest(blob)
            if res.model is not None:
                models[org] = codec.encode(res.model)
            round_metrics[org] = dict(res.metrics)
            results[org] = res
        inboxes = next_inboxes
        metrics_log.append(round_metrics)
        message_log.append(round_messages)
        state_digests.append({o: codec.digest(s) for o, s in states.items()})
        if on_round is not None:
            on_round(rnd, results)
        if rnd == rounds and held_out:
            assessed = {
                o: validation.assess(algorithm, results[o].model, datasets[o], held_out[o], seed, rounds, o)
                for o in consortium
            }

    return SimulationResult(
        consortium=consortium,
        rounds=rounds,
        states=states,
        models=models,
        metrics=metrics_log,
        state_digests=state_digests,
        message_digests=message_log,
        numeric_profile=None if profile is None else profile.record(),
        validation={o: a.record() for o, a in assessed.items()},
    )
