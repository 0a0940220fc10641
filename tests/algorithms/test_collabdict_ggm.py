"""Tests for algorithms.collabdict.ggm: the GGM step function in the simulator (equals the centralised fit,
EM monotonicity, the DP bound, ℓ-diversity)."""

import math

import numpy as np
import pytest

from algorithms import codec
from algorithms.collabdict.ggm import (
    CollabDictGGM,
    GGMHyperParameters,
    fit_centralised,
    fit_isolated,
    log_likelihood,
    max_relative_deviation,
    rounds_for,
    score,
)
from algorithms.simulator import simulate
from algorithms.step import LocalDataset
from tests.algorithms.conftest import make_mixture


def datasets(Xs):
    return {f"org{s}": LocalDataset(X, name=f"org{s}") for s, X in enumerate(Xs)}


def assert_matches_reference(res, ref, S, tol=1e-8):
    for s in range(S):
        m = res.model(f"org{s}")
        p = ref.params[-1]
        assert m["iteration"] == len(ref.params) - 1
        assert np.array_equal(m["active"], p.active)
        assert np.allclose(m["means"], p.means, rtol=tol, atol=tol)
        assert np.allclose(m["precisions"], p.precisions, rtol=tol, atol=tol)
        assert np.allclose(m["pi"], ref.pis[-1][s], rtol=tol, atol=tol)


@pytest.mark.parametrize(
    "hyper",
    [
        dict(rho=0.0, tau=0.0, weight_prior=0.0, shrinkage=0.0),
        dict(tau=0.0, weight_prior=0.0),
        dict(tau=2.0, n_components=4, weight_prior=0.0),
        dict(weight_prior=20.0, shrinkage=3.0),
    ],
)
def test_simulated_exact_aggregation_equals_centralised(hyper):
    Xs = make_mixture(S=5, M=3, K=3, seed=0)
    hyper = dict(dict(n_components=3), **hyper)
    algo = CollabDictGGM(**hyper, aggregation={"mode": "exact"})
    iters = 6
    res = simulate(algo, datasets(Xs), rounds_for(iters, 5, algo.agg), seed=7, topology={"kind": "none"})
    ref = fit_centralised(Xs, iters, seed=7, hyper=algo.hyper)
    assert_matches_reference(res, ref, 5)
    # the objective reported at each iteration is the centralised one, and it never decreases when π^s follows
    # its own counts (β = 0; with β > 0 the weights' prior moves with the consortium's weights)
    objs = [m["org0"]["objective"] for m in res.metrics if "objective" in m["org0"]]
    assert np.allclose(objs, ref.objectives, rtol=1e-10)
    if hyper["weight_prior"] == 0:
        assert np.all(np.diff(objs) >= -1e-6)


def test_every_iteration_equals_centralised():
    Xs = make_mixture(S=3, M=2, K=2, seed=1)
    algo = CollabDictGGM(n_components=2, tau=0.0)
    models = {}

    def grab(rnd, results):
        if results["org1"].model is not None:
            models[results["org1"].model["iteration"]] = results["org1"].model

    simulate(algo, datasets(Xs), rounds_for(4, 3, algo.agg), seed=2, topology={"kind": "none"}, on_round=grab)
    ref = fit_centralised(Xs, 4, seed=2, hyper=algo.hyper)
    assert sorted(models) == [0, 1, 2, 3, 4]
    for it, m in models.items():
        assert np.allclose(m["means"], ref.params[it].means, atol=1e-8)
        assert np.allclose(m["precisions"], ref.params[it].precisions, atol=1e-8)
        assert np.allclose(m["pi"], ref.pis[it][1], atol=1e-8)


def test_dynamical_consensus_matches_with_enough_rounds_and_error_decays():
    Xs = make_mixture(S=5, M=2, K=2, seed=3)
    ref = fit_centralised(Xs, 1, seed=4, hyper=CollabDictGGM(n_components=2, tau=0.0, rho=0.0).hyper)
    errs = []
    for k in (15, 30, 200):
        algo = CollabDictGGM(
            n_components=2,
            tau=0.0,
            rho=0.0,
            aggregation={"mode": "consensus", "graph": "cic", "rounds": k, "chunks": 2},
        )
        res = simulate(algo, datasets(Xs), rounds_for(1, 5, algo.agg), seed=4, topology={"kind": "none"})
        errs.append(max(np.abs(res.model(f"org{s}")["means"] - ref.params[-1].means).max() for s in range(5)))
    assert errs[0] > errs[1] > errs[2]
    assert errs[2] < 1e-8


