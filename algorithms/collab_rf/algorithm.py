"""Collaborative random forests as a step function (``algorithms.step.Algorithm``).

One platform round is one action of the schedule (default (FIT, SHARE, GET) × 4 = 12 rounds):

* at the start of every step, each inbox message (a neighbour's SHARE of the previous round)
  is written to the registry held in the state (paper or code semantics);
* FIT trains n_new trees; SHARE puts GET_TOP(Φ, n_share) in the outbox, one message per
  out-neighbour of the round; GET reads the registry into the ensemble;
* in the last round (and any round after the schedule) the model — the ensemble, with
  estimator ids — is returned.

Message payload: {"sender": org, "estimators": [...]}; model payload: {"organisation": org,
"estimators": [...], "threshold": t} (anomaly iff Φ(x) > t; t = 0.5 unless
``decision_threshold="validation"``; with ``vote="evidence"`` also "weights", and Φ is the weighted mean). :func:`algorithms.collab_rf.estimators.estimator_digests` lists
(id, digest) of the estimators in either.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import Any

from algorithms.collab_rf import protocol
from algorithms.collab_rf import registry as reg
from algorithms.collab_rf.protocol import CollabRFParams
from algorithms.step import LocalDataset, StepResult, TaskContext


class CollaborativeRandomForest:
    """The seed-003 algorithm. Parameters as in :class:`CollabRFParams`."""

    name = "collab_rf"

    def __init__(
        self,
        n_new: int = 10,
        n_share: int = 10,
        n_max: int = 50,
        max_depth: int | None = 10,
        ranking: str = "pgreedy_treekernel",
        registry: str = "paper",
        n_rep: int = 10,
        val_size: float = 0.3,
        kernel_decay: float = 1.0,
        schedule: tuple[str, ...] | list[str] = protocol.DEFAULT_SCHEDULE,
        n_jobs: int = 1,
        positive_weight: float | str = 1.0,
        decision_threshold: str = "fixed",
        validation_size: float = 0.2,
        tree_seed: int | None = protocol.AUTHORS_TREE_SEED,
        vote: str = "mean",
    ):
        self.p = CollabRFParams(
            n_new=n_new,
            n_share=n_share,
            n_max=n_max,
            max_depth=max_depth,
            ranking=ranking,
            registry=registry,
            n_rep=n_rep,
            val_size=val_size,
            kernel_decay=kernel_decay,
            schedule=tuple(schedule),
            n_jobs=n_jobs,
            positive_weight=positive_weight,
            decision_threshold=decision_threshold,
            validation_size=validation_size,
            tree_seed=tree_seed,
            vote=vote,
        )

    @property
    def rounds(self) -> int:
        return len(self.p.schedule)

    def params(self) -> dict[str, Any]:
        return self.p.to_json()

    @staticmethod
    def provenance_scope() -> AbstractContextManager[None]:
        """Around one task's provenance: each estimator is digested once (see ``payload_provenance``)."""
        from algorithms.collab_rf.estimators import digest_memo

        return digest_memo()

    @staticmethod
    def payload_provenance(payload: Mapping[str, Any]) -> dict[str, Any]:
        """Signed with each message / model on the platform: ``{"estimators": [[creator, counter,
        digest], ...]}`` (ids of seed 003 §III-C), so the estimator-origin matrix (Fig. 5) of any
        model can be computed from the ledger alone."""
        from algorithms.collab_rf.estimators import estimator_digests

        return {"estimators": [[c, n, d] for (c, n), d in estimator_digests(payload)]}

    @staticmethod
    def validation_score(model: Mapping[str, Any], data: LocalDataset, seed: int) -> tuple[str, float]:
        """Balanced accuracy of a model (its own threshold and vote) on a member's validation slice
        (:mod:`algorithms.validation`; the metric of seed 003 §VI and of the held-out evaluation). On a slice
        that holds one class only it reduces to the accuracy on that class, and is named so:
        ``one_class_accuracy`` (a member that holds one class cannot measure how its model separates them)."""
        import numpy as np

        from algorithms.collab_rf.estimators import model_predict
        from algorithms.collab_rf.metrics import detection_scores

        if data.labels is None:
            raise ValueError(
                "collaborative RF scores a validation slice against its labels; the data has none"
            )
        value = detection_scores(data.labels, model_predict(model, data.features))["bacc"]
        both = np.unique(np.asarray(data.labels)).size == 2
        return ("balanced_accuracy" if both else "one_class_accuracy"), value

    def init(self, data: LocalDataset, ctx: TaskContext) -> dict:
        return protocol.init_node(ctx.organisation, data, self.p, ctx.process_seed, ctx.position)

    def step(self, state: dict, inbox: Mapping[str, Any], data: LocalDataset, ctx: TaskContext) -> StepResult:
        for sender in sorted(inbox):
            msg = inbox[sender]
            if msg.get("sender") != sender:
                raise ValueError(
                    f"{ctx.organisation}: message from {sender} claims sender {msg.get('sender')!r}"
                )
            state = protocol.receive(state, sender, msg["estimators"])
        action = self.p.schedule[ctx.round - 1] if ctx.round <= len(self.p.schedule) else None
        rng = ctx.rng("rank")
        outbox: dict[str, Any] = {}
        shared = 0
        if action == "FIT":
            state = protocol.fit(state, data, self.p, ctx.process_seed, ctx.position, rng)
        elif action == "SHARE":
            E = protocol.share(state, data, self.p, rng)
            shared = len(E)
            outbox = {nbr: {"sender": ctx.organisation, "estimators": E} for nbr in ctx.out_neighbours}
        elif action == "GET":
            state = protocol.get(state, data, self.p, rng)
        own = sum(1 for e in state["ensemble"] if e["creator"] == ctx.organisation)
        metrics = {
            "n_estimators": float(len(state["ensemble"])),
            "n_own": float(own),
            "registry_size": float(reg.size(state["registry"])),
            "n_shared": float(shared),
            "action": float(-1 if action is None else protocol.ACTIONS.index(action)),
        }
        model = None
        if ctx.round >= min(ctx.rounds, len(self.p.schedule)):
            model = protocol.final_model(state, data, self.p)
        return StepResult(state=state, outbox=outbox, metrics=metrics, model=model)
