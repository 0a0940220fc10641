"""The node operations FIT / SHARE / GET (seed 003 §III-B; docs/collab_rf.md) on a node
state, and a direct simulation of the protocol (the authors' round scheduler) used as the
reference the step-function wrapper is checked against.

Node state (a codec payload):
    {"organisation": str, "counter": int (next estimator counter), "fits": int,
     "ensemble": [estimators], "registry": registry payload,
     "scaler_mean", "scaler_scale": float64[d],
     "validation_rows": int64[m]}     # rows held out for the decision threshold (empty: none)

Model payload: {"organisation": str, "estimators": [...], "threshold": float} (a row is an
anomaly iff Φ(x) > threshold; 0.5 unless ``decision_threshold="validation"``), plus
"weights": float64[n] (ω_i of each estimator) with ``vote="evidence"``, where Φ is the ω-weighted
mean (:mod:`algorithms.collab_rf.decision`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from algorithms.collab_rf import decision
from algorithms.collab_rf import ensemble as ens
from algorithms.collab_rf import registry as reg
from algorithms.collab_rf.estimators import canonical, ensemble_scores
from algorithms.collab_rf.ranking import RANKINGS, make_ranking
from algorithms.collab_rf.training import Scaler, fit_seed, fit_trees
from algorithms.step import LocalDataset, TaskContext

ACTIONS = ("FIT", "SHARE", "GET")
DEFAULT_SCHEDULE = ("FIT", "SHARE", "GET") * 4
DISCONNECTED_SCHEDULE = ("FIT",) * 4
AUTHORS_TREE_SEED = 42  # random_state of the first FIT in the authors' scripts (seed 003 §VI)


@dataclass(frozen=True)
class CollabRFParams:
    """Hyper-parameters (defaults: the paper's settings, seed 003 §VI; docs/collab_rf.md).

    ``positive_weight``, ``vote``, ``decision_threshold`` and ``validation_size``: options for rare
    positives (:mod:`algorithms.collab_rf.decision`); ``positive_weight="balanced"`` with
    ``vote="evidence"`` is the rare-positive mode. ``tree_seed``: an integer r gives the k-th
    FIT (k = 0, 1, ..) of every organisation ``random_state = r + k``, the authors' per-tree
    seeding of seed 003 §VI (their scripts start at r = 42: the reproduction default, which brings
    every Table 3 test mean within 0.01 BAcc of the paper's; benchmarks/results/collab_rf_seeds.md).
    None keeps the project's earlier seeding, each FIT's ``random_state`` drawn from (process seed,
    position, FIT index) (:func:`~algorithms.collab_rf.training.fit_seed`); processes whose
    parameters say ``tree_seed: null`` still run with it.
    """

    n_new: int = 10
    n_share: int = 10
    n_max: int = 50
    max_depth: int | None = 10
    ranking: str = "pgreedy_treekernel"
    registry: str = "paper"
    n_rep: int = 10
    val_size: float = 0.3
    kernel_decay: float = 1.0
    schedule: tuple[str, ...] = field(default=DEFAULT_SCHEDULE)
    n_jobs: int = 1
    positive_weight: float | str = 1.0
    decision_threshold: str = "fixed"
    validation_size: float = 0.2
    tree_seed: int | None = AUTHORS_TREE_SEED
    vote: str = "mean"

    def __post_init__(self) -> None:
        for name in ("n_new", "n_share", "n_max"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        if self.n_max < self.n_new:
            raise ValueError(f"n_max ({self.n_max}) must be >= n_new ({self.n_new})")
        if self.ranking not in RANKINGS:
            raise ValueError(f"ranking must be one of {RANKINGS}, got {self.ranking!r}")
        if self.registry not in reg.SEMANTICS:
            raise ValueError(f"registry must be one of {reg.SEMANTICS}, got {self.registry!r}")
        sched = tuple(self.schedule)
        object.__setattr__(self, "schedule", sched)
        bad = [a for a in sched if a not in ACTIONS]
        if bad:
            raise ValueError(f"unknown actions {bad} in schedule; allowed: {ACTIONS}")
        if sched and sched[0] != "FIT":
            raise ValueError("every agent runs FIT as its first operation (seed §III-B)")
        if self.n_jobs < 1:
            raise ValueError(f"n_jobs must be >= 1, got {self.n_jobs}")
        make_ranking(self.ranking, **self.ranking_options())  # validates n_rep, val_size, decay
        decision.validate_positive_weight(self.positive_weight)
        if self.decision_threshold not in decision.DECISIONS:
            raise ValueError(
                f"decision_threshold must be one of {decision.DECISIONS}, got {self.decision_threshold!r}"
            )
        if self.vote not in decision.VOTES:
            raise ValueError(f"vote must be one of {decision.VOTES}, got {self.vote!r}")
        if not (isinstance(self.validation_size, (int, float)) and 0.0 < self.validation_size < 1.0):
            raise ValueError(f"validation_size must be in (0, 1), got {self.validation_size!r}")
        if self.tree_seed is not None and (
            isinstance(self.tree_seed, bool)
            or not isinstance(self.tree_seed, int)
            or not 0 <= self.tree_seed < 2**31 - 64
        ):
            raise ValueError(
                f"tree_seed must be None or an integer in [0, 2**31 - 64), got {self.tree_seed!r}"
            )

    def ranking_options(self) -> dict[str, Any]:
        if self.ranking == "linreg_bootstrap":
            return {"n_rep": self.n_rep, "val_size": self.val_size}
        return {"decay": self.kernel_decay}

    def make_ranking(self):
        return make_ranking(self.ranking, **self.ranking_options())

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["schedule"] = list(self.schedule)
        return d


def validation_seed(process_seed: int, position: int) -> int:
    """Seed of an organisation's held-out validation rows."""
    ss = np.random.SeedSequence([int(process_seed), int(position), 0x7A11D])
    return int(ss.generate_state(1)[0])


def init_node(
    organisation: str, data: LocalDataset, params: CollabRFParams, process_seed: int = 0, position: int = 0
) -> dict:
    """Empty ensemble, empty registry, the node's StandardScaler on its training rows (all its
    rows, or those not held out for the decision threshold)."""
    if data.labels is None:
        raise ValueError(f"{organisation}: collaborative RF needs labelled local data")
    val = np.zeros(0, dtype=np.int64)
    if params.decision_threshold == "validation":
        val = decision.validation_rows(
            data.labels, params.validation_size, validation_seed(process_seed, position)
        )
    s = Scaler.fit(_training(data, val).features)
    state = {
        "organisation": organisation,
        "counter": 0,
        "fits": 0,
        "ensemble": [],
        "registry": reg.new_registry(params.registry),
        "scaler_mean": s.mean,
        "scaler_scale": s.scale,
        "validation_rows": val,
    }
    return {k: state[k] for k in sorted(state)}  # key-sorted: encodes like its decoded copy


def _training(data: LocalDataset, validation: np.ndarray) -> LocalDataset:
    """The rows FIT and the rankings may use: all but the held-out validation rows."""
    if len(validation) == 0:
        return data
    keep = np.ones(len(data), dtype=bool)
    keep[np.asarray(validation, dtype=np.int64)] = False
    return LocalDataset(data.features[keep], data.labels[keep], name=data.name)


def training_data(state: Mapping[str, Any], data: LocalDataset) -> LocalDataset:
    return _training(data, np.asarray(state.get("validation_rows", np.zeros(0, dtype=np.int64))))


def final_model(state: Mapping[str, Any], data: LocalDataset, params: CollabRFParams) -> dict:
    """The model payload: the ensemble, its vote weights (``vote="evidence"`` only) and its decision
    threshold (0.5, or the BAcc-optimal cut of Φ on the organisation's validation rows)."""
    threshold = decision.PAPER_THRESHOLD
    weights = decision.vote_weights(state["ensemble"]) if params.vote == "evidence" else None
    val = np.asarray(state.get("validation_rows", np.zeros(0, dtype=np.int64)), dtype=np.int64)
    if params.decision_threshold == "validation" and len(val) and state["ensemble"]:
        scores = ensemble_scores(state["ensemble"], data.features[val], weights)
        threshold = decision.balanced_accuracy_threshold(scores, data.labels[val])
    model: dict[str, Any] = {
        "organisation": state["organisation"],
        "estimators": state["ensemble"],
        "threshold": float(threshold),
    }
    if weights is not None:
        model["weights"] = weights
    return {k: model[k] for k in sorted(model)}


def _crop_if_needed(
    state: dict, params: CollabRFParams, data: LocalDataset, rng: np.random.Generator
) -> None:
    if len(state["ensemble"]) > params.n_max:
        state["ensemble"] = ens.crop(
            state["ensemble"], params.n_max, params.make_ranking(), X=data.features, y=data.labels, rng=rng
        )


def fit(
    state: Mapping[str, Any],
    data: LocalDataset,
    params: CollabRFParams,
    process_seed: int,
    position: int,
    rng: np.random.Generator,
) -> dict:
    """FIT: n_new new trees with ids (v_j, counter..); Φ ← ADD(Φ, new); CROP if |Φ| > n_max.
    With ``vote="evidence"`` each new tree records the class counts (n⁺, n⁻) of the rows it was fitted on."""
    state = dict(state)
    data = training_data(state, data)
    scaler = Scaler(np.asarray(state["scaler_mean"]), np.asarray(state["scaler_scale"]))
    seed = (
        params.tree_seed + int(state["fits"])
        if params.tree_seed is not None
        else fit_seed(process_seed, position, state["fits"])
    )
    new = fit_trees(
        data.features,
        data.labels,
        scaler,
        params.n_new,
        params.max_depth,
        seed,
        state["organisation"],
        state["counter"],
        n_jobs=params.n_jobs,
        positive_weight=decision.resolve_positive_weight(params.positive_weight, data.labels),
    )
    if params.vote == "evidence":
        n_pos, n_neg = decision.class_counts(data.labels)
        new = [canonical({**e, "n_pos": n_pos, "n_neg": n_neg}) for e in new]
    state["counter"] = int(state["counter"]) + params.n_new
    state["fits"] = int(state["fits"]) + 1
    state["ensemble"] = ens.add(state["ensemble"], new)
    _crop_if_needed(state, params, data, rng)
    return state


def share(
    state: Mapping[str, Any], data: LocalDataset, params: CollabRFParams, rng: np.random.Generator
) -> list[dict]:
    """SHARE: E = GET_TOP(Φ, n_share), to be written to each first-order neighbour."""
    data = training_data(state, data)
    return ens.get_top(
        state["ensemble"], params.n_share, params.make_ranking(), X=data.features, y=data.labels, rng=rng
    )


def receive(state: Mapping[str, Any], sender: str, estimators: Sequence[Mapping[str, Any]]) -> dict:
    """A neighbour's SHARE lands in this node's registry."""
    state = dict(state)
    state["registry"] = reg.write(state["registry"], sender, estimators)
    return state


def get(
    state: Mapping[str, Any], data: LocalDataset, params: CollabRFParams, rng: np.random.Generator
) -> dict:
    """GET: read the registry; Φ ← ADD(Φ, received); CROP if |Φ| > n_max."""
    state = dict(state)
    received, state["registry"] = reg.read(state["registry"])
    state["ensemble"] = ens.add(state["ensemble"], received)
    _crop_if_needed(state, params, training_data(state, data), rng)
    return state


def rank_rng(
    process_seed: int, rnd: int, organisation: str, consortium: Sequence[str]
) -> np.random.Generator:
    """The RNG of a node's GET_TOP calls in round ``rnd`` (the step context's ``rng("rank")``)."""
    ctx = TaskContext(
        process_seed=process_seed,
        round=rnd,
        rounds=rnd,
        organisation=organisation,
        consortium=tuple(consortium),
    )
    return ctx.rng("rank")


@dataclass
class ProtocolRun:
    """Outcome of :func:`run_protocol`: final node states and per-round logs."""

    states: dict[str, dict]
    shared: list[dict[tuple[str, str], list[tuple[str, int]]]]  # per round: (sender, receiver) -> ids
    ensemble_sizes: list[dict[str, int]]


def run_protocol(
    datasets: Mapping[str, LocalDataset],
    params: CollabRFParams,
    seed: int,
    topology: Any = None,
    consortium: Sequence[str] | None = None,
) -> ProtocolRun:
    """Direct simulation (the authors' ``simulator.py`` scheduling): in round r every node, in
    consortium order, runs action r of the schedule; SHARE writes straight into the
    neighbours' registries (read by their GET in a later round)."""
    consortium = tuple(consortium or datasets.keys())
    states = {o: init_node(o, datasets[o], params, seed, i) for i, o in enumerate(consortium)}
    shared_log, sizes = [], []
    for rnd, action in enumerate(params.schedule, start=1):
        A = topology.adjacency(rnd) if topology is not None else np.zeros((len(consortium),) * 2)
        writes: list[tuple[str, str, list[dict]]] = []
        round_shared: dict[tuple[str, str], list[tuple[str, int]]] = {}
        for i, org in enumerate(consortium):
            rng = rank_rng(seed, rnd, org, consortium)
            if action == "FIT":
                states[org] = fit(states[org], datasets[org], params, seed, i, rng)
            elif action == "SHARE":
                E = share(states[org], datasets[org], params, rng)
                for j in np.flatnonzero(A[i]):
                    writes.append((org, consortium[j], E))
                    round_shared[(org, consortium[j])] = [(e["creator"], e["counter"]) for e in E]
            else:
                states[org] = get(states[org], datasets[org], params, rng)
        for sender, receiver, E in writes:
            states[receiver] = receive(states[receiver], sender, E)
        shared_log.append(round_shared)
        sizes.append({o: len(s["ensemble"]) for o, s in states.items()})
    return ProtocolRun(states=states, shared=shared_log, ensemble_sizes=sizes)