def test_simulation_is_reproducible_bit_for_bit_and_params_rebuild():
    Xs = make_mixture(S=3, M=2, K=2, seed=5)
    algo = CollabDictGGM(n_components=2, dp_radius=4.0)
    a = simulate(algo, datasets(Xs), 7, seed=1, topology={"kind": "none"})
    b = simulate(type(algo)(**algo.params()), datasets(Xs), 7, seed=1, topology={"kind": "none"})
    assert a.state_digests == b.state_digests and a.message_digests == b.message_digests
    c = simulate(algo, datasets(Xs), 7, seed=2, topology={"kind": "none"})
    assert c.models["org0"] != a.models["org0"]
    codec.encode(algo.params())


def test_metrics_report_privacy_every_iteration():
    Xs = make_mixture(S=3, M=2, K=3, seed=6)
    algo = CollabDictGGM(n_components=3, dp_radius=3.0, tau=0.0)
    res = simulate(algo, datasets(Xs), rounds_for(3, 3, algo.agg), seed=0, topology={"kind": "none"})
    its = [m for m in res.metrics if "objective" in m["org0"]]
    assert len(its) == 3
    for m in its:
        for s, X in enumerate(Xs):
            ms = m[f"org{s}"]
            assert 0 <= ms["l_diversity_min"] <= ms["l_diversity"] <= math.log(len(X)) + 1e-12
            assert ms["dp_epsilon"] > 0
            assert ms["dp_epsilon_appendix_b"] >= ms["dp_epsilon"]


def test_score_of_model_payload():
    Xs = make_mixture(S=3, M=2, K=2, seed=7, base=100)
    algo = CollabDictGGM(n_components=2)
    res = simulate(algo, datasets(Xs), rounds_for(5, 3, algo.agg), seed=0, topology={"kind": "none"})
    model = res.model("org0")
    a_in = score(model, Xs[0])
    a_out = score(model, Xs[0] + 8.0)
    assert np.median(a_out) > np.median(a_in) + 5


def test_validation():
    with pytest.raises(ValueError, match="lam0"):
        CollabDictGGM(lam0=0)
    with pytest.raises(ValueError, match="aggregation mode"):
        CollabDictGGM(aggregation={"mode": "smoke-signals"})
    with pytest.raises(ValueError, match="dp_radius"):
        CollabDictGGM(dp_radius=-1)


def test_default_chunked_consensus_is_exact_on_real_scale_data():
    """The seed's mechanism (CIC consensus, C = 3 chunks) at the default k_max on real shuttle rows, five
    organisations of very different sizes: θ and π^s equal the centralised computation to 1e-6 relative
    (with one chunk scale for the packed vector and k_max blind to it this was ~1e-3)."""
    from algorithms.datasets.shuttle import load_shuttle, signed_log

    X, _ = load_shuttle()
    Z = signed_log(X[np.random.default_rng(0).permutation(len(X))[:2400]])
    Z = (Z - Z.mean(0)) / Z.std(0)
    Xs = np.split(Z, [1500, 2100, 2300, 2370])  # 1500, 600, 200, 70, 30 rows
    algo = CollabDictGGM(n_components=6)
    assert (algo.agg.mode, algo.agg.chunks) == ("consensus", 3)
    res = simulate(algo, datasets(Xs), rounds_for(4, 5, algo.agg), seed=3, topology={"kind": "none"})
    ref = fit_centralised(Xs, 4, seed=3, hyper=algo.hyper)
    errors = [max_relative_deviation(res.model(f"org{s}"), ref.params[-1], ref.pis[-1][s]) for s in range(5)]
    assert max(errors) <= 1e-6


def test_score_kinds_of_model_payload():
    Xs = make_mixture(S=3, M=2, K=2, seed=7, base=100)
    algo = CollabDictGGM(n_components=2, aggregation={"mode": "exact"})
    model = simulate(algo, datasets(Xs), rounds_for(3, 3, algo.agg), seed=0, topology={"kind": "none"}).model(
        "org0"
    )
    a20, nll = score(model, Xs[0]), score(model, Xs[0], kind="nll")
    assert np.all(a20 <= nll + 1e-9) and np.any(nll - a20 > 1e-3)  # eq. 20 = −ln p − KL(r‖π)
    with pytest.raises(ValueError, match="anomaly score"):
        score(model, Xs[0], kind="lof")


