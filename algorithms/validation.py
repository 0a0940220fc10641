"""What collaboration bought a member (docs/models.md "What collaboration bought you").

A process may declare a **validation fraction** f (a term every member accepts). Each organisation then
holds out a validation slice of its own rows, the same in the simulator and on every host:

* :func:`slice_rows` picks, for every label (or for all rows of unlabelled data), round(f · n_c) of the
  n_c rows of that label with a generator seeded from (process seed, organisation, ``"validation"``), so
  the slice is stratified, deterministic and never depends on another organisation's data;
* the algorithm trains on the remaining rows only (:func:`split`);
* in the last round, :func:`assess` scores on the slice (a) the organisation's collaborative model and
  (b) the model it would have got **alone**: the same algorithm object (the same hyper-parameters), the
  same process seed and number of rounds, on its training rows, in a consortium of one
  (:func:`train_alone`, no neighbours, nothing exchanged).

Both figures and the metric's name go into the task's signed result (``validation`` of the
ExecutionRecord result schema), so the ledger carries what each member's collaboration was worth; the gain
is collaborative − isolated (higher is better for every metric used).

The metric is the family's, through the algorithm's ``validation_score(model, data, seed) -> (name,
value)`` hook: balanced accuracy (collaborative RF), ROC-AUC of the anomaly score when the slice holds
both classes, else the mean held-out log-likelihood (CollabDict GGM) or mean ELBO (CollabDict VAE). An
algorithm without the hook cannot serve a process that declares a slice (:class:`ValidationUnsupported`).

This module imports only numpy and :mod:`algorithms` (it runs inside images).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from algorithms import codec
from algorithms.step import Algorithm, LocalDataset, TaskContext, seed_words

#: the validation fraction a process declares unless it says otherwise (CLI, gateway, demo)
DEFAULT_FRACTION = 0.2


class ValidationSliceError(ValueError):
    """An organisation's data cannot be split as the process declares (the slice would be empty or
    leave no row to train on)."""


class ValidationUnsupported(ValueError):
    """The algorithm has no ``validation_score`` hook: it cannot score a validation slice."""


def check_fraction(fraction: float) -> float:
    """``fraction`` as a float in [0, 1), or :class:`ValueError` (0: no slice)."""
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)):
        raise ValueError(f"validation fraction must be a number, got {fraction!r}")
    f = float(fraction)
    if not (math.isfinite(f) and 0.0 <= f < 1.0):
        raise ValueError(f"validation fraction must be in [0, 1), got {fraction!r}")
    return f


def supports(algorithm: Any) -> bool:
    """Whether ``algorithm`` (an object or its class) can score a validation slice."""
    return callable(getattr(algorithm, "validation_score", None))


def slice_rows(data: LocalDataset, fraction: float, seed: int, organisation: str) -> np.ndarray:
    """The sorted row indices of ``organisation``'s validation slice (module doc); raises
    :class:`ValidationSliceError` if the slice would be empty or would hold every row."""
    f = check_fraction(fraction)
    n = len(data)
    rng = np.random.Generator(
        np.random.PCG64(np.random.SeedSequence(seed_words(seed, organisation, "validation")))
    )
    if data.labels is None:
        groups = [np.arange(n)]
    else:
        labels = np.asarray(data.labels)
        groups = [np.flatnonzero(labels == c) for c in np.unique(labels)]
    held = [g[rng.permutation(len(g))[: int(round(f * len(g)))]] for g in groups]
    rows = np.sort(np.concatenate(held)) if held else np.zeros(0, dtype=np.int64)
    if rows.size == 0:
        raise ValidationSliceError(
            f"{organisation}: a validation slice of {f:g} of its {n} rows holds no row; declare a larger "
            "fraction or give it more data"
        )
    if rows.size >= n:
        raise ValidationSliceError(
            f"{organisation}: a validation slice of {f:g} of its {n} rows leaves no row to train on"
        )
    return rows.astype(np.int64)


def _rows(data: LocalDataset, rows: np.ndarray, name: str) -> LocalDataset:
    n = len(data)
    extras = {
        k: (np.asarray(v)[rows] if np.ndim(v) >= 1 and len(v) == n else v) for k, v in data.extras.items()
    }
    labels = None if data.labels is None else np.asarray(data.labels)[rows]
    return LocalDataset(np.asarray(data.features)[rows], labels, name=name, extras=extras)


def split(
    data: LocalDataset, fraction: float, seed: int, organisation: str
) -> tuple[LocalDataset, LocalDataset]:
    """(training part, validation slice) of ``organisation``'s data; disjoint, together every row."""
    held = slice_rows(data, fraction, seed, organisation)
    keep = np.ones(len(data), dtype=bool)
    keep[held] = False
    return _rows(data, np.flatnonzero(keep), data.name), _rows(data, held, f"{data.name}-validation")


