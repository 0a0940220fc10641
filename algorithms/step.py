"""The step-function interface every learning algorithm implements (docs/design.md, "Algorithms").

An algorithm is a deterministic object built from its hyper-parameters (scikit-learn style:
parameters are validated in ``__init__``; all randomness comes from the :class:`TaskContext`):

    state            = algo.init(data, ctx)                       # before round 1
    StepResult(...)  = algo.step(state, inbox, data, ctx)          # rounds 1..R

``inbox`` maps each sender organisation to the payload it addressed to this organisation in
the previous round (empty in round 1). ``StepResult.outbox`` maps recipient organisations
to payloads delivered at the start of the next round. The final model of an organisation
is the last ``model`` its steps returned. States, messages and models are *payloads*: values
that :mod:`algorithms.codec` can encode (dicts, lists, scalars, strings, bytes, ndarrays).

The same code runs in the in-memory simulator (:mod:`algorithms.simulator`) and, one task
per organisation and round, in the audited platform; given the same data and seed the two
produce bit-identical payloads.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

Payload = Any  # a value accepted by algorithms.codec.encode

SDK_VERSION = "1.0.0"
"""The version of the public algorithm SDK (``consortia_sdk``, semantic versioning): a minor version adds
names, a major version changes or removes one. Defined here, beside the interface it versions, because
the task runtime inside images records it in every signed result (:mod:`algorithms.task_manifest`);
``consortia_sdk`` exports it, and every image's ``image.json`` names the version it was written for."""


@dataclass(frozen=True)
class LocalDataset:
    """One organisation's data. It never leaves the organisation.

    ``features`` is (n, d); ``labels`` is (n,) or None. ``extras`` holds further named
    arrays an algorithm may need (e.g. a stream order for online learning).
    """

    features: np.ndarray
    labels: np.ndarray | None = None
    name: str = "local"
    extras: Mapping[str, np.ndarray] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.features.shape[0])


def seed_words(*parts: int | str) -> list[int]:
    words: list[int] = []
    for p in parts:
        if isinstance(p, str):
            words.append(zlib.crc32(p.encode("utf-8")))
        else:
            if p < 0:
                raise ValueError("seed components must be non-negative")
            words.append(int(p))
    return words


@dataclass(frozen=True)
class TaskContext:
    """What a task knows about where it runs: process seed, round, position, neighbours.

    ``round`` is 0 during ``init`` and 1..rounds during ``step``. Neighbour tuples hold
    organisation ids (MSP ids) as given by the process topology for this round.
    """

    process_seed: int
    round: int
    rounds: int
    organisation: str
    consortium: tuple[str, ...]
    out_neighbours: tuple[str, ...] = ()
    in_neighbours: tuple[str, ...] = ()

    @property
    def position(self) -> int:
        """Index of this organisation in the consortium order (0-based)."""
        return self.consortium.index(self.organisation)

    @property
    def size(self) -> int:
        return len(self.consortium)

    def rng(self, purpose: str = "step") -> np.random.Generator:
        """Private RNG, seeded from (process seed, organisation position, round, purpose)."""
        ss = np.random.SeedSequence(seed_words(self.process_seed, self.position, self.round, purpose))
        return np.random.Generator(np.random.PCG64(ss))

    def shared_rng(self, purpose: str, round: int | None = None) -> np.random.Generator:
        """RNG identical at every organisation (e.g. identical initialisation, eq. (12) set-up),
        seeded from (process seed, round, purpose)."""
        r = self.round if round is None else round
        ss = np.random.SeedSequence(seed_words(self.process_seed, 2**32 - 1, r, purpose))
        return np.random.Generator(np.random.PCG64(ss))


@dataclass
class StepResult:
    """What one step of one organisation produces."""

    state: Payload
    outbox: dict[str, Payload] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    model: Payload | None = None


@runtime_checkable
class Algorithm(Protocol):
    """A learning algorithm as a deterministic step function.

    Optional: ``warm_imports``, a tuple of module names the algorithm imports lazily (inside
    ``step``); a warm worker imports them before its first task (:mod:`algorithms.task_worker`)."""

    name: str

    def init(self, data: LocalDataset, ctx: TaskContext) -> Payload: ...

    def step(
        self, state: Payload, inbox: Mapping[str, Payload], data: LocalDataset, ctx: TaskContext
    ) -> StepResult: ...

    def params(self) -> dict[str, Any]:
        """The hyper-parameters (JSON-able) that rebuild this object: ``type(self)(**params)``."""
        ...
