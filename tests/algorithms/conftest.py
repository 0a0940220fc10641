"""Small synthetic mixtures shared by the CollabDict tests."""

import numpy as np
import pytest


def make_mixture(S=5, M=3, K=3, seed=0, base=40, step=20, scale=3.0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(0, scale, (K, M))
    Xs = []
    for s in range(S):
        n = base + step * s
        z = rng.integers(0, K, n)
        Xs.append(centres[z] + rng.standard_normal((n, M)))
    return Xs


@pytest.fixture
def mixture_data():
    return make_mixture()
