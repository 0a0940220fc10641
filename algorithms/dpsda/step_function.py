"""DPSDA-C / DPSDA-PS as a deterministic step function (:class:`algorithms.step.Algorithm`).

One platform round r = one time step t = r of the online protocol; organisation i's online data
stream is its :class:`~algorithms.step.LocalDataset` in order (rows (t−1)B … tB−1 define f_t; every
organisation holds the same stream, since f_t is revealed to all nodes, seed 002 §2.2).

Messages of round r are delivered in round r+1, so update k (eqs. (11)–(14) / (20)–(22)) is split
over two rounds:

* round k:   play x^i(k); compute n·ĝ_i(k) at x_i(k) (kept private); release h_i(k) = z_i(k) + η_i(k)
             to the out-neighbours of G(k)  — DPSDA-C sends h_i and its degree; DPSDA-PS pushes
             a·h_i and a·w_i with a = 1/(d_i^out + 1);
* round k+1: z_i(k+1) = Σ_j a_ij h_j (own term and received terms in ascending consortium order)
             + n E_i ĝ_i(k); x_i(k+1) = Π(z_i(k+1)[/w_i(k+1)], α(k)); play x^i(k+1); …

Nothing is released in the last round (its update would only produce x(T+1)), so every per-round
privacy metric is 0 there. Per round, with σ > 0 (:mod:`~algorithms.dpsda.privacy`, docs/dpsda.md):

* ``epsilon_spent``          ε0 = Δ/σ of this node's release (the node observer);
* ``epsilon_network_spent``  n·ε0: all n releases of the round (the observer of every link; f_t is
                             shared, so one changed f_{t0} moves every node's release);
* ``rho_spent`` / ``rho_network_spent``  the zCDP ρ = ε0²/2 of the same releases (n·ε0²/2);
* ``epsilon_total``          this node's running basic composition Σ ε0;
* ``privacy_rigorous``       1 when ĝ is clipped and Δ is the proven bound 2nL̂√d, 0 when Δ is the
                             paper's nominal normalisation (then ε is a label, not a guarantee);
* ``sensitivity`` (Δ used) and ``gradient_clip`` (L̂, when set).

The ledger adds these up per organisation and caps the process's budget (chaincode/execution_record.py).
A non-private run (σ = 0) has no finite ε and reports no ε metric (metrics are signed as canonical
JSON, which has no infinity), so a learning process with a privacy budget rejects it.
The model is the node's played block x^i(r) and its estimate x_i(r) of the whole decision.

The Gaussian mode (``mechanism="gaussian"``, docs/dpsda.md "The Gaussian mode") reports instead, every
round: ``privacy_rigorous`` = 1, ``gradient_clip`` (L̂), ``sensitivity`` (Δ₂, the network ℓ2 sensitivity
of one step), ``noise_multiplier`` (z), ``noise_std`` (s = z·Δ₂), ``sampling_rate`` (q; 1 for a stream) and
``parallel_composition`` (1 for a stream: every row enters one step, so the run's privacy is one step's;
0 for Poisson sampling: the steps compose). With z > 0 also ``rho_spent`` = ``rho_network_spent`` = 1/(2z²)
in a round that releases a gradient (0 in the last round; a zCDP bound of the step that ignores the
amplification by sampling), ``epsilon_total`` = ``epsilon_network_total`` (the tight running ε of the
network at ``privacy_delta``; one node's messages are a part of the network's, and no smaller bound is
proven for them) and ``privacy_delta``. It reports no ``epsilon_spent`` (a Gaussian release has no pure ε)
and no ``estimate_loss`` (the loss of the private batch is not noised). The ledger does not charge the
reported ``epsilon_total``: it checks z, q, ρ and δ and computes the ε itself (chaincode/privacy.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from algorithms.dpsda.framework import (
    SAMPLING_KEY,
    DPSDAConfig,
    check_sampling_key,
    check_stream,
    gradient_data_index,
    initial_decision,
    perturb,
    primal,
    scaled_block_gradient,
    stream_batch,
)
from algorithms.dpsda.privacy import epsilon_per_step, zcdp_of_laplace
from algorithms.dpsda.weights import circulation_weight, metropolis_row, push_sum_weight
from algorithms.step import LocalDataset, StepResult, TaskContext


def gaussian_metrics(cfg: DPSDAConfig, released: bool, releases: int) -> dict[str, float]:
    """What one round of the Gaussian mode reports (module docstring): ``released`` says whether this round
    computed a noisy gradient, ``releases`` how many rounds have so far."""
    metrics = {
        "privacy_rigorous": 1.0,
        "gradient_clip": float(cfg.gradient_clip or 0.0),
        "sensitivity": cfg.gaussian_sensitivity,
        "noise_multiplier": cfg.noise_multiplier,
        "noise_std": cfg.gaussian_noise_std,
        "sampling_rate": float(cfg.sampling_rate) if cfg.sampling == "poisson" else 1.0,
        "parallel_composition": 1.0 if cfg.sampling == "stream" else 0.0,
    }
    if cfg.private:
        rho = 1.0 / (2.0 * cfg.noise_multiplier**2) if released else 0.0
        epsilon = cfg.gaussian_composition(releases).epsilon(cfg.privacy_delta)
        metrics.update(
            {
                "rho_spent": rho,
                "rho_network_spent": rho,
                "epsilon_total": epsilon,
                "epsilon_network_total": epsilon,
                "privacy_delta": cfg.privacy_delta,
            }
        )
    return metrics


def privacy_metrics(epsilon0: float, n_nodes: int) -> dict[str, float]:
    """What one round charges to the ledger: node and network ε0 and zCDP ρ of this round's releases."""
    rho = zcdp_of_laplace(epsilon0)
    return {
        "epsilon_spent": epsilon0,
        "epsilon_network_spent": n_nodes * epsilon0,
        "rho_spent": rho,
        "rho_network_spent": n_nodes * rho,
    }


