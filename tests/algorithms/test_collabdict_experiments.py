"""Tests for algorithms.collabdict.experiments (the held-out evaluation's settings and figures)."""

import numpy as np
import pytest

from algorithms.collabdict import experiments as ex
from algorithms.collabdict.ggm import GGMHyperParameters


@pytest.mark.parametrize("protocol", ex.PROTOCOLS)
def test_setting_deals_the_training_pool_and_keeps_a_common_test_set(protocol):
    X, y = ex.load("breastw")
    st = ex.make_setting("breastw", protocol, 0)
    assert len(st.trains) == 10 and min(st.sizes) >= 5 and max(st.sizes) > 5 * min(st.sizes)
    assert st.X_test.shape == (205, 9) and int(st.y_test.sum()) == 72  # 30 % stratified
    pooled = np.concatenate(st.trains)
    assert np.allclose(pooled.mean(0), 0) and np.allclose(pooled.std(0), 1)
    # one-class: the pool is the normal training rows only (683 − 205 rows, of which 167 anomalies)
    assert len(pooled) == (478 - 167 if protocol == "one-class" else 478)
    with pytest.raises(ValueError, match="protocol"):
        ex.make_setting("breastw", "semi-supervised", 0)


def test_ggm_outcome_reports_every_organisation_and_the_worst():
    st = ex.make_setting("breastw", "contaminated", 2)
    out = ex.ggm_outcome(st, GGMHyperParameters(n_components=3), 5, 0).summary()
    assert len(out["isolated"]) == len(out["collab"]) == 10
    assert out["worst_isolated"] == pytest.approx(min(out["isolated"]), abs=1e-4)
    assert out["worst_collab"] == pytest.approx(min(out["collab"]), abs=1e-4)
    assert 0.5 < out["central"] <= 1.0 and out["sizes"] == st.sizes
    agg = ex.over_seeds([out, dict(out, worst_collab=0.0)])
    assert agg["runs"] == 2 and agg["runs_worst_collab_at_least_isolated"] == 1


def test_auc_refuses_non_finite_scores():
    with pytest.raises(FloatingPointError, match="non-finite"):
        ex.auc(np.array([0, 1]), np.array([0.0, np.nan]))
    with pytest.raises(ValueError, match="unknown dataset"):
        ex.load("mushrooms")
