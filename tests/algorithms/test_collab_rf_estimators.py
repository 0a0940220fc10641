import numpy as np
import pytest
from sklearn.ensemble import RandomForestRegressor

from algorithms import codec
from algorithms.collab_rf.estimators import (
    depth_of,
    digest_memo,
    ensemble_predict,
    ensemble_scores,
    estimator_digest,
    estimator_digests,
    estimator_id,
    from_sklearn_tree,
    predict_trees,
    validate_estimator,
)


@pytest.fixture(scope="module")
def forest():
    rng = np.random.default_rng(0)
    X = rng.normal(3.0, 2.0, size=(600, 5))
    y = (X[:, 0] + X[:, 1] ** 2 > 12).astype(float)
    mean, scale = X.mean(axis=0), X.std(axis=0)
    rf = RandomForestRegressor(n_estimators=6, max_depth=5, random_state=0).fit((X - mean) / scale, y)
    ests = [from_sklearn_tree(t, "org01", i, mean, scale) for i, t in enumerate(rf.estimators_)]
    return X, y, mean, scale, rf, ests


def test_predictions_equal_sklearn_exactly(forest):
    X, _, mean, scale, rf, ests = forest
    Xs = (X - mean) / scale
    ours = predict_trees(ests, X)
    ref = np.array([t.predict(Xs) for t in rf.estimators_])
    assert ours.shape == (6, 600)
    assert np.array_equal(ours, ref)
    assert np.array_equal(ensemble_scores(ests, X), ours.mean(axis=0))


def test_ensemble_predict_threshold_and_empty(forest):
    X, *_, ests = forest
    s = ensemble_scores(ests, X)
    assert np.array_equal(ensemble_predict(ests, X), (s > 0.5).astype(int))
    assert ensemble_predict([], X).sum() == 0


def test_trees_with_different_scalers_predict_with_their_own(forest):
    X, _, mean, scale, rf, ests = forest
    other = dict(ests[0])
    other["scaler_mean"] = mean + 1.0
    other["counter"] = 99
    both = predict_trees([ests[0], other], X)
    assert np.array_equal(both[1], rf.estimators_[0].predict((X - mean - 1.0) / scale))


def test_ids_digests_and_codec_roundtrip(forest):
    *_, ests = forest
    assert [estimator_id(e) for e in ests] == [("org01", i) for i in range(6)]
    back = codec.decode(codec.encode({"estimators": ests}))["estimators"]
    assert [estimator_digest(e) for e in back] == [estimator_digest(e) for e in ests]
    msg = {"sender": "org01", "estimators": ests[:3]}
    listed = estimator_digests(msg)
    assert [i for i, _ in listed] == [("org01", 0), ("org01", 1), ("org01", 2)]
    assert len({d for _, d in listed}) == 3 and all(d.startswith("sha256:") for _, d in listed)
    with pytest.raises(ValueError, match="estimators"):
        estimator_digests({"sender": "x"})


def test_digest_memo_digests_each_estimator_object_once(forest, monkeypatch):
    """Inside one memo scope an estimator object shared by several payloads is encoded once, with the
    same digest as outside; an equal copy is another object (digested itself), and a scope's memo
    ends with it (an estimator changed afterwards gets its new digest)."""
    *_, ests = forest
    plain = [estimator_digest(e) for e in ests]
    encoded: list[int] = []
    real = codec.encode
    monkeypatch.setattr(codec, "encode", lambda v: encoded.append(1) or real(v))
    copy = codec.decode(real({"estimators": ests[:1]}))["estimators"][0]
    with digest_memo():
        for _ in range(3):
            assert [d for _, d in estimator_digests({"estimators": ests})] == plain
        assert estimator_digest(copy) == plain[0]
    assert len(encoded) == len(ests) + 1
    changed = {**ests[0], "threshold": np.asarray(ests[0]["threshold"]) + 1.0}
    with digest_memo():
        assert estimator_digest(changed) != plain[0]


def test_validation_and_depth(forest):
    *_, ests = forest
    validate_estimator(ests[0])
    assert 1 <= depth_of(ests[0]) <= 5
    bad = dict(ests[0])
    bad["value"] = bad["value"][:-1]
    with pytest.raises(ValueError, match="value"):
        validate_estimator(bad)


def _with_nan(X, rate, seed):
    X = X.copy()
    X[np.random.default_rng(seed).random(X.shape) < rate] = np.nan
    return X


@pytest.mark.parametrize("train_nan", [0.2, 0.0], ids=["trained-with-nan", "trained-without-nan"])
def test_missing_values_route_exactly_as_sklearn(train_nan):
    """scikit-learn routes NaN by the learned ``missing_go_to_left`` (and +inf thresholds for
    missing-vs-present splits); ignoring it disagreed with ``predict`` on ~19 % of rows."""
    rng = np.random.default_rng(3)
    X = rng.normal(3.0, 2.0, size=(2000, 6))
    y = (X[:, 0] + X[:, 1] ** 2 > 12).astype(float)
    Xtr = _with_nan(X[:1000], train_nan, 1)
    Xte = _with_nan(X[1000:], 0.2, 2)
    mean, scale = np.nanmean(Xtr, axis=0), np.nanstd(Xtr, axis=0)
    rf = RandomForestRegressor(n_estimators=10, max_depth=8, random_state=0).fit(
        (Xtr - mean) / scale, y[:1000]
    )
    if train_nan:
        assert any(
            np.isinf(t.tree_.threshold).any() for t in rf.estimators_
        )  # missing-vs-present splits exist
    ests = [from_sklearn_tree(t, "org01", i, mean, scale) for i, t in enumerate(rf.estimators_)]
    ours = predict_trees(ests, Xte)
    ref = np.array([t.predict((Xte - mean) / scale) for t in rf.estimators_])
    assert np.isnan(Xte).any(axis=1).mean() > 0.5
    assert np.array_equal(ours, ref)
    assert np.array_equal(ensemble_predict(ests, Xte), (ref.mean(axis=0) > 0.5).astype(int))
    assert np.allclose(ensemble_scores(ests, Xte), rf.predict((Xte - mean) / scale), rtol=0, atol=1e-12)


def test_payload_without_missing_routing_refuses_nan_rows(forest):
    from algorithms.collab_rf.estimators import MissingRoutingUnknown

    X, *_, ests = forest
    old = [{k: v for k, v in e.items() if k != "missing_left"} for e in ests]
    validate_estimator(old[0])  # still a valid payload
    assert np.array_equal(predict_trees(old, X), predict_trees(ests, X))
    Xn = X.copy()
    Xn[0, 1] = np.nan
    with pytest.raises(MissingRoutingUnknown, match="missing"):
        predict_trees(old, Xn)