class DPSDA:
    """DPSDA-C (``variant="C"``) or DPSDA-PS (``variant="PS"``); parameters as :class:`DPSDAConfig`."""

    def __init__(self, **params: Any):
        self.config = DPSDAConfig(**params)
        self.name = "dpsda-c" if self.config.variant == "C" else "dpsda-ps"
        # ε of one Laplace release (Theorem 2/4); a constant of the configuration, so the object stays
        # stateless. The Gaussian mode has no pure ε per release (its running ε comes from the accountant).
        self._epsilon_per_release = (
            0.0
            if self.config.gaussian
            else epsilon_per_step(self.config.accounting_sensitivity, self.config.laplace_scale)
        )

    def params(self) -> dict[str, Any]:
        return self.config.params()

    # -- Algorithm -----------------------------------------------------------------------------
    def init(self, data: LocalDataset, ctx: TaskContext) -> dict[str, Any]:
        cfg = self.config
        if ctx.size != cfg.n_nodes:
            raise ValueError(
                f"{self.name} is configured for {cfg.n_nodes} nodes, the consortium has {ctx.size}"
            )
        check_stream(cfg, np.asarray(data.features), data.labels, ctx.rounds, data.extras.get(SAMPLING_KEY))
        m = cfg.dimension
        return {
            "z": np.zeros(m),
            "y": np.zeros(m),
            "w": 1.0,
            "epsilon_total": 0.0,
            "pending_gradient": None,
            "own_message": None,
            "expected_senders": [],
            "self_degree": 0,
        }

    def step(
        self, state: dict[str, Any], inbox: Mapping[str, Any], data: LocalDataset, ctx: TaskContext
    ) -> StepResult:
        cfg = self.config
        r, i = ctx.round, ctx.position
        block = cfg.block(i)
        features = np.asarray(data.features, dtype=np.float64)
        labels = np.asarray(data.labels, dtype=np.float64)
        z = np.asarray(state["z"], dtype=np.float64)
        y = np.asarray(state["y"], dtype=np.float64)
        w = float(state["w"])

        if r == 1:
            decision = initial_decision(cfg, ctx)[block]
        else:
            z, w = self._combine(state, inbox, ctx)
            z[block] += state["pending_gradient"]  # + n E_i ĝ_i(r−1)
            y = primal(cfg, z, w, r - 1)  # (13) / (22)
            decision = y[block]

        new_state: dict[str, Any] = {
            "z": z,
            "y": y,
            "w": w,
            "epsilon_total": float(state["epsilon_total"]),
            "pending_gradient": None,
            "own_message": None,
            "expected_senders": [],
            "self_degree": 0,
        }
        outbox: dict[str, Any] = {}
        epsilon_spent = 0.0
        if r < ctx.rounds:
            key = check_sampling_key(cfg, data.extras.get(SAMPLING_KEY))
            new_state["pending_gradient"] = scaled_block_gradient(
                cfg, y, features, labels, gradient_data_index(cfg, r), ctx, key
            )
            h = perturb(cfg, z, ctx)  # (11) / (20)
            outbox, own = self._release(h, w, ctx)
            new_state["own_message"] = own
            new_state["expected_senders"] = sorted(ctx.consortium.index(s) for s in ctx.in_neighbours)
            new_state["self_degree"] = len(ctx.out_neighbours)
            epsilon_spent = self._epsilon_per_release
            new_state["epsilon_total"] = new_state["epsilon_total"] + epsilon_spent

        if cfg.gaussian:
            metrics = gaussian_metrics(cfg, r < ctx.rounds, min(r, ctx.rounds - 1))
        else:
            a, b = stream_batch(cfg, features, labels, r)
            metrics = {
                "laplace_scale": cfg.laplace_scale,
                "sensitivity": cfg.accounting_sensitivity,
                "estimate_loss": cfg.loss_function.value(y, a, b),
                "privacy_rigorous": 1.0 if cfg.rigorous_privacy else 0.0,
            }
            if cfg.gradient_clip is not None:
                metrics["gradient_clip"] = cfg.gradient_clip
            if cfg.laplace_scale > 0:
                metrics.update(privacy_metrics(epsilon_spent, cfg.n_nodes))
                metrics["epsilon_total"] = new_state["epsilon_total"]
        model = {
            "round": r,
            "block_start": block.start,
            "block_stop": block.stop,
            "decision_block": np.array(decision, dtype=np.float64),
            "estimate": y,
        }
        return StepResult(state=new_state, outbox=outbox, metrics=metrics, model=model)

    # -- internals -----------------------------------------------------------------------------
    def _release(self, h: np.ndarray, w: float, ctx: TaskContext) -> tuple[dict[str, Any], dict[str, Any]]:
        """The messages of eq. (11)/(20) to this round's out-neighbours, and the node's own term."""
        degree = len(ctx.out_neighbours)
        if self.config.variant == "C":
            if set(ctx.out_neighbours) != set(ctx.in_neighbours):
                raise ValueError(
                    f"DPSDA-C needs an undirected graph; round {ctx.round} gives "
                    f"{ctx.organisation} out {ctx.out_neighbours}, in {ctx.in_neighbours}"
                )
            msg = {"h": h, "degree": degree}
            return {o: msg for o in ctx.out_neighbours}, msg
        a = push_sum_weight(degree)
        msg = {"h": a * h, "w": a * w}
        return {o: msg for o in ctx.out_neighbours}, msg

    def _combine(
        self, state: Mapping[str, Any], inbox: Mapping[str, Any], ctx: TaskContext
    ) -> tuple[np.ndarray, float]:
        """Σ_j a_ij h_j (and Σ_j a_ij w_j for push-sum) over the own term and the inbox, ascending order."""
        cfg = self.config
        i = ctx.position
        senders = sorted(ctx.consortium.index(s) for s in inbox)
        if senders != list(state["expected_senders"]):
            raise ValueError(
                f"{ctx.organisation} expected messages from positions {state['expected_senders']} "
                f"in round {ctx.round}, got {senders}"
            )
        terms = {ctx.consortium[j]: inbox[ctx.consortium[j]] for j in senders}
        terms[ctx.organisation] = state["own_message"]
        order = sorted(senders + [i])
        z = np.zeros(cfg.dimension)
        if cfg.variant == "PS":
            w = 0.0
            for j in order:
                msg = terms[ctx.consortium[j]]
                z += np.asarray(msg["h"], dtype=np.float64)
                w += float(msg["w"])
            return z, w
        if cfg.weights == "metropolis":
            nbrs = [j for j in order if j != i]
            diag, off = metropolis_row(
                int(state["self_degree"]), [int(terms[ctx.consortium[j]]["degree"]) for j in nbrs]
            )
            coef = dict(zip(nbrs, off))
            coef[i] = diag
        else:
            a = circulation_weight(int(state["self_degree"]))
            coef = {j: a for j in order}
        for j in order:
            z += coef[j] * np.asarray(terms[ctx.consortium[j]]["h"], dtype=np.float64)
        return z, 1.0
