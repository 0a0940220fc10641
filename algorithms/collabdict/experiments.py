"""Held-out evaluation of the CollabDict algorithms (issue 31; docs/collabdict.md, "Held-out evaluation").

The setting (the procedure of ``benchmarks.heldout``, docs/heldout.md): a labelled anomaly-detection dataset;
a stratified test set common to all organisations is set aside; the rest (its normal rows only in the
*one-class* protocol, all rows in the *contaminated* one) is dealt to S = 10 organisations with per-class
Dirichlet(0.5) shares, at least 5 rows each (:func:`algorithms.datasets.partition.dirichlet_label_shares`:
size and label skew; in the contaminated protocol an organisation may hold anomalies only). Features are
standardised with the pooled training moments (shuttle: sign(x)·ln(1+|x|) first). For each organisation three
models are scored by ROC-AUC on the common test set:

* **isolated** — the organisation's data alone, same hyper-parameters (``ggm.fit_isolated``, ``vae.fit_isolated``);
* **collaborative** — CollabDict over all organisations, the organisation's own model (``fit_collaborative``:
  the centralised computation of the step function, which the simulator reproduces to 1e-8 (GGM) and 1e-6
  (VAE) with exact aggregation — tests);
* **central** — one model on the pooled data.

The figures reported per dataset and protocol are ``worst_isolated`` (min over organisations),
``worst_collab`` and ``central``, with the mean over organisations and the per-organisation gain.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache

import numpy as np
from sklearn.metrics import roc_auc_score

from algorithms.datasets.partition import dirichlet_label_shares, heldout_split

DATASETS = ("breastw", "satellite", "shuttle")
PROTOCOLS = ("one-class", "contaminated")


@cache
def load(dataset: str) -> tuple[np.ndarray, np.ndarray]:
    """(X, y) of a benchmark dataset, after its data-independent transform (shuttle: signed log)."""
    if dataset == "breastw":
        from algorithms.datasets.odds import load_breastw

        return load_breastw()
    if dataset == "satellite":
        from algorithms.datasets.odds import load_satellite

        return load_satellite()
    if dataset == "shuttle":
        from algorithms.datasets.shuttle import load_shuttle, signed_log

        X, y = load_shuttle()
        return signed_log(X), y
    raise ValueError(f"unknown dataset {dataset!r}; expected one of {DATASETS}")


@dataclass(frozen=True)
class Setting:
    """One held-out experiment's data: the organisations' training matrices and the common test set."""

    dataset: str
    protocol: str
    split_seed: int
    trains: tuple[np.ndarray, ...]
    X_test: np.ndarray
    y_test: np.ndarray

    @property
    def sizes(self) -> list[int]:
        return [len(X) for X in self.trains]


def make_setting(
    dataset: str,
    protocol: str,
    split_seed: int,
    organisations: int = 10,
    alpha: float = 0.5,
    max_rows: int | None = None,
    min_rows: int = 5,
    test_fraction: float = 0.3,
) -> Setting:
    """The held-out setting of ``dataset`` under ``protocol`` ("one-class" or "contaminated") for one split seed."""
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {PROTOCOLS}, got {protocol!r}")
    X, y = load(dataset)
    split = heldout_split(y, split_seed, test_fraction=test_fraction, max_rows=max_rows)
    pool = split.pool if protocol == "contaminated" else split.pool[y[split.pool] == 0]
    shares = dirichlet_label_shares(y, pool, organisations, alpha, split_seed, min_rows=min_rows)
    rows = np.concatenate(shares)
    mu, sd = X[rows].mean(axis=0), X[rows].std(axis=0)
    Z = (X - mu) / np.where(sd > 0, sd, 1.0)
    return Setting(dataset, protocol, split_seed, tuple(Z[s] for s in shares), Z[split.test], y[split.test])


Scorer = Callable[[np.ndarray], np.ndarray]


@dataclass
class Outcome:
    """AUCs on the common test set: one per organisation (isolated, collaborative) and the central model's."""

    isolated: list[float]
    collaborative: list[float]
    central: float
    sizes: list[int] = field(default_factory=list)

    def summary(self) -> dict:
        iso, col = np.asarray(self.isolated), np.asarray(self.collaborative)
        return {
            "worst_isolated": float(iso.min()),
            "worst_collab": float(col.min()),
            "central": float(self.central),
            "mean_isolated": float(iso.mean()),
            "mean_collab": float(col.mean()),
            "members_below_isolated": int((col < iso).sum()),
            "largest_loss": float(max(0.0, (iso - col).max())),
            "isolated": [round(float(a), 4) for a in iso],
            "collab": [round(float(a), 4) for a in col],
            "sizes": list(self.sizes),
        }


