import numpy as np
from sklearn.metrics import balanced_accuracy_score, precision_score, recall_score

from algorithms.collab_rf.metrics import detection_scores


def test_scores_equal_sklearn():
    rng = np.random.default_rng(0)
    for _ in range(20):
        y = (rng.random(200) < 0.1).astype(int)
        p = (rng.random(200) < 0.15).astype(int)
        s = detection_scores(y, p)
        assert s["bacc"] == balanced_accuracy_score(y, p, adjusted=False)
        assert s["prec"] == precision_score(y, p, zero_division=0)
        assert s["rec"] == recall_score(y, p, zero_division=0)


def test_all_normal_prediction():
    y = np.array([0, 0, 1, 0])
    assert detection_scores(y, np.zeros(4)) == {"bacc": 0.5, "prec": 0.0, "rec": 0.0}