def test_tau_in_bic_units_selects_components_automatically():
    """Start with too many components: with τ in BIC units the ℓ0 update switches the superfluous ones off at
    every organisation and they are pruned (N̄_k < δ); in raw nats (the literal objective with
    ε_π = 1e-8) the same τ = 2 only zeroes weights of a sample or less and prunes nothing. The seed's π^s
    (``weight_prior=0``): the default β = 200 pseudo-rows of the consortium's weights keep every component
    weighted at organisations of 120 rows, which is what it is for."""
    Xs = make_mixture(S=3, M=2, K=2, seed=11, base=120)
    fits = {
        units: fit_centralised(
            Xs,
            15,
            seed=0,
            hyper=GGMHyperParameters(n_components=8, tau=2.0, tau_units=units, weight_prior=0.0),
        )
        for units in ("bic", "nats")
    }
    plain = fit_centralised(
        Xs, 15, seed=0, hyper=GGMHyperParameters(n_components=8, tau=0.0, weight_prior=0.0)
    )
    assert (
        fits["bic"].params[-1].active.sum()
        < fits["nats"].params[-1].active.sum()
        == plain.params[-1].active.sum()
    )
    support = {u: (f.pis[-1] > 1e-6).sum(axis=1) for u, f in fits.items()}
    assert np.all(support["bic"] <= support["nats"]) and support["bic"].sum() < support["nats"].sum()
    with pytest.raises(ValueError, match="tau_units"):
        GGMHyperParameters(tau_units="furlongs")


def satellite_like(n, rng):
    """Rows like satellite's: 4 spectral bands × 9 neighbouring pixels, strongly correlated, integer-valued."""
    base = rng.normal(0, 1, (n, 4))
    return np.round(20 * (np.repeat(base, 9, axis=1) + 0.15 * rng.standard_normal((n, 36))) + 80)


def assert_usable(model, X):
    for Lam in np.asarray(model["precisions"])[np.asarray(model["active"], dtype=bool)]:
        np.linalg.cholesky(Lam)
    for kind in ("eq20", "nll"):
        assert np.all(np.isfinite(score(model, X, kind)))


@pytest.mark.parametrize("seed", [2, 3])
def test_fewer_rows_than_features_never_crashes(seed):
    """An organisation with 6 rows × 36 features alone (before: "a precision matrix Λ_k is not positive
    definite" for these seeds) and in a consortium; every component, including those left with one row or
    less, keeps a positive-definite Λ_k, and the scores are finite."""
    rng = np.random.default_rng(seed)
    Xs = [satellite_like(n, rng) for n in (6, 30, 60)]
    pooled = np.concatenate(Xs)
    Xs = [(X - pooled.mean(0)) / pooled.std(0) for X in Xs]
    small = (Xs[0] - Xs[0].mean(0)) / Xs[0].std(0)
    assert_usable(fit_isolated(small, 10, seed), Xs[1])
    algo = CollabDictGGM(n_components=4, aggregation={"mode": "exact"})
    res = simulate(algo, datasets(Xs), rounds_for(3, 3, algo.agg), seed=seed, topology={"kind": "none"})
    for org in res.consortium:
        assert_usable(res.model(org), Xs[2])


def test_personalised_weights_borrow_the_consortium_weights():
    """β > 0: an organisation that saw one cluster only keeps a real weight on the other (about the
    consortium's), so that cluster's rows are not flagged; an organisation with many rows keeps its own
    weights. β = 0 (the seed's π^s) gives the unseen cluster almost no weight."""
    rng = np.random.default_rng(0)
    A, B = np.zeros(2), np.array([8.0, 8.0])
    big = [
        np.concatenate([A + rng.standard_normal((n, 2)), B + rng.standard_normal((n, 2))]) for n in (80, 60)
    ]
    small = A + rng.standard_normal((4, 2))
    Xs = [*big, small]
    fits = {
        beta: fit_centralised(Xs, 10, seed=0, hyper=GGMHyperParameters(n_components=2, weight_prior=beta))
        for beta in (0.0, 50.0)
    }
    kB = [int(np.argmin(np.linalg.norm(f.params[-1].means - B, axis=1))) for f in fits.values()]
    pi0, pi50 = fits[0.0].pis[-1][2][kB[0]], fits[50.0].pis[-1][2][kB[1]]
    assert pi0 < 1e-3 and pi50 > 0.3
    test_B = B + rng.standard_normal((50, 2))
    ll = {beta: log_likelihood(f.model(2), test_B).mean() for beta, f in fits.items()}
    assert ll[50.0] > ll[0.0] + 3
    assert np.abs(fits[0.0].pis[-1][0] - fits[50.0].pis[-1][0]).max() < 0.1  # the big organisation
