import numpy as np
import pytest

from algorithms.collab_rf.training import Scaler, fit_seed, fit_trees


def test_fit_ids_determinism_and_seed_dependence():
    rng = np.random.default_rng(0)
    X = rng.normal(5, 3, size=(300, 4))
    y = (X[:, 0] > 7).astype(float)
    s = Scaler.fit(X)
    assert np.allclose(s.transform(X).mean(axis=0), 0, atol=1e-12)
    a = fit_trees(X, y, s, 4, 5, 11, "org03", 8)
    b = fit_trees(X, y, s, 4, 5, 11, "org03", 8)
    c = fit_trees(X, y, s, 4, 5, 12, "org03", 8)
    assert [(e["creator"], e["counter"]) for e in a] == [("org03", i) for i in range(8, 12)]
    assert all(np.array_equal(x["threshold"], z["threshold"]) for x, z in zip(a, b))
    assert any(not np.array_equal(x["threshold"], z["threshold"]) for x, z in zip(a, c))
    assert all(np.array_equal(e["scaler_mean"], s.mean) for e in a)
    a[0]["value"][:] = -1  # callers own their copies
    assert fit_trees(X, y, s, 4, 5, 11, "org03", 8)[0]["value"].min() >= 0


def test_fit_seed_and_validation():
    assert fit_seed(1, 2, 0) == fit_seed(1, 2, 0)
    assert len({fit_seed(1, p, k) for p in range(5) for k in range(4)}) == 20
    X = np.zeros((5, 2))
    with pytest.raises(ValueError, match="n_new"):
        fit_trees(X, np.zeros(5), Scaler.fit(X), 0, 3, 0, "a", 0)
    with pytest.raises(ValueError, match="non-empty"):
        fit_trees(X, np.zeros(4), Scaler.fit(X), 1, 3, 0, "a", 0)


def test_forget_fits_makes_the_next_fit_compute_again(monkeypatch):
    """Benchmarks time FIT twice in one process: after ``forget_fits`` the forest is fitted again
    (same trees: fitting is deterministic), not served from the memo."""
    from algorithms.collab_rf import training

    rng = np.random.default_rng(1)
    X = rng.normal(size=(120, 3))
    y = (X[:, 0] > 0).astype(float)
    s = Scaler.fit(X)
    fitted: list[int] = []
    real_fit = training.RandomForestRegressor.fit
    monkeypatch.setattr(
        training.RandomForestRegressor,
        "fit",
        lambda self, *a, **k: fitted.append(1) or real_fit(self, *a, **k),
    )
    first = fit_trees(X, y, s, 3, 4, 5, "org01", 0)
    fit_trees(X, y, s, 3, 4, 5, "org01", 0)
    assert len(fitted) == 1  # the memo answered the second call
    training.forget_fits()
    again = fit_trees(X, y, s, 3, 4, 5, "org01", 0)
    assert len(fitted) == 2
    assert all(np.array_equal(a["threshold"], b["threshold"]) for a, b in zip(first, again))
