"""The description of one task (``in/task.json`` of the task-runtime file contract, docs/executor.md
"Task runtime file contract"; seed 003 §IV-B): which process, round and organisation, which algorithm
with which parameters, which image, and the topology the task builds its neighbours from.

The host writes it (:mod:`executor.tasks`), the task runtime inside the image reads it
(:mod:`algorithms.task_runtime`) and the signed result repeats its identifying fields
(:mod:`algorithms.task_manifest`). This module imports only :mod:`algorithms` and :mod:`wire` (it
runs inside images).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from algorithms.simulator import context as simulator_context
from algorithms.step import TaskContext
from algorithms.topologies import registry as topology_registry
from algorithms.validation import check_fraction
from wire.canonical import canonical_json


class TaskInputError(ValueError):
    """The task directory does not satisfy the file contract."""


@dataclass(frozen=True)
class TaskSpec:
    """The task description (``in/task.json``).

    ``algorithm`` is ``"package.module:Class"``; ``params`` rebuild it (``Class(**params)``).
    ``data_salt`` (hex) salts the data commitment so that it reveals nothing about the data.
    ``topology`` is the process's topology record ``{kind, seed, ...}``: the task builds its graph
    (:mod:`algorithms.topologies.registry`) and its neighbours in this round from it, exactly as the
    simulator does (:func:`algorithms.simulator.context`).
    ``validation_fraction`` (> 0: the process declares a validation slice) makes the task train on the
    rest of its rows and, in the last round, score its collaborative model and the model it would have got
    alone on the slice (:mod:`algorithms.validation`); 0 (absent from ``task.json``): no slice.
    """

    process_id: str
    round: int
    rounds: int
    organisation: str
    consortium: tuple[str, ...]
    process_seed: int
    algorithm: str
    params: Mapping[str, Any]
    image_digest: str
    runtime: str
    topology: Mapping[str, Any] = field(default_factory=lambda: {"kind": "none"})
    data_salt: str = ""
    validation_fraction: float = 0.0

    def __post_init__(self) -> None:
        if not isinstance(self.round, int) or not 1 <= self.round <= self.rounds:
            raise TaskInputError(f"round must be in 1..{self.rounds}, got {self.round!r}")
        if self.organisation not in self.consortium:
            raise TaskInputError(f"organisation {self.organisation!r} is not in the consortium")
        if ":" not in self.algorithm:
            raise TaskInputError(f"algorithm must be 'module:Class', got {self.algorithm!r}")
        if not self.image_digest.startswith("sha256:"):
            raise TaskInputError(f"image digest must be sha256:<hex>, got {self.image_digest!r}")
        try:
            bytes.fromhex(self.data_salt)
        except ValueError:
            raise TaskInputError("data_salt must be hex") from None
        try:
            check_fraction(self.validation_fraction)
        except ValueError as exc:
            raise TaskInputError(str(exc)) from None
        if not isinstance(self.topology, Mapping):
            raise TaskInputError("topology must be an object {kind, seed, ...}")
        problems = topology_registry.problems(
            topology_registry.normalise(self.topology), len(self.consortium)
        )
        if problems:
            raise TaskInputError("; ".join(problems))

    def to_json(self) -> bytes:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        d["consortium"] = list(self.consortium)
        d["params"] = dict(self.params)
        d["topology"] = dict(self.topology)
        if not self.validation_fraction:
            del d["validation_fraction"]
        return canonical_json(d)

    @classmethod
    def from_json(cls, data: bytes) -> TaskSpec:
        try:
            d = json.loads(data)
            if "consortium" in d:
                d["consortium"] = tuple(d["consortium"])
            return cls(**d)
        except (ValueError, TypeError) as exc:
            raise TaskInputError(f"bad task.json: {exc}") from None

    def context(self) -> TaskContext:
        """This round's context: the neighbours come from the topology record, as in the simulator."""
        graph = topology_registry.build(self.topology, len(self.consortium))
        return simulator_context(
            self.process_seed, self.round, self.rounds, self.organisation, self.consortium, graph
        )

    def init_context(self) -> TaskContext:
        """Round 0, no neighbours: exactly what the simulator passes to ``init``."""
        return TaskContext(
            process_seed=self.process_seed,
            round=0,
            rounds=self.rounds,
            organisation=self.organisation,
            consortium=self.consortium,
        )
