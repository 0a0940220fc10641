import numpy as np
import pytest

from algorithms.collab_rf.ensemble import add, crop, get_top
from algorithms.collab_rf.estimators import estimator_id


def est(creator, counter, value=0.0):
    return {
        "creator": creator,
        "counter": counter,
        "left": np.array([-1], np.int32),
        "right": np.array([-1], np.int32),
        "feature": np.array([-2], np.int32),
        "threshold": np.array([-2.0]),
        "value": np.array([value]),
        "scaler_mean": np.zeros(1),
        "scaler_scale": np.ones(1),
    }


class ReverseRanking:
    """Ranks the last-inserted first (a deterministic stand-in to test the operations' contracts)."""

    def top(self, estimators, k, X=None, y=None, rng=None):
        return list(range(len(estimators) - 1, -1, -1))[:k]


def test_add_skips_present_ids_and_keeps_order():
    a = [est("a", 0), est("a", 1)]
    out = add(a, [est("b", 0), est("a", 1, value=9.0), est("b", 0), est("b", 1)])
    assert [estimator_id(e) for e in out] == [("a", 0), ("a", 1), ("b", 0), ("b", 1)]
    assert out[1]["value"][0] == 0.0  # the held copy is kept
    assert len({estimator_id(e) for e in out}) == len(out)


def test_get_top_returns_all_when_small_and_ranked_top_k_otherwise():
    a = [est("a", i) for i in range(5)]
    assert get_top(a, 5, ReverseRanking()) == a
    assert [e["counter"] for e in get_top(a, 2, ReverseRanking())] == [4, 3]
    assert len(crop(a, 3, ReverseRanking())) == 3
    with pytest.raises(ValueError, match="k >= 0"):
        get_top(a, -1, ReverseRanking())