def auc(y: np.ndarray, scores: np.ndarray) -> float:
    """ROC-AUC of an anomaly score (higher = more anomalous); a non-finite score is an error, not a number."""
    scores = np.asarray(scores, dtype=np.float64)
    if not np.all(np.isfinite(scores)):
        raise FloatingPointError(f"{int((~np.isfinite(scores)).sum())} non-finite anomaly scores")
    return float(roc_auc_score(y, scores))


def evaluate(
    setting: Setting, isolated: Sequence[Scorer], collaborative: Sequence[Scorer], central: Scorer
) -> Outcome:
    X, y = setting.X_test, setting.y_test
    return Outcome(
        isolated=[auc(y, f(X)) for f in isolated],
        collaborative=[auc(y, f(X)) for f in collaborative],
        central=auc(y, central(X)),
        sizes=setting.sizes,
    )


# --------------------------------------------------------------------------------------------- GGM


def ggm_outcome(setting: Setting, hyper, iterations: int, seed: int, kind: str = "eq20") -> Outcome:
    """Isolated, collaborative and central sparse-GGM mixtures (same hyper-parameters, algorithm seed
    ``seed``) scored with ``kind`` (eq. 20 or −ln p) on the common test set."""
    from algorithms.collabdict import ggm

    def scorer(model):
        return lambda X: ggm.score(model, X, kind)

    isolated = [scorer(ggm.fit_isolated(X, iterations, seed, hyper)) for X in setting.trains]
    collaborative = [scorer(m) for m in ggm.fit_collaborative(list(setting.trains), iterations, seed, hyper)]
    central = scorer(ggm.fit_isolated(np.concatenate(setting.trains), iterations, seed, hyper))
    return evaluate(setting, isolated, collaborative, central)


def validation_slices(
    setting: Setting, seed: int, fraction: float = 0.2
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Each organisation's rows split into a fitting part and a validation slice (``fraction`` of its rows,
    at least one; chosen from ``seed``): the data of a held-out-likelihood comparison that uses no label."""
    fits, vals = [], []
    for s, X in enumerate(setting.trains):
        perm = np.random.default_rng([seed, s]).permutation(len(X))
        k = max(1, int(round(fraction * len(X))))
        fits.append(X[perm[k:]])
        vals.append(X[perm[:k]])
    return fits, vals


def ggm_heldout_likelihood(setting: Setting, hyper, iterations: int, seed: int) -> dict:
    """Held-out log-likelihood of the collaborative sparse-GGM mixture: fitted on every organisation's
    fitting part (:func:`validation_slices`), ln p^s(x) of its validation rows under its own model. Returns the
    mean per validation row over all organisations (``pooled``) and the lowest organisation mean (``worst``)."""
    from algorithms.collabdict import ggm

    fits, vals = validation_slices(setting, seed)
    models = ggm.fit_collaborative(fits, iterations, seed, hyper)
    lls = [ggm.log_likelihood(m, V) for m, V in zip(models, vals)]
    return {
        "pooled": float(np.concatenate(lls).mean()),
        "worst": float(min(ll.mean() for ll in lls)),
        "active": int(np.asarray(models[0]["active"]).sum()),
    }


# --------------------------------------------------------------------------------------------- VAE


def vae_outcome(setting: Setting, hyper, iterations: int, seed: int) -> Outcome:
    """Isolated, collaborative and central CollabDict VAEs (same hyper-parameters, algorithm seed ``seed``),
    scored with eq. (39) on the common test set (Monte-Carlo draws from ``seed``)."""
    from algorithms.collabdict import vae

    def scorer(model):
        return lambda X: vae.score(model, X, seed=seed)

    isolated = [scorer(vae.fit_isolated(X, iterations, seed, hyper)) for X in setting.trains]
    collaborative = [scorer(m) for m in vae.fit_collaborative(list(setting.trains), iterations, seed, hyper)]
    central = scorer(vae.fit_isolated(np.concatenate(setting.trains), iterations, seed, hyper))
    return evaluate(setting, isolated, collaborative, central)


def over_seeds(outcomes: Sequence[dict]) -> dict:
    """Summaries of several (split seed, algorithm seed) runs: the mean of each figure, and in how many runs
    the worst collaborative organisation is at least the worst isolated one."""
    keys = ("worst_isolated", "worst_collab", "central", "mean_isolated", "mean_collab")
    out: dict = {k: float(np.mean([o[k] for o in outcomes])) for k in keys}
    out["runs"] = len(outcomes)
    out["runs_worst_collab_at_least_isolated"] = int(
        sum(o["worst_collab"] >= o["worst_isolated"] for o in outcomes)
    )
    out["members_below_isolated"] = [o["members_below_isolated"] for o in outcomes]
    return out