def train_alone(algorithm: Algorithm, train: LocalDataset, seed: int, rounds: int, organisation: str) -> Any:
    """The model ``organisation`` gets from ``train`` alone: ``algorithm``'s init and ``rounds`` steps in
    a consortium of one (no neighbours, no messages), states passed through the codec as on the platform.
    Returns the last model a step returned (None if none did)."""
    alone = (organisation,)
    state = codec.decode(
        codec.encode(algorithm.init(train, TaskContext(seed, 0, rounds, organisation, alone)))
    )
    model = None
    for rnd in range(1, rounds + 1):
        res = algorithm.step(state, {}, train, TaskContext(seed, rnd, rounds, organisation, alone))
        if res.outbox:
            raise ValueError(f"{organisation} alone addressed messages to {sorted(res.outbox)}")
        state = codec.decode(codec.encode(res.state))
        if res.model is not None:
            model = codec.decode(codec.encode(res.model))
    return model


@dataclass(frozen=True)
class Assessment:
    """One member's validation figures: the metric's name, its collaborative and isolated models' values
    on its slice, and the slice's size. :meth:`record` is the ``validation`` block of its signed result."""

    metric: str
    collaborative: float
    isolated: float
    rows: int

    @property
    def gain(self) -> float:
        return self.collaborative - self.isolated

    def record(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "collaborative": self.collaborative,
            "isolated": self.isolated,
            "rows": self.rows,
        }


def score(algorithm: Any, model: Any, data: LocalDataset, seed: int) -> tuple[str, float]:
    """The family's metric of ``model`` on ``data`` (the algorithm's ``validation_score`` hook)."""
    hook = getattr(algorithm, "validation_score", None)
    if not callable(hook):
        raise ValidationUnsupported(
            f"algorithm {getattr(algorithm, 'name', type(algorithm).__name__)} cannot score a validation "
            "slice (it has no validation_score); create the process without one (validation fraction 0)"
        )
    name, value = hook(model, data, seed)
    value = float(value)
    if not math.isfinite(value):
        raise FloatingPointError(f"validation {name} is not finite ({value})")
    return str(name), value


def assess(
    algorithm: Algorithm,
    collaborative_model: Any,
    train: LocalDataset,
    validation: LocalDataset,
    seed: int,
    rounds: int,
    organisation: str,
) -> Assessment:
    """Score ``collaborative_model`` and the model trained alone on ``train`` (:func:`train_alone`) on
    ``validation`` with the family's metric."""
    if collaborative_model is None:
        raise ValueError(f"{organisation}: the last round returned no model to assess")
    metric, collaborative = score(algorithm, collaborative_model, validation, seed)
    isolated_model = train_alone(algorithm, train, seed, rounds, organisation)
    if isolated_model is None:
        raise ValueError(f"{organisation}: training alone returned no model")
    metric_alone, isolated = score(algorithm, isolated_model, validation, seed)
    if metric_alone != metric:  # e.g. one slice scored by AUC, the other not: cannot happen on one slice
        raise ValueError(f"{organisation}: metrics differ ({metric} vs {metric_alone})")
    return Assessment(metric, collaborative, isolated, len(validation))
